"""Reading one RequestResult for the log and the drill-down screen (no Textual).

A replayed export record becomes a RequestResult too (export/jsonl_export.py
result_from_record), so live and replayed requests read the same.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specmon.sinks.alarms import session_alarms

if TYPE_CHECKING:
    from specmon.pipeline import RequestResult

LOG_HEADER = (
    f"{'#':>5} {'request id':<12} {'category':<8} {'out':>5} {'steps':>5} "
    f"{'AL':>5} {'acc%':>5} {'TTFT ms':>8} {'lat ms':>8} status"
)


def metric(result: RequestResult, tag: str) -> float | None:
    """A per-request metric value in display units (ms, tokens, ...), or None."""
    value = result.metrics.get(tag)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def request_id(result: RequestResult, index: int) -> str:
    return str(result.x_request_id or f"req-{index + 1}")


def status(result: RequestResult) -> tuple[str, str]:
    """(text, kind) where kind is retry | cancelled | error | warmup | ok: a retried attempt
    (the load loop sent the same request again) is a row but not a request."""
    error = result.error
    if error and error.get("retried"):
        return f"retried {error.get('type', 'error')}", "retry"
    if error and result.error_kind == "cancelled":
        return "ERR cancelled", "cancelled"
    if error:
        return f"ERR {error.get('type', 'error')}", "error"
    if result.phase == "warmup":
        return "warmup", "warmup"
    if result.outcome.zero_step:
        return "ok 0-step", "ok"
    if result.spec is None and result.outcome.reason:
        return f"ok no-spec:{result.outcome.reason}", "ok"
    return "ok", "ok"


def output_tokens(result: RequestResult) -> float | None:
    for tag in ("output_sequence_length", "output_token_count"):
        value = metric(result, tag)
        if value is not None:
            return value
    return None


def _num(value: float | None, width: int, fmt: str) -> str:
    return (format(value, fmt) if value is not None else "-").rjust(width)


def log_row(result: RequestResult, index: int) -> tuple[str, str]:
    """One log line (fixed columns) and its kind for styling."""
    spec = result.spec
    steps = spec.num_spec_steps if spec is not None else None
    al = spec.mean_acceptance_length if spec is not None else None
    rate = spec.draft_acceptance_rate if spec is not None else None
    text, kind = status(result)
    category = str(result.category or "-")[:8]
    line = (
        f"{index + 1:>5} {request_id(result, index)[:12]:<12} {category:<8} "
        f"{_num(output_tokens(result), 5, '.0f')} {_num(steps, 5, 'd')} {_num(al, 5, '.2f')} "
        f"{_num(None if rate is None else 100 * rate, 5, '.1f')} "
        f"{_num(metric(result, 'time_to_first_token'), 8, '.1f')} "
        f"{_num(metric(result, 'request_latency'), 8, '.1f')} {text}"
    )
    return line, kind


@dataclass(frozen=True)
class Note:
    """A log line after the row of results[at] (an alarm that started with that request)."""

    at: int
    text: str
    kind: str = "alarm"


def alarm_notes(session: object) -> list[Note]:
    """The log's line for each alarm the session's AlarmSink raised, in start order:
    'ALARM acceptance_drift at #203: acceptance length of the last 30 requests ...'."""
    return [
        Note(
            alarm.log_index,
            f"{'!':>5} ALARM {alarm.name} at #{alarm.log_index + 1}: {alarm.message}",
        )
        for alarm in session_alarms(session)
        if alarm.log_index is not None
    ]


@dataclass(frozen=True)
class LogCounts:
    """What the log holds: its rows, and among them the retried attempts and the requests
    cut by a stop (neither is a finished request); `shown` passes the filter."""

    rows: int
    retried: int = 0
    cancelled: int = 0
    shown: int | None = None  # None: no filter
    pending: int = 0  # rows that arrived while scrolled up

    @property
    def requests(self) -> int:
        """The header's count: finished requests, valid or failed (HeaderInfo: completed +
        errors - retries)."""
        return self.rows - self.retried - self.cancelled


def log_title(counts: LogCounts, filter_text: str = "") -> str:
    """'60 shown · following'; with retried attempts or cut requests among the rows,
    '116 requests + 14 retried attempts shown': the requests as the header counts them."""
    extra = []
    if counts.retried:
        extra.append(f"{counts.retried:,} retried attempt{'s' if counts.retried != 1 else ''}")
    if counts.cancelled:
        extra.append(f"{counts.cancelled:,} cancelled")
    if counts.shown is not None:
        parts = [f"{counts.shown:,} shown", f"filter '{filter_text}' of {counts.rows:,}"]
        if extra:
            parts[-1] += f" ({counts.requests:,} requests + {' + '.join(extra)})"
    elif extra:
        parts = [f"{counts.requests:,} requests + {' + '.join(extra)} shown"]
    else:
        parts = [f"{counts.rows:,} shown"]
    parts.append(f"{counts.pending:,} new (end follows)" if counts.pending else "following")
    return " · ".join(parts)


def per_step(result: RequestResult) -> tuple[list[int] | None, list[int] | None]:
    spec = result.spec
    if spec is None:
        return None, None
    return spec.per_step_accepted, spec.per_step_drafted


def raw_payload(result: RequestResult) -> str:
    """The request's own spec-decode payload and last response body, pretty-printed."""
    parts: dict[str, Any] = {}
    spec = result.outcome.trace or result.spec
    if spec is not None:
        parts["spec_decode_acceptance"] = spec.to_export_dict()
    responses = result.capture.responses if result.capture is not None else []
    if responses:
        parts["last_response"] = responses[-1]
    if result.error:
        parts["error"] = result.error
    payload = result.outcome.payload
    if not responses and payload is not None:  # live run: the payload outlives the bodies
        parts["payload_as_sent"] = payload
    if not responses:  # replayed records, or live results whose bodies were dropped
        parts["metrics"] = result.metrics or {}
    return pretty_json(parts)


def payload_title(result: RequestResult) -> str:
    """The raw panel's title: says when the bodies are gone and the parsed record stands in."""
    capture = result.capture
    if capture is not None and capture.responses:
        return "raw payload (last response body)"
    if capture is not None and result.outcome.payload is not None:
        return (
            "spec-decode payload as sent; live runs keep only this part of the "
            "body (--export-level raw writes whole bodies)"
        )
    if capture is not None:  # a live run: the session drops bodies once written
        return (
            "parsed record: live runs do not keep response bodies (memory); "
            "--export-level raw writes them to the raw capture file"
        )
    return "parsed record (the replayed file holds no response bodies)"


def pretty_json(obj: Any, indent: int = 0) -> str:
    """Indented JSON with lists of numbers/strings kept on one line (per-step arrays)."""
    pad = " " * indent
    if isinstance(obj, dict) and obj:
        items = [
            f"{pad}  {json.dumps(str(k))}: {pretty_json(v, indent + 2)}" for k, v in obj.items()
        ]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(obj, list) and any(isinstance(v, (dict, list)) for v in obj):
        items = [f"{pad}  {pretty_json(v, indent + 2)}" for v in obj]
        return "[\n" + ",\n".join(items) + f"\n{pad}]"
    return json.dumps(obj, default=str)
