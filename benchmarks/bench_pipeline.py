"""Per-request processing cost, in memory, without any HTTP: what specmon adds per request.

Builds N realistic vLLM 0.32 captures (the shapes of tests/fixtures/vllm032) and times each
stage of the hot path, as the median over `--repeats` passes, in microseconds of this
process's CPU time per request (CPU time, not wall time: the figures stay comparable on a
machine shared with other work):

  process_capture   parse + adapters.detect + per-request metrics (specmon/pipeline.py)
  accumulator.add   RunAccumulator.add of already-processed results
  session.add       RunSession.add: all of the above + the JSONL line written to a temp dir

Kinds: `stream-detailed` / `stream-summary` (32 SSE events: role, prefill content, 28 step
chunks, finish, usage chunk with `choices: []` and `metrics.speculative_decoding`, per-step
lists at detailed level, null at summary), `nonstream` (one chat body, detailed).

It also measures the memory each request leaves in the accumulator (tracemalloc, after
RunSession.add dropped the responses as a live run does).

  python benchmarks/bench_pipeline.py                      # every kind, 2,000 requests
  python benchmarks/bench_pipeline.py --kinds stream-detailed --count 5000 --repeats 7
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable

from specmon.accumulator import RunAccumulator
from specmon.capture import RawCapture
from specmon.pipeline import process_capture
from specmon.session import RunSession

MODEL = "bench-specdec"
K = 3
STEPS = 28  # step i accepts i % 4 drafts: histogram [7, 7, 7, 7], accepted 42, drafted 84
KINDS = ("stream-detailed", "stream-summary", "nonstream")


def spec_payload(detailed: bool) -> dict:
    accepted_per_step = [i % (K + 1) for i in range(STEPS)]
    accepted, drafted = sum(accepted_per_step), STEPS * K
    return {
        "mean_acceptance_length": 1 + accepted / STEPS,
        "draft_acceptance_rate": accepted / drafted,
        "acceptance_histogram": [accepted_per_step.count(j) for j in range(K + 1)],
        "num_spec_steps": STEPS,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": K,
        "per_step_accepted": accepted_per_step if detailed else None,
        "per_step_drafted": [K] * STEPS if detailed else None,
    }


def _usage() -> dict:
    # 1 prefill token + 28 steps + 42 accepted drafts
    return {"prompt_tokens": 40, "total_tokens": 111, "completion_tokens": 71}


def _chunk(i: int, choices: list, **extra) -> dict:
    return {
        "id": f"chatcmpl-{i}",
        "object": "chat.completion.chunk",
        "created": 1764489600,
        "model": MODEL,
        "choices": choices,
        **extra,
    }


def _delta(delta: dict, finish: str | None = None) -> list:
    return [
        {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, "token_ids": None}
    ]


def stream_capture(i: int, detailed: bool) -> RawCapture:
    responses = [_chunk(i, _delta({"role": "assistant", "content": ""}))]
    responses.append(_chunk(i, _delta({"content": "Hello"})))  # the prefill token
    responses += [_chunk(i, _delta({"content": f" w{s}"})) for s in range(STEPS)]
    responses.append(_chunk(i, _delta({"content": ""}, "length")))
    metrics = {"time_to_first_token_ms": 1.5, "speculative_decoding": spec_payload(detailed)}
    responses.append(_chunk(i, [], usage=_usage(), metrics=metrics))
    start = 1_000_000_000 + i * 1_000_000
    stamps = [start + 100_000 + 10_000 * j for j in range(len(responses))]
    return RawCapture(
        endpoint="chat",
        streaming=True,
        status=200,
        request={
            "model": MODEL,
            "messages": [{"role": "user", "content": f"prompt {i}"}],
            "max_tokens": 71,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        responses=responses,
        start_ns=start,
        response_ns=stamps,
        end_ns=stamps[-1] + 5_000,
        x_request_id=f"{i:032x}",
        wall_start_ns=1_764_489_600_000_000_000 + i * 1_000_000,
    )


def nonstream_capture(i: int) -> RawCapture:
    body = {
        "id": f"chatcmpl-{i}",
        "object": "chat.completion",
        "created": 1764489600,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello " * 70},
                "logprobs": None,
                "finish_reason": "length",
            }
        ],
        "usage": _usage(),
        "metrics": {"time_to_first_token_ms": 1.5, "speculative_decoding": spec_payload(True)},
    }
    start = 1_000_000_000 + i * 1_000_000
    return RawCapture(
        endpoint="chat",
        streaming=False,
        status=200,
        request={
            "model": MODEL,
            "messages": [{"role": "user", "content": f"prompt {i}"}],
            "max_tokens": 71,
        },
        responses=[body],
        start_ns=start,
        response_ns=[start + 400_000],
        end_ns=start + 410_000,
        x_request_id=f"{i:032x}",
        wall_start_ns=1_764_489_600_000_000_000 + i * 1_000_000,
    )


def build(kind: str, count: int) -> list[RawCapture]:
    if kind == "nonstream":
        return [nonstream_capture(i) for i in range(count)]
    return [stream_capture(i, kind == "stream-detailed") for i in range(count)]


def median_us(run: Callable[[], int], repeats: int) -> float:
    """Median over repeats of (seconds for one pass / requests in it), in microseconds."""
    samples = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.process_time()
        n = run()
        samples.append((time.process_time() - t0) / n * 1e6)
    return statistics.median(samples)


def measure(kind: str, count: int, repeats: int) -> dict[str, float]:
    out: dict[str, float] = {}

    def pipeline_pass() -> int:
        for cap in build_cache:
            process_capture(cap)
        return len(build_cache)

    build_cache = build(kind, count)
    out["process_capture"] = median_us(pipeline_pass, repeats)
    results = [process_capture(c) for c in build_cache]

    def accumulate_pass() -> int:
        acc = RunAccumulator()
        for r in results:
            acc.add(r)
        return len(results)

    out["accumulator.add"] = median_us(accumulate_pass, repeats)

    with tempfile.TemporaryDirectory(prefix="specmon-bench-") as tmp:

        def session_pass() -> int:
            captures = build(kind, count)  # session.add drops responses: fresh captures
            session = RunSession(tmp, "records")
            t0 = time.process_time()
            for cap in captures:
                session.add(cap)
            elapsed = time.process_time() - t0
            session.finish()
            session_pass.elapsed = elapsed  # type: ignore[attr-defined]
            return len(captures)

        samples = []
        for _ in range(repeats):
            gc.collect()
            n = session_pass()
            samples.append(session_pass.elapsed / n * 1e6)  # type: ignore[attr-defined]
        out["session.add"] = statistics.median(samples)
        out["bytes/request kept"] = kept_bytes(kind, count, tmp)
    return out


def kept_bytes(kind: str, count: int, tmp: str) -> float:
    """Memory the session keeps per request (responses dropped, as in a live run).

    The captures are built while tracing, as the load loop builds them during a run, so
    what the kept results still reference of them (request body, timings) counts too.
    """
    session = RunSession(tmp, "records")
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    captures = build(kind, count)
    for cap in captures:
        session.add(cap)
    del captures, cap  # what remains is referenced from the session
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    session.finish()
    return grown / count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=2000, help="requests per pass")
    ap.add_argument("--repeats", type=int, default=5, help="passes; the median is printed")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma list of {', '.join(KINDS)}")
    args = ap.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad or args.count < 1 or args.repeats < 1:
        print(
            f"bench_pipeline: bad arguments ({', '.join(bad) or 'count/repeats < 1'})",
            file=sys.stderr,
        )
        return 2
    cols = ("process_capture", "accumulator.add", "session.add", "bytes/request kept")
    print(f"| kind | {' | '.join(c + (' µs' if 'bytes' not in c else '') for c in cols)} |")
    print("|" + " --- |" * (len(cols) + 1))
    for kind in kinds:
        row = measure(kind, args.count, args.repeats)
        print(f"| {kind} | " + " | ".join(f"{row[c]:.1f}" for c in cols) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
