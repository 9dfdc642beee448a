"""The raw capture: one request as sent and received, one JSON object per line.

Shape (docs/architecture.md): endpoint, streaming, request, status, responses (each JSON
body or SSE `data:` object, arrival order, no [DONE]), start_ns, response_ns, end_ns, error,
plus optional extras. A plain slotted dataclass, not pydantic: the load loop builds
thousands per second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from specmon.checks import is_int
from specmon.errors import UserError
from specmon.export.safe_json import dumps_safe

ENDPOINTS = ("chat", "completions")
PHASES = ("profiling", "warmup")
ERROR_TYPES = (
    "http_error",
    "timeout",
    "connection_error",
    "broken_stream",
    "invalid_json",
    "response_too_large",
    "cancelled",
    "client_error",  # the client raised what the wire does not name (docs/architecture.md)
    "invalid_timing",  # an answer stamped before its request: no latency is read from it
)


class CaptureError(ValueError):
    """A line that is JSON but not a capture; the message is the one-line reason."""


@dataclass(slots=True)
class RawCapture:
    endpoint: str
    streaming: bool
    request: dict[str, Any]
    status: int
    responses: list[Any] = field(default_factory=list)
    start_ns: int | None = None
    response_ns: list[int] | None = None
    end_ns: int | None = None
    error: dict[str, Any] | None = None
    x_request_id: str | None = None
    category: str | None = None
    benchmark_phase: str = "profiling"
    server: str | None = None
    segment: int | None = None
    worker_id: str | None = None
    wall_start_ns: int | None = None
    question_id: int | str | None = None  # a dataset row's id (docs/datasets.md)
    turn: int | None = None  # 1-based turn of that row

    @classmethod
    def from_dict(cls, d: Any) -> RawCapture:
        """Validate a decoded JSON object; raise CaptureError naming the first bad field."""
        if not isinstance(d, dict):
            raise CaptureError(f"expected a JSON object, got {type(d).__name__}")
        if "endpoint" not in d and "metadata" in d and "metrics" in d:
            raise CaptureError(
                "a profile_export.jsonl record, not a raw capture (open it with `specmon replay`)"
            )
        endpoint = d.get("endpoint")
        if endpoint not in ENDPOINTS:
            raise CaptureError(f"'endpoint' must be 'chat' or 'completions', got {endpoint!r}")
        streaming = d.get("streaming")
        if not isinstance(streaming, bool):
            raise CaptureError("'streaming' must be true or false")
        request = d.get("request")
        if not isinstance(request, dict):
            raise CaptureError("'request' must be the JSON object that was sent")
        status = d.get("status")
        if not is_int(status):
            raise CaptureError("'status' must be an integer HTTP status")
        responses = d.get("responses", [])
        if responses is None:
            responses = []
        if not isinstance(responses, list):
            raise CaptureError("'responses' must be a list")
        error = d.get("error")
        if error is not None and not (
            isinstance(error, dict) and isinstance(error.get("type"), str)
        ):
            raise CaptureError('\'error\' must be null or {"type": str, "message": str}')
        phase = d.get("benchmark_phase") or "profiling"
        if phase not in PHASES:
            raise CaptureError(f"'benchmark_phase' must be 'profiling' or 'warmup', got {phase!r}")
        response_ns = d.get("response_ns")
        if response_ns is not None and not (
            isinstance(response_ns, list) and all(is_int(t) for t in response_ns)
        ):
            raise CaptureError("'response_ns' must be a list of integers")
        _check_times(d, response_ns or [])
        return cls(
            endpoint=endpoint,
            streaming=streaming,
            request=request,
            status=status,
            responses=responses,
            start_ns=_opt_int(d, "start_ns"),
            response_ns=response_ns,
            end_ns=_opt_int(d, "end_ns"),
            error=error,
            benchmark_phase=phase,
            **{key: read(d, key) for key, read in EXTRAS.items()},
        )

    def to_dict(self) -> dict[str, Any]:
        """The raw-capture JSON object (optional extras omitted when unset)."""
        d: dict[str, Any] = {
            "endpoint": self.endpoint,
            "streaming": self.streaming,
            "request": self.request,
            "status": self.status,
            "responses": self.responses,
            "start_ns": self.start_ns,
            "response_ns": self.response_ns,
            "end_ns": self.end_ns,
            "error": self.error,
        }
        for key in EXTRAS:
            value = getattr(self, key)
            if value is not None:
                d[key] = value
        d["benchmark_phase"] = self.benchmark_phase
        return d

    def to_json_line(self) -> bytes:
        return dumps_safe(self.to_dict()) + b"\n"


# Clock readings (perf_counter_ns, time_ns) are int64 nanoseconds: anything outside is not a
# time this process could have read, and would overflow every time difference downstream.
TIME_NS_MAX = 2**63 - 1


def _check_times(d: dict[str, Any], response_ns: list[int]) -> None:
    for key in ("start_ns", "end_ns", "wall_start_ns"):
        v = d.get(key)
        if is_int(v) and not 0 <= v <= TIME_NS_MAX:
            raise CaptureError(f"'{key}' out of range: {v} (a clock reading is 0 to 2**63-1 ns)")
    if any(not 0 <= t <= TIME_NS_MAX for t in response_ns):
        raise CaptureError("'response_ns' out of range (a clock reading is 0 to 2**63-1 ns)")
    start, end = d.get("start_ns"), d.get("end_ns")
    if is_int(start) and is_int(end) and end < start:
        raise CaptureError(f"'end_ns' ({end}) is before 'start_ns' ({start})")


def _opt_int(d: dict[str, Any], key: str) -> int | None:
    v = d.get(key)
    if v is None:
        return None
    if not is_int(v):
        raise CaptureError(f"'{key}' must be an integer")
    return v


def _opt_int_or_str(d: dict[str, Any], key: str) -> int | str | None:
    v = d.get(key)
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, str))):
        raise CaptureError(f"'{key}' must be an integer or a string")
    return v


def _opt_str(d: dict[str, Any], key: str) -> str | None:
    v = d.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise CaptureError(f"'{key}' must be a string")
    return v


# The optional extras (docs/architecture.md, "Raw capture"), each with the reader that
# checks its type: read by from_dict, written by to_dict only when set.
EXTRAS: dict[str, Callable[[dict[str, Any], str], Any]] = {
    "x_request_id": _opt_str,
    "category": _opt_str,
    "question_id": _opt_int_or_str,  # a dataset row's id
    "turn": _opt_int,
    "server": _opt_str,
    "segment": _opt_int,
    "worker_id": _opt_str,
    "wall_start_ns": _opt_int,
}


def parse_capture_line(line: str | bytes) -> RawCapture:
    """One JSONL line -> RawCapture; CaptureError with a one-line reason otherwise."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise CaptureError(f"not valid JSON ({exc.msg if hasattr(exc, 'msg') else exc})") from None
    return RawCapture.from_dict(obj)


def read_raw_capture(path: str | Path) -> Iterator[tuple[int, RawCapture | str]]:
    """Yield (line_no, capture) or (line_no, reason) for each non-blank line of `path`.

    A missing or unreadable file is a UserError; a bad line is yielded with its reason
    so the caller can report it and go on.
    """
    p = Path(path)
    if not p.is_file():
        raise UserError(f"raw capture file not found: {p}")
    try:
        fh = p.open("rb")
    except OSError as exc:
        raise UserError(f"cannot read {p}: {exc.strerror}") from None
    with fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield line_no, parse_capture_line(line)
            except CaptureError as exc:
                yield line_no, str(exc)
