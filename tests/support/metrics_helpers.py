"""Builders of raw captures in the shapes a real vLLM 0.32 sends (reference/real-vllm.md)
and the seed's legacy per-choice shape, for the metrics-core tests."""

from __future__ import annotations

from typing import Any

from specmon.capture import RawCapture
from specmon.specdecode.record import SpecDecodeAcceptanceRecord

MS = 1_000_000

# What AIPerf 0.13 writes, by hand from its exports (not from specmon's own tables): a metric
# block's statistics in the JSON and in the CSV, and the six per-record spec-decode metrics.
AIPERF_JSON_STATS = ("avg", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "min",
                     "max", "std", "count", "sum")  # fmt: skip
AIPERF_CSV_STATS = ("avg", "min", "max", "sum", "p1", "p5", "p10", "p25", "p50", "p75", "p90",
                    "p95", "p99", "std")  # fmt: skip
RECORD_SPEC_TAGS = ("spec_decode_acceptance_length", "spec_decode_draft_acceptance_rate",
                    "spec_decode_accepted_per_verified", "spec_decode_steps",
                    "spec_decode_accepted_draft_tokens", "spec_decode_draft_tokens")  # fmt: skip


def vllm_payload(
    per_step_accepted: list[int], k: int, drafted: list[int] | None = None, dense: bool = True
) -> dict[str, Any]:
    """A consistent payload from per-step accepted counts (each step drafts k unless given)."""
    drafted = drafted if drafted is not None else [k] * len(per_step_accepted)
    s, a, d = len(per_step_accepted), sum(per_step_accepted), sum(drafted)
    hist = [0] * (k + 1)
    for j in per_step_accepted:
        hist[j] += 1
    histogram: Any = hist if dense else {str(j): n for j, n in enumerate(hist) if n}
    return {
        "mean_acceptance_length": 1 + a / s if s else 1.0,
        "draft_acceptance_rate": a / d if d else 0.0,
        "acceptance_histogram": histogram,
        "num_spec_steps": s,
        "num_accepted_draft_tokens": a,
        "num_draft_tokens": d,
        "num_spec_tokens": k,
    }


def nonstream_capture(
    payload: dict | None,
    *,
    start_ns: int = 0,
    latency_ms: int = 50,
    completion_tokens: int = 20,
    prompt_tokens: int = 10,
    endpoint: str = "chat",
    legacy: bool = False,
    **extra: Any,
) -> RawCapture:
    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
    if endpoint == "chat":
        choice["message"] = {"role": "assistant", "content": "hello"}
    else:
        choice["text"] = "hello"
    body: dict[str, Any] = {
        "id": "x",
        "choices": [choice],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }
    if payload is not None:
        if legacy:
            choice["speculative_decoding_stats"] = payload
        else:
            body["metrics"] = {"speculative_decoding": payload}
    end = start_ns + latency_ms * MS
    request = {"model": "m", "max_tokens": completion_tokens}
    request.update({"messages": []} if endpoint == "chat" else {"prompt": "p"})
    return RawCapture(
        endpoint=endpoint,
        streaming=False,
        request=request,
        status=200,
        responses=[body],
        start_ns=start_ns,
        response_ns=[end],
        end_ns=end,
        **extra,
    )


def stream_capture(
    payload: dict | None,
    chunk_times_ms: list[int],
    *,
    start_ns: int = 0,
    completion_tokens: int = 20,
    prompt_tokens: int = 10,
    usage_ms: int | None = None,
    role_ms: int | None = None,
    **extra: Any,
) -> RawCapture:
    """Role chunk (empty content) at the first time, one content chunk per time, then the
    usage chunk (choices: []) carrying the payload, as vLLM 0.32 streams chat."""
    responses: list[dict] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    ]
    times = [start_ns + (role_ms if role_ms is not None else chunk_times_ms[0]) * MS]
    for t in chunk_times_ms:
        responses.append({"choices": [{"index": 0, "delta": {"content": "ab"}}]})
        times.append(start_ns + t * MS)
    usage_chunk: dict[str, Any] = {
        "choices": [],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }
    if payload is not None:
        usage_chunk["metrics"] = {"speculative_decoding": payload}
    responses.append(usage_chunk)
    last = usage_ms if usage_ms is not None else chunk_times_ms[-1] + 1
    times.append(start_ns + last * MS)
    return RawCapture(
        endpoint="chat",
        streaming=True,
        request={
            "model": "m",
            "messages": [],
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        status=200,
        responses=responses,
        start_ns=start_ns,
        response_ns=times,
        end_ns=times[-1],
        **extra,
    )


def error_capture(kind: str = "timeout", status: int = 0, start_ns: int = 0) -> RawCapture:
    return RawCapture(
        endpoint="chat",
        streaming=True,
        request={"model": "m", "messages": []},
        status=status,
        responses=[],
        start_ns=start_ns,
        error={"type": kind, "message": f"{kind} happened"},
    )


WORKED = [2, 3, 1, 4, 2, 0, 3, 3]  # a worked example (docs/metrics.md §5-§6), k = 4
SECOND = [1, 1, 0]  # the pooled companion request, k = 4
# WORKED and SECOND pooled: accepted-count -> steps, as the exports write it (string keys)
WORKED_AND_SECOND_POOLED = {"0": 2, "1": 3, "2": 2, "3": 3, "4": 1}


def spec_record(hist: dict[int, int], k: int) -> SpecDecodeAcceptanceRecord:
    """A vLLM record whose every figure follows from its histogram (accepted count -> steps)
    at k drafts a step: acceptance length 1 + accepted / steps, rate accepted / (k * steps)."""
    steps = sum(hist.values())
    accepted = sum(j * n for j, n in hist.items())
    return SpecDecodeAcceptanceRecord(
        engine="vllm",
        mean_acceptance_length=1 + accepted / steps,
        draft_acceptance_rate=accepted / (k * steps),
        acceptance_histogram=hist,
        num_accepted_draft_tokens=accepted,
        num_draft_tokens=k * steps,
        num_spec_steps=steps,
        num_spec_tokens=k,
    )
