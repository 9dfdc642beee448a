"""Wire-path fuzz: generated JSON text -> SSE framing (split at random bytes) -> SSEParser ->
capture -> RunSession (pipeline, adapters, every export at --export-level raw) -> `specmon
report` over the raw file, and counts per outcome. Crashes must be 0 and every case must be a
line in the raw file, the JSONL and the report (docs/architecture.md, "Hostile responses").

Half the cases are valid vLLM streams built with the simulator's payload writers
(specmon/sim/payloads.py), some with hostile parts outside the spec object; each must give a
record carrying its plan's totals. A fifth are valid streams with one hostile mutation (huge
ints, deep nesting, 1e308/NaN, wrong types, a truncated stream); the rest are free-form fuzz.
The spec-decode totals of the records the session formed must come back exactly from the
summary JSON, the CSV, the JSONL lines and `specmon report` (counted as `wrong:*` otherwise).

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from specmon.capture import RawCapture
from specmon.commands.report import run_report
from specmon.session import RunSession
from specmon.sim.model import SequencePlan
from specmon.sim.payloads import vllm_metrics, vllm_object
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


VALID_SHARE = 0.40  # consistent vLLM streams: each must become a record with the plan's totals
BENIGN_SHARE = 0.10  # valid streams with hostile parts outside the spec object: still records
MUTATED_SHARE = 0.20  # valid streams with one hostile mutation of the spec object or the stream
DEEP = 300  # nesting past dumps_safe's 200 levels, under orjson's 1,024 (docs/architecture.md)
BAD = ("crash", "lost", "wrong")  # outcomes that must never happen
TOTALS = ("num_spec_steps", "num_accepted_draft_tokens", "num_draft_tokens")
SUMMARY_TOTALS = {  # summary / CSV name of each record total (docs/metrics.md)
    "num_spec_steps": ("total_spec_decode_steps", "Total Spec Decode Steps"),
    "num_accepted_draft_tokens": ("total_accepted_draft_tokens", "Total Accepted Draft Tokens"),
    "num_draft_tokens": ("total_draft_tokens", "Total Draft Tokens"),
}
# Hostile JSON text outside the spec object (orjson cannot even encode the first two).
HOSTILE_EXTRAS = (
    '"x_deep":' + "[" * DEEP + "]" * DEEP,
    f'"x_big":{2**70}',
    f'"x_neg":{-(2**64) - 1}',
    '"x_float":1.7976931348623157e308',
    '"x_types":[null,true,"s",{},[],-0.0]',
)
MUTATIONS = {  # the spec object's field value, as JSON text
    "huge_int": ["18446744073709551616", "27670116110564327423", "1" + "0" * 30],
    "deep": ["[" * DEEP + "]" * DEEP],
    "big_float": ["1e308", "1e400", "-1e400", "1.7976931348623157e308"],
    "nan": ["NaN", "Infinity", "-Infinity"],
    "wrong_type": ['"3"', "true", "null", "{}", "[1,2]", "1.5"],
    "negative": ["-1"],
    "truncated": [],  # the stream is cut inside the usage chunk, before [DONE]
}


@dataclass
class Case:
    """One generated request: its SSE payloads and, when it must form a record, its totals."""

    kind: str  # valid | benign | mutated:<what> | random
    payloads: list[bytes]
    truncated: bool = False
    expect: tuple[int, int, int] | None = None  # the record's (steps, accepted, drafted)


def random_plan(rng: random.Random, k: int) -> SequencePlan:
    """A consistent request: each spec step drafts k tokens and accepts 0..k of them."""
    accepted = [rng.randint(0, k) for _ in range(rng.randint(1, 24))]
    return SequencePlan(
        completion_tokens=1 + sum(a + 1 for a in accepted),
        finish_reason="length",
        step_tokens=[a + 1 for a in accepted],
        per_step_accepted=accepted,
        per_step_drafted=[k] * len(accepted),
    )


def valid_chunks(rng: random.Random) -> tuple[list[dict[str, Any]], SequencePlan]:
    """vLLM's stream as the simulator writes it: content deltas, then one usage chunk carrying
    `metrics.speculative_decoding` (specmon/sim/payloads.py)."""
    k = rng.randint(1, 7)
    plan = random_plan(rng, k)
    spec = vllm_object(plan, k, rng.choice(["summary", "detailed"]), streaming=True)
    delta = {"index": 0, "delta": {"content": "t"}, "finish_reason": None}
    content = [{"id": "x", "choices": [delta]} for _ in range(rng.randint(1, 3))]
    usage = {"prompt_tokens": rng.randint(1, 64), "completion_tokens": plan.completion_tokens}
    last = {"id": "x", "choices": [], "usage": usage, "metrics": vllm_metrics(spec, True)}
    return [*content, last], plan


def with_extra(chunk: dict[str, Any], extra: str) -> bytes:
    """The chunk's JSON text with one more root key written as raw text."""
    return orjson.dumps(chunk)[:-1] + b"," + extra.encode() + b"}"


def mutated(rng: random.Random, chunks: list[dict[str, Any]]) -> Case:
    """A valid stream with one hostile change to its spec object's fields (or its framing)."""
    what = rng.choice(sorted(MUTATIONS))
    texts = [orjson.dumps(c) for c in chunks]
    if what == "truncated":
        return Case("mutated:truncated", texts, truncated=True)
    spec = chunks[-1]["metrics"]["speculative_decoding"]
    spec[rng.choice(sorted(spec))] = "@@MUT@@"
    value = rng.choice(MUTATIONS[what]).encode()
    last = orjson.dumps(chunks[-1]).replace(b'"@@MUT@@"', value)
    return Case(f"mutated:{what}", [*texts[:-1], last])


