"""Deterministic raw captures (vLLM merged shape, k=3) for the TUI tests. No randomness:
every value follows from the request index, so screens and snapshots are reproducible."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from specmon.accumulator import RunAccumulator
from specmon.capture import RawCapture
from specmon.pipeline import process_capture

K = 3
MS = 1_000_000
T0 = 5_000_000_000  # perf_counter origin of the recorded run
CATEGORIES = ("chat", "code", "math")

# Three hand-checkable requests (histograms h_0..h_3, 4 steps each):
#   r1 [1,0,1,2]: accepted 0+2+6 = 8,  AL = 1 + 8/4 = 3.0,  drafted 12, rate 8/12
#   r2 [3,1,0,0]: accepted 1,          AL = 1 + 1/4 = 1.25, drafted 12, rate 1/12
#   r3 [0,0,2,2]: accepted 4+6 = 10,   AL = 1 + 10/4 = 3.5, drafted 12, rate 10/12
SMALL_HISTOGRAMS = ([1, 0, 1, 2], [3, 1, 0, 0], [0, 0, 2, 2])


def spec_payload(hist: list[int], per_step: bool = False) -> dict:
    steps = sum(hist)
    accepted = sum(j * n for j, n in enumerate(hist))
    drafted = K * steps
    payload = {
        "mean_acceptance_length": 1 + accepted / steps if steps else 1.0,
        "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
        "acceptance_histogram": list(hist),
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": K,
    }
    if per_step:  # steps in bucket order: all the j=0 steps, then j=1, ...
        payload["per_step_accepted"] = [j for j, n in enumerate(hist) for _ in range(n)]
        payload["per_step_drafted"] = [K] * steps
    return payload


def make_capture(
    i: int,
    hist: list[int] | None,
    *,
    start_ms: float,
    latency_ms: float = 200.0,
    error: str | None = None,
    category: str = "chat",
    per_step: bool = False,
    phase: str = "profiling",
    streaming: bool = False,
    ttft_ms: float = 40.0,
    step_ms: float = 15.0,
) -> dict:
    """One non-streaming chat request as the load loop would record it (raw capture dict)."""
    start = T0 + int(start_ms * MS)
    end = start + int(latency_ms * MS)
    base = {
        "endpoint": "chat",
        "streaming": False,
        "request": {"model": "demo-model", "messages": [{"role": "user", "content": f"q{i}"}]},
        "start_ns": start,
        "end_ns": end,
        "x_request_id": f"req-{i:04d}",
        "category": category,
        "benchmark_phase": phase,
    }
    if error:
        return {
            **base,
            "status": 500,
            "responses": [{"error": "boom"}],
            "response_ns": [end],
            "error": {"type": error, "message": "HTTP 500"},
        }
    steps_hist = hist or [0] * (K + 1)
    tokens = sum((j + 1) * n for j, n in enumerate(steps_hist)) or 1
    body = {
        "id": f"chatcmpl-{i}",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "x" * tokens},
                "finish_reason": "length",
            }
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": tokens, "total_tokens": 20 + tokens},
        "metrics": {"speculative_decoding": spec_payload(steps_hist, per_step)},
    }
    if not streaming:
        return {**base, "status": 200, "responses": [body], "response_ns": [end], "error": None}
    # Streaming: one chunk per verify step (j+1 tokens), first after ttft_ms, then every
    # step_ms; the spec-decode metrics ride on the final usage chunk (choices: []).
    chunks, times = [], []
    per_step_tokens = [j + 1 for j, n in enumerate(steps_hist) for _ in range(n)] or [1]
    for s_i, n_tok in enumerate(per_step_tokens):
        chunks.append(
            {
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": "x" * n_tok}}],
            }
        )
        times.append(start + int((ttft_ms + s_i * step_ms) * MS))
    usage_chunk = {
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": body["usage"],
        "metrics": body["metrics"],
    }
    chunks.append(usage_chunk)
    times.append(times[-1] + MS)
    return {
        **base,
        "streaming": True,
        "status": 200,
        "responses": chunks,
        "response_ns": times,
        "end_ns": times[-1],
        "error": None,
    }


def small_captures() -> list[dict]:
    return [
        make_capture(i + 1, h, start_ms=100.0 * i, per_step=(i == 0))
        for i, h in enumerate(SMALL_HISTOGRAMS)
    ]


def run_captures(n: int = 60) -> list[dict]:
    """A longer deterministic run: varied histograms, every 9th request an HTTP error,
    request 5 zero-step, two warmup requests first."""
    out = [
        make_capture(1000 + w, [2, 1, 1, 1], start_ms=-500.0 + 100 * w, phase="warmup")
        for w in range(2)
    ]
    for i in range(1, n + 1):
        start = 250.0 * i
        cat = CATEGORIES[i % 3]
        if i % 9 == 0:
            out.append(make_capture(i, None, start_ms=start, error="http_error", category=cat))
        elif i == 5:
            out.append(make_capture(i, [0, 0, 0, 0], start_ms=start, category=cat))
        else:
            hist = [1 + i % 3, (i * 7) % 4, (i * 5) % 3, 1 + (i * 3) % 5]
            out.append(
                make_capture(
                    i,
                    hist,
                    start_ms=start,
                    latency_ms=150.0 + 10 * (i % 7),
                    category=cat,
                    per_step=(i % 4 == 1),
                    streaming=(i % 2 == 0),
                    ttft_ms=40.0 + 5 * (i % 5),
                )
            )
    return out


def accumulate(captures: list[dict], live: bool = False) -> RunAccumulator:
    acc = RunAccumulator(live=live)
    for c in captures:
        acc.add(process_capture(RawCapture.from_dict(c)))
    return acc


def session_view(acc: RunAccumulator) -> SimpleNamespace:
    """An interfaces.SessionView over an accumulator (what SpecmonApp reads of a session)."""
    return SimpleNamespace(accumulator=acc, artifact_dir=None, spec_method=None)


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
