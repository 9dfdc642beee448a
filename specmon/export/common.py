"""Shared helpers for the exporters: file names and atomic writes."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO

JSON_NAME = "profile_export_aiperf.json"
CSV_NAME = "profile_export_aiperf.csv"
JSONL_NAME = "profile_export.jsonl"
RAW_NAME = "profile_export_raw.jsonl"

# The AIPerf export schema specmon writes (AIPerf 0.13's; see aiperf-peer.md).
SCHEMA_VERSION = "1.4"
AIPERF_COMPAT_VERSION = "0.13.0"


def _umask_mode() -> int:
    """0666 less the process umask: the mode open() would give a new file (0644 under the
    usual 022), as screenshots get. mkstemp creates 0600, which hid exports from the group.

    Linux states the umask in /proc/self/status; elsewhere it is read by setting it, which
    is not thread-safe, so that happens once, at import (module _UMASK)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o666 & ~_UMASK


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def atomic_write(path: str | Path, data: bytes) -> Path:
    """Write to a temp file in the same directory, fsync, then os.replace: a reader sees
    the old file or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _umask_mode())
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


def open_new_stream(path: str | Path) -> BinaryIO:
    """A fresh file at `path` for line-by-line writing, never through a symlink: created
    exclusively (O_CREAT|O_EXCL|O_NOFOLLOW) under a temp name, then renamed over `path`,
    so a symlink or an old file there is replaced, its target untouched."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _umask_mode())
        os.replace(tmp, path)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return os.fdopen(fd, "wb")
