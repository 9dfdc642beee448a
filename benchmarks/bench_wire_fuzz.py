"""Wire-path fuzz: generated JSON text -> SSE framing (split at random bytes) -> SSEParser ->
capture -> RunSession (pipeline, adapters, every export at --export-level raw) -> `specmon
report` over the raw file, and counts per outcome. Crashes must be 0 and every case must be a
line in the raw file, the JSONL and the report (docs/architecture.md, "Hostile responses").

    python benchmarks/bench_wire_fuzz.py --cases 100000
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

import orjson

from specmon.capture import RawCapture
from specmon.commands.report import run_report
from specmon.session import RunSession
from specmon.sources.load.client import SSEParser

EDGE_NUMBERS = [
    "0", "-1", "1", "2", "9223372036854775807", "-9223372036854775808", "18446744073709551615",
    "18446744073709551616", "1e308", "1.7976931348623157e308", "1e400", "-1e400", "1e-400",
    "0.5", "NaN", "3.0", "-0.0", "123456789012345678901234567890",
]  # fmt: skip
SPEC_KEYS = [
    "acceptance_histogram", "num_spec_steps", "num_accepted_draft_tokens", "num_draft_tokens",
    "num_spec_tokens", "mean_acceptance_length", "draft_acceptance_rate",
]  # fmt: skip


def number(rng: random.Random) -> str:
    """Mostly small counts (so records form), an edge number one time in ten."""
    return rng.choice(EDGE_NUMBERS) if rng.random() < 0.1 else str(rng.randint(0, 8))


def random_value(rng: random.Random, depth: int = 0) -> str:
    """JSON-ish text: mostly valid, with edge numbers, deep nesting and the odd broken token."""
    roll = rng.random()
    if roll < 0.02:
        n = rng.choice([100, 256, 300, 1000, 1030])
        return "[" * n + "]" * n
    if depth > 3 or roll < 0.5:
        return (
            number(rng) if rng.random() < 0.8 else rng.choice(['"x"', "null", "true", "[]", "{}"])
        )
    if roll < 0.7:
        return "[" + ",".join(random_value(rng, depth + 1) for _ in range(rng.randint(0, 5))) + "]"
    keys = rng.sample(SPEC_KEYS, rng.randint(0, len(SPEC_KEYS)))
    return "{" + ",".join(f'"{k}":{random_value(rng, depth + 1)}' for k in keys) + "}"


def random_payload(rng: random.Random) -> bytes:
    """One response: a vLLM-shaped chunk whose usage and spec stats are fuzzed."""
    usage = f'{{"prompt_tokens":{number(rng)},"completion_tokens":{number(rng)}}}'
    spec = random_value(rng, 1) if rng.random() < 0.3 else _spec_object(rng)
    text = (
        f'{{"id":"x","choices":[{{"index":0,"delta":{{"content":"hi"}}}}],'
        f'"usage":{usage},"metrics":{{"speculative_decoding":{spec}}}}}'
    )
    return text.encode()


def _spec_object(rng: random.Random) -> str:
    return "{" + ",".join(f'"{k}":{random_value(rng, 2)}' for k in SPEC_KEYS) + "}"


def to_capture(payloads: list[bytes], rng: random.Random, t0: int) -> dict:
    """SSE bytes split at random points, parsed as the client parses them."""
    stream = b"".join(b"data: " + p + b"\n\n" for p in payloads) + b"data: [DONE]\n\n"
    parser, responses, stamps, error = SSEParser(), [], [], None
    cuts = sorted(rng.sample(range(1, len(stream)), min(3, len(stream) - 1)))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    for i, piece in enumerate(pieces):
        for data in parser.feed(piece):
            try:
                responses.append(orjson.loads(data))
                stamps.append(t0 + 1000 * (i + 1))
            except orjson.JSONDecodeError as exc:
                error = error or {"type": "invalid_json", "message": str(exc)[:80]}
    return {
        "endpoint": "chat", "streaming": True, "request": {"model": "m", "stream": True},
        "status": 200, "responses": responses, "start_ns": t0, "response_ns": stamps,
        "end_ns": t0 + 10_000, "error": error,
    }  # fmt: skip


def run_batch(cases: int, seed: int, workdir: Path) -> Counter:
    """`cases` generated requests through one session and one report; outcome counts."""
    rng = random.Random(seed)
    session = RunSession(workdir / "run", "raw", {"fuzz_seed": seed}, live=False)
    counts: Counter = Counter()
    for i in range(cases):
        payloads = [random_payload(rng) for _ in range(rng.randint(1, 2))]
        capture = to_capture(payloads, rng, 1_000_000 + i * 100_000)
        try:
            result = session.add(RawCapture(**capture))
        except Exception as exc:  # a crash: what the fuzz exists to find
            counts[f"crash:{type(exc).__name__}"] += 1
            continue
        if result.error is not None:
            counts["error:" + str(result.error.get("type"))] += 1
        elif result.outcome.record is not None:
            counts["record"] += 1
        else:
            counts["reason:" + str(result.outcome.reason)] += 1
    try:
        session.finish()
    except Exception as exc:
        counts[f"crash:finish:{type(exc).__name__}"] += 1
    _check_exports(workdir, cases, counts)
    return counts


def _check_exports(workdir: Path, cases: int, counts: Counter) -> None:
    run = workdir / "run"
    for name in ("profile_export_raw.jsonl", "profile_export.jsonl"):
        lines = (run / name).read_bytes().splitlines()
        if len(lines) != cases:
            counts[f"lost:{name}"] += cases - len(lines)
    json.loads((run / "profile_export_aiperf.json").read_text())  # must parse
    try:
        again = run_report(
            run / "profile_export_raw.jsonl",
            workdir / "report",
            "records",
            io.StringIO(),
            io.StringIO(),
        )
    except Exception as exc:
        counts[f"crash:report:{type(exc).__name__}"] += 1
        return
    acc = again.accumulator
    if acc.request_count + acc.error_count != cases:
        counts["lost:report"] += cases - acc.request_count - acc.error_count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=5_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    total: Counter = Counter()
    done = 0
    with tempfile.TemporaryDirectory() as tmp:
        while done < args.cases:
            n = min(args.batch, args.cases - done)
            batch_dir = Path(tmp) / f"b{done}"
            total.update(run_batch(n, args.seed + done, batch_dir))
            done += n
    print(f"{done} cases")
    for outcome, n in sorted(total.items(), key=lambda kv: -kv[1]):
        print(f"  {outcome:40s} {n}")
    bad = sum(n for k, n in total.items() if k.startswith(("crash", "lost")))
    print(f"crashes and lost lines: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
