"""The sweep's rule: which k per concurrency, from measured cells, decided as vLLM's offline
tuner does (`vllm bench sweep tune_speculative_k`; docs/tuning.md §10). The one selection
every sweep surface paints: the sweep's table and sweep.json (specmon/run/sweep/runner.py), the
live sweep view (tui/sweep_view.py), the arms' best fixed k (analysis/arms.py), and `specmon
tune` / `specmon compare` given a sweep's directory.

* per cell, over its repeats: median and MAD (median absolute deviation, unscaled) of output
  token throughput; relative MAD = MAD / median; above 0.10 the cell is unstable and not
  selected (specmon's exception: its median is more than 3 standard errors above every other
  k's, a median's standard error taken as sqrt(pi/2) 1.4826 MAD / sqrt(repeats), or its
  slowest repeat beats every other k's fastest, so no noise of that size can reverse the
  order); score = max(median - 1.4826 MAD, 0) (1.4826 MAD estimates a
  normal sigma); a k > 0 is selected over an unstable k=0 only when it is ahead of k=0 by
  the same bar (3 standard errors, or its slowest repeat above k=0's fastest), else nothing
  is selected: "the k=0 baseline is unstable ... measure again";
* per concurrency: best_k = highest median; selected_k = the smallest k whose score is within
  1% of the top score among stable cells; selected_vs_best_percent = 100 (score_sel / top - 1)
  and selected_vs_k0_percent = 100 (score_sel / score_k0 - 1), both on scores as vLLM does
  (the k0 figure is omitted without a baseline cell at that concurrency).

Health gates (specmon/decision/gates.py) come first: a cell whose repeats failed more than
1% of their requests, ran with a saturated client, on a server behind its own step model,
or counted too few requests is excluded from selection (as vLLM's tuner rejects a run with
any failed request) and listed in `excluded` with why; when every cell at a load shares a
machine-wide reason (a saturated client, a lagging server) the decision is taken among them
and says so. With an SLO (decision/slo.py) a cell that misses it is excluded the same way.
A cell excluded only by a gate that doubts the measurement (a saturated client, a lagging
server, a per-token time off the simulator's formula, too few requests; not errors, not the
SLO) whose median is above the pick's makes the decision `uncertain`: "uncertain:
re-measure" leads its line, so a slower arm is never picked silently. `trust_of` sums a
sweep's decisions into the verdict its artifacts carry ("clean" or "flagged", with why, and
the excluded cells per load): the schedule file, sweep.json, `tune` and `compare`.

Where specmon differs (vLLM refuses these inputs): fewer than 3 repeats still decide, marked
"few repeats" (1 repeat: MAD 0, score = median); a concurrency whose cells are all unstable
selects nothing and says why; k values measured elsewhere but absent here are listed as
missing and the decision is taken among the rest.
"""

from __future__ import annotations

import functools
import math
import random
import re
import statistics
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from specmon.decision.gates import Health, machine_wide
from specmon.decision.margin import Margin, interval
from specmon.decision.slo import Slo
from specmon.decision.sweep_types import Cell, RepeatMeasurement
from specmon.records import json_record, stored_as

MAX_RELATIVE_MAD = 0.10
MAD_TO_SIGMA = 1.4826
MEDIAN_SE = math.sqrt(math.pi / 2)  # a median's standard error over a mean's (normal data)
SEPARATION = 3.0  # standard errors between two medians for an unstable cell to be kept
TIE_TOLERANCE = 0.01
MIN_REPEATS = 3
DRAWS = 200  # bootstrap draws for P(selected)
# draws for a margin's interval: a 5% quantile of 200 draws moves by a whole step of a
# 3-repeat median's distribution from one seed to the next; 1000 hold it (cached, cheap)
MARGIN_DRAWS = 1000

# figures summarised by their median next to the objective (RepeatMeasurement fields)
OTHER_FIGURES = (
    "request_throughput",
    "ttft_ms",
    "itl_ms",
    "tpot_ms",
    "request_latency_ms",
    "acceptance_length",
)


