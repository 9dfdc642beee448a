"""A batch-aware model of throughput over (k, concurrency), fitted to measured sweep cells.

Per cell (docs/architecture.md, sweep contract) the measured verify-step time of one request
is T = TPOT x acceptance length (ms per step: each step emits AL tokens). Two step-time forms,
both with a per-step floor a, a cost b per verified token of the batch (B requests verify
k+1 tokens each, B = client concurrency) and a draft cost c per drafted token:

* linear:   T(k, B) = a + b B (k+1) + c k          (a linear per-token model)
* roofline: T(k, B) = max(a, b B (k+1)) + c k      (memory-bound floor, then compute-bound)

Acceptance E(k') comes from the pooled histogram of the largest measured k: exact by
truncation for k' <= k (E = 1 + S_1 + ... + S_k'), extrapolated beyond it (marked).
Throughput is predicted as eta B E(k) / T(k, B), eta being the median ratio of measured
throughput to that ideal (prefill and request gaps, which the step time does not see).

The form is chosen by leave-one-out error (refit without each cell, predict it), which is
also the error reported: a form that only fits noise does not win. Pure Python, no numpy.

Physical bounds (docs/tuning.md "Bounds"): the parameters are fitted under b >= 0, c >= 0
and a > 0 (least squares over every choice of which of b, c sit at zero, the feasible one
with the smallest error kept), so the step time never falls as k or the batch grows and a
predicted speedup over k=0 never exceeds E(k'). A fit whose step time does not grow with k
at all while k=0 was never measured is refused (NotEnoughData says what to measure).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specmon.decision import acceptance as tuning
from specmon.decision.sweep_types import Cell

FORMS = ("linear", "roofline")
TIE_TOLERANCE = 0.01  # same rule as the decisions: within 1% of the best goes to the smaller k


class NotEnoughData(ValueError):
    """The cells cannot determine the model (too few cells, one k only, no timing)."""


@dataclass(frozen=True)
class StepParams:
    """Step-time parameters in ms (a: floor, b: per verified token, c: per drafted token)."""

    a: float
    b: float
    c: float

    def step_ms(self, form: str, k: int, concurrency: int) -> float:
        verified = concurrency * (k + 1)
        if form == "roofline":
            return max(self.a, self.b * verified) + self.c * k
        return self.a + self.b * verified + self.c * k


@dataclass(frozen=True)
class Point:
    """One measured cell as the model sees it (medians over its repeats)."""

    k: int
    concurrency: int
    step_ms: float
    throughput: float


def _solve(matrix: list[list[float]], rhs: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None when (nearly) singular."""
    n = len(rhs)
    m = [row[:] + [rhs[i]] for i, row in enumerate(matrix)]
    scale = max((abs(v) for row in matrix for v in row), default=0.0) or 1.0
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) <= 1e-12 * scale:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(col + 1, n):
            f = m[r][col] / m[col][col]
            for c in range(col, n + 1):
                m[r][c] -= f * m[col][c]
    out = [0.0] * n
    for r in range(n - 1, -1, -1):
        out[r] = (m[r][n] - sum(m[r][c] * out[c] for c in range(r + 1, n))) / m[r][r]
    return out


def least_squares(rows: Sequence[Sequence[float]], y: Sequence[float]) -> list[float] | None:
    """argmin ||X p - y|| by the normal equations; columns that are all zero get p = 0."""
    ncol = len(rows[0]) if rows else 0
    used = [j for j in range(ncol) if any(r[j] != 0 for r in rows)]
    if not used or len(rows) < len(used):
        return None
    xtx = [[sum(r[i] * r[j] for r in rows) for j in used] for i in used]
    xty = [sum(r[i] * t for r, t in zip(rows, y, strict=True)) for i in used]
    sol = _solve(xtx, xty)
    if sol is None:
        return None
    out = [0.0] * ncol
    for j, v in zip(used, sol, strict=True):
        out[j] = v
    return out


def _sse(form: str, p: StepParams, points: Sequence[Point]) -> float:
    return sum((p.step_ms(form, q.k, q.concurrency) - q.step_ms) ** 2 for q in points)


