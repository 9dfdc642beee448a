"""Which k, from whatever has been measured: the one answer every surface paints (the
what-if panel, the server cards, the segments table, the end of a headless run, `specmon
tune`, `specmon compare`; docs/tuning.md "Choosing k").

Input: measurements, one per (k, load) point (a segment of a run, a whole run, a sweep
cell): the pooled accepted-drafts histogram, when known the verify-step time
T = TPOT x acceptance length, and the point's health (specmon/decision/gates.py). An
unhealthy point is excluded and named in `flags`, never used silently. The basis is chosen
by what the healthy measurements allow:

1. runs at two or more k with timing at two or more loads -> the batch-aware model
   (decision/stepcost.py `fit`); at a single load (the model's k and B columns are then
   collinear) the across-k line T(k) = t0 (1 + c k) with c >= 0 fitted;
2. one k, timing at two or more loads -> the per-segment model (stepcost.py
   `fit_segment_model`): the draft cost unknown, the k that loses least over
   c = 0 .. 0.2 is taken;
3. otherwise -> the histogram only: speedup E(k') / (1 + c k') with the draft cost c given
   (+/- in the TUI, --draft-cost) or assumed DEFAULT_DRAFT_COST, said so.

Every basis gives, per k', a throughput weight w(k') (1 / step time, up to a constant);
the prediction is E(k') w(k'). Bounds: the step cost never falls with k, so
gain(k') = E(k') w(k') / w(0) <= E(k'); a basis that breaks this, or whose step time does
not grow with k at all (no contrast), is refused with what to measure next, never shown
as "best".

Uncertainty: P(best) is the share of DRAWS Bayesian-bootstrap draws of the histogram
(over the measurement's request blocks, whole requests, when it carries them; else over the
verify steps, said so in `p_best_over`; seeded by the data, so the same data gives the same
figure) in which the recommended k is still the pick; other k picked in at least
NOISE_SHARE of the draws are "within noise". It covers acceptance noise only: the step
times are taken as measured.

SLO (decision/slo.py): with one, the pick is the best k' predicted to meet it (`meets_slo`:
the nearest measured k's TTFT as measured, its TPOT scaled by the predicted throughput
ratio); none meeting it gives no k and says which measured figure misses. A k' beyond every measured k is predicted with its E(k') band
(acceptance.predictions) and shown as "k=7 predicted +9% [+2..+15] over k=4, measure it";
it becomes the recommendation itself (marked extrapolated) when even the band's low end
does not lose against the best measured-range k. Ties within 1% go to the smaller k, as in
the sweep decisions (decision/cells.py).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Any

from specmon.constants import DEFAULT_DRAFT_COST  # always reported as assumed
from specmon.decision import acceptance as tuning
from specmon.decision import stepcost as kmodel
from specmon.decision.cells import TIE_TOLERANCE  # the sweep's tie rule: one bar
from specmon.decision.gates import MIN_SEGMENT_REQUESTS, Health, flag
from specmon.decision.measured import MeasuredAnswer, Proposal
from specmon.decision.measured import name as measured_name
from specmon.decision.slo import Percentiles, Slo
from specmon.decision.stepcost import SegmentModel, fit_segment_model
from specmon.decision.sweep_types import Cell, RepeatMeasurement

__all__ = [
    "ACROSS_K",
    "HISTOGRAM",
    "MODEL",
    "SEGMENTS",
    "KChoice",
    "Measurement",
    "SegmentModel",
    "choose",
    "choose_per_load",
    "fit_segment_model",
    "least_regret",
]

# One run at one k cannot tell the draft cost: without a given one the per-segment model takes
# the k that loses least for any c in this range (n-gram drafters ~0, small models ~0.2).
ROBUST_COSTS = tuple(i * 0.025 for i in range(9))
EXTRA_KS = tuning.EXTRAPOLATE  # how far beyond the measured k the extrapolation looks
DRAWS = 200  # bootstrap draws for P(best)
# Fewer request blocks than this and the request bootstrap has next to no spread (one
# request resamples to itself: P(best) = 1.00 from a single request); the verify steps are
# resampled instead, as before request blocks existed.
MIN_REQUEST_BLOCKS = 10
NOISE_SHARE = 0.10  # a k picked in this share of the draws is "within noise"
BOUND_SLACK = 1e-9

HISTOGRAM = "histogram"
SEGMENTS = "segments"
MODEL = "model"
ACROSS_K = "across_k"


@dataclass(frozen=True)
class Measurement:
    """One measured point: k, load (client concurrency; None when unknown), figures and
    health (requests None: not counted, no request-count gate)."""

    k: int
    concurrency: int | None
    histogram: Mapping[int, int]
    step_ms: float | None = None  # TPOT x acceptance length
    throughput: float | None = None  # output tokens/s
    label: str = ""
    requests: int | None = None
    errors: int = 0
    saturated: bool = False
    server_lag_share: float | None = None
    # TTFT / TPOT percentiles of the point's requests (decision/slo.py), for an --slo
    latency: Percentiles = field(default_factory=dict)
    # the histogram split into blocks of whole requests (acceptance.add_request), what
    # P(best) resamples; empty: not known, P(best) then resamples verify steps (said so)
    blocks: tuple[Mapping[int, int], ...] = ()
    # (output tokens, request seconds) per block of whole requests (measured.add_rate),
    # what the measured answer's intervals resample; empty: the AL blocks stand in
    rate_blocks: tuple[tuple[float, float], ...] = ()

    @property
    def steps(self) -> int:
        return sum(int(n) for n in self.histogram.values())

    @property
    def health(self) -> Health:
        return Health(
            self.requests,
            self.errors,
            self.saturated,
            self.server_lag_share,
            MIN_SEGMENT_REQUESTS,
        )

    def where(self) -> str:
        load = "" if self.concurrency is None else f" at concurrency {self.concurrency}"
        name = f"{self.label} " if self.label else ""
        return f"{name}(k={self.k}{load})"


@dataclass(frozen=True)
class KChoice:
    """The answer for one load: k (None: nothing recommended, `why` says why)."""

    k: int | None
    basis: str  # in words: what the answer rests on
    source: str  # HISTOGRAM | SEGMENTS | MODEL | ACROSS_K
    gain: dict[int, float] = field(default_factory=dict)  # k' -> predicted vs k'=0
    extrapolated_k: int | None = None  # a better k' beyond every measured k
    extrapolated_gain: float | None = None  # its predicted gain vs k'=0
    draft_cost: float | None = None  # the c used (None when the model measured it)
    draft_cost_assumed: bool = False
    why: str | None = None
    p_best: float | None = None
    within_noise: tuple[int, ...] = ()
    p_best_over: str = "verify steps"  # what P(best) resampled: "requests" or "verify steps"
    measured_k: int | None = None  # the largest healthy measured k
    base_k: int | None = None  # the best k within the measured range
    extrapolated_percent: float | None = None  # extrapolated_k vs base_k, %
    extrapolated_band: tuple[float, float] | None = None  # its band, %
    flags: tuple[str, ...] = ()  # excluded measurements, with why
    refused: bool = False  # a fit out of bounds or without contrast
    concurrency: int | None = None  # the load answered
    slo: str | None = None  # the objective the answer meets (Slo.text()), None without one
    # issue 31: the answer is the measurement (decision/answer.py sets these; `k` is then
    # the measured answer's, `p_best` its, and the model's pick only proposes)
    measured: MeasuredAnswer | None = None
    proposal: Proposal | None = None
    model_k: int | None = None  # what the model alone would pick (JSON only)
    lead: bool = False  # True: the measured answer leads (every surface's answer)

    @property
    def beyond_measured(self) -> bool:
        """The recommendation itself is an extrapolated k (measure it)."""
        return self.k is not None and self.measured_k is not None and self.k > self.measured_k

    def head(self) -> str:
        """'measured best k=6: 12,790 tok/s, +2.2% over k=4 [-0.5..+4.8], 2.40x k=0' (the
        model alone: 'best k=3 (1.42x)'); the cards and the headline show this part."""
        if self.lead:
            return self._measured_head()
        if self.k is None:
            return f"no recommendation: {self.why}"
        if self.k == 0:
            return "best k=0 (speculation does not pay)"
        mark = ", extrapolated" if self.beyond_measured else ""
        return f"best k={self.k} ({self.gain.get(self.k, 1.0):.2f}x{mark})"

    def _measured_head(self) -> str:
        if self.measured is not None:
            return self.measured.head()
        if self.k is None:
            return f"no recommendation: {self.why}"
        return f"measured {measured_name(self.k)} (no throughput measured here)"

    def next_line(self) -> str:
        """The model's proposal, a second line ('' without one): 'next: measure k=8, ...'."""
        if not self.lead or self.proposal is None:
            return ""
        return f"{self.proposal.text()} · {self.basis}"

    def lines(self) -> list[str]:
        """The answer and, when the model proposes a k to measure, the proposal."""
        return [self.text()] + ([self.next_line()] if self.next_line() else [])

    def sureness(self) -> str:
        """'P(best)=0.71; k=4 within noise' (empty without a P(best))."""
        if self.p_best is None:
            return ""
        noise = f"; k={','.join(map(str, self.within_noise))} within noise"
        return f"P(best)={self.p_best:.2f}" + (noise if self.within_noise else "")

    def text(self) -> str:
        """One line: head · basis · P(best) (· the extrapolated k with its band) (· flags);
        led by the measurement: head · P(best) (· flags), the basis on the next line."""
        extra = "".join(f" · {f}" for f in self.flags)
        if self.lead:
            sure = f" · P(best)={self.p_best:.2f}" if self.p_best is not None else ""
            basis = "" if self.proposal is not None or self.k is None else f" · model: {self.basis}"
            return f"{self.head()}{sure}{basis}{extra}"
        if self.k is None:
            return self.head() + extra
        sure = f" · {self.sureness()}" if self.p_best is not None else ""
        return f"{self.head()} · {self.basis}{sure}{self.hint()}{extra}"

    def hint(self) -> str:
        if self.lead:
            return f" · {self.next_line()}" if self.next_line() else ""
        if self.extrapolated_k is None or self.extrapolated_percent is None:
            return ""
        band = ""
        if self.extrapolated_band is not None:
            lo, hi = self.extrapolated_band
            band = f" [{lo:+.0f}..{hi:+.0f}]"
        return (
            f" · k={self.extrapolated_k} predicted {self.extrapolated_percent:+.0f}%{band} "
            f"over k={self.base_k}, measure it"
        )

    def caveat(self) -> str:
        """The first clause the what-if panel shows under the answer."""
        if self.k is None:
            return str(self.why)
        if self.lead and self.proposal is not None:
            # the proposal line beside it says how to measure it (the server's flag)
            return f"k={self.proposal.k} is a prediction, not a measurement"
        if self.lead:
            return "the answer is what was measured; the model proposes no other k"
        if self.extrapolated_k is not None:
            return (
                f"k={self.extrapolated_k} is beyond the largest measured k={self.measured_k} "
                "(extrapolated); restart the server at that k to verify"
            )
        return "a prediction that assumes drafts at positions <= k' do not depend on k"

    def to_dict(self) -> dict[str, Any]:
        return {
            "recommended_k": self.k,
            "concurrency": self.concurrency,
            "text": self.text(),
            "basis": self.basis,
            "source": self.source,
            "predicted_gain_vs_k0": {str(k): g for k, g in sorted(self.gain.items())},
            "p_best": self.p_best,
            "p_best_basis": f"Bayesian bootstrap over {self.p_best_over} ({DRAWS} draws, seeded)"
            if self.p_best is not None
            else None,
            "within_noise": list(self.within_noise),
            "measured_k": self.measured_k,
            "beyond_measured": self.beyond_measured,
            "extrapolated_k": self.extrapolated_k,
            "extrapolated_percent_vs_base": self.extrapolated_percent,
            "extrapolated_band_percent": None
            if self.extrapolated_band is None
            else list(self.extrapolated_band),
            "extrapolated_note": "extrapolated, measure it" if self.extrapolated_k else None,
            "draft_cost": self.draft_cost,
            "draft_cost_assumed": self.draft_cost_assumed,
            "flags": list(self.flags),
            "slo": self.slo,
            "refused": self.refused,
            "why_none": self.why,
            "measured": None if self.measured is None else self.measured.to_dict(),
            "proposal": None if self.proposal is None else self.proposal.to_dict(),
            "next": self.next_line() or None,  # the proposal as every surface says it
            "model_k": self.model_k,
        }


