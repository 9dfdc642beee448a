"""profile_export.jsonl: one object per profiling request, written as it lands (docs/metrics.md §8.3).

{"metadata": {...}, "metrics": {tag: {"value", "unit"}}, "spec_decode_acceptance": {...},
 "error": {...}}. spec_decode_acceptance carries string histogram keys and the rate as a
fraction; it is ABSENT (not null) without a record; a zero-step record is kept verbatim.
`error` is present only for failed requests. `result_from_record` reads a line back
(for `specmon replay`).
"""

from __future__ import annotations

from typing import Any

from specmon.constants import MS_PER_NS
from specmon.export.safe_json import dumps_safe
from specmon.pipeline import (
    BASE_SCALE,
    RequestResult,
    SpecOutcome,
    derive_request_metrics,
    to_display,
)
from specmon.specdecode.fidelity import FIDELITY_KEY
from specmon.specdecode.record import record_from_export_dict
from specmon.stats import METRICS

CONTEXT_KEY = "context_tokens"  # specmon's: the request's prompt + output tokens (usage)
_UNITS = {tag: mdef.unit for tag, mdef in METRICS.items()}  # one dict lookup per metric


def request_times_ns(result: RequestResult) -> tuple[int | None, int | None]:
    """(request_start_ns, request_end_ns) on the wall clock when the capture has one."""
    start, end = result.start_ns, result.end_ns
    if result.wall_start_ns is not None and start is not None:
        offset = result.wall_start_ns - start
        return result.wall_start_ns, (end + offset) if end is not None else None
    return start, end


def record_dict(result: RequestResult) -> dict[str, Any]:
    start, end = request_times_ns(result)
    meta: dict[str, Any] = {}
    if result.x_request_id is not None:
        meta["x_request_id"] = result.x_request_id
    # AIPerf 0.13's metadata key order (the keys specmon has)
    meta["request_start_ns"] = start
    meta["request_end_ns"] = end
    if result.worker_id is not None:
        meta["worker_id"] = result.worker_id
    meta["benchmark_phase"] = result.phase
    meta["was_cancelled"] = result.error_kind == "cancelled"
    # specmon extras (ignored by AIPerf tooling)
    for key in ("category", "question_id", "turn", "server", "segment"):
        value = getattr(result, key)
        if value is not None:
            meta[key] = value
    context = result.context_tokens  # prompt + output tokens: the context at the end
    if context is not None:
        meta[CONTEXT_KEY] = context
    outcome = result.outcome
    if outcome.reason:
        meta["spec_decode_reason"] = outcome.reason
    if outcome.zero_step:
        meta["spec_decode_zero_step"] = True
    if outcome.trace is not None:  # which of the record's fields the engine reported
        meta[FIDELITY_KEY] = outcome.trace.fidelity
    out: dict[str, Any] = {
        "metadata": meta,
        "metrics": {
            tag: {"value": v, "unit": _UNITS[tag]}
            for tag, v in result.metrics.items()
            if tag in _UNITS
        },
    }
    if outcome.trace is not None:
        out["spec_decode_acceptance"] = outcome.trace.to_export_dict()
    if result.error is not None:
        out["error"] = result.error
    return out


def record_line(result: RequestResult) -> bytes:
    return dumps_safe(record_dict(result)) + b"\n"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _stored_values(metrics: dict[str, Any]) -> dict[str, int | float]:
    """The stored (ns) values behind a line's display values. The integer-ns timings
    behind ms values (ns * 1e-06) are recovered so a replay computes statistics exactly as
    the live run did, and ITL is recomputed from them; a time value that does not
    round-trip is stored as ms / 1e-06."""
    ns: dict[str, int | None] = {}
    for tag in ("time_to_first_token", "time_to_second_token", "request_latency"):
        ms = metrics.get(tag)
        guess = round(ms / MS_PER_NS) if ms is not None else None
        ns[tag] = guess if guess is not None and guess * MS_PER_NS == ms else None
    osl, isl = metrics.get("output_sequence_length"), metrics.get("input_sequence_length")
    derived = derive_request_metrics(
        ns["time_to_first_token"], ns["time_to_second_token"], ns["request_latency"], osl, isl
    )
    display = to_display(derived)
    exact = all(metrics[tag] == value for tag, value in display.items() if tag in metrics)
    values: dict[str, int | float] = {}
    for tag, value in metrics.items():
        if tag in BASE_SCALE:
            recovered = tag in derived and (
                exact or tag not in ("inter_token_latency", "decode_duration")
            )
            values[tag] = derived[tag] if recovered else value / BASE_SCALE[tag]
        else:
            values[tag] = value  # displayed in its stored unit
    return values


def result_from_record(obj: dict[str, Any]) -> RequestResult:
    """Rebuild a RequestResult (without capture) from one profile_export.jsonl object.

    Raises ValueError/KeyError/TypeError on a line that is not such a record.
    """
    meta = obj.get("metadata") or {}
    # Known scalar metrics only: AIPerf's own files also carry list and extra metrics.
    metrics = {
        tag: m["value"]
        for tag, m in (obj.get("metrics") or {}).items()
        if tag in METRICS and isinstance(m, dict) and _is_number(m.get("value"))
    }
    spec_dict = obj.get("spec_decode_acceptance")
    trace = record_from_export_dict(spec_dict) if spec_dict else None
    zero_step = bool(meta.get("spec_decode_zero_step")) or (
        trace is not None and trace.num_spec_steps == 0
    )
    outcome = SpecOutcome(
        record=None if zero_step else trace,
        zero_step=zero_step,
        reason=meta.get("spec_decode_reason"),
        trace=trace,
    )
    return RequestResult(
        capture=None,
        outcome=outcome,
        engine=trace.engine if trace else None,
        values=_stored_values(metrics),
        error=obj.get("error") or None,
        phase=meta.get("benchmark_phase") or "profiling",
        category=meta.get("category"),
        question_id=meta.get("question_id"),
        turn=meta.get("turn"),
        server=meta.get("server"),
        segment=meta.get("segment"),
        start_ns=meta.get("request_start_ns"),
        end_ns=meta.get("request_end_ns"),
        x_request_id=meta.get("x_request_id"),
        worker_id=meta.get("worker_id"),
    )