def median_and_mad(values: Sequence[float]) -> tuple[float, float, float]:
    """(median, MAD, relative MAD); relative MAD is inf when the median is 0 and MAD is not."""
    med = float(statistics.median(values))
    mad = float(statistics.median(abs(v - med) for v in values))
    if med != 0:
        rel = mad / abs(med)
    else:
        rel = 0.0 if mad == 0 else math.inf
    return med, mad, rel


@dataclass(frozen=True)
class CellStats:
    k: int
    concurrency: int
    repeats: int
    # output token throughput, tokens/s
    median: float = field(metadata=stored_as("median_output_token_throughput"))
    mad: float = field(metadata=stored_as("mad_output_token_throughput"))
    relative_mad: float
    score: float  # max(median - 1.4826 MAD, 0)
    unstable: bool
    few_repeats: bool
    medians: dict[str, float | None] = field(default_factory=dict)  # OTHER_FIGURES
    excluded: tuple[str, ...] = ()  # health gate reasons: never selected when not empty
    requests: int = 0
    errors: int = 0
    # the slowest and fastest repeat's output token throughput: the instability rule's
    # exception reads them; not stored
    slowest: float = field(default=0.0, metadata=stored_as(None))
    fastest: float = field(default=0.0, metadata=stored_as(None))

    def to_dict(self) -> dict[str, Any]:
        out = json_record(self)
        out["relative_mad"] = None if math.isinf(self.relative_mad) else self.relative_mad
        return out


def _figure_median(repeats: Sequence[RepeatMeasurement], name: str) -> float | None:
    vals = [getattr(r, name) for r in repeats]
    present = [float(v) for v in vals if v is not None]
    return float(statistics.median(present)) if present else None


def slo_misses(cell: Cell, slo: Slo | None) -> list[str]:
    """Why the cell misses the SLO (slo.check: the median over repeats of each repeat's
    percentile)."""
    if slo is None:
        return []
    return slo.check([r.latency_percentiles for r in cell.repeats])


def summarize(cell: Cell, slo: Slo | None = None) -> CellStats | None:
    """The cell's statistics; None when it has no repeat (not measured). A cell that fails
    a health gate or misses the SLO carries why in `excluded`."""
    if not cell.repeats:
        return None
    med, mad, rel = median_and_mad([r.output_token_throughput for r in cell.repeats])
    return CellStats(
        k=cell.k,
        concurrency=cell.concurrency,
        repeats=len(cell.repeats),
        median=med,
        mad=mad,
        relative_mad=rel,
        score=_score_of(med, mad),
        unstable=rel > MAX_RELATIVE_MAD,
        few_repeats=len(cell.repeats) < MIN_REPEATS,
        medians={name: _figure_median(cell.repeats, name) for name in OTHER_FIGURES},
        excluded=tuple(cell_health(cell).reasons() + slo_misses(cell, slo)),
        requests=sum(r.request_count for r in cell.repeats),
        errors=sum(r.error_count for r in cell.repeats),
        slowest=min(r.output_token_throughput for r in cell.repeats),
        fastest=max(r.output_token_throughput for r in cell.repeats),
    )


def cell_health(cell: Cell) -> Health:
    """The cell's health over its repeats: counts summed, the worst lag share, saturated if
    any repeat was."""
    return Health(
        requests=sum(r.request_count for r in cell.repeats),
        errors=sum(r.error_count for r in cell.repeats),
        saturated=any(r.client_saturated for r in cell.repeats),
        server_lag_share=cell.server_lag_share,
        formula_off_share=cell.per_token_off_share,
    )


