"""One request in, one RequestResult out: parse, detect the spec-decode record, compute
this request's AIPerf record metrics (docs/metrics.md §3, §5, §7).

The same function serves live runs, `specmon report` and replays, so a number never
depends on where the capture came from.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from specmon.capture import RawCapture
from specmon.checks import is_count
from specmon.constants import MS_PER_NS, S_PER_NS
from specmon.records import same_named
from specmon.specdecode.adapters.base import ParsedResponse
from specmon.specdecode.record import SpecDecodeAcceptanceRecord

log = logging.getLogger(__name__)


# The stored unit of every time metric is ns (AIPerf's base unit); the display unit is ms,
# reached by this factor (AIPerf's `value * target/source` conversion). Every other metric
# is stored in its display unit. One table, read by the accumulator and every exporter.
BASE_SCALE: dict[str, float] = {
    "time_to_first_token": MS_PER_NS,
    "time_to_second_token": MS_PER_NS,
    "request_latency": MS_PER_NS,
    "decode_duration": MS_PER_NS,
    "inter_token_latency": MS_PER_NS,
}


def to_display(values: dict[str, int | float]) -> dict[str, int | float]:
    """Stored values (time metrics in ns) in display units (time metrics in ms)."""
    scale = BASE_SCALE
    return {tag: v * scale[tag] if tag in scale else v for tag, v in values.items()}


@dataclass(slots=True)
class SpecOutcome:
    """What the spec-decode detection made of one request's responses."""

    # the record that counts (None for zero-step, absent, malformed)
    record: SpecDecodeAcceptanceRecord | None = None
    zero_step: bool = False
    reason: str | None = None  # why there is no record: absent, n_gt_1, malformed:<kind>, ...
    # What the per-request trace carries under spec_decode_acceptance: the record, or the
    # zero-step record verbatim (it stays out of every distribution).
    trace: SpecDecodeAcceptanceRecord | None = None
    # The spec-decode wire object as the server sent it (also for rejected payloads), kept
    # after the session drops the response bodies so the drill-down can show it.
    payload: Any = None


@dataclass(slots=True)
class RequestResult:
    capture: RawCapture | None
    outcome: SpecOutcome = field(default_factory=SpecOutcome)
    engine: str | None = None
    # This request's record-metric values in their stored unit (BASE_SCALE: time metrics
    # in ns); `metrics` gives them in display units.
    values: dict[str, int | float] = field(default_factory=dict)
    error: dict[str, Any] | None = None  # {"type", "message", "code"?, "retried"?}
    phase: str = "profiling"
    category: str | None = None
    question_id: int | str | None = None
    turn: int | None = None
    server: str | None = None
    segment: int | None = None
    start_ns: int | None = None  # monotonic ns of the sending process
    # final content response ns (= start + request_latency, as AIPerf's request_end_ns);
    # the last response or end of request when there is no latency
    end_ns: int | None = None
    x_request_id: str | None = None
    worker_id: str | None = None
    wall_start_ns: int | None = None

    @property
    def spec(self) -> SpecDecodeAcceptanceRecord | None:
        """The acceptance record that counts (None for zero-step, absent, malformed)."""
        return self.outcome.record

    @property
    def metrics(self) -> dict[str, int | float]:
        """The record-metric values in display units (a new dict per call)."""
        return to_display(self.values)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def prompt_tokens(self) -> int | None:
        """The prompt's tokens as the server's usage reported them (None without one)."""
        value = self.values.get("input_sequence_length")
        return None if value is None else int(value)

    @property
    def context_tokens(self) -> int | None:
        """The context at the request's end: prompt + output tokens, from its usage (None
        without a prompt count; docs/metrics.md §15)."""
        prompt = self.prompt_tokens
        return (
            None if prompt is None else prompt + int(self.values.get("output_sequence_length", 0))
        )

    @property
    def error_kind(self) -> str | None:
        return None if self.error is None else str(self.error.get("type") or "unknown")


def parse_responses(capture: RawCapture) -> list[ParsedResponse]:
    """Wrap each JSON object of the capture; non-objects (bad payloads) are skipped."""
    times, responses, request = capture.response_ns, capture.responses, capture.request
    if times is not None and len(times) == len(responses):
        return [
            ParsedResponse(data, ns, request)
            for data, ns in zip(responses, times)
            if isinstance(data, dict)
        ]
    return [ParsedResponse(data, None, request) for data in responses if isinstance(data, dict)]


