"""Shared helpers for the exporters: file names and atomic writes."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

JSON_NAME = "profile_export_aiperf.json"
CSV_NAME = "profile_export_aiperf.csv"
JSONL_NAME = "profile_export.jsonl"
RAW_NAME = "profile_export_raw.jsonl"

# The AIPerf export schema specmon writes (AIPerf 0.13's; see aiperf-peer.md).
SCHEMA_VERSION = "1.4"
AIPERF_COMPAT_VERSION = "0.13.0"


def atomic_write(path: str | Path, data: bytes) -> Path:
    """Write to a temp file in the same directory, fsync, then os.replace: a reader sees
    the old file or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
