"""What another num_speculative_tokens (k) would give, estimated from one run at a fixed k.

Pure functions, no I/O (docs/tuning.md). The input is the pooled
histogram h_0..h_k: h_j = verify steps that accepted exactly j drafts, N = sum h_j.

* S_i = sum_{j>=i} h_j / N: unconditional acceptance of position i (vLLM's per-position rate).
* a_i = sum_{j>=i} h_j / sum_{j>=i-1} h_j: acceptance of position i given i-1 was accepted,
  a binomial proportion with n_i = sum_{j>=i-1} h_j trials (95% Wilson interval).
* flat alpha = A / (A + R): the truncated-geometric MLE (A accepted drafts, R steps with j < k).
* E(k') = 1 + S_1 + ... + S_k' for k' <= k (truncation), and beyond k each further position
  is accepted with probability a_k (extrapolated, band from a_k's interval).
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


def position_estimates(histogram: Histogram, k: int) -> list[PositionEstimate]:
    dense = dense_histogram(histogram, k)
    tail = _tail_sums(dense)
    steps = tail[0]
    out = []
    for i in range(1, k + 1):
        trials = tail[i - 1]
        out.append(
            PositionEstimate(
                position=i,
                unconditional=tail[i] / steps if steps else None,
                conditional=tail[i] / trials if trials else None,
                ci95=wilson_interval(tail[i], trials),
                trials=trials,
            )
        )
    return out


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


def _geometric_tail(s_k: float, a: float, m: int) -> float:
    """S_k (a + a^2 + ... + a^m): the expected extra accepted drafts of m more positions."""
    return s_k * sum(a**t for t in range(1, m + 1))


def predictions(
    histogram: Histogram, k: int, draft_cost: float | None = None, extra: int = EXTRAPOLATE
) -> list[Prediction]:
    """E(k') for k' = 1..k exact, k+1..k+extra extrapolated with a_k carried forward."""
    if k <= 0:
        return []
    positions = position_estimates(histogram, k)
    alpha = flat_alpha(histogram, k)
    out: list[Prediction] = []
    length: float | None = None if positions[0].unconditional is None else 1.0
    for pos in positions:
        if length is not None and pos.unconditional is not None:
            length += pos.unconditional
        out.append(_prediction(pos.position, length, False, None, None, draft_cost, alpha))
    last = positions[-1]
    for m in range(1, extra + 1):
        kp = k + m
        if length is None:
            out.append(_prediction(kp, None, True, None, None, draft_cost, alpha))
            continue
        s_k = last.unconditional if last.unconditional is not None else 0.0
        a = last.conditional if last.conditional is not None else 0.0  # nobody reached k: S_k = 0
        lo, hi = last.ci95 if last.ci95 is not None else (a, a)
        out.append(
            _prediction(
                kp,
                length + _geometric_tail(s_k, a, m),
                True,
                length + _geometric_tail(s_k, lo, m),
                length + _geometric_tail(s_k, hi, m),
                draft_cost,
                alpha,
            )
        )
    return out


def _prediction(
    kp: int,
    length: float | None,
    extrapolated: bool,
    low: float | None,
    high: float | None,
    draft_cost: float | None,
    alpha: float | None,
) -> Prediction:
    return Prediction(
        k=kp,
        acceptance_length=length,
        extrapolated=extrapolated,
        low=low,
        high=high,
        speedup=speedup(length, kp, draft_cost),
        flat_alpha_length=None if alpha is None else flat_alpha_length(alpha, kp),
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
    histogram: Histogram, k: int, draft_cost: float | None = None, extra: int = EXTRAPOLATE
) -> TuningEstimate:
    """Every estimate of docs/tuning.md §2-§5 for one pooled histogram at fixed k."""
    k = max(int(k), 0)
    dense = dense_histogram(histogram, k)
    preds = predictions(dense, k, draft_cost, extra)
    best = recommend_k(preds)
    notes = []
    if sum(dense) == 0:
        notes.append("no verify steps: every estimate is undefined")
    if k == 0:
        notes.append("k=0: the run did not speculate, nothing to estimate")
    return TuningEstimate(
        num_spec_tokens=k,
        steps=sum(dense),
        positions=position_estimates(dense, k),
        flat_alpha=flat_alpha(dense, k),
        draft_cost=draft_cost,
        predictions=preds,
        recommended_k=best,
        caveat=_caveat(best, k, draft_cost, k + extra),
        notes=notes,
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


@dataclass(frozen=True)
class RunPoint:
    """One server / run at a fixed k: its pooled histogram and measured verify-step time."""

    k: int
    histogram: Histogram
    step_time: float | None  # e.g. ms per verify step (TPOT x acceptance length)


def recommend_across_runs(runs: Sequence[RunPoint]) -> TuningEstimate | None:
    """Runs at several k under the same load (one segment): fit c from their step times,
    then predict from the largest-k histogram (exact for every k' up to it).

    At higher concurrency verifying k+1 tokens costs more, the fitted c grows and the
    recommended k falls: the per-segment answer of docs/tuning.md §6. None without runs.
    """
    if not runs:
        return None
    cost = estimate_draft_cost([(r.k, r.step_time) for r in runs if r.step_time is not None])
    widest = max(runs, key=lambda r: r.k)
    return analyze(widest.histogram, widest.k, cost)
