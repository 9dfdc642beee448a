"""Which k, from whatever has been measured: the one answer the what-if panel, the segments
table and `specmon tune` all give (docs/tuning.md "Choosing k").

Input: measurements, one per (k, load) point (a segment of a run, a whole run, a sweep
cell): the pooled accepted-drafts histogram and, when known, the verify-step time
T = TPOT x acceptance length. The basis is chosen by what the measurements allow:

1. runs at two or more k with timing -> the batch-aware model (analysis/kmodel.py) fitted
   over them; at a single load (the model's k and B columns are then collinear) the
   across-k line T(k) = t0 (1 + c k) with c fitted;
2. one k, timing at two or more loads -> the per-segment model below;
3. otherwise -> the histogram only: speedup E(k') / (1 + c k') with the draft cost c given
   (+/- in the TUI, --draft-cost) or assumed DEFAULT_DRAFT_COST, said so.

Per-segment model (one k, loads B_1 < ... < B_n). The measured step time grows with load
because the batch verifies B (k+1) tokens. Two forms are fitted at the measured k, with the
draft cost assumed c (a fraction of the floor step a, draft time d = c a per drafted token):

    linear:   T(k', B) = a + b (B-1) (k'+1) + d k'   (batch 1 verifies k'+1 in one step)
    roofline: T(k', B) = max(a, b B (k'+1)) + d k'

the one with the smaller squared error is kept (ties: linear). The prediction at a measured
load is anchored to that segment's measured step time:
T(k', B) = T_meas(B) + model(k', B) - model(k, B). Throughput B E(k') / T(k', B) picks k'.

Every answer keeps k' within the measured range (exact E by truncation); a better k' beyond
it is reported apart as "extrapolated, measure it", never as the plain recommendation. Ties
within 1% go to the smaller k, as in the sweep decisions (analysis/sweep.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specmon.analysis import kmodel
from specmon.analysis.sweep_types import Cell, RepeatMeasurement
from specmon.constants import DEFAULT_DRAFT_COST  # always reported as assumed
from specmon.specdecode import tuning

TIE_TOLERANCE = 0.01
# One run at one k cannot tell the draft cost: without a given one the per-segment model takes
# the k that loses least for any c in this range (n-gram drafters ~0, small models ~0.2).
ROBUST_COSTS = tuple(i * 0.025 for i in range(9))
EXTRA_KS = tuning.EXTRAPOLATE  # how far beyond the measured k the extrapolated hint looks

HISTOGRAM = "histogram"
SEGMENTS = "segments"
MODEL = "model"
ACROSS_K = "across_k"


@dataclass(frozen=True)
class Measurement:
    """One measured point: k, load (client concurrency; None when unknown) and figures."""

    k: int
    concurrency: int | None
    histogram: Mapping[int, int]
    step_ms: float | None = None  # TPOT x acceptance length
    throughput: float | None = None  # output tokens/s
    label: str = ""

    @property
    def steps(self) -> int:
        return sum(int(n) for n in self.histogram.values())


@dataclass(frozen=True)
class KChoice:
    """The answer for one load: k (None: nothing recommended, `why` says why)."""

    k: int | None
    basis: str  # in words: what the answer rests on
    source: str  # HISTOGRAM | SEGMENTS | MODEL | ACROSS_K
    gain: dict[int, float] = field(default_factory=dict)  # k' -> predicted vs k'=0
    extrapolated_k: int | None = None  # a better k' beyond every measured k
    extrapolated_gain: float | None = None
    draft_cost: float | None = None  # the c used (None when the model measured it)
    draft_cost_assumed: bool = False
    why: str | None = None

    def text(self) -> str:
        """One line: 'best k=3 (1.42x) — basis' (plus the extrapolated hint)."""
        if self.k is None:
            return f"no recommendation: {self.why}"
        head = (
            "best k=0 (speculation does not pay)"
            if self.k == 0
            else f"best k={self.k} ({self.gain.get(self.k, 1.0):.2f}x)"
        )
        return f"{head} · {self.basis}{self.hint()}"

    def hint(self) -> str:
        if self.extrapolated_k is None or self.extrapolated_gain is None:
            return ""
        return (
            f" · k={self.extrapolated_k} ({self.extrapolated_gain:.2f}x) extrapolated, measure it"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "recommended_k": self.k,
            "basis": self.basis,
            "source": self.source,
            "predicted_gain_vs_k0": {str(k): g for k, g in sorted(self.gain.items())},
            "extrapolated_k": self.extrapolated_k,
            "extrapolated_note": "extrapolated, measure it" if self.extrapolated_k else None,
            "draft_cost": self.draft_cost,
            "draft_cost_assumed": self.draft_cost_assumed,
            "why_none": self.why,
        }


def _pool(ms: Sequence[Measurement], k: int) -> dict[int, int]:
    out: dict[int, int] = {}
    for m in ms:
        if m.k == k:
            for j, n in m.histogram.items():
                out[int(j)] = out.get(int(j), 0) + int(n)
    return out


def _lengths(ms: Sequence[Measurement]) -> tuple[int, dict[int, float], set[int]]:
    """E(k') for k' = 0..k_max + EXTRA_KS from the pooled widest-k histogram."""
    k_max = max(m.k for m in ms)
    table = {0: 1.0}
    extra = set()
    for p in tuning.predictions(_pool(ms, k_max), k_max, None, EXTRA_KS):
        if p.acceptance_length is not None:
            table[p.k] = p.acceptance_length
            if p.extrapolated:
                extra.add(p.k)
    return k_max, table, extra


def _pick(
    predict: Mapping[int, float], k_max: int
) -> tuple[int, dict[int, float], int | None, float | None]:
    """Plain best within 0..k_max (ties within 1% to the smaller k); the extrapolated hint."""
    base = predict.get(0)
    gain = {k: (v / base if base else v) for k, v in predict.items()}
    inside = {k: v for k, v in predict.items() if k <= k_max}
    top = max(inside.values())
    best = min(k for k, v in inside.items() if v >= (1 - TIE_TOLERANCE) * top)
    beyond = {k: v for k, v in predict.items() if k > k_max}
    ext_k = ext_g = None
    if beyond:
        k_b = max(beyond, key=lambda k: (beyond[k], -k))
        if beyond[k_b] > (1 + TIE_TOLERANCE) * predict[best]:
            ext_k, ext_g = k_b, gain[k_b]
    return best, {k: g for k, g in gain.items() if k <= k_max}, ext_k, ext_g


def choose(
    measurements: Sequence[Measurement],
    concurrency: int | None = None,
    draft_cost: float | None = None,
) -> KChoice:
    """The recommended k at `concurrency` (None: the only / most measured load)."""
    spec = [m for m in measurements if m.k > 0 and m.steps > 0]
    if not spec:
        return KChoice(None, "no verify steps yet", HISTOGRAM, why="no verify steps yet")
    timed = [m for m in spec if m.step_ms and m.step_ms > 0]
    if concurrency is None:
        loads = [m.concurrency for m in timed] or [None]
        concurrency = max(set(loads), key=lambda c: (loads.count(c), -(c or 0)))
    if len({m.k for m in timed}) >= 2:
        return _across_k(spec, timed, concurrency)
    if len({m.concurrency for m in timed if m.concurrency}) >= 2:
        return _segments(spec, timed, concurrency, draft_cost)
    return _histogram(spec, draft_cost)


def choose_per_load(
    measurements: Sequence[Measurement], draft_cost: float | None = None
) -> dict[int | None, KChoice]:
    loads = sorted({m.concurrency for m in measurements}, key=lambda c: (c is None, c or 0))
    return {c: choose(measurements, c, draft_cost) for c in loads}


# ---------------------------------------------------------------- histogram only


def _histogram(spec: Sequence[Measurement], draft_cost: float | None) -> KChoice:
    assumed = draft_cost is None
    c = DEFAULT_DRAFT_COST if draft_cost is None else float(draft_cost)
    k_max, lengths, _ = _lengths(spec)
    predict = {k: e / (1 + c * k) for k, e in lengths.items()}
    best, gain, ext_k, ext_g = _pick(predict, k_max)
    word = "assumed" if assumed else "given"
    return KChoice(
        best,
        f"histogram only, draft cost {word} {c:.2f}",
        HISTOGRAM,
        gain,
        ext_k,
        ext_g,
        c,
        assumed,
    )


# ---------------------------------------------------------------- several k measured


def _cells(timed: Sequence[Measurement]) -> list[Cell]:
    by_key: dict[tuple[int, int], Cell] = {}
    for m in timed:
        if m.concurrency is None:
            continue
        steps = m.steps
        al = 1 + sum(int(j) * int(n) for j, n in m.histogram.items()) / steps
        assert m.step_ms is not None
        cell = by_key.setdefault((m.k, m.concurrency), Cell(m.k, m.concurrency))
        tput = m.throughput or m.concurrency * al * 1000.0 / m.step_ms
        cell.repeats.append(
            RepeatMeasurement(
                output_token_throughput=tput,
                request_throughput=0.0,
                request_count=1,
                tpot_ms=m.step_ms / al,
                acceptance_length=al,
                histogram={int(j): int(n) for j, n in m.histogram.items()},
            )
        )
    return list(by_key.values())


def _across_k(
    spec: Sequence[Measurement], timed: Sequence[Measurement], concurrency: int | None
) -> KChoice:
    k_max, lengths, _ = _lengths(spec)
    try:
        model = kmodel.fit(_cells(timed)) if concurrency is not None else None
    except kmodel.NotEnoughData:
        model = None
    if model is not None and concurrency is not None:
        predict = {
            k: concurrency * e * 1000.0 / model.predict_step_ms(k, concurrency)
            for k, e in lengths.items()
            if model.predict_step_ms(k, concurrency) > 0
        }
        best, gain, ext_k, ext_g = _pick(predict, k_max)
        return KChoice(best, model.basis, MODEL, gain, ext_k, ext_g)
    # one load: T(k) = t0 (1 + c k) fitted over the runs at that load
    here = [m for m in timed if m.concurrency == concurrency] or list(timed)
    cost = tuning.estimate_draft_cost([(m.k, m.step_ms) for m in here if m.step_ms])
    if cost is None:
        return KChoice(
            None,
            "runs at several k, but their step times give no draft cost",
            ACROSS_K,
            why="step time does not grow with k across the runs (cannot fit a draft cost)",
        )
    ks = ",".join(str(k) for k in sorted({m.k for m in here}))
    predict = {k: e / (1 + cost * k) for k, e in lengths.items()}
    best, gain, ext_k, ext_g = _pick(predict, k_max)
    basis = f"measured at k={ks}, step time t0(1+c k) fitted, c={cost:.3f}"
    return KChoice(best, basis, ACROSS_K, gain, ext_k, ext_g, cost, False)


# ---------------------------------------------------------------- one k, several loads


@dataclass(frozen=True)
class SegmentModel:
    """Step time at the measured k over loads, extended to other k' (module docstring)."""

    form: str
    a: float  # floor step, ms, without drafts
    b: float  # ms per verified token of the batch
    d: float  # ms per drafted token (= c a, c assumed or given)
    k: int
    measured: dict[int, float]  # concurrency -> measured step ms

    def model_ms(self, k: int, concurrency: int) -> float:
        if self.form == "roofline":
            core = max(self.a, self.b * concurrency * (k + 1))
        else:  # the first request's k+1 tokens ride the memory-bound step
            core = self.a + self.b * (concurrency - 1) * (k + 1)
        return core + self.d * k

    def step_ms(self, k: int, concurrency: int) -> float:
        anchor = self.measured.get(concurrency)
        if anchor is None:
            return self.model_ms(k, concurrency)
        return anchor + self.model_ms(k, concurrency) - self.model_ms(self.k, concurrency)


def fit_segment_model(k: int, points: Mapping[int, float], cost: float) -> SegmentModel | None:
    """Fit both forms to {concurrency: step ms} at one k; None with fewer than two loads."""
    if len(points) < 2:
        return None
    fits = [f for f in (_fit_linear_1k(k, points, cost), _fit_roofline_1k(k, points, cost)) if f]
    if not fits:
        return None

    def sse(m: SegmentModel) -> float:
        return sum((m.model_ms(k, b) - t) ** 2 for b, t in points.items())

    return min(fits, key=lambda m: (round(sse(m), 9), m.form != "linear"))


def _line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - slope * mx, slope


def _fit_linear_1k(k: int, points: Mapping[int, float], cost: float) -> SegmentModel | None:
    """T = A + b (B-1) (k+1) with A = a (1 + c k)."""
    xs = [float((b - 1) * (k + 1)) for b in points]
    fitted = _line(xs, list(points.values()))
    if fitted is None:
        return None
    intercept, slope = fitted
    slope = max(slope, 0.0)
    if intercept <= 0:  # the growth explains everything: no floor left, use the smallest load
        intercept = min(points.values()) * 0.5
    a = intercept / (1 + cost * k)
    return SegmentModel("linear", a, slope, cost * a, k, dict(points))


def _fit_roofline_1k(k: int, points: Mapping[int, float], cost: float) -> SegmentModel | None:
    """T = max(A, b B (k+1) + d k): floor loads give A, the others b (least squares through
    the draft offset); every split of the loads into floor / compute is tried."""
    loads = sorted(points)
    best: tuple[float, SegmentModel] | None = None
    for cut in range(1, len(loads) + 1):
        floor, compute = loads[:cut], loads[cut:]
        big_a = sum(points[b] for b in floor) / len(floor)
        a = big_a / (1 + cost * k)
        d = cost * a
        if compute:
            xs = [b * (k + 1) for b in compute]
            b = sum(x * (points[c] - d * k) for x, c in zip(xs, compute, strict=True)) / sum(
                x * x for x in xs
            )
        else:
            b = 0.0
        if b < 0:
            continue
        m = SegmentModel("roofline", a, b, d, k, dict(points))
        err = sum((m.model_ms(k, c) - t) ** 2 for c, t in points.items())
        if best is None or err < best[0]:
            best = (err, m)
    return None if best is None else best[1]


def _segments(
    spec: Sequence[Measurement],
    timed: Sequence[Measurement],
    concurrency: int | None,
    draft_cost: float | None,
) -> KChoice:
    k = timed[0].k
    points = _step_by_load(timed)
    if concurrency is None or len(points) < 2:
        return _histogram(spec, draft_cost)
    if concurrency not in points:
        why = f"no step time measured at concurrency {concurrency} (no TPOT or acceptance)"
        return KChoice(None, "step time measured per segment", SEGMENTS, why=why)
    k_max, lengths, _ = _lengths(spec)
    costs = ROBUST_COSTS if draft_cost is None else (float(draft_cost),)
    forms, tables = set(), []
    for c in costs:
        model = fit_segment_model(k, points, c)
        if model is None:
            return _histogram(spec, draft_cost)
        forms.add(model.form)
        tables.append(
            {
                kp: concurrency * e * 1000.0 / model.step_ms(kp, concurrency)
                for kp, e in lengths.items()
                if model.step_ms(kp, concurrency) > 0
            }
        )
    shown = tables[len(tables) // 2]  # the middle cost's prediction is the one displayed
    best, gain, ext_k, ext_g = _pick(shown, k_max)
    if len(tables) > 1:
        best = least_regret(tables, k_max)
    cost_text = (
        f"draft cost given {costs[0]:.2f}"
        if draft_cost is not None
        else f"draft cost unknown, least loss over c={costs[0]:.2f}-{costs[-1]:.2f}"
    )
    basis = (
        f"step time measured per segment ({len(points)} loads at k={k}), "
        f"{'/'.join(sorted(forms))} verify cost, {cost_text}"
    )
    return KChoice(best, basis, SEGMENTS, gain, ext_k, ext_g, draft_cost, False)


def least_regret(tables: Sequence[Mapping[int, float]], k_max: int) -> int:
    """The k' in 0..k_max whose worst relative loss over the tables (one per plausible draft
    cost) is smallest; ties (within 0.1%) to the smaller k'."""
    ks = sorted(k for k in tables[0] if k <= k_max and all(k in t for t in tables))
    tops = [max(t[j] for j in ks) for t in tables]
    worst = {k: max(1 - t[k] / top for t, top in zip(tables, tops, strict=True)) for k in ks}
    least = min(worst.values())
    return min(k for k in ks if worst[k] <= least + 1e-3)


def _step_by_load(timed: Sequence[Measurement]) -> dict[int, float]:
    """Step time per load: step-weighted mean over the measurements at that load."""
    sums: dict[int, tuple[float, int]] = {}
    for m in timed:
        if m.concurrency is None or m.step_ms is None:
            continue
        t, n = sums.get(m.concurrency, (0.0, 0))
        sums[m.concurrency] = (t + m.step_ms * m.steps, n + m.steps)
    return {c: t / n for c, (t, n) in sums.items() if n}
