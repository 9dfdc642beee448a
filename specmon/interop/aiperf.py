"""Read NVIDIA AIPerf 0.13 exports.

- `profile_export_raw.jsonl` (`aiperf profile --export-level raw`): one record per request with
  the request payload and every raw response (SSE messages or a JSON body) with its
  perf_counter_ns time. `raw_record_to_capture` turns one into a specmon raw capture
  (docs/architecture.md), so `specmon report` can recompute AIPerf's numbers from the very
  responses AIPerf saw.
- `profile_export.jsonl` (per-request metrics + `spec_decode_acceptance`) and
  `profile_export_aiperf.json` (the summary): plain readers.

A line that is not a usable record is skipped and counted with its line number; a missing
file is a UserError.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specmon.errors import UserError

RAW_EXPORT_NAME = "profile_export_raw.jsonl"
RAW_RECORDS_FOLDER = "raw_records"  # per-processor files AIPerf merges into the one above
RECORDS_EXPORT_NAME = "profile_export.jsonl"
SUMMARY_EXPORT_NAME = "profile_export_aiperf.json"
# Summary keys that belong to the spec-decode section (docs/metrics.md §8.1).
SPEC_SUMMARY_PREFIXES = (
    "spec_decode_",
    "total_spec_decode_steps",
    "total_accepted_draft_tokens",
    "total_draft_tokens",
    "pooled_spec_decode_acceptance_histogram",
)


@dataclass
class ConversionReport:
    captures: list[dict] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "line N: why"


def _open_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed JSON or the exception) for each non-blank line."""
    try:
        fh = open(path, encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"no such file: {path}") from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    with fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except ValueError as exc:
                yield lineno, exc


def raw_export_path(artifact_dir_or_file: str | Path) -> Path:
    """The raw export inside an AIPerf artifact dir (or the file itself)."""
    path = Path(artifact_dir_or_file)
    if path.is_dir():
        path = path / RAW_EXPORT_NAME
    if not path.is_file():
        raise UserError(f"no AIPerf raw export at {path} (run aiperf with --export-level raw)")
    return path


def _endpoint_of(payload: dict) -> str:
    if "messages" in payload:
        return "chat"
    if "prompt" in payload:
        return "completions"
    raise ValueError("payload has neither 'messages' nor 'prompt'")


def _sse_data(message: dict) -> str | None:
    """The joined `data` field values of one AIPerf SSEMessage ({perf_ns, packets})."""
    values = [p.get("value") or "" for p in message.get("packets", []) if p.get("name") == "data"]
    return "\n".join(values) if values else None


def _responses(raw_responses: Iterable[dict]) -> tuple[list[dict], list[int]]:
    """AIPerf responses -> (JSON objects, their perf_ns), dropping [DONE] and non-JSON events."""
    bodies: list[dict] = []
    times: list[int] = []
    for resp in raw_responses:
        text = _sse_data(resp) if "packets" in resp else resp.get("text")
        if text is None or text.strip() in ("", "[DONE]"):
            continue
        bodies.append(json.loads(text))
        times.append(int(resp["perf_ns"]))
    return bodies, times


# AIPerf names errors by exception class; map the common ones onto specmon's error kinds.
_ERROR_KINDS = (("timeout", "timeout"), ("connect", "connection_error"), ("cancel", "cancelled"))


def _error_kind(raw_error: dict, status: int) -> str:
    if status >= 400 or (raw_error.get("code") or 0) >= 400:
        return "http_error"
    name = str(raw_error.get("type") or "error")
    for needle, kind in _ERROR_KINDS:
        if needle in name.lower():
            return kind
    return name


def _error(raw_error: dict | None, status: int) -> dict | None:
    """AIPerf ErrorDetails {code, type, message} -> specmon's {type, message}."""
    if raw_error is None and status < 400:
        return None
    raw_error = raw_error or {}
    return {
        "type": _error_kind(raw_error, status),
        "message": str(raw_error.get("message") or f"HTTP {status}"),
    }