@dataclass(frozen=True)
class Decision:
    concurrency: int
    selected_k: int | None  # None: nothing selectable (see reason)
    best_k: int | None  # highest median among the measured cells
    selected_score: float | None
    selected_median: float | None
    selected_vs_best_percent: float | None
    selected_vs_k0_percent: float | None  # None without a baseline (k=0) cell here
    candidates: list[CellStats]
    unstable_ks: list[int]
    missing_ks: list[int]  # measured at other concurrencies, not here
    few_repeats: bool  # some candidate has fewer than MIN_REPEATS repeats
    reason: str | None = None  # why selected_k is None
    notes: list[str] = field(default_factory=list)
    excluded: dict[int, list[str]] = field(default_factory=dict)  # k -> health gate reasons
    p_selected: float | None = None  # bootstrap over repeats (`p_selected`)
    slo: str | None = None  # the objective decided under (Slo.text()), None without one
    # why the pick may be the slower arm: a cell the gates doubt measured above it (None: not)
    uncertain: str | None = None
    # the pick's medians over the best other selectable cell's, and its score over k=0's (the
    # figure selected_vs_k0_percent states), each with its 90% interval (`margin_over`)
    over_runner_up: Margin | None = None
    over_k0: Margin | None = None

    def basis(self) -> str:
        """What the decision rests on, in words (the same on every surface)."""
        ks = ",".join(str(s.k) for s in self.candidates)
        counts = sorted({s.repeats for s in self.candidates})
        reps = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        plural = "" if counts == [1] else "s"
        words = (
            f"measured at k={ks} ({reps} repeat{plural}): median - {MAD_TO_SIGMA} MAD, ties "
            f"within {TIE_TOLERANCE:.0%} to the smaller k"
        )
        return words + (f" · SLO {self.slo}" if self.slo else "")

    def head(self) -> str:
        """'selected k=4 (312.0 tok/s, +41.0% vs k=0, P(sel.)=0.93)', or why none."""
        if self.selected_k is None or self.selected_median is None:
            return f"no k selected: {self.reason}"
        figures = [f"{self.selected_median:.1f} tok/s"]
        runner = self.over_runner_up
        if runner is not None and not (runner.other == 0 and self.over_k0 is not None):
            # (when k=0 is the runner-up, "vs k=0" below states it, as vLLM's figure)
            figures.append(f"{runner.percent()} over k={runner.other}")
        if self.over_k0 is not None and self.selected_k > 0:
            figures.append(f"{self.over_k0.percent()} vs k=0")
        elif self.selected_vs_k0_percent is not None and self.selected_k > 0:
            figures.append(f"{self.selected_vs_k0_percent:+.1f}% vs k=0")
        if self.p_selected is not None:
            figures.append(f"P(sel.)={self.p_selected:.2f}")
        picked = f"selected k={self.selected_k} ({', '.join(figures)})"
        return (
            picked
            if self.uncertain is None
            else f"uncertain: re-measure ({self.uncertain}); {picked}"
        )

    def text(self) -> str:
        """One line: head · basis (sweep.json's `text`)."""
        return f"{self.head()} · {self.basis()}"

    def to_dict(self) -> dict[str, Any]:
        # its fields (json_record), with the one line and the basis after the concurrency
        return {
            "concurrency": self.concurrency,
            "text": self.text(),
            "basis": self.basis(),
            **json_record(self),
        }


def _percent(num: float, den: float) -> float | None:
    return None if den <= 0 else 100.0 * (num / den - 1.0)


def selectable(stats: Sequence[CellStats]) -> list[CellStats]:
    """The cells a decision may pick: the healthy ones; when there are none and every
    excluded cell is so only for machine-wide reasons (gates.MACHINE_WIDE), those."""
    healthy = [s for s in stats if not s.excluded]
    if healthy:
        return healthy
    return [s for s in stats if machine_wide(s.excluded)]


def best_median(stats: Sequence[CellStats]) -> CellStats | None:
    """The best fixed k among one load's cells: the highest median (the smaller k on a tie)
    among the selectable ones; a decision's best_k and an arm's "best fixed k" both."""
    healthy = selectable(stats)
    return max(healthy, key=lambda s: (s.median, -s.k)) if healthy else None


def _select(stable: Sequence[CellStats]) -> CellStats:
    """The smallest k whose score is within the tie tolerance of the top score."""
    top = max(s.score for s in stable)
    return min((s for s in stable if s.score >= (1 - TIE_TOLERANCE) * top), key=lambda s: s.k)