@dataclass(frozen=True)
class _Basis:
    """What a basis found: throughput weights w(k') per table (several: one per plausible
    draft cost, least regret picks), the table shown, and its words."""

    tables: list[dict[int, float]]
    shown: int
    basis: str
    source: str
    draft_cost: float | None = None
    assumed: bool = False


def _pool(ms: Sequence[Measurement], k: int) -> dict[int, int]:
    out: dict[int, int] = {}
    for m in ms:
        if m.k == k:
            for j, n in m.histogram.items():
                out[int(j)] = out.get(int(j), 0) + int(n)
    return out


def choose(
    measurements: Sequence[Measurement],
    concurrency: int | None = None,
    draft_cost: float | None = None,
    slo: Slo | None = None,
) -> KChoice:
    """The recommended k at `concurrency` (None: the only / most measured load); with an
    `slo`, the best k predicted to meet it (none, and why, when no k does)."""
    healthy, flags = _gate(measurements)
    spec = [m for m in healthy if m.k > 0 and m.steps > 0]
    goal = None if slo is None else slo.text()
    if not spec:
        why = "every measurement excluded (see flags)" if flags else _no_steps(healthy)
        return KChoice(
            None, why, HISTOGRAM, why=why, flags=flags, concurrency=concurrency, slo=goal
        )
    timed = [m for m in spec if m.step_ms and m.step_ms > 0]
    if concurrency is None:
        loads = [m.concurrency for m in timed] or [None]
        concurrency = max(set(loads), key=lambda c: (loads.count(c), -(c or 0)))
    basis = _basis(spec, timed, concurrency, draft_cost)
    if isinstance(basis, KChoice):
        return _with(basis, flags=flags, concurrency=concurrency, slo=goal)
    if slo is not None:
        basis = replace(basis, basis=f"{basis.basis} · SLO {goal}")
    return _decide(basis, spec, concurrency, flags, slo)


