"""What another num_speculative_tokens (k) would give, estimated from one run at a fixed k.

Pure functions, no I/O (docs/tuning.md). The input is the pooled
histogram h_0..h_k: h_j = verify steps that accepted exactly j drafts, N = sum h_j.

* S_i = sum_{j>=i} h_j / N: unconditional acceptance of position i (vLLM's per-position rate).
* a_i = sum_{j>=i} h_j / sum_{j>=i-1} h_j: acceptance of position i given i-1 was accepted,
  a binomial proportion with n_i = sum_{j>=i-1} h_j trials (95% Wilson interval).
* flat alpha = A / (A + R): the truncated-geometric MLE (A accepted drafts, R steps with j < k).
* E(k') = 1 + S_1 + ... + S_k' for k' <= k (truncation), and beyond k each further position
  is accepted with probability a_k (extrapolated). The band does not trust that flat guess:
  it spans a_k's interval AND the 95% interval of a weighted straight-line trend of a_1..a_k
  extrapolated to each further position, plus the sampling error of the measured E(k), so
  it covers the truth when conditional acceptance rises, stays flat or falls with position.
* a_i's trials are steps that accepted i-1 drafts; a step that drafted fewer than i (the
  last steps near max_tokens) is counted as a rejection, biasing a_i low. Given per-step
  drafted counts (`position_trials`), only steps that drafted position i are counted.
* speedup(k') = E(k') / (1 + c k'), c = draft step time / target step time (Leviathan et al.).

Degenerate inputs (no steps, k = 0, positions nobody reached) give None, never an exception.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Z95 = 1.959963984540054  # two-sided 95% normal quantile
EXTRAPOLATE = 4  # how many k' beyond the measured k to predict

Histogram = Mapping[int, int] | Sequence[int]


@dataclass(frozen=True)
class PositionEstimate:
    position: int  # 1-based draft position i
    unconditional: float | None  # S_i
    conditional: float | None  # a_i
    ci95: tuple[float, float] | None  # Wilson interval of a_i
    trials: int  # n_i


@dataclass(frozen=True)
class Prediction:
    k: int
    acceptance_length: float | None  # E(k'), tokens per verify step incl. the bonus token
    extrapolated: bool
    low: float | None  # band from a_k's interval; None for the exact (truncation) rows
    high: float | None
    speedup: float | None  # E(k') / (1 + c k'); None without a draft cost
    flat_alpha_length: float | None = None  # E(k') under the flat-alpha model, for comparison
    trend_length: float | None = None  # E(k') with a_i following the trend fitted over a_1..a_k


@dataclass(frozen=True)
class TuningEstimate:
    num_spec_tokens: int
    steps: int
    positions: list[PositionEstimate]
    flat_alpha: float | None
    draft_cost: float | None
    predictions: list[Prediction]
    recommended_k: int | None
    caveat: str
    notes: list[str] = field(default_factory=list)
    acceptance_basis: str = ""  # how a_i's trials were counted (TRIALS_* below)


TRIALS_FROM_HISTOGRAM = (
    "a_i from the histogram: steps that drafted fewer than i drafts (near max_tokens) count "
    "as rejections, so a_i is biased low; per-step drafted counts (detailed level) remove it"
)
TRIALS_FROM_STEPS = "a_i from per-step drafted counts: only steps that drafted position i"


# Requests are the unit of resampling for P(best) and the measured answer's intervals
# (docs/tuning.md §9): steps within one request share a prompt and a text, so they are
# correlated. Requests are folded into blocks of consecutive requests (arrival order), at
# most 2 x REQUEST_BLOCKS of them: block `i // per` for request i, `per` the smallest power
# of two that keeps the count under the cap; when it doubles, neighbouring blocks merge
# pairwise. Consecutive, not interleaved (i mod n, as before): on a machine whose speed
# drifts (another job takes a core for a minute) neighbouring requests share that drift,
# and interleaved blocks each held a slice of every minute, so the drift never reached the
# spread and a 90% interval held a margin the next minute contradicted (seen: "+2.0%
# [+0.7..+3.5]" at 20 s, "-3.4% [-4.5..-2.3]" at 40 s, both P(best)=1.00, one core busy).
REQUEST_BLOCKS = 40


def block_slot(count: int, index: int) -> tuple[int, bool]:
    """(the block request `index` belongs to, whether the `count` blocks held so far must
    first merge pairwise: the block size doubled)."""
    per = 1
    while index >= 2 * REQUEST_BLOCKS * per:
        per *= 2
    slot = index // per
    return slot, count > slot + 1


def add_request(blocks: list[dict[int, int]], index: int, histogram: Mapping[int, int]) -> None:
    """Fold request number `index` (0-based, in arrival order) into its block."""
    slot, merge = block_slot(len(blocks), index)
    if merge:
        blocks[:] = [_merged(blocks[i : i + 2]) for i in range(0, len(blocks), 2)]
    while len(blocks) <= slot:
        blocks.append({})
    block = blocks[slot]
    for j, n in histogram.items():
        block[int(j)] = block.get(int(j), 0) + int(n)


def _merged(pair: list[dict[int, int]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for block in pair:
        for j, n in block.items():
            out[j] = out.get(j, 0) + n
    return out


def dense_histogram(histogram: Histogram, k: int) -> list[int]:
    """h_0..h_k as a list. Raises ValueError for negative counts or j outside 0..k."""
    if isinstance(histogram, Mapping):
        items = [(int(j), int(n)) for j, n in histogram.items()]
    else:
        items = [(j, int(n)) for j, n in enumerate(histogram)]
    dense = [0] * (max(k, 0) + 1)
    for j, n in items:
        if n < 0 or j < 0:
            raise ValueError(f"histogram bucket {j} has a negative key or count ({n})")
        if n == 0:
            continue
        if j > k:
            raise ValueError(f"histogram has {n} steps accepting {j} drafts, more than k={k}")
        dense[j] += n
    return dense


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval of a binomial proportion; None with no trials."""
    if trials <= 0:
        return None
    p = successes / trials
    z2n = z * z / trials
    centre = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(p * (1 - p) / trials + z2n / (4 * trials))
    return max(0.0, centre - half), min(1.0, centre + half)