def _stable(healthy: Sequence[CellStats]) -> list[CellStats]:
    """The cells that may win on their score: the stable ones, and an unstable one that is
    ahead of every other beyond its noise (`_dominates`)."""
    return [s for s in healthy if not s.unstable or _dominates(s, healthy)]


def _pick(stats: Sequence[CellStats]) -> CellStats | None:
    """The decision's pick among one load's cells: the selectable, then the stable (or
    dominant), then the best score within the tie (`_select`); None when no such cell has
    a positive score. `_decide_one` selects with it and `p_selected` re-decides every
    bootstrap draw with it, so P(sel.) is the share of draws the same rule picks k in."""
    healthy = selectable(stats)
    stable = _stable(healthy)
    if not stable or max(s.score for s in stable) <= 0:
        return None
    sel = _select(stable)
    return sel if _clears_the_baseline(sel, healthy) else None


def _baseline(cells: Sequence[CellStats]) -> CellStats | None:
    """The k=0 cell among `cells`, if measured."""
    return next((s for s in cells if s.k == 0), None)


def _clears_the_baseline(sel: CellStats, healthy: Sequence[CellStats]) -> bool:
    """A k > 0 is picked over an unstable k=0 (which is not picked itself) only when it is
    ahead of k=0 beyond the noise (`_dominates`, the bar an unstable cell clears to be kept):
    the noise that keeps k=0 out must not hand the pick to a k the repeats cannot tell
    apart from it. Seen on a real vLLM with a drafter that never agrees, at concurrency 1:
    k=0 repeats 101/128/135/153/177 tok/s against k=1 at 90/93/94/102/112, and on a machine
    busy with a second vLLM, k=0 at 103/121/140/264/348 against k=1 at 175-194 (a higher
    score, 0 of 4,662 drafts accepted): k=1 was selected both times (tests/analysis/
    test_sweep_decisions.py)."""
    k0 = _baseline(healthy)
    return sel.k == 0 or k0 is None or not k0.unstable or _dominates(sel, [k0])


def p_selected(cells: Sequence[Cell], k: int, slo: Slo | None = None) -> float | None:
    """How sure the selection is: the share of DRAWS bootstrap draws (each cell's repeats
    resampled with replacement, seeded by the figures, so the same cells give the same
    share) in which k is still selected; None when a cell has fewer than MIN_REPEATS."""
    measured = [c for c in cells if c.repeats]
    if not measured or min(len(c.repeats) for c in measured) < MIN_REPEATS:
        return None
    rng = random.Random(repr([(c.k, [r.output_token_throughput for r in c.repeats])
                              for c in measured]))  # fmt: skip
    wins = 0
    for _ in range(DRAWS):
        drawn = [
            summarize(Cell(c.k, c.concurrency, [rng.choice(c.repeats) for _ in c.repeats]), slo)
            for c in measured
        ]
        pick = _pick([d for d in drawn if d])  # each draw decided by the decision's rule
        wins += pick is not None and pick.k == k
    return wins / DRAWS


def _decision_notes(
    stats: list[CellStats], missing: list[int], excluded: dict[int, list[str]], waived: list[int]
) -> list[str]:
    """What the row's decision should be read with: few repeats, unmeasured k, the cells
    excluded (or only flagged, `waived`, when every cell failed a health gate)."""
    notes = []
    if any(s.few_repeats for s in stats):
        n = min(s.repeats for s in stats)
        notes.append(f"few repeats (as few as {n} < {MIN_REPEATS}): MAD is a weak guard")
    if missing:
        notes.append(f"k={','.join(map(str, missing))} not measured here")
    notes += [
        f"k={k} {'flagged' if k in waived else 'excluded'}: {'; '.join(why)}"
        for k, why in excluded.items()
    ]
    if waived:
        notes.append(
            "every cell here ran on a saturated client or a lagging server: decided among "
            "them anyway; remeasure on an idle machine before trusting it"
        )
    return notes