NO_SPECULATION = "no speculation on this server (no verify steps)"


def _no_steps(healthy: Sequence[Measurement]) -> str:
    """Why there is no verify step: requests answered at k=0 only (a server that does not
    speculate: waiting will not bring any), or nothing answered yet."""
    if healthy and all(m.k == 0 for m in healthy):
        return NO_SPECULATION
    return "no verify steps yet"


def choose_per_load(
    measurements: Sequence[Measurement],
    draft_cost: float | None = None,
    slo: Slo | None = None,
) -> dict[int | None, KChoice]:
    loads = sorted({m.concurrency for m in measurements}, key=lambda c: (c is None, c or 0))
    return {c: choose(measurements, c, draft_cost, slo) for c in loads}


def _with(choice: KChoice, **changes: Any) -> KChoice:
    return KChoice(**{**choice.__dict__, **changes})


def _gate(ms: Sequence[Measurement]) -> tuple[list[Measurement], tuple[str, ...]]:
    healthy, flags = [], []
    for m in ms:
        reasons = m.health.reasons()
        if reasons:
            flags.append(flag(m.where(), reasons))
        else:
            healthy.append(m)
    return healthy, tuple(flags)


def _basis(
    spec: Sequence[Measurement],
    timed: Sequence[Measurement],
    concurrency: int | None,
    draft_cost: float | None,
) -> _Basis | KChoice:
    k_max = max(m.k for m in spec)
    if len({m.k for m in timed}) >= 2:
        return _across_k(timed, concurrency, k_max)
    if len({m.concurrency for m in timed if m.concurrency}) >= 2:
        return _segments(timed, concurrency, draft_cost, k_max)
    return _histogram(draft_cost, k_max)