def bounded_least_squares(rows: Sequence[Sequence[float]], y: Sequence[float]) -> StepParams | None:
    """(a, b, c) minimising the squared error under a > 0, b >= 0, c >= 0: each subset of
    {b, c} held at zero is solved, the feasible solution with the smallest error wins."""
    best: tuple[float, StepParams] | None = None
    for zero in ((), (1,), (2,), (1, 2)):
        masked = [[0.0 if j in zero else v for j, v in enumerate(r)] for r in rows]
        sol = least_squares(masked, y)
        if sol is None or sol[0] <= 0 or sol[1] < 0 or sol[2] < 0:
            continue
        err = sum(
            (sum(p * v for p, v in zip(sol, r, strict=True)) - t) ** 2
            for r, t in zip(rows, y, strict=True)
        )
        if best is None or err < best[0] - 1e-12:
            best = (err, StepParams(*sol))
    return None if best is None else best[1]


def _fit_linear(points: Sequence[Point]) -> StepParams | None:
    rows = [[1.0, float(q.concurrency * (q.k + 1)), float(q.k)] for q in points]
    return bounded_least_squares(rows, [q.step_ms for q in points])


def _fit_partition(points: Sequence[Point], floor: Sequence[bool]) -> StepParams | None:
    """Least squares with the regime of each point given: floor rows a + c k, others b x + c k."""
    rows = [
        [1.0, 0.0, float(q.k)] if f else [0.0, float(q.concurrency * (q.k + 1)), float(q.k)]
        for q, f in zip(points, floor, strict=True)
    ]
    if not any(floor):  # no floor row: a is not determined here, the knee gives it
        sol = least_squares([[r[1], r[2]] for r in rows], [q.step_ms for q in points])
        if sol is None or sol[0] < 0 or sol[1] < 0:
            return None
        return StepParams(0.0, sol[0], sol[1])
    return bounded_least_squares(rows, [q.step_ms for q in points])


def _fit_roofline(points: Sequence[Point]) -> StepParams | None:
    """Try every split of the points by verified tokens B (k+1) into floor / compute regime,
    then re-split at each candidate's own knee a / b; keep the lowest true (max) error."""
    xs = sorted({q.concurrency * (q.k + 1) for q in points})
    best: tuple[float, StepParams] | None = None
    cuts = [float(x) for x in xs] + [float("inf")]
    for cut in cuts:
        cand = _fit_partition(points, [q.concurrency * (q.k + 1) < cut for q in points])
        for _ in range(3):  # re-split at the fitted knee: converges in a step or two
            if cand is None or cand.a < 0 or cand.b <= 0:
                break
            split = [cand.a >= cand.b * q.concurrency * (q.k + 1) for q in points]
            nxt = _fit_partition(points, split)
            if nxt is None or _sse("roofline", nxt, points) >= _sse("roofline", cand, points):
                break
            cand = nxt
        if cand is None or cand.a < 0 or cand.b < 0:
            continue
        err = _sse("roofline", cand, points)
        if best is None or err < best[0]:
            best = (err, cand)
    return None if best is None else best[1]


def _fit_form(form: str, points: Sequence[Point]) -> StepParams | None:
    return _fit_roofline(points) if form == "roofline" else _fit_linear(points)