def _median_se(stats: CellStats) -> float:
    """Standard error of a median of n repeats: sqrt(pi / 2) sigma / sqrt(n), sigma estimated
    as 1.4826 MAD (normal repeats)."""
    return MEDIAN_SE * MAD_TO_SIGMA * stats.mad / math.sqrt(stats.repeats)


def _dominates(cell: CellStats, cells: Sequence[CellStats]) -> bool:
    """`cell` is ahead of every other of `cells` beyond the noise: its median more than
    SEPARATION standard errors above every other's, or its slowest repeat above every
    other's fastest. The bar an unstable cell clears to stay selectable (no noise of its
    size can reverse the order) and a k > 0 clears over an unstable k=0. Seen on a real
    vLLM with a drafter that never agrees: k=0 repeats 192-406 tok/s, unstable, against
    76-98 at k=1, which was selected; and under load k=0 at a median of 132 tok/s (relative
    MAD .16, one slow repeat below k=1's fastest) against a steady 63 at k=1."""
    others = [c for c in cells if c is not cell]
    if not others:
        return False
    apart = all(
        cell.median - c.median > SEPARATION * math.hypot(_median_se(cell), _median_se(c))
        for c in others
    )
    return apart or all(cell.slowest > c.fastest for c in others)


def _no_decision_reason(
    stats: list[CellStats], healthy: list[CellStats], stable: list[CellStats]
) -> str | None:
    """Why no k can be selected at this load, or None when one can."""
    if not healthy and all(w.startswith("misses the SLO") for s in stats for w in s.excluded):
        return "no k meets the SLO"
    if not healthy:
        return "every cell excluded by the health gates or the SLO"
    if not stable:
        return f"every cell is unstable (relative MAD > {MAX_RELATIVE_MAD:.0%})"
    if max(s.score for s in stable) <= 0:
        return "no stable cell has a positive score"
    k0 = _baseline(healthy)
    sel = _select(stable)
    if k0 is not None and not _clears_the_baseline(sel, healthy):
        return (
            f"the k=0 baseline is unstable (relative MAD {k0.relative_mad:.2f} > "
            f"{MAX_RELATIVE_MAD:.2f}) and k={sel.k} is not ahead of its median "
            f"{k0.median:,.1f} beyond the noise: measure again"
        )
    return None


def _decide_one(concurrency: int, stats: list[CellStats], all_ks: set[int]) -> Decision:
    stats = sorted(stats, key=lambda s: s.k)
    missing = sorted(all_ks - {s.k for s in stats})
    unstable = [s.k for s in stats if s.unstable]
    few = any(s.few_repeats for s in stats)
    excluded = {s.k: list(s.excluded) for s in stats if s.excluded}
    healthy = selectable(stats)
    notes = _decision_notes(stats, missing, excluded, [s.k for s in healthy if s.excluded])
    best = best_median(stats)
    stable = _stable(healthy)
    notes += [
        f"k={s.k} is unstable but beats every other k beyond the noise: kept"
        for s in stable
        if s.unstable
    ]
    reason = _no_decision_reason(stats, healthy, stable)
    if reason is not None:
        return Decision(
            concurrency=concurrency,
            selected_k=None,
            best_k=None if best is None else best.k,
            selected_score=None,
            selected_median=None,
            selected_vs_best_percent=None,
            selected_vs_k0_percent=None,
            candidates=stats,
            unstable_ks=unstable,
            missing_ks=missing,
            few_repeats=few,
            reason=reason,
            notes=notes,
            excluded=excluded,
        )
    top = max(s.score for s in stable)
    sel = _pick(stats)
    assert sel is not None  # _no_decision_reason found a cell _pick selects
    k0 = _baseline(healthy)
    if k0 is not None and k0.unstable:
        notes.append("the k=0 baseline is unstable: the speedup is uncertain")
    return Decision(
        uncertain=_faster_doubted(sel, stats, healthy),
        concurrency=concurrency,
        selected_k=sel.k,
        best_k=None if best is None else best.k,
        selected_score=sel.score,
        selected_median=sel.median,
        selected_vs_best_percent=_percent(sel.score, top),
        selected_vs_k0_percent=None if k0 is None else _percent(sel.score, k0.score),
        candidates=stats,
        unstable_ks=unstable,
        missing_ks=missing,
        few_repeats=few,
        notes=notes,
        excluded=excluded,
    )