def _tail_sums(dense: list[int]) -> list[int]:
    """tail[i] = sum_{j>=i} h_j, i = 0..k+1 (tail[k+1] = 0)."""
    tail = [0] * (len(dense) + 1)
    for i in range(len(dense) - 1, -1, -1):
        tail[i] = tail[i + 1] + dense[i]
    return tail


def position_trials(
    per_step_accepted: Sequence[int], per_step_drafted: Sequence[int], k: int
) -> list[int]:
    """n_i for i = 1..k counting only steps that could accept position i: accepted >= i-1
    drafts and drafted >= i. Sum the lists of several requests to pool them."""
    trials = [0] * max(k, 0)
    for acc, dra in zip(per_step_accepted, per_step_drafted, strict=True):
        for i in range(1, min(acc + 1, dra, k) + 1):
            trials[i - 1] += 1
    return trials


def _checked_trials(trials: Sequence[int] | None, tail: list[int], k: int) -> list[int]:
    if trials is None:
        return [tail[i - 1] for i in range(1, k + 1)]
    if len(trials) != k:
        raise ValueError(f"{len(trials)} position trial counts for k={k}")
    for i, n in enumerate(trials, start=1):
        if not tail[i] <= n <= tail[i - 1]:
            raise ValueError(f"position {i}: {n} trials outside [{tail[i]}, {tail[i - 1]}]")
    return [int(n) for n in trials]


def position_estimates(
    histogram: Histogram, k: int, trials: Sequence[int] | None = None
) -> list[PositionEstimate]:
    """S_i and a_i per position; trials (from `position_trials`) replaces n_i when given."""
    dense = dense_histogram(histogram, k)
    tail = _tail_sums(dense)
    steps = tail[0]
    n_i = _checked_trials(trials, tail, k)
    out = []
    for i in range(1, k + 1):
        n = n_i[i - 1]
        out.append(
            PositionEstimate(
                position=i,
                unconditional=tail[i] / steps if steps else None,
                conditional=tail[i] / n if n else None,
                ci95=wilson_interval(tail[i], n),
                trials=n,
            )
        )
    return out


