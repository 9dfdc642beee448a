"""profile_export_aiperf.json, laid out as AIPerf 0.13 writes it (docs/metrics.md §8.1).

Top-level order as in a real AIPerf 0.13 file: schema_version, aiperf_version,
specmon_version, benchmark_id, the standard metric blocks in AIPerf's declared order,
input_config, was_cancelled, is_complete, error_summary, start_time, end_time, the pooled
histogram (string keys, uncapped), then the other metric blocks (spec-decode among them). Every spec-decode key is
omitted when no request had a record.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from specmon import __version__
from specmon.constants import NS_PER_S
from specmon.export.common import AIPERF_COMPAT_VERSION, SCHEMA_VERSION, atomic_write
from specmon.export.safe_json import dumps_safe

# AIPerf's JsonExportData field order for the metrics it declares.
_DECLARED_ORDER = (
    "request_throughput",
    "request_latency",
    "request_count",
    "time_to_first_token",
    "time_to_second_token",
    "inter_token_latency",
    "output_token_throughput",
    "output_token_throughput_per_user",
    "output_sequence_length",
    "input_sequence_length",
    "total_output_tokens",
    "benchmark_duration",
    "total_isl",
    "total_osl",
    "error_request_count",
)


def iso_local(ns: int | None) -> str | None:
    """Naive local time with microseconds, as AIPerf writes start_time / end_time."""
    if ns is None:
        return None
    return datetime.fromtimestamp(ns / NS_PER_S).isoformat(timespec="microseconds")


def build_json(
    blocks: dict[str, dict[str, Any]],
    pooled_histogram: dict[int, int] | None,
    *,
    input_config: dict[str, Any] | None = None,
    was_cancelled: bool = False,
    error_summary: list[dict[str, Any]] | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
    benchmark_id: str | None = None,
) -> dict[str, Any]:
    """The export document. `blocks` is RunAccumulator.summary(); wall-clock ns for times."""
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "aiperf_version": AIPERF_COMPAT_VERSION,
        "specmon_version": __version__,
        "benchmark_id": benchmark_id or uuid.uuid4().hex[:12],
    }
    for tag in _DECLARED_ORDER:
        if tag in blocks:
            doc[tag] = blocks[tag]
    doc["input_config"] = input_config or {}
    doc["was_cancelled"] = bool(was_cancelled)
    doc["is_complete"] = not was_cancelled
    doc["error_summary"] = error_summary or []
    for key, ns in (("start_time", start_ns), ("end_time", end_ns)):
        if ns is not None:
            doc[key] = iso_local(ns)
    if pooled_histogram and "total_spec_decode_steps" in blocks:
        doc["pooled_spec_decode_acceptance_histogram"] = {
            str(j): n for j, n in sorted(pooled_histogram.items())
        }
    for tag, block in blocks.items():  # AIPerf's undeclared ("extra") metrics come last
        if tag not in doc:
            doc[tag] = block
    return doc


def dumps_json(doc: dict[str, Any]) -> bytes:
    # orjson writes NaN/inf as null, as AIPerf's exporter does.
    return dumps_safe(doc, option=orjson.OPT_INDENT_2) + b"\n"


def write_json(path: str | Path, doc: dict[str, Any]) -> Path:
    return atomic_write(path, dumps_json(doc))