# RequestResult's fields taken from the capture as they are (end_ns and error are derived)
_FROM_CAPTURE = (
    "category",
    "question_id",
    "turn",
    "server",
    "segment",
    "start_ns",
    "x_request_id",
    "worker_id",
    "wall_start_ns",
)


def process_capture(
    capture: RawCapture, engine: str | None = None, note: str | None = None
) -> RequestResult:
    """Turn one raw capture into its RequestResult. Never raises on payload content.

    engine: read only that engine's payload (`--engine`); None detects any engine's.
    note: the server's non-comparable verification mode, put on the record."""
    result = RequestResult(
        capture=capture,
        phase=capture.benchmark_phase,
        **same_named(RequestResult, capture, _FROM_CAPTURE),
    )
    result.end_ns = _last_ns(capture)
    error = _error_of(capture)
    if error is not None:
        result.error = error
        return result
    parsed = parse_responses(capture)
    _attach_spec(result, parsed, capture.request, engine)
    if note is not None and result.outcome.record is not None:
        noted = result.outcome.record.model_copy(update={"verification_note": note})
        result.outcome.record = result.outcome.trace = noted
    result.values, final_ns = request_timing(capture, parsed)
    if final_ns is not None:
        result.end_ns = final_ns
    if result.spec is not None:
        result.values.update(spec_record_metrics(result.spec))
    return result


def _error_of(capture: RawCapture) -> dict[str, Any] | None:
    if capture.error is not None:
        err: dict[str, Any] = {
            "type": str(capture.error.get("type")),
            "message": str(capture.error.get("message", "")),
        }
        if capture.status >= 400:
            err["code"] = capture.status
        if capture.error.get("retried") is True:  # an attempt sent again: not a request
            err["retried"] = True
        return err
    if capture.status >= 400:
        return {"type": "http_error", "message": f"HTTP {capture.status}", "code": capture.status}
    if _stamped_before_start(capture):  # a latency from such stamps would be negative
        return {"type": "invalid_timing", "message": "an answer stamped before its request"}
    return None


def _stamped_before_start(capture: RawCapture) -> bool:
    start = capture.start_ns
    if start is None:
        return False
    ends = [*(capture.response_ns or ()), *([capture.end_ns] if capture.end_ns is not None else [])]
    return any(ns < start for ns in ends)


def _last_ns(capture: RawCapture) -> int | None:
    if capture.response_ns:
        return max(capture.response_ns)
    return capture.end_ns


def _attach_spec(
    result: RequestResult,
    parsed: list[ParsedResponse],
    request: dict[str, Any],
    engine: str | None = None,
) -> None:
    from specmon.specdecode.adapters import detect  # the registry loads adapters lazily

    try:
        outcome = detect(parsed, request, engine)
    except Exception as exc:  # an adapter bug must never stop a run
        log.warning("spec-decode detection failed: %s: %s", type(exc).__name__, exc)
        result.outcome = SpecOutcome(reason=f"adapter_error:{type(exc).__name__}")
        return
    record = outcome.record
    spec = SpecOutcome(reason=outcome.reason, payload=outcome.payload)
    result.outcome = spec
    result.engine = outcome.engine or (record.engine if record else None)
    if outcome.zero_step or (record is not None and record.num_spec_steps == 0):
        # Kept verbatim in the trace, left out of every distribution (docs/metrics.md §7).
        spec.zero_step = True
        spec.trace = outcome.zero_step_record or record
        if result.engine is None and spec.trace is not None:
            result.engine = spec.trace.engine
        return
    spec.record = record
    spec.trace = record


def spec_record_metrics(rec: SpecDecodeAcceptanceRecord) -> dict[str, int | float]:
    """The six spec-decode record metrics of one request (docs/metrics.md §5).

    A counts-only record (no verify steps) gives the rate and the two counts; the
    step-based ones are left out, not invented."""
    a, d, s = rec.num_accepted_draft_tokens, rec.num_draft_tokens, rec.num_spec_steps
    out: dict[str, int | float] = {
        "spec_decode_draft_acceptance_rate": rec.draft_acceptance_rate * 100.0,
        "spec_decode_accepted_draft_tokens": a,
        "spec_decode_draft_tokens": d,
    }
    if s is None or rec.mean_acceptance_length is None:
        return out
    out["spec_decode_acceptance_length"] = rec.mean_acceptance_length  # server value verbatim
    out["spec_decode_steps"] = s
    if d + s > 0:
        out["spec_decode_accepted_per_verified"] = (a + s) / (d + s)
    return out


