"""Cost of the live segments table: segment_table() over every result (what
MultiRun.segment_rows did on each refresh) against the incremental SegmentTable.

Builds synthetic RequestResults (a real SpecDecodeAcceptanceRecord each, k = 2, 4, 6 on three
servers, four load segments) and prints milliseconds per call:

  full       segment_table() on all results (the old segment_rows, list copies included);
  cold       SegmentTable's first call (folds in every result once);
  +N / srv   a refresh after N new results per server;
  no new     a refresh with nothing new (the recommendation per segment only).

  python benchmarks/bench_segments.py                  # 3 servers x 20,000 requests
  python benchmarks/bench_segments.py --requests 100000 --repeat 5
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from specmon.analysis.segments import SegmentTable
from specmon.pipeline import RequestResult, SpecOutcome
from specmon.specdecode.record import SpecDecodeAcceptanceRecord

# the from-scratch table lives with the tests, as their oracle
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.segments_oracle import segment_table

NS = 1_000_000_000
KS = {"k2": 2, "k4": 4, "k6": 6}


def make_result(rng: random.Random, server: str, k: int, index: int, total: int) -> RequestResult:
    hist = {j: rng.randint(0, 4) for j in range(k + 1)}
    hist[k] += 1
    steps = sum(hist.values())
    accepted = sum(j * n for j, n in hist.items())
    spec = SpecDecodeAcceptanceRecord(
        engine="vllm",
        mean_acceptance_length=1 + accepted / steps,
        draft_acceptance_rate=accepted / (k * steps),
        acceptance_histogram=hist,
        num_accepted_draft_tokens=accepted,
        num_draft_tokens=k * steps,
        num_spec_steps=steps,
        num_spec_tokens=k,
    )
    start = index * 0.01
    return RequestResult(
        capture=None,
        outcome=SpecOutcome(record=spec),
        values={
            "inter_token_latency": rng.uniform(5, 20) * 1e6,  # ns
            "output_sequence_length": steps + accepted,
        },
        error=None,
        phase="profiling",
        segment=4 * index // total,
        server=server,
        start_ns=int(start * NS),
        end_ns=int((start + rng.uniform(0.1, 2)) * NS),
    )


def best_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return 1000 * min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000, help="results per server")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many timings")
    args = parser.parse_args()
    rng = random.Random(1)
    n = args.requests
    full = {label: [make_result(rng, label, k, i, n) for i in range(n)] for label, k in KS.items()}
    settings: dict = {label: {} for label in KS}

    def old_rows() -> list[dict]:
        copies = {label: list(rs) for label, rs in full.items()}
        return segment_table(copies, settings=settings, draft_cost=None, across_servers=True)

    print(
        f"{len(KS)} servers x {n:,} results, {len(old_rows())} segment rows; ms per call "
        f"(best of {args.repeat})"
    )
    print(f"  full segment_table():         {best_ms(old_rows, args.repeat):8.2f}")

    def cold() -> SegmentTable:
        table = SegmentTable(draft_cost=None, across_servers=True)
        for label, rs in full.items():
            table.update(label, rs)
        table.rows(settings)
        return table

    print(f"  SegmentTable cold:            {best_ms(cold, args.repeat):8.2f}")
    for new in (0, 100, 1000):
        timings = []
        for _ in range(args.repeat):  # each timing on a table that has seen all but `new`
            table = SegmentTable(draft_cost=None, across_servers=True)
            for label, rs in full.items():
                table.update(label, rs[: n - new])
            table.rows(settings)
            started = time.perf_counter()
            for label, rs in full.items():
                table.update(label, rs)
            table.rows(settings)
            timings.append(1000 * (time.perf_counter() - started))
        what = "no new" if new == 0 else f"+{new:,} / server"
        print(f"  SegmentTable {what + ':':<18}{min(timings):8.2f}")
    assert cold().rows(settings) == old_rows()  # same table either way


if __name__ == "__main__":
    main()