@dataclass
class KModel:
    form: str
    params: StepParams
    efficiency: float  # eta: measured throughput / (B E(k) / T) over the fitted cells
    acceptance: dict[int, float]  # E(k') for k' = 0..k_max (+ extrapolated ones)
    extrapolated_ks: frozenset[int]  # k' whose E is extrapolated beyond the largest k
    measured_ks: list[int]
    concurrencies: list[int]
    points: list[Point]
    loo_errors: dict[tuple[int, int], float | None]  # (k, concurrency) -> relative error
    loo_mean_abs: float | None
    notes: list[str] = field(default_factory=list)

    @property
    def basis(self) -> str:
        err = (
            "model error unknown"
            if self.loo_mean_abs is None
            else (f"model error {self.loo_mean_abs * 100:.0f}%")
        )
        return f"measured over {len(self.points)} cells, {err} ({self.form} step time)"

    def acceptance_length(self, k: int) -> float:
        if k not in self.acceptance:
            raise KeyError(f"no acceptance estimate for k={k}")
        return self.acceptance[k]

    def predict_step_ms(self, k: int, concurrency: int) -> float:
        return self.params.step_ms(self.form, k, concurrency)

    def predict_throughput(self, k: int, concurrency: int) -> float:
        step = self.predict_step_ms(k, concurrency)
        if step <= 0:
            return 0.0
        return self.efficiency * concurrency * self.acceptance_length(k) * 1000.0 / step

    def best_k(self, concurrency: int, ks: Sequence[int] | None = None) -> int:
        """Predicted best k at this load among ks (default: the measured ones); k values
        within 1% of the top prediction go to the smaller k, as in the decisions."""
        cands = sorted(self.measured_ks if ks is None else ks)
        preds = {k: self.predict_throughput(k, concurrency) for k in cands}
        top = max(preds.values())
        return min(k for k in cands if preds[k] >= (1 - TIE_TOLERANCE) * top)

    def to_dict(self) -> dict[str, Any]:
        return {
            "form": self.form,
            "step_time_ms": {"a": self.params.a, "b": self.params.b, "c": self.params.c},
            "formula": _FORMULAS[self.form],
            "efficiency": self.efficiency,
            "acceptance_length": {str(k): v for k, v in sorted(self.acceptance.items())},
            "extrapolated_ks": sorted(self.extrapolated_ks),
            "basis": self.basis,
            "loo_mean_abs_error": self.loo_mean_abs,
            "cells": [
                {
                    "k": q.k,
                    "concurrency": q.concurrency,
                    "measured_step_ms": q.step_ms,
                    "measured_throughput": q.throughput,
                    "predicted_throughput": self.predict_throughput(q.k, q.concurrency),
                    "loo_error": self.loo_errors.get((q.k, q.concurrency)),
                }
                for q in self.points
            ],
            "notes": list(self.notes),
        }


_FORMULAS = {
    "linear": "T(k,B) = a + b*B*(k+1) + c*k",
    "roofline": "T(k,B) = max(a, b*B*(k+1)) + c*k",
}


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def _acceptance(cells: Sequence[Cell]) -> tuple[dict[int, float], frozenset[int], list[str]]:
    """E(k') from the pooled histogram of the largest k with one; else measured AL per k."""
    spec = [c for c in cells if c.k > 0 and any(r.histogram for r in c.repeats)]
    if spec:
        k_max = max(c.k for c in spec)
        pooled: dict[int, int] = {}
        for c in spec:
            if c.k == k_max:
                for r in c.repeats:
                    for j, n in r.histogram.items():
                        pooled[j] = pooled.get(j, 0) + n
        preds = tuning.predictions(pooled, k_max)
        table = {0: 1.0}
        table.update({p.k: p.acceptance_length for p in preds if p.acceptance_length is not None})
        extra = frozenset(p.k for p in preds if p.extrapolated)
        return table, extra, [f"acceptance E(k') from the pooled k={k_max} histogram"]
    table = {0: 1.0}
    for k in sorted({c.k for c in cells if c.k > 0}):
        als = [r.acceptance_length for c in cells if c.k == k for r in c.repeats]
        vals = [a for a in als if a is not None]
        if vals:
            table[k] = _median(vals)
    return table, frozenset(), ["no histogram: acceptance is each k's measured median"]


def _points(cells: Sequence[Cell], acceptance: dict[int, float]) -> tuple[list[Point], list[str]]:
    points, notes = [], []
    for c in sorted(cells, key=lambda c: (c.k, c.concurrency)):
        if not c.repeats:
            continue
        tpots = [r.tpot_ms for r in c.repeats if r.tpot_ms is not None]
        als = [r.acceptance_length for r in c.repeats if r.acceptance_length is not None]
        al = 1.0 if c.k == 0 else (_median(als) if als else acceptance.get(c.k))
        if not tpots or al is None:
            notes.append(f"k={c.k} concurrency {c.concurrency}: no TPOT or acceptance, not fitted")
            continue
        tput = _median([r.output_token_throughput for r in c.repeats])
        points.append(Point(c.k, c.concurrency, _median(tpots) * al, tput))
    return points, notes