def _refusal(why: str, source: str) -> KChoice:
    return KChoice(None, why, source, why=why, refused=True)


# ---------------------------------------------------------------- histogram only


def _cost_weights(cost: float, k_max: int) -> dict[int, float]:
    return {k: 1.0 / (1 + cost * k) for k in range(k_max + EXTRA_KS + 1)}


def _histogram(draft_cost: float | None, k_max: int) -> _Basis:
    assumed = draft_cost is None
    c = DEFAULT_DRAFT_COST if draft_cost is None else float(draft_cost)
    word = "assumed" if assumed else "given"
    basis = f"histogram only, draft cost {word} {c:.2f}"
    return _Basis([_cost_weights(c, k_max)], 0, basis, HISTOGRAM, c, assumed)


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
    timed: Sequence[Measurement], concurrency: int | None, k_max: int
) -> _Basis | KChoice:
    ks = ",".join(str(k) for k in sorted({m.k for m in timed}))
    if concurrency is not None and len({m.concurrency for m in timed if m.concurrency}) >= 2:
        try:
            model = kmodel.fit(_cells(timed))
        except kmodel.NotEnoughData as exc:
            return _refusal(f"the step-time model is refused: {exc}", MODEL)
        weights = {}
        for k in range(k_max + EXTRA_KS + 1):
            step = model.predict_step_ms(k, concurrency)
            if step > 0:
                weights[k] = concurrency * 1000.0 / step
        return _Basis([weights], 0, model.basis, MODEL)
    # one load: T(k) = t0 (1 + c k) fitted over the runs at that load
    here = [m for m in timed if m.concurrency == concurrency] or list(timed)
    cost = tuning.estimate_draft_cost([(m.k, m.step_ms) for m in here if m.step_ms])
    if cost is None:
        return _refusal(
            f"no contrast in step time across k={ks} (it does not grow with k, so no draft "
            "cost can be fitted): measure k=0",
            ACROSS_K,
        )
    basis = f"measured at k={ks}, step time t0(1+c k) fitted, c={cost:.3f}"
    return _Basis([_cost_weights(cost, k_max)], 0, basis, ACROSS_K, cost, False)


