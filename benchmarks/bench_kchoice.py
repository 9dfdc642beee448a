"""How much throughput the one-run k recommendation loses against the simulator's formula.

The evaluation of docs/tuning.md "Choosing k": three per-position acceptance profiles
(rising, flat, falling) x concurrency 1, 4, 16, 64, under the simulator's linear latency
model and a roofline one. One run at k=4 with one segment per concurrency: each segment's
histogram is drawn with the simulator's own acceptance walk (specmon/sim/model.py), its step
time is the formula's T(4, B) with +-2% measurement noise; the draft cost is 0, 5% or 10%
of a step (the recommendation does not know it: it takes the least loss over c = 0-0.2).
specmon.decision picks k per segment (the per-segment model, draft cost assumed; a k above
the measured 4 only when even its band's low end wins); the truth throughput of the pick,
B E(k) / T(k, B), is compared with the analytic best k' in 0..4 and in 0..8.

    python benchmarks/bench_kchoice.py [--requests N] [--seeds S]
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specmon.decision.choose import Measurement, choose
from specmon.sim.model import expected_tokens_per_step, plan_sequence, step_time_ms

MEASURED_K = 4
K_RANGE = 8
CONCURRENCIES = (1, 4, 16, 64)
PROFILES = {
    "rising": [0.60 + 0.05 * i for i in range(K_RANGE)],
    "flat": [0.75] * K_RANGE,
    "falling": [0.90 - 0.05 * i for i in range(K_RANGE)],
}


@dataclass(frozen=True)
class Latency:
    """The simulator's linear model (sim/model.py step_time_ms) or a roofline:
    T(k, B) = max(floor, compute B (k+1)) + draft k."""

    form: str
    step_ms: float = 10.0
    batch_slope: float = 0.02  # linear
    compute_ms: float = 0.05  # roofline: ms per verified token
    draft_ms: float = 0.5

    def step(self, k: int, b: int) -> float:
        if self.form == "linear":
            return step_time_ms(k, b, self.step_ms, self.draft_ms, self.batch_slope)
        return max(self.step_ms, self.compute_ms * b * (k + 1)) + self.draft_ms * k

    def truth(self, acceptance: list[float], k: int, b: int) -> float:
        return b * expected_tokens_per_step(acceptance, k) * 1000.0 / self.step(k, b)


# the simulator's draft cost: none (n-gram, the demo's default), 5% and 10% of a step
DRAFT_MS = (0.0, 0.5, 1.0)
MODELS = tuple(Latency(form, draft_ms=d) for d in DRAFT_MS for form in ("linear", "roofline"))


def measure(
    rng: random.Random, acceptance: list[float], lat: Latency, b: int, requests: int
) -> Measurement:
    hist: dict[int, int] = {}
    for _ in range(requests):
        plan = plan_sequence(rng, MEASURED_K, acceptance, 128, ignore_eos=True)
        for j in plan.per_step_accepted:
            hist[j] = hist.get(j, 0) + 1
    noise = 1 + rng.uniform(-0.02, 0.02)
    return Measurement(MEASURED_K, b, hist, lat.step(MEASURED_K, b) * noise)


@dataclass(frozen=True)
class Row:
    model: str
    profile: str
    concurrency: int
    picked: int | None
    best: int  # analytic best in 0..MEASURED_K
    best_any: int  # analytic best in 0..K_RANGE
    loss: float  # 1 - truth(picked) / truth(best), in 0..1
    loss_any: float


def evaluate(requests: int = 200, seed: int = 0) -> list[Row]:
    rows = []
    for lat in MODELS:
        for name, acc in PROFILES.items():
            rng = random.Random(seed)
            segments = [measure(rng, acc, lat, b, requests) for b in CONCURRENCIES]
            for b in CONCURRENCIES:
                pick = choose(segments, b).k
                truth = {k: lat.truth(acc, k, b) for k in range(K_RANGE + 1)}
                best = max(range(MEASURED_K + 1), key=lambda k: truth[k])
                best_any = max(truth, key=lambda k: truth[k])
                got = truth[pick] if pick is not None else 0.0
                rows.append(
                    Row(
                        f"{lat.form}/d{lat.draft_ms:g}",
                        name,
                        b,
                        pick,
                        best,
                        best_any,
                        1 - got / truth[best],
                        1 - got / truth[best_any],
                    )
                )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="requests per segment")
    parser.add_argument("--seeds", type=int, default=3, help="independent repeats")
    args = parser.parse_args()
    print(
        f"{'model':12} {'profile':8} {'conc':>4} {'seed':>4} {'pick':>4} {'best<=4':>7} "
        f"{'loss':>6} {'best<=8':>7} {'loss8':>6}"
    )
    worst = 0.0
    for seed in range(args.seeds):
        for r in evaluate(args.requests, seed):
            worst = max(worst, r.loss)
            print(
                f"{r.model:12} {r.profile:8} {r.concurrency:>4} {seed:>4} {r.picked!s:>4} "
                f"{r.best:>7} {100 * r.loss:5.1f}% {r.best_any:>7} {100 * r.loss_any:5.1f}%"
            )
    print(f"worst loss vs the best k <= {MEASURED_K}: {100 * worst:.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