def per_position(hist: dict[int, int], k: int | None) -> list[PositionEstimate]:
    """S_i and conditional a_i (Wilson 95 %) for i = 1..k, of a pooled histogram
    (E.3); k at least the highest position observed."""
    if sum(hist.values()) <= 0:
        return []
    observed = max((j for j, n in hist.items() if n), default=0)
    return position_estimates(hist, max(k or 0, observed))


def flat_alpha(histogram: Histogram, k: int) -> float | None:
    """Truncated-geometric MLE of a per-position acceptance alpha: A / (A + R)."""
    dense = dense_histogram(histogram, k)
    accepted = sum(j * n for j, n in enumerate(dense))
    rejected_steps = sum(dense[:k])  # steps that stopped before k (saw a rejection)
    if accepted + rejected_steps == 0:
        return None
    return accepted / (accepted + rejected_steps)


def positions_rejecting_flat_alpha(
    alpha: float | None, positions: Iterable[PositionEstimate]
) -> list[int]:
    """Positions whose a_i interval excludes the flat alpha: where the flat model misfits."""
    if alpha is None:
        return []
    return [
        p.position for p in positions if p.ci95 is not None and not p.ci95[0] <= alpha <= p.ci95[1]
    ]


def flat_alpha_length(alpha: float, k: int) -> float:
    """E(k) = (1 - alpha^(k+1)) / (1 - alpha) for i.i.d. acceptance (bonus token included)."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def speedup(acceptance_length: float | None, k: int, draft_cost: float | None) -> float | None:
    if acceptance_length is None or draft_cost is None:
        return None
    return acceptance_length / (1 + draft_cost * k)


@dataclass(frozen=True)
class PositionTrend:
    """Weighted least-squares line a_i = level + slope (i - centre) over a_1..a_k.

    Weights n_i / (p (1 - p)) (inverse binomial variance, p smoothed by +0.5 / +1 so that
    0 and 1 keep a finite weight); `at(j)` gives the line's value and its standard error.
    """

    level: float
    slope: float
    centre: float
    weight_sum: float
    spread: float  # sum w (i - centre)^2

    def at(self, position: int) -> tuple[float, float]:
        d = position - self.centre
        var = 1.0 / self.weight_sum + d * d / self.spread
        return self.level + self.slope * d, math.sqrt(var)


def position_trend(positions: Sequence[PositionEstimate]) -> PositionTrend | None:
    """The trend of a_i over the positions with trials; None with fewer than two."""
    pts = []
    for p in positions:
        if p.trials > 0 and p.conditional is not None:
            smooth = (p.conditional * p.trials + 0.5) / (p.trials + 1)
            # clipped: at huge trial counts (or a hostile count) smooth rounds to 0 or 1
            smooth = min(max(smooth, 1e-9), 1.0 - 1e-9)
            pts.append((p.position, p.conditional, p.trials / (smooth * (1 - smooth))))
    if len(pts) < 2:
        return None
    sw = sum(w for _, _, w in pts)
    centre = sum(i * w for i, _, w in pts) / sw
    level = sum(a * w for _, a, w in pts) / sw
    spread = sum(w * (i - centre) ** 2 for i, _, w in pts)
    slope = sum(w * (i - centre) * (a - level) for i, a, w in pts) / spread
    return PositionTrend(level, slope, centre, sw, spread)


def _clip01(v: float) -> float:
    return min(1.0, max(0.0, v))


def _chain_tail(s_k: float, rates: Sequence[float]) -> float:
    """S_k (r_1 + r_1 r_2 + ...): extra accepted drafts when position k+t has rate r_t."""
    total, run = 0.0, 1.0
    for r in rates:
        run *= r
        total += run
    return s_k * total


def _length_se(dense: list[int]) -> float:
    """Standard error of the measured E(k) = 1 + mean accepted drafts per step."""
    n = sum(dense)
    if n == 0:
        return 0.0
    mean = sum(j * h for j, h in enumerate(dense)) / n
    var = sum(h * (j - mean) ** 2 for j, h in enumerate(dense)) / n
    return math.sqrt(var / n)


def predictions(
    histogram: Histogram,
    k: int,
    draft_cost: float | None = None,
    extra: int = EXTRAPOLATE,
    trials: Sequence[int] | None = None,
) -> list[Prediction]:
    """E(k') for k' = 1..k exact, k+1..k+extra extrapolated with a_k carried forward.

    The band of an extrapolated row takes, per further position, the lower (upper) end of
    a_k's Wilson interval and of the trend's 95% interval, S_k's Wilson interval and the
    measured E(k) +- 1.96 standard errors: wide when a_1..a_k trend, tight when flat.
    """
    if k <= 0:
        return []
    dense = dense_histogram(histogram, k)
    positions = position_estimates(dense, k, trials)
    alpha = flat_alpha(dense, k)
    out: list[Prediction] = []
    length: float | None = None if positions[0].unconditional is None else 1.0
    for pos in positions:
        if length is not None and pos.unconditional is not None:
            length += pos.unconditional
        out.append(_prediction(pos.position, length, False, None, None, draft_cost, alpha))
    last = positions[-1]
    s_k = last.unconditional
    if length is None or s_k is None:
        out += [
            _prediction(k + m, None, True, None, None, draft_cost, alpha)
            for m in range(1, extra + 1)
        ]
        return out
    a = last.conditional if last.conditional is not None else 0.0  # nobody reached k: S_k = 0
    flat_lo, flat_hi = last.ci95 if last.ci95 is not None else (a, a)
    trend = position_trend(positions)
    tail = _tail_sums(dense)
    s_lo, s_hi = wilson_interval(tail[k], tail[0]) or (s_k, s_k)
    se = Z95 * _length_se(dense)
    lows, highs, means = [], [], []
    for m in range(1, extra + 1):
        lo, hi, mean = flat_lo, flat_hi, a
        if trend is not None:
            t_mean, t_se = trend.at(k + m)
            lo, hi, mean = min(lo, t_mean - Z95 * t_se), max(hi, t_mean + Z95 * t_se), t_mean
        lows.append(_clip01(lo))
        highs.append(_clip01(hi))
        means.append(_clip01(mean))
        out.append(
            _prediction(
                k + m,
                length + _chain_tail(s_k, [a] * m),
                True,
                max(1.0, length - se + _chain_tail(s_lo, lows)),
                length + se + _chain_tail(s_hi, highs),
                draft_cost,
                alpha,
                length + _chain_tail(s_k, means) if trend is not None else None,
            )
        )
    return out


def expected_lengths(
    weights: Sequence[float], k: int, extra: int = EXTRAPOLATE
) -> dict[int, float]:
    """The central E(k') of `predictions` for k' = 0..k+extra from bucket weights w_0..w_k
    (counts, or a bootstrap draw's proportions): truncation up to k, a_k carried beyond."""
    total = sum(weights)
    if k <= 0 or total <= 0:
        return {0: 1.0}
    tail = [0.0] * (k + 2)
    for i in range(k, -1, -1):
        tail[i] = tail[i + 1] + weights[i]
    out, length = {0: 1.0}, 1.0
    for i in range(1, k + 1):
        length += tail[i] / total
        out[i] = length
    s_k = tail[k] / total
    a = tail[k] / tail[k - 1] if tail[k - 1] > 0 else 0.0
    for m in range(1, extra + 1):
        out[k + m] = length + _chain_tail(s_k, [a] * m)
    return out


def _prediction(
    kp: int,
    length: float | None,
    extrapolated: bool,
    low: float | None,
    high: float | None,
    draft_cost: float | None,
    alpha: float | None,
    trend: float | None = None,
) -> Prediction:
    return Prediction(
        k=kp,
        acceptance_length=length,
        extrapolated=extrapolated,
        low=low,
        high=high,
        speedup=speedup(length, kp, draft_cost),
        flat_alpha_length=None if alpha is None else flat_alpha_length(alpha, kp),
        trend_length=trend,
    )


def recommend_k(preds: Iterable[Prediction]) -> int | None:
    """k' with the highest predicted speedup; 0 (speculation off, speedup 1) when none beats it.

    Ties go to the smaller k' (fewer drafts, less waste). None without any speedup.
    """
    best_k, best = None, None
    for p in preds:
        if p.speedup is None:
            continue
        if best is None:
            best_k, best = 0, 1.0
        if p.speedup > best:
            best_k, best = p.k, p.speedup
    return best_k


def estimate_draft_cost(points: Sequence[tuple[float, float]]) -> float | None:
    """c from step times measured at several k: least-squares line step_time = t0 (1 + c k).

    Fit step_time = b0 + b1 k, then t0 = b0 and c = b1 / b0. None without two distinct k,
    or when the fit is unphysical (t0 <= 0 or c < 0).
    """
    pts = [
        (float(k), float(t))
        for k, t in points
        if math.isfinite(float(k)) and math.isfinite(float(t))
    ]
    if len({k for k, _ in pts}) < 2:
        return None
    n = len(pts)
    mean_k = sum(k for k, _ in pts) / n
    mean_t = sum(t for _, t in pts) / n
    sxx = sum((k - mean_k) ** 2 for k, _ in pts)
    sxy = sum((k - mean_k) * (t - mean_t) for k, t in pts)
    slope = sxy / sxx
    intercept = mean_t - slope * mean_k
    if intercept <= 0:
        return None
    c = slope / intercept
    return c if c >= 0 else None


def _caveat(est_k: int | None, k: int, draft_cost: float | None, last_k: int) -> str:
    base = (
        "batch size moves the best k: at high concurrency verifying k+1 tokens costs more "
        "than one target step, so the optimum shrinks; pair this with measured TPOT per "
        "concurrency segment"
    )
    if draft_cost is None:
        return "no draft cost c given, so no speedup or recommendation; " + base
    if est_k is None:
        return "no verify steps recorded, nothing to recommend; " + base
    if est_k == 0:
        return "no k beats plain decoding under this draft cost; " + base
    if est_k > k:
        edge = " (the edge of the predicted range)" if est_k == last_k else ""
        return (
            f"k={est_k}{edge} is beyond the measured k={k} (extrapolated from a_{k}); "
            f"restart the server at that k to verify; " + base
        )
    return "a prediction that assumes drafts at positions <= k' do not depend on k; " + base


def analyze(
    histogram: Histogram,
    k: int,
    draft_cost: float | None = None,
    extra: int = EXTRAPOLATE,
    trials: Sequence[int] | None = None,
) -> TuningEstimate:
    """Every estimate of docs/tuning.md §2-§5 for one pooled histogram at fixed k; trials
    (from `position_trials`, summed over requests) makes a_i count only drafting steps."""
    k = max(int(k), 0)
    dense = dense_histogram(histogram, k)
    preds = predictions(dense, k, draft_cost, extra, trials)
    best = recommend_k(preds)
    notes = []
    if sum(dense) == 0:
        notes.append("no verify steps: every estimate is undefined")
    if k == 0:
        notes.append("k=0: the run did not speculate, nothing to estimate")
    return TuningEstimate(
        num_spec_tokens=k,
        steps=sum(dense),
        positions=position_estimates(dense, k, trials),
        flat_alpha=flat_alpha(dense, k),
        draft_cost=draft_cost,
        predictions=preds,
        recommended_k=best,
        caveat=_caveat(best, k, draft_cost, k + extra),
        notes=notes,
        acceptance_basis=TRIALS_FROM_HISTOGRAM if trials is None else TRIALS_FROM_STEPS,
    )


def estimate_to_dict(est: TuningEstimate) -> dict[str, Any]:
    """The JSON object `specmon tune --json` prints (docs/tuning.md §8)."""
    return {
        "num_spec_tokens": est.num_spec_tokens,
        "steps": est.steps,
        "positions": [
            {
                "position": p.position,
                "unconditional": p.unconditional,
                "conditional": p.conditional,
                "conditional_ci95": None if p.ci95 is None else [p.ci95[0], p.ci95[1]],
                "trials": p.trials,
            }
            for p in est.positions
        ],
        "flat_alpha": est.flat_alpha,
        "draft_cost": est.draft_cost,
        "predictions": [
            {
                "k": p.k,
                "acceptance_length": p.acceptance_length,
                "extrapolated": p.extrapolated,
                "low": p.low,
                "high": p.high,
                "speedup": p.speedup,
            }
            for p in est.predictions
        ],
        "recommended_k": est.recommended_k,
    }


def tune_report(histogram: Histogram, k: int, draft_cost: float | None = None) -> dict[str, Any]:
    return estimate_to_dict(analyze(histogram, k, draft_cost))