def _efficiency(points: Sequence[Point], acc: dict[int, float]) -> float:
    ratios = [
        q.throughput / (q.concurrency * acc[q.k] * 1000.0 / q.step_ms)
        for q in points
        if q.step_ms > 0 and acc.get(q.k)
    ]
    return _median(ratios) if ratios else 1.0


def _build(
    form: str, points: list[Point], acc: dict[int, float], extra: frozenset[int]
) -> KModel | None:
    params = _fit_form(form, points)
    if params is None:
        return None
    return KModel(
        form=form,
        params=params,
        efficiency=_efficiency(points, acc),
        acceptance=acc,
        extrapolated_ks=extra,
        measured_ks=sorted({q.k for q in points}),
        concurrencies=sorted({q.concurrency for q in points}),
        points=points,
        loo_errors={},
        loo_mean_abs=None,
    )


def _loo(
    form: str, points: list[Point], acc: dict[int, float], extra: frozenset[int]
) -> dict[tuple[int, int], float | None]:
    """Refit without each cell, predict its throughput: relative error (pred - meas) / meas."""
    out: dict[tuple[int, int], float | None] = {}
    for i, q in enumerate(points):
        rest = points[:i] + points[i + 1 :]
        sub = _build(form, rest, acc, extra) if len(rest) >= 3 else None
        if sub is None or q.throughput <= 0 or q.k not in acc:
            out[(q.k, q.concurrency)] = None
            continue
        out[(q.k, q.concurrency)] = sub.predict_throughput(q.k, q.concurrency) / q.throughput - 1
    return out


def _mean_abs(errors: dict[tuple[int, int], float | None]) -> float | None:
    vals = [abs(e) for e in errors.values() if e is not None]
    return sum(vals) / len(vals) if vals else None


def fit(cells: Sequence[Cell], form: str = "auto") -> KModel:
    """Fit the step-time model to the measured cells (form "auto", "linear" or "roofline").

    "auto" keeps the form with the smaller mean leave-one-out error (ties: linear). Raises
    NotEnoughData when fewer than 3 cells have timing or the fit is singular (one k only).
    Leave-one-out refits the step time and eta without the cell; E(k') stays the pooled one.
    """
    if form not in ("auto", *FORMS):
        raise ValueError(f"unknown model form {form!r}; expected auto, linear or roofline")
    acc, extra, notes = _acceptance(cells)
    points, skipped = _points(cells, acc)
    if len(points) < 3:
        raise NotEnoughData(f"{len(points)} cells with timing; the model needs at least 3")
    if len({q.k for q in points}) < 2:
        raise NotEnoughData("cells at one k only; the model needs two or more k")
    forms = FORMS if form == "auto" else (form,)
    fitted = []
    for f in forms:
        model = _build(f, points, acc, extra)
        if model is None:
            continue
        model.loo_errors = _loo(f, points, acc, extra)
        model.loo_mean_abs = _mean_abs(model.loo_errors)
        fitted.append(model)
    if not fitted:
        raise NotEnoughData("the step-time fit is singular (or out of bounds) for these cells")
    best = min(fitted, key=_selection_key)
    _refuse_without_contrast(best)
    best.notes = notes + skipped
    return best


def _refuse_without_contrast(m: KModel) -> None:
    """Step time flat in k (b = c = 0) says nothing about k unless k=0 was measured."""
    if m.params.b == 0 and m.params.c == 0 and 0 not in m.measured_ks:
        ks = ",".join(map(str, m.measured_ks))
        raise NotEnoughData(f"no contrast in step time across k={ks}: measure k=0")


def _selection_key(m: KModel) -> tuple[float, float, int]:
    loo = float("inf") if m.loo_mean_abs is None else m.loo_mean_abs
    return (round(loo, 12), _sse(m.form, m.params, m.points), FORMS.index(m.form))


# ---------------------------------------------------------------- one k, several loads
# The per-segment model (specmon/decision/choose.py docstring): step time at the one
# measured k over loads, extended to other k' with the draft cost assumed or given.


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