def raw_record_to_capture(record: dict) -> dict:
    """One AIPerf raw record -> one specmon raw capture dict. Raises ValueError if unusable."""
    payload = record.get("payload")
    if not isinstance(payload, dict):
        raise ValueError("record has no request payload")
    meta = record.get("metadata") or {}
    start_ns = int(record["start_perf_ns"])
    responses, response_ns = _responses(record.get("responses") or [])
    status = int(record.get("status") or 0)
    # AIPerf keeps the request's end only as wall-clock ns; shift it onto the perf clock.
    end_ns = response_ns[-1] if response_ns else start_ns
    if meta.get("request_start_ns") and meta.get("request_end_ns"):
        end_ns = start_ns + int(meta["request_end_ns"]) - int(meta["request_start_ns"])
    capture = {
        "endpoint": _endpoint_of(payload),
        "streaming": bool(payload.get("stream")),
        "request": payload,
        "status": status,
        "responses": responses,
        "start_ns": start_ns,
        "response_ns": response_ns,
        "end_ns": end_ns,
        "error": _error(record.get("error"), status),
        "benchmark_phase": meta.get("benchmark_phase", "profiling"),
    }
    for ours, theirs in (
        ("x_request_id", "x_request_id"),
        ("worker_id", "worker_id"),
        ("wall_start_ns", "request_start_ns"),
    ):
        if meta.get(theirs) is not None:
            capture[ours] = meta[theirs]
    return capture


def read_raw_export(artifact_dir_or_file: str | Path) -> ConversionReport:
    """Convert every record of an AIPerf raw export; unusable lines are skipped and counted."""
    report = ConversionReport()
    for lineno, obj in _open_jsonl(raw_export_path(artifact_dir_or_file)):
        try:
            if isinstance(obj, Exception):
                raise ValueError(f"not JSON ({obj})")
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
            report.captures.append(raw_record_to_capture(obj))
        except (KeyError, TypeError, ValueError) as exc:
            report.skipped.append(f"line {lineno}: {exc}")
    return report


def write_captures(captures: Iterable[dict], path: str | Path) -> int:
    """Write captures as specmon raw capture JSONL; returns how many lines were written."""
    count = 0
    with open(path, "w", encoding="utf-8") as fh:
        for capture in captures:
            fh.write(json.dumps(capture) + "\n")
            count += 1
    return count


def read_records_export(artifact_dir_or_file: str | Path) -> list[dict]:
    """AIPerf's profile_export.jsonl as a list of {metadata, metrics, spec_decode_acceptance?}."""
    path = Path(artifact_dir_or_file)
    if path.is_dir():
        path = path / RECORDS_EXPORT_NAME
    records = []
    for lineno, obj in _open_jsonl(path):
        if isinstance(obj, Exception) or not isinstance(obj, dict):
            raise UserError(f"{path}: line {lineno} is not a JSON object")
        records.append(obj)
    return records


def read_summary_export(artifact_dir_or_file: str | Path) -> dict:
    """AIPerf's profile_export_aiperf.json as a dict."""
    path = Path(artifact_dir_or_file)
    if path.is_dir():
        path = path / SUMMARY_EXPORT_NAME
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise UserError(f"no such file: {path}") from None
    except ValueError as exc:
        raise UserError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a JSON object")
    return data


def spec_decode_summary(summary: dict) -> dict:
    """Only the spec-decode keys of a profile_export_aiperf.json (specmon's or AIPerf's)."""
    return {key: value for key, value in summary.items() if key.startswith(SPEC_SUMMARY_PREFIXES)}


def main(argv: list[str] | None = None) -> int:
    """`python -m specmon.interop.aiperf AIPERF_DIR_OR_RAW OUT.jsonl`: convert for `specmon report`."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m specmon.interop.aiperf",
        description="AIPerf raw export -> specmon raw capture JSONL",
    )
    parser.add_argument("source", help="AIPerf artifact dir or its profile_export_raw.jsonl")
    parser.add_argument("output", help="specmon raw capture JSONL to write")
    args = parser.parse_args(argv)
    try:
        report = read_raw_export(args.source)
        written = write_captures(report.captures, args.output)
    except (UserError, OSError) as exc:
        print(f"specmon: error: {exc}", file=sys.stderr)
        return 2
    for reason in report.skipped:
        print(f"skipped {reason}", file=sys.stderr)
    print(f"{written} captures written to {args.output}, {len(report.skipped)} lines skipped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
