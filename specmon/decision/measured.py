"""The answer is the measurement (issue 31; docs/tuning.md §9 "The measured answer"): at one
load, the best arm among those measured there (fixed k including k=0), with its measured
output tok/s and its margin over the runner-up and over k=0, each with a 90% interval.

The intervals come from a Bayesian bootstrap over each arm's requests: a measurement
carries its requests folded into at most 80 blocks of consecutive whole requests
(`rate_blocks`, output tokens and request seconds per block; acceptance.block_slot), and a
draw weights every block by Gamma(1) and reads the throughput as the measured figure times
the draw's tokens per request-second over the measurement's own (a ratio estimator: in a
closed loop, throughput = concurrency x tokens / request time). Without rate blocks the
acceptance-length blocks (or the verify steps) stand in: throughput scaled by the draw's
acceptance length, the step time taken as measured. Arms are different servers, so their
draws are independent. Seeded by the data: the same data gives the same figures.

The rule (the sweep's, decision/cells.py, with the noise added): the top arm is the one
with the highest measured figure; a smaller k is kept instead while the top's margin over
it is not surely above the 1% tie bar (the low end of its 90% interval at or below 1%), so
ties within the noise go to the smaller k and the answer does not flip between neighbours
on a steady load. P(best) is the share of draws in which the answer is the best within the
1% tie bar (its draw at or above 99% of the draw's top); docs/tuning.md publishes how well
it is calibrated (benchmarks/bench_calibration.py).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from specmon.decision import acceptance as tuning
from specmon.decision.cells import TIE_TOLERANCE
from specmon.decision.margin import Margin, interval

DRAWS = 200
MIN_BLOCKS = 10  # fewer blocks than this and a request bootstrap has next to no spread
# A bootstrap over n blocks is too narrow by about sqrt((n - 1) / n) (the plug-in variance);
# the draws' spread around the measured figure is widened by the inverse, which matters for
# the short segments a live run decides on (calibrated in benchmarks/bench_calibration.py).

RateBlock = tuple[float, float]  # (output tokens, request seconds) of whole requests


def add_rate(blocks: list[list[float]], index: int, tokens: float, seconds: float) -> None:
    """Fold request number `index` (0-based, arrival order) into its rate block (blocks of
    consecutive requests, acceptance.block_slot)."""
    slot, merge = tuning.block_slot(len(blocks), index)
    if merge:
        blocks[:] = [
            [sum(b[0] for b in blocks[i : i + 2]), sum(b[1] for b in blocks[i : i + 2])]
            for i in range(0, len(blocks), 2)
        ]
    while len(blocks) <= slot:
        blocks.append([0.0, 0.0])
    blocks[slot][0] += tokens
    blocks[slot][1] += seconds


@dataclass(frozen=True)
class Arm:
    """One measured arm at one load: its k, measured output tok/s and bootstrap draws of it
    (empty: no noise known)."""

    k: int
    throughput: float
    draws: tuple[float, ...] = ()


def name(k: int) -> str:
    return "k=0 (no speculation)" if k == 0 else f"k={k}"


def rate_draws(
    throughput: float,
    rate_blocks: Sequence[RateBlock],
    al_blocks: Sequence[Sequence[float]],
    seed: str,
) -> tuple[float, ...]:
    """DRAWS bootstrap draws of a measured throughput (module docstring); () when neither
    rate nor acceptance blocks are known."""
    rng = random.Random(seed)
    # in a canonical order, so the same blocks give the same draws whatever order the
    # requests were read back in (a live table, an export, a JSONL replay)
    rate_blocks = sorted(rate_blocks)
    al_blocks = sorted(al_blocks, key=lambda b: tuple(b))
    if len(rate_blocks) >= MIN_BLOCKS:
        return _ratio_draws(throughput, rate_blocks, rng)
    if len(al_blocks) >= MIN_BLOCKS or (len(al_blocks) == 1 and sum(al_blocks[0]) > 0):
        return _al_draws(throughput, al_blocks, rng)
    return ()


def _widen(values: list[float], centre: float, n: int) -> tuple[float, ...]:
    scale = (n / (n - 1)) ** 0.5 if n > 1 else 1.0
    return tuple(centre + (v - centre) * scale for v in values)


def _ratio_draws(
    throughput: float, blocks: Sequence[RateBlock], rng: random.Random
) -> tuple[float, ...]:
    tok = sum(b[0] for b in blocks)
    sec = sum(b[1] for b in blocks)
    if tok <= 0 or sec <= 0:
        return ()
    point = tok / sec
    out = []
    for _ in range(DRAWS):
        w = [rng.gammavariate(1.0, 1.0) for _ in blocks]
        t = sum(wi * b[0] for wi, b in zip(w, blocks))
        s = sum(wi * b[1] for wi, b in zip(w, blocks))
        out.append(throughput * (t / s) / point if s > 0 else throughput)
    return _widen(out, throughput, len(blocks))


def _al_draws(
    throughput: float, blocks: Sequence[Sequence[float]], rng: random.Random
) -> tuple[float, ...]:
    """Throughput scaled by the draw's acceptance length (blocks: dense histograms; one
    block alone: the verify steps resampled, Dirichlet over its counts)."""
    width = max(len(b) for b in blocks)
    dense = [list(b) + [0.0] * (width - len(b)) for b in blocks]

    def al(h: Sequence[float]) -> float:
        n = sum(h)
        return 1 + sum(j * x for j, x in enumerate(h)) / n if n > 0 else 1.0

    point = al([sum(col) for col in zip(*dense)])
    out = []
    for _ in range(DRAWS):
        if len(dense) == 1:
            mixed = [rng.gammavariate(x, 1.0) if x > 0 else 0.0 for x in dense[0]]
        else:
            w = [rng.gammavariate(1.0, 1.0) for _ in dense]
            mixed = [sum(wi * b[j] for wi, b in zip(w, dense)) for j in range(width)]
        out.append(throughput * al(mixed) / point)
    return _widen(out, throughput, len(dense)) if len(dense) > 1 else tuple(out)


def margin(a: Arm, b: Arm) -> Margin:
    """a over b: a / b - 1 with the 90% interval of the ratio of their independent draws."""
    value = a.throughput / b.throughput - 1
    if not a.draws and not b.draws:
        return Margin(b.k, value, None, None)
    da = a.draws or (a.throughput,) * DRAWS
    db = b.draws or (b.throughput,) * DRAWS
    ratios = [x / y - 1 for x, y in zip(da, db) if y > 0]
    return Margin(b.k, value, *interval(ratios))


@dataclass(frozen=True)
class MeasuredAnswer:
    """The answer at one load (module docstring)."""

    k: int
    throughput: float
    arms: tuple[Arm, ...]
    runner_up: Margin | None  # the answer over the best other arm
    vs_k0: Margin | None  # the answer over k=0, when k=0 was measured
    top: Margin | None  # the top arm over the answer, when the answer is a tie kept
    p_best: float | None

    def head(self) -> str:
        """'measured best k=6: 12,790 tok/s, +2.2% over k=4 [-0.5..+4.8], 2.40x k=0 [..]'."""
        if len(self.arms) == 1:
            return (
                f"measured {name(self.k)}: {self.throughput:,.0f} tok/s (the only k measured here)"
            )
        parts = [f"measured best {name(self.k)}: {self.throughput:,.0f} tok/s"]
        if self.top is not None:
            parts.append(
                f"k={self.top.other} {self.top.percent()} is within noise (ties to the smaller k)"
            )
        elif self.runner_up is not None:
            parts.append(f"{self.runner_up.percent()} over {name(self.runner_up.other)}")
        if self.vs_k0 is not None and self.k != 0 and self.runner_up is not None:
            if self.runner_up.other != 0:
                parts.append(f"{self.vs_k0.times()} k=0")
        return ", ".join(parts)

    def to_dict(self) -> dict:
        def m(x: Margin | None) -> dict | None:
            return None if x is None else x.to_dict()

        return {
            "k": self.k,
            "output_token_throughput": self.throughput,
            "measured": {str(a.k): a.throughput for a in self.arms},
            "over_runner_up": m(self.runner_up),
            "over_k0": m(self.vs_k0),
            "within_noise_of": m(self.top),
            "p_best": self.p_best,
        }


def answer(arms: Sequence[Arm]) -> MeasuredAnswer | None:
    """The measured answer over `arms` (one per k; module docstring); None without arms."""
    arms = sorted((a for a in arms if a.throughput > 0), key=lambda a: a.k)
    if not arms:
        return None
    top = max(arms, key=lambda a: (a.throughput, -a.k))
    pick = top
    for a in arms:  # the smallest k the top does not surely beat by more than the tie bar
        if a.k >= top.k:
            break
        low = margin(top, a).low
        beaten = margin(top, a).value if low is None else low
        if beaten <= TIE_TOLERANCE:
            pick = a
            break
    others = [a for a in arms if a.k != pick.k]
    runner = max(others, key=lambda a: (a.throughput, -a.k)) if others else None
    k0 = next((a for a in arms if a.k == 0), None)
    return MeasuredAnswer(
        k=pick.k,
        throughput=pick.throughput,
        arms=tuple(arms),
        runner_up=None if runner is None else margin(pick, runner),
        vs_k0=None if k0 is None or pick.k == 0 else margin(pick, k0),
        top=None if pick is top else _named(margin(top, pick), top.k),
        p_best=_p_best(arms, pick.k),
    )


def _named(m: Margin, k: int) -> Margin:
    """The top's margin over the answer, named by the top's k (what the line shows)."""
    return Margin(k, m.value, m.low, m.high)


def _p_best(arms: Sequence[Arm], k: int) -> float | None:
    """The share of draws in which arm `k` is the best within the tie bar (its draw at or
    above (1 - 1%) of the draw's top): the event "k is the best, ties within 1% counted",
    which is what picking k by the tie rule claims. (The share in which the plain rule
    picks k exactly under-stated it: a k tied with a larger one loses every draw the
    larger k edges ahead by noise; 0.805 stated for 0.947 observed.)"""
    if len(arms) < 2 or not any(a.draws for a in arms):
        return None
    hits = 0
    for i in range(DRAWS):
        values = {a.k: a.draws[i] if a.draws else a.throughput for a in arms}
        hits += values[k] >= (1 - TIE_TOLERANCE) * max(values.values())
    return hits / DRAWS


@dataclass(frozen=True)
class Proposal:
    """What the model proposes to measure next: k, its predicted gain over the measured
    answer `over` (%), and the 90% band of that gain (%), fit and model-form error in."""

    k: int
    over: int
    percent: float
    low: float
    high: float
    # measured at this load, but the run was excluded (a gate: errors, saturation, lag):
    # the next step is to measure it again, not for the first time
    excluded: bool = False

    def text(self) -> str:
        verb = "re-measure" if self.excluded else "measure"
        return (
            f"next: {verb} k={self.k}, predicted {self.percent:+.0f}% "
            f"[{self.low:+.0f}..{self.high:+.0f}] over measured k={self.over} "
            f"(a server at --num-spec-tokens {self.k})"
        )

    def to_dict(self) -> dict:
        return {
            "k": self.k,
            "over_measured_k": self.over,
            "predicted_percent": self.percent,
            "band90_percent": [self.low, self.high],
            "measure_with": f"--num-spec-tokens {self.k}",
            "measured_but_excluded": self.excluded,
        }
