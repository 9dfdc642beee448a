"""The one answer every surface paints (issue 31; docs/tuning.md §9): the measurement leads,
the model proposes.

`advise` takes the measured points (runs, segments, sweep cells as decision.Measurement)
and answers one load:

1. the answer: the best arm measured at that load (decision/measured.py: fixed k including
   k=0, goodput under an SLO: arms that miss it as measured are left out), with its measured
   figure and its margins over the runner-up and over k=0, each with a 90% interval;
2. the proposal: among the k NOT measured at that load, the model's own pick
   (decision/choose.py: acceptance from the histogram, step time from the basis the
   measurements allow; its extrapolated k when its pick was measured), else the k it
   predicts best; proposed when, at some plausible draft cost, it beats the answer by more
   than the tie bar (measuring is how a draft cost the run cannot see gets settled), as a
   second line "next: measure k=8, predicted +5% [-3..+12] over measured k=6". The figure
   is the model's central table (the middle draft cost); its band is the 90% band of the
   predicted gain over bootstrap draws of the acceptance histogram (the model refitted per
   draw) and over every plausible draft cost, widened by the model's own error where it can
   be read: the largest relative error with which the model, refitted without a measured
   k (leave-one-k-out; k=0 is never in the fit), predicts that k's measured margin.

The model never names the answer: with one k measured the answer is "measured k=4".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from specmon.decision import acceptance as tuning
from specmon.decision import choose as model
from specmon.decision import measured as meas
from specmon.decision.cells import TIE_TOLERANCE
from specmon.decision.choose import NO_SPECULATION, KChoice, Measurement
from specmon.decision.margin import LEVEL, quantile
from specmon.decision.slo import Slo

__all__ = ["advise", "advise_per_load"]

# The model's error where leave-one-k-out cannot read it: a floor of 3% of the predicted
# figure per k between the proposal and the nearest measured k (the band under-covered
# without it: 80% of 179 proposals in benchmarks/bench_calibration.py).
FORM_PER_K = 0.03


def advise(
    measurements: Sequence[Measurement],
    concurrency: int | None = None,
    draft_cost: float | None = None,
    slo: Slo | None = None,
) -> KChoice:
    """The answer at `concurrency` (None: the most measured load), with the proposal."""
    healthy, flags = model._gate(measurements)
    if concurrency is None:
        concurrency = _most_measured(healthy)
    fitted = model.choose(measurements, concurrency, draft_cost, slo)
    arms = _arms(healthy, concurrency, slo)
    answer = meas.answer(arms)
    spec = [m for m in healthy if m.k > 0 and m.steps > 0]
    if answer is None:
        if not spec or fitted.refused or fitted.k is None:
            return model._with(fitted, lead=True, model_k=fitted.k, k=None)
        if slo is not None and _arms(healthy, concurrency, None):
            why = f"no measured k meets the SLO ({slo.text()})"
            return model._with(fitted, lead=True, model_k=fitted.k, k=None, why=why)
        k = max(m.k for m in spec)
        proposal = _propose(spec, k, {k}, concurrency, draft_cost, slo, _model_ks(fitted))
        proposal = _name_excluded(proposal, measurements, healthy, concurrency)
        return model._with(
            fitted, k=k, lead=True, model_k=fitted.k, proposal=proposal, p_best=None,
            within_noise=(),
        )  # fmt: skip
    proposal = None
    if spec and not fitted.refused:
        measured_ks = {a.k for a in arms}
        proposal = _propose(
            spec, answer.k, measured_ks, concurrency, draft_cost, slo, _model_ks(fitted), arms
        )
        proposal = _name_excluded(proposal, measurements, healthy, concurrency)
    tied = () if answer.top is None else (answer.top.other,)
    if not spec:  # only k=0 measured here: the model has no acceptance to propose from
        fitted = model._with(fitted, basis=NO_SPECULATION, why=None)
    return model._with(
        fitted, k=answer.k, lead=True, model_k=fitted.k, measured=answer, proposal=proposal,
        p_best=answer.p_best, within_noise=tied, flags=flags, concurrency=concurrency,
    )  # fmt: skip


def advise_per_load(
    measurements: Sequence[Measurement],
    draft_cost: float | None = None,
    slo: Slo | None = None,
) -> dict[int | None, KChoice]:
    loads = sorted({m.concurrency for m in measurements}, key=lambda c: (c is None, c or 0))
    return {c: advise(measurements, c, draft_cost, slo) for c in loads}


def _model_ks(fitted: KChoice) -> tuple[int, ...]:
    """The k the model alone names, in its order of preference: its pick, then its
    extrapolated k (the proposal takes the first one not measured)."""
    return tuple(k for k in (fitted.k, fitted.extrapolated_k) if k is not None)


def _name_excluded(
    proposal: meas.Proposal | None,
    measurements: Sequence[Measurement],
    healthy: Sequence[Measurement],
    concurrency: int | None,
) -> meas.Proposal | None:
    """Marks a proposal whose k was measured at this load but every run of it excluded by
    a gate, so the line says "re-measure" (the user did run it; the run did not count)."""
    if proposal is None:
        return None
    at_load = lambda ms: any(m.k == proposal.k and m.concurrency == concurrency for m in ms)
    if at_load(measurements) and not at_load(healthy):
        return replace(proposal, excluded=True)
    return proposal


def _most_measured(ms: Sequence[Measurement]) -> int | None:
    loads = [m.concurrency for m in ms if m.throughput] or [None]
    return max(set(loads), key=lambda c: (loads.count(c), -(c or 0)))


def _arms(ms: Sequence[Measurement], concurrency: int | None, slo: Slo | None) -> list[meas.Arm]:
    """One arm per k measured at this load (the measurement with the most requests), with
    its bootstrap draws; under an SLO only the arms whose own figures meet it."""
    best: dict[int, Measurement] = {}
    for m in ms:
        if m.concurrency != concurrency or not m.throughput or m.throughput <= 0:
            continue
        if slo is not None and (not m.latency or slo.check([m.latency])):
            continue
        held = best.get(m.k)
        if held is None or (m.requests or 0) > (held.requests or 0):
            best[m.k] = m
    return [meas.Arm(k, float(m.throughput or 0), _draws(m)) for k, m in best.items()]


def _draws(m: Measurement) -> tuple[float, ...]:
    al_blocks: list[list[int]] = []
    if m.k > 0 and m.steps > 0:
        dense = lambda h: tuning.dense_histogram(h, m.k)
        al_blocks = [dense(b) for b in m.blocks] if m.blocks else [dense(m.histogram)]
    # seeded by the blocks, not the figure: a live table and its export read the window
    # from different clocks (the figures differ in the 7th digit; the draws must not)
    seed = repr((m.k, m.concurrency, sorted(m.rate_blocks), m.steps))
    return meas.rate_draws(float(m.throughput or 0), m.rate_blocks, al_blocks, seed)


def _tables(
    spec: Sequence[Measurement], concurrency: int | None, draft_cost: float | None
) -> tuple[list[dict[int, float]], dict[int, float], int] | None:
    """The model's predicted throughput per k' (one table per plausible draft cost), the
    E(k') table and the largest measured k; None when the basis is refused."""
    timed = [m for m in spec if m.step_ms and m.step_ms > 0]
    basis = model._basis(spec, timed, concurrency, draft_cost)
    if isinstance(basis, KChoice):
        return None
    k_max = max(m.k for m in spec)
    dense = tuning.dense_histogram(model._pool(spec, k_max), k_max)
    lengths = tuning.expected_lengths(dense, k_max, model.EXTRA_KS)
    if model._out_of_bounds(basis, lengths) is not None:
        return None
    return [model._predict(lengths, t) for t in basis.tables], lengths, k_max


def _ratio(preds: Sequence[dict[int, float]], j: int, a: int) -> float:
    """The predicted throughput of k'=j over k'=a, averaged over the draft-cost tables."""
    return sum(p[j] / p[a] for p in preds) / len(preds)


def _propose(
    spec: Sequence[Measurement],
    answer_k: int,
    measured_ks: set[int],
    concurrency: int | None,
    draft_cost: float | None,
    slo: Slo | None,
    model_ks: Sequence[int] = (),
    arms: Sequence[meas.Arm] = (),
) -> meas.Proposal | None:
    """The k to measure next (module docstring), with its band; None when no unmeasured k
    beats the answer by more than a tie at any plausible draft cost."""
    fit = _tables(spec, concurrency, draft_cost)
    if fit is None:
        return None
    preds, lengths, k_max = fit
    ks = [j for j in preds[0] if j not in measured_ks and all(j in p for p in preds)]
    if slo is not None and answer_k in preds[0]:
        meeting, _ = model.meets_slo(slo, spec, concurrency, preds[len(preds) // 2])
        ks = [j for j in ks if j in meeting]
    if answer_k not in preds[0] or not ks:
        return None
    central = preds[len(preds) // 2]
    j = next((x for x in model_ks if x in ks), None)
    if j is None:
        j = max(ks, key=lambda x: (central[x] / central[answer_k], -x))
    if max(p[j] / p[answer_k] for p in preds) <= 1 + TIE_TOLERANCE:
        return None
    low, high = _band(spec, preds, lengths, k_max, j, answer_k)
    form = max(
        _form_error(spec, arms, answer_k, concurrency, draft_cost),
        FORM_PER_K * min(abs(j - k) for k in measured_ks),
    )
    # widened as a ratio (divided and multiplied by 1 + form), so no band reaches -100%
    low, high = low / (1 + form), high * (1 + form)
    percent = 100 * (central[j] / central[answer_k] - 1)
    return meas.Proposal(j, answer_k, percent, 100 * (low - 1), 100 * (high - 1))


def _band(
    spec: Sequence[Measurement],
    preds: Sequence[dict[int, float]],
    lengths: dict[int, float],
    k_max: int,
    j: int,
    a: int,
) -> tuple[float, float]:
    """90% band of pred(j) / pred(a) over the bootstrap draws of the histogram (E(k') refitted
    per draw, the extrapolation included) and over every draft-cost table."""
    weights = [{k: p[k] / lengths[k] for k in p} for p in preds]
    lows, highs = [], []
    draws, _ = model._draws(spec, k_max)
    for e in draws:
        r = [e[j] * w[j] / (e[a] * w[a]) for w in weights]
        lows.append(min(r))
        highs.append(max(r))
    tail = (1 - LEVEL) / 2
    return quantile(lows, tail), quantile(highs, 1 - tail)


def _form_error(
    spec: Sequence[Measurement],
    arms: Sequence[meas.Arm],
    a: int,
    concurrency: int | None,
    draft_cost: float | None,
) -> float:
    """The model's own error, leave-one-k-out: refitted without each measured k (k=0 never
    is in the fit), how far its predicted margin of that k over the answer is from the
    measured one, relative; the largest (0 with nothing to check)."""
    figure = {arm.k: arm.throughput for arm in arms}
    worst = 0.0
    for arm in arms:
        if arm.k == a or a not in figure:
            continue
        rest = [m for m in spec if m.k != arm.k]
        if not rest or (not any(m.k == a for m in rest) and a > 0):
            continue
        fit = _tables(rest, concurrency, draft_cost)
        if fit is None or arm.k not in fit[0][0] or a not in fit[0][0]:
            continue
        predicted = _ratio(fit[0], arm.k, a)
        worst = max(worst, abs(predicted / (figure[arm.k] / figure[a]) - 1))
    return worst