def generate(rng: random.Random) -> Case:
    roll = rng.random()
    if roll >= VALID_SHARE + BENIGN_SHARE + MUTATED_SHARE:
        return Case("random", [random_payload(rng) for _ in range(rng.randint(1, 2))])
    chunks, plan = valid_chunks(rng)
    if roll >= VALID_SHARE + BENIGN_SHARE:
        return mutated(rng, chunks)
    expect = (plan.steps, plan.accepted, plan.drafted)
    texts = [orjson.dumps(c) for c in chunks]
    if roll < VALID_SHARE:
        return Case("valid", texts, expect=expect)
    return Case(
        "benign", [*texts[:-1], with_extra(chunks[-1], rng.choice(HOSTILE_EXTRAS))], expect=expect
    )


def to_capture(case: Case, rng: random.Random, t0: int) -> dict:
    """SSE bytes split at random points, parsed as the client parses them; a truncated stream
    ends inside its last event, before [DONE], as the client then records it."""
    stream = b"".join(b"data: " + p + b"\n\n" for p in case.payloads)
    if case.truncated:
        stream = stream[: rng.randint(len(stream) - len(case.payloads[-1]) - 2, len(stream) - 3)]
    else:
        stream += b"data: [DONE]\n\n"
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
    if case.truncated:
        error = error or {"type": "broken_stream", "message": "stream ended before [DONE]"}
    return {
        "endpoint": "chat", "streaming": True, "request": {"model": "m", "stream": True},
        "status": 200, "responses": responses, "start_ns": t0, "response_ns": stamps,
        "end_ns": t0 + 10_000, "error": error,
    }  # fmt: skip


def run_batch(cases: int, seed: int, workdir: Path) -> Counter:
    """`cases` generated requests through one session and one report; outcome counts, with
    `crash:*`, `lost:*` and `wrong:*` for what must never happen."""
    rng = random.Random(seed)
    session = RunSession(workdir / "run", "raw", {"fuzz_seed": seed}, live=False)
    counts: Counter = Counter()
    sums = [0, 0, 0]  # the spec-decode totals of the records the session formed
    for i in range(cases):
        case = generate(rng)
        capture = to_capture(case, rng, 1_000_000 + i * 100_000)
        try:
            result = session.add(RawCapture(**capture))
        except Exception as exc:  # a crash: what the fuzz exists to find
            counts[f"crash:{type(exc).__name__}"] += 1
            continue
        record = result.outcome.record if result.error is None else None
        got = None if record is None else tuple(getattr(record, t) for t in TOTALS)
        if case.expect is not None and got != case.expect:
            counts[f"wrong:{case.kind}:{result.outcome.reason or result.error}"] += 1
        elif result.error is not None:
            counts[f"{case.kind}/error:{result.error.get('type')}"] += 1
        elif got is not None:
            counts[f"{case.kind}/record"] += 1
            sums = [s + g for s, g in zip(sums, got, strict=True)]
        else:
            counts[f"{case.kind}/reason:{result.outcome.reason}"] += 1
    try:
        session.finish()
    except Exception as exc:
        counts[f"crash:finish:{type(exc).__name__}"] += 1
    _check_exports(workdir, cases, sums, counts)
    return counts


def _check_exports(workdir: Path, cases: int, sums: list[int], counts: Counter) -> None:
    run = workdir / "run"
    for name in ("profile_export_raw.jsonl", "profile_export.jsonl"):
        lines = (run / name).read_bytes().splitlines()
        if len(lines) != cases:
            counts[f"lost:{name}"] += cases - len(lines)
    _check_totals("run", run, sums, counts)
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
    if [acc.total_steps, acc.total_accepted, acc.total_drafted] != sums:
        counts["wrong:report:accumulator_totals"] += 1
    _check_totals("report", workdir / "report", sums, counts)


def _check_totals(where: str, run: Path, sums: list[int], counts: Counter) -> None:
    """Each record total, summed, in the summary JSON, the CSV and the JSONL lines."""
    summary = json.loads((run / "profile_export_aiperf.json").read_text())
    csv_rows = dict(
        line.rsplit(",", 1) for line in (run / "profile_export_aiperf.csv").read_text().splitlines()
        if line.count(",") >= 1
    )  # fmt: skip
    traces = [
        orjson.loads(line).get("spec_decode_acceptance")
        for line in (run / "profile_export.jsonl").read_bytes().splitlines()
    ]
    for total, (tag, header), want in zip(TOTALS, SUMMARY_TOTALS.values(), sums, strict=True):
        in_json = summary.get(tag, {}).get("avg", 0.0)
        in_csv = next((float(v) for k, v in csv_rows.items() if k.startswith(header)), 0.0)
        in_jsonl = sum(t[total] for t in traces if t and t.get("num_spec_steps"))
        for name, value in (("json", in_json), ("csv", in_csv), ("jsonl", in_jsonl)):
            if value != want:
                counts[f"wrong:{where}:{name}:{tag}"] += 1


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
    bad = sum(n for k, n in total.items() if k.startswith(BAD))
    formed = sum(n for k, n in total.items() if k.endswith("/record"))
    print(f"records formed: {formed} ({100 * formed / max(done, 1):.1f}%)")
    print(f"crashes, lost lines and wrong totals: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