def has_content(data: dict[str, Any]) -> bool:
    """True when a response carries generated text (usage/metrics-only chunks do not)."""
    choices = data.get("choices")
    if not isinstance(choices, list):
        return False
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        if choice.get("text"):
            return True
        for key in ("delta", "message"):
            msg = choice.get(key)
            if isinstance(msg, dict) and (
                msg.get("content") or msg.get("reasoning_content") or msg.get("reasoning")
            ):
                return True
    return False


def _timed_content(resp: ParsedResponse) -> bool:
    return resp.perf_ns is not None and has_content(resp.data)


def content_times(parsed: list[ParsedResponse]) -> tuple[int | None, int | None, int | None]:
    """perf_ns of the first, second and last timed responses with content.

    Scans from both ends instead of testing every response: a stream's content starts
    within its first chunks and ends within its last ones, so ~6 of 32 events are looked at.
    """
    n = len(parsed)
    first = 0
    while first < n and not _timed_content(parsed[first]):
        first += 1
    if first == n:
        return None, None, None
    last = n - 1
    while last > first and not _timed_content(parsed[last]):
        last -= 1
    second = first + 1
    while second <= last and not _timed_content(parsed[second]):
        second += 1
    return (
        parsed[first].perf_ns,
        parsed[second].perf_ns if second <= last else None,
        parsed[last].perf_ns,
    )


def last_usage(parsed: list[ParsedResponse]) -> dict[str, Any] | None:
    for resp in reversed(parsed):
        usage = resp.data.get("usage")
        if isinstance(usage, dict) and usage:
            return usage
    return None


def _count(v: Any) -> int | None:
    return v if is_count(v) else None


def request_timing(
    capture: RawCapture, parsed: list[ParsedResponse]
) -> tuple[dict[str, int | float], int | None]:
    """(record-metric values in stored units, final content response ns) of one request.

    Streaming: TTFT and latency from the first / last response with content (the usage
    chunk does not count). Non-streaming: latency = end - start.
    """
    usage = last_usage(parsed)
    osl = _count(usage.get("completion_tokens")) if usage else None
    isl = _count(usage.get("prompt_tokens")) if usage else None
    start = capture.start_ns
    latency_ns = ttft_ns = ttst_ns = None
    if start is not None:
        if capture.streaming:
            first, second, last = content_times(parsed)
            if first is not None and last is not None:
                ttft_ns = first - start
                latency_ns = last - start
                if second is not None:
                    ttst_ns = second - first
        else:
            end = capture.end_ns if capture.end_ns is not None else _last_ns(capture)
            if end is not None:
                latency_ns = end - start
    values = derive_request_metrics(ttft_ns, ttst_ns, latency_ns, osl, isl)
    final_ns = start + latency_ns if start is not None and latency_ns is not None else None
    return values, final_ns


def derive_request_metrics(
    ttft_ns: float | None,
    ttst_ns: float | None,
    latency_ns: float | None,
    osl: int | None,
    isl: int | None,
) -> dict[str, int | float]:
    """AIPerf's arithmetic on ns times (stored as ns; see BASE_SCALE for ms). The
    throughputs use `* 1e-09` (1 / 1e9) as AIPerf's unit conversion does, so values agree
    to the last digit (docs/metrics.md §1)."""
    values: dict[str, int | float] = {}
    for tag, ns in (
        ("time_to_first_token", ttft_ns),
        ("time_to_second_token", ttst_ns),
        ("request_latency", latency_ns),
    ):
        if ns is not None:
            values[tag] = ns
    if ttft_ns is not None and latency_ns is not None:
        values["decode_duration"] = latency_ns - ttft_ns
    if ttft_ns is not None and latency_ns is not None and osl is not None and osl >= 2:
        itl_ns = (latency_ns - ttft_ns) / (osl - 1)
        values["inter_token_latency"] = itl_ns
        itl_s = itl_ns * S_PER_NS
        if itl_s > 0:
            values["output_token_throughput_per_user"] = 1 / itl_s
    if osl is not None and latency_ns:
        values["e2e_output_token_throughput"] = osl / (latency_ns * S_PER_NS)
    if osl is not None:
        values["output_sequence_length"] = osl
    if isl is not None:
        values["input_sequence_length"] = isl
    return values