# gates that doubt the configuration itself, not its measurement: never "uncertain"
_CONFIG_GATES = ("error rate", "misses the SLO")


def _faster_doubted(
    sel: CellStats, stats: Sequence[CellStats], healthy: Sequence[CellStats]
) -> str | None:
    """Why the pick may be the slower arm: the cells left out only for how they were
    measured (not their errors, not the SLO) whose median beat the pick's; None if none."""
    faster = [
        s
        for s in stats
        if s not in healthy
        and s.median > sel.median
        and not any(r.startswith(_CONFIG_GATES) for r in s.excluded)
    ]
    if not faster:
        return None
    return "; ".join(
        f"k={s.k} measured {s.median:,.1f} tok/s above the pick's {sel.median:,.1f} but was "
        f"excluded: {'; '.join(s.excluded)}"
        for s in faster
    )


def trust_of(decisions: Sequence[Decision], complete: bool = True) -> dict[str, Any]:
    """The verdict a sweep's artifacts carry: `trust` "clean" (every cell passed the gates,
    each load decided on stable cells) or "flagged", `trust_reasons` (one line each), and
    `excluded_cells` (concurrency -> k -> the gates' reasons, as JSON keys)."""
    reasons = [] if complete else ["the sweep was interrupted: not every cell was measured"]
    for d in decisions:
        at = f"concurrency {d.concurrency}"
        reasons += [f"{at}: {note}" for note in d.notes if _TRUST_NOTES.match(note)]
        if d.uncertain is not None:
            reasons.append(f"{at}: uncertain: re-measure ({d.uncertain})")
        if d.selected_k is None:
            reasons.append(f"{at}: nothing selected: {d.reason}")
        if d.unstable_ks:
            reasons.append(
                f"{at}: k={','.join(map(str, d.unstable_ks))} unstable (relative MAD > "
                f"{MAX_RELATIVE_MAD:.0%})"
            )
    excluded = {
        str(d.concurrency): {str(k): why for k, why in d.excluded.items()}
        for d in decisions
        if d.excluded
    }
    return {
        "trust": "flagged" if reasons else "clean",
        "trust_reasons": reasons,
        "excluded_cells": excluded,
    }


# the decision notes that flag the measurement: excluded or only flagged cells, a k missing
_TRUST_NOTES = re.compile(r"k=[\d,]+ (excluded|flagged|not measured)|every cell here")


def trust_lines(trust: dict[str, Any]) -> list[str]:
    """'trust: flagged (3 reasons)' and one indented line per reason, as tune / compare
    print a sweep's verdict."""
    reasons = trust["trust_reasons"]
    if not reasons:
        return [
            "trust: clean (every cell passed the health gates; each load decided on stable cells)"
        ]
    return [f"trust: flagged ({len(reasons)} reason{'s' if len(reasons) > 1 else ''})"] + [
        f"  {r}" for r in reasons
    ]


def decide(cells: Sequence[Cell], slo: Slo | None = None, bootstrap: bool = True) -> list[Decision]:
    """One decision per concurrency with a measured cell (`Cell.measured`: the others are
    left out here, whoever calls), sorted by concurrency; with an SLO, among the cells that
    meet it. `bootstrap` False leaves P(selected) out (the live grid redraws too often for
    200 draws per load)."""
    measured = [cell for cell in cells if cell.measured]
    by_conc: dict[int, list[CellStats]] = {}
    for cell in measured:
        st = summarize(cell, slo)
        assert st is not None  # it has repeats
        by_conc.setdefault(cell.concurrency, []).append(st)
    all_ks = {cell.k for cell in measured}
    out = []
    for c in sorted(by_conc):
        d = replace(_decide_one(c, by_conc[c], all_ks), slo=None if slo is None else slo.text())
        here = [cell for cell in measured if cell.concurrency == c]
        if d.selected_k is not None:
            d = _with_margins(d, here)
        if bootstrap and d.selected_k is not None:
            d = replace(d, p_selected=p_selected(here, d.selected_k, slo))
        out.append(d)
    return out