# ---------------------------------------------------------------- one k, several loads


def _segments(
    timed: Sequence[Measurement],
    concurrency: int | None,
    draft_cost: float | None,
    k_max: int,
) -> _Basis | KChoice:
    k = timed[0].k
    points = _step_by_load(timed)
    if concurrency is None or len(points) < 2:
        return _histogram(draft_cost, k_max)
    if concurrency not in points:
        why = f"no step time measured at concurrency {concurrency} (no TPOT or acceptance)"
        return KChoice(None, "step time measured per segment", SEGMENTS, why=why)
    costs = ROBUST_COSTS if draft_cost is None else (float(draft_cost),)
    forms, tables = set(), []
    for c in costs:
        model = fit_segment_model(k, points, c)
        if model is None:
            return _histogram(draft_cost, k_max)
        forms.add(model.form)
        tables.append(
            {
                kp: concurrency * 1000.0 / model.step_ms(kp, concurrency)
                for kp in range(k_max + EXTRA_KS + 1)
                if model.step_ms(kp, concurrency) > 0
            }
        )
    cost_text = (
        f"draft cost given {costs[0]:.2f}"
        if draft_cost is not None
        else f"draft cost unknown, least loss over c={costs[0]:.2f}-{costs[-1]:.2f}"
    )
    basis = (
        f"step time measured per segment ({len(points)} loads at k={k}), "
        f"{'/'.join(sorted(forms))} verify cost, {cost_text}"
    )
    return _Basis(tables, len(tables) // 2, basis, SEGMENTS, draft_cost, False)


def least_regret(
    tables: Sequence[Mapping[int, float]],
    k_max: int,
    allowed: AbstractSet[int] | None = None,
    reference: Sequence[Mapping[int, float]] | None = None,
) -> int:
    """The k' in 0..k_max (and in `allowed`, when given) whose worst relative loss over the
    tables (one per plausible draft cost) is smallest; ties (within 0.1%) to the smaller k'.
    The loss is against the best of all k' in range, allowed or not, in `reference` (the
    central predictions, when `tables` hold cautious ones: the caution is about the
    candidate, not about what the best k would give), else in `tables` themselves."""
    ks = sorted(k for k in tables[0] if k <= k_max and all(k in t for t in tables))
    tops = [max(t[j] for j in ks) for t in (reference or tables)]
    worst = {
        k: max(1 - t[k] / top for t, top in zip(tables, tops, strict=True))
        for k in ks
        if allowed is None or k in allowed
    }
    least = min(worst.values())
    return min(k for k in worst if worst[k] <= least + 1e-3)


def _step_by_load(timed: Sequence[Measurement]) -> dict[int, float]:
    """Step time per load: step-weighted mean over the measurements at that load."""
    sums: dict[int, tuple[float, int]] = {}
    for m in timed:
        if m.concurrency is None or m.step_ms is None:
            continue
        t, n = sums.get(m.concurrency, (0.0, 0))
        sums[m.concurrency] = (t + m.step_ms * m.steps, n + m.steps)
    return {c: t / n for c, (t, n) in sums.items() if n}


# ---------------------------------------------------------------- the decision


@dataclass(frozen=True)
class _Pick:
    k: int  # the recommendation
    base: int  # the best k within the measured range
    ext: int | None  # the best k beyond it, when it beats base by more than a tie


def _predict(lengths: Mapping[int, float], w: Mapping[int, float]) -> dict[int, float]:
    return {k: lengths[k] * w[k] for k in w if k in lengths}


def _in_range(
    basis: _Basis,
    lengths: Mapping[int, float],
    k_max: int,
    allowed: AbstractSet[int] | None,
    central: Mapping[int, float] | None = None,
) -> int:
    """The best k' in 0..k_max; with several tables the least-regret one, its loss read
    against the `central` lengths' best (when `lengths` are the cautious ones)."""
    preds = [_predict(lengths, t) for t in basis.tables]
    if len(preds) > 1:
        reference = None if central is None else [_predict(central, t) for t in basis.tables]
        return least_regret(preds, k_max, allowed, reference)
    inside = {k: v for k, v in preds[0].items() if k <= k_max and (allowed is None or k in allowed)}
    top = max(inside.values())
    return min(k for k, v in inside.items() if v >= (1 - TIE_TOLERANCE) * top)


def _pick(
    basis: _Basis,
    lengths: Mapping[int, float],
    low: Mapping[int, float],
    k_max: int,
    allowed: AbstractSet[int] | None = None,
) -> _Pick:
    """The answer over every k' (beyond the measured range with the band's low end of E(k'),
    `low`, so an extrapolated k wins only when even its pessimistic prediction does), the
    best k within the measured range, and the best extrapolated k' (central E) when it beats
    that by more than a tie under some table (some plausible draft cost: a k the cost
    decides is named, never hidden behind the middle cost); with `allowed` (the k' that
    meet the SLO), among those only."""
    base = _in_range(basis, lengths, k_max, allowed)
    cautious = {k: low.get(k, e) if k > k_max else e for k, e in lengths.items()}
    k = _in_range(basis, cautious, max(lengths), allowed, lengths)
    preds = [_predict(lengths, t) for t in basis.tables]
    best_case = {
        j: max(p[j] / p[base] for p in preds)
        for j in preds[0]
        if j > k_max and (allowed is None or j in allowed) and all(j in p for p in preds)
    }
    ext = max(best_case, key=lambda j: (best_case[j], -j)) if best_case else None
    if ext is not None and best_case[ext] <= 1 + TIE_TOLERANCE:
        ext = None
    return _Pick(k, base, k if k > k_max else ext)


def _out_of_bounds(basis: _Basis, lengths: Mapping[int, float]) -> str | None:
    for w in basis.tables:
        if not w.get(0):  # the fit puts k=0's step time at or below zero: no physical model
            return "fit out of bounds: the fitted step time at k=0 is not positive; measure k=0"
        for k, v in _predict(lengths, w).items():
            gain = v / (lengths[0] * w[0]) if w.get(0) else None
            if gain is not None and gain > lengths[k] * (1 + BOUND_SLACK):
                return (
                    f"fit out of bounds: k'={k} predicted {gain:.2f}x over k=0, above its "
                    f"E({k})={lengths[k]:.2f} tokens per step; measure k=0"
                )
    return None


def _draws(spec: Sequence[Measurement], k_max: int) -> tuple[list[dict[int, float]], str]:
    """DRAWS Bayesian-bootstrap E(k') tables, and what was resampled. Over requests when
    every measurement at k_max carries its request blocks: each block weighted ~ Gamma(1)
    (Dirichlet(1, ..., 1) over the blocks), the draw's histogram the weighted sum, so the
    correlation of steps within a request widens the spread as it should; else over verify
    steps: bucket shares ~ Dirichlet(counts), which treats steps as independent. Seeded by
    the data itself (the same data, the same draws)."""
    at_k = [m for m in spec if m.k == k_max]
    if all(m.blocks for m in at_k) and sum(len(m.blocks) for m in at_k) >= MIN_REQUEST_BLOCKS:
        blocks = [tuning.dense_histogram(b, k_max) for m in at_k for b in m.blocks]
        rng = random.Random(repr(blocks))
        out = []
        for _ in range(DRAWS):
            weights = [rng.gammavariate(1.0, 1.0) for _ in blocks]
            mixed = [sum(w * b[j] for w, b in zip(weights, blocks)) for j in range(k_max + 1)]
            out.append(tuning.expected_lengths(mixed, k_max, EXTRA_KS))
        return out, "requests"
    dense = tuning.dense_histogram(_pool(spec, k_max), k_max)
    rng = random.Random(repr(dense))
    out = []
    for _ in range(DRAWS):
        shares = [rng.gammavariate(n, 1.0) if n > 0 else 0.0 for n in dense]
        out.append(tuning.expected_lengths(shares, k_max, EXTRA_KS))
    return out, "verify steps"


def _votes(
    basis: _Basis,
    spec: Sequence[Measurement],
    lengths: Mapping[int, float],
    low: Mapping[int, float],
    allowed: AbstractSet[int] | None,
) -> tuple[dict[int, int], str]:
    """How often each k is the pick over the bootstrap draws (the band kept at its width
    around each draw), and what the draws resampled."""
    k_max = max(m.k for m in spec)
    votes: dict[int, int] = {}
    draws, over = _draws(spec, k_max)
    for draw in draws:
        low_d = {j: draw[j] * v / lengths[j] for j, v in low.items()}
        got = _pick(basis, draw, low_d, k_max, allowed).k
        votes[got] = votes.get(got, 0) + 1
    return votes, over


def _beyond(
    basis: _Basis,
    lengths: Mapping[int, float],
    low: Mapping[int, float],
    high: Mapping[int, float],
    pick: _Pick,
) -> tuple[float | None, tuple[float, float] | None]:
    """The extrapolated k's predicted gain over the best measured-range k, % (the shown
    table's central E), and its band: the E(k') band's ends, at the least and the most
    favourable table (so over the plausible draft costs when the basis has several)."""
    j, base = pick.ext, pick.base
    if j is None:
        return None, None
    shown = basis.tables[basis.shown]
    pct = 100 * (lengths[j] * shown[j] / (lengths[base] * shown[base]) - 1)
    if j not in low:
        return pct, None
    ratios = [t[j] / t[base] / lengths[base] for t in basis.tables]
    return pct, (100 * (low[j] * min(ratios) - 1), 100 * (high[j] * max(ratios) - 1))


def _bands(pooled: Mapping[int, int], k_max: int) -> tuple[dict[int, float], dict[int, float]]:
    low, high = {}, {}
    for p in tuning.predictions(pooled, k_max, None, EXTRA_KS):
        if p.extrapolated and p.low is not None and p.high is not None:
            low[p.k], high[p.k] = p.low, p.high
    return low, high


def _decide(
    basis: _Basis,
    spec: Sequence[Measurement],
    concurrency: int | None,
    flags: tuple[str, ...],
    slo: Slo | None = None,
) -> KChoice:
    k_max = max(m.k for m in spec)
    pooled = _pool(spec, k_max)
    lengths = tuning.expected_lengths(tuning.dense_histogram(pooled, k_max), k_max, EXTRA_KS)
    goal = None if slo is None else slo.text()
    bad = _out_of_bounds(basis, lengths)
    if bad is not None:
        return _with(_refusal(bad, basis.source), flags=flags, concurrency=concurrency, slo=goal)
    shown = _predict(lengths, basis.tables[basis.shown])
    meeting: dict[int, tuple[float | None, float | None]] = {}
    if slo is not None:
        meeting, why = meets_slo(slo, spec, concurrency, shown)
        if why is not None:
            return KChoice(
                None, basis.basis, basis.source, why=why, flags=flags,
                concurrency=concurrency, slo=goal,
            )  # fmt: skip
    allowed = None if slo is None else frozenset(meeting)
    low, high = _bands(pooled, k_max)
    pick = _pick(basis, lengths, low, k_max, allowed)
    words = basis.basis if slo is None else basis.basis + _slo_words(slo, pick.k, meeting[pick.k])
    gain = {k: v / shown[0] for k, v in shown.items() if k <= k_max or k == pick.k}
    votes, over = _votes(basis, spec, lengths, low, allowed)
    noise = tuple(sorted(k for k, n in votes.items() if k != pick.k and n >= NOISE_SHARE * DRAWS))
    ext_pct, band = _beyond(basis, lengths, low, high, pick)
    return KChoice(
        k=pick.k,
        basis=words,
        source=basis.source,
        gain=gain,
        extrapolated_k=pick.ext,
        extrapolated_gain=None if pick.ext is None else shown[pick.ext] / shown[0],
        draft_cost=basis.draft_cost,
        draft_cost_assumed=basis.assumed,
        p_best=votes.get(pick.k, 0) / DRAWS,
        p_best_over=over,
        within_noise=noise,
        measured_k=k_max,
        base_k=pick.base,
        extrapolated_percent=ext_pct,
        extrapolated_band=band,
        flags=flags,
        concurrency=concurrency,
        slo=goal,
    )


def meets_slo(
    slo: Slo,
    spec: Sequence[Measurement],
    concurrency: int | None,
    shown: Mapping[int, float],
) -> tuple[dict[int, tuple[float | None, float | None]], str | None]:
    """The k' predicted to meet the SLO at this load with their predicted (TTFT, TPOT) at
    the SLO's percentile, and why none does (None when some k' in the measured range does).
    Each k' is checked (slo.check) against the measurement at this load nearest to it in k
    (ties: the one with more steps): its TTFT as measured (prefill does not depend on k),
    its TPOT scaled by the predicted throughput ratio `shown`[k] / `shown`[k'] (at one
    concurrency TPOT is inversely proportional to output throughput), so a measured k is
    checked against exactly what was measured."""
    here = [m for m in spec if m.latency and concurrency in (None, m.concurrency)]
    if not here:
        return {}, f"no k meets the SLO ({slo.text()}): no TTFT or TPOT percentiles measured here"
    ok = {}
    for k, v in shown.items():
        ref = min(here, key=lambda m: (abs(m.k - k), -m.steps))
        if v <= 0 or ref.k not in shown:
            continue
        scale = shown[ref.k] / v
        if not slo.check([ref.latency], scale):
            ttft, tpot = slo.figures([ref.latency])
            ok[k] = (ttft, None if tpot is None else tpot * scale)
    k_max = max(m.k for m in spec)
    if any(k <= k_max for k in ok):
        return ok, None
    ref = max(here, key=lambda m: (m.steps, m.k))
    said = "; ".join(w.removeprefix("misses the SLO: ") for w in slo.check([ref.latency]))
    return {}, f"no k meets the SLO ({slo.text()}): measured at k={ref.k}: {said}"


def _slo_words(slo: Slo, k: int, figures: tuple[float | None, float | None]) -> str:
    """'(TPOT p90 26.7 ms predicted at k=3)': what the pick is expected to give."""
    ttft, tpot = figures
    parts = []
    if slo.ttft_ms is not None and ttft is not None:
        parts.append(f"TTFT {slo.percentile} {ttft:.1f} ms")
    if slo.tpot_ms is not None and tpot is not None:
        parts.append(f"TPOT {slo.percentile} {tpot:.1f} ms")
    return f" ({', '.join(parts)} predicted at k={k})" if parts else ""