def _with_margins(d: Decision, cells: Sequence[Cell]) -> Decision:
    """The decision (one that selected a k) with its margins: over the best other
    selectable cell (by median, the measured figure) and over k=0 (by score, as
    selected_vs_k0_percent)."""
    by_k = {cell.k: cell for cell in cells}
    sel = by_k[d.selected_k]  # type: ignore[index]
    healthy = selectable(d.candidates)
    others = [s for s in healthy if s.k != sel.k]
    runner = max(others, key=lambda s: (s.median, -s.k)) if others else None
    k0 = _baseline(healthy)
    return replace(
        d,
        over_runner_up=None if runner is None else margin_over(sel, by_k[runner.k], _median),
        over_k0=None if k0 is None or sel.k == 0 else margin_over(sel, by_k[0], _score),
    )


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def _score(values: Sequence[float]) -> float:
    med, mad, _ = median_and_mad(values)
    return _score_of(med, mad)


def _score_of(median: float, mad: float) -> float:
    """The sweep's score: median - 1.4826 MAD (a normal sigma), at least 0."""
    return max(median - MAD_TO_SIGMA * mad, 0.0)


def margin_over(a: Cell, b: Cell, stat: Callable[[Sequence[float]], float]) -> Margin | None:
    """stat(a's repeats) / stat(b's repeats) - 1 with its 90% interval over MARGIN_DRAWS
    bootstrap draws (each cell's repeats resampled with replacement, independently:
    different servers; seeded by the figures). No interval below MIN_REPEATS repeats on
    either side (a bootstrap of two values says nothing); None when b's figure is 0."""
    xs = tuple(r.output_token_throughput for r in a.repeats)
    ys = tuple(r.output_token_throughput for r in b.repeats)
    if stat(ys) <= 0:
        return None
    value = stat(xs) / stat(ys) - 1
    if min(len(xs), len(ys)) < MIN_REPEATS:
        return Margin(b.k, value, None, None)
    band = _ratio_interval(xs, ys, stat)
    return Margin(b.k, value, *band) if band else Margin(b.k, value, None, None)


@functools.lru_cache(maxsize=256)  # the live grid decides again on every redraw
def _ratio_interval(
    xs: tuple[float, ...], ys: tuple[float, ...], stat: Callable[[Sequence[float]], float]
) -> tuple[float, float] | None:
    rng = random.Random(repr((xs, ys)))
    ratios = []
    for _ in range(MARGIN_DRAWS):
        den = stat([rng.choice(ys) for _ in ys])
        num = stat([rng.choice(xs) for _ in xs])
        if den > 0:
            ratios.append(num / den - 1)
    return interval(ratios) if ratios else None


def decision_lines(decisions: Sequence[Decision], width: int = 98) -> list[str]:
    """The sweep's answer per load, as its table, `specmon tune` and `compare` print it:
    'decision at concurrency 4: selected k=2 (...)' per load, then the basis (once when
    every load shares it), wrapped to `width`."""
    lines = []
    for d in decisions:
        line = f"decision at concurrency {d.concurrency}: {d.head()}"
        lines += textwrap.wrap(line, width, subsequent_indent="  ", break_on_hyphens=False)
    bases = {d.basis() for d in decisions}
    said = (
        [("basis", decisions[0].basis())]
        if len(bases) == 1
        else [(f"basis at concurrency {d.concurrency}", d.basis()) for d in decisions]
    )
    for name, basis in said:
        lines += textwrap.wrap(f"{name}: {basis}", width, subsequent_indent="  ")
    return lines
