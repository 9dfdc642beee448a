"""Which k per concurrency, from measured sweep cells, decided as vLLM's offline tuner does.

`vllm bench sweep tune_speculative_k` rules (docs/architecture.md, sweep contract):

* per cell, over its repeats: median and MAD (median absolute deviation, unscaled) of output
  token throughput; relative MAD = MAD / median; above 0.10 the cell is unstable and not
  selected (specmon's exception: its slowest repeat beats every other k's fastest); score = max(median - 1.4826 MAD, 0) (1.4826 MAD estimates a normal sigma);
* per concurrency: best_k = highest median; selected_k = the smallest k whose score is within
  1% of the top score among stable cells; selected_vs_best_percent = 100 (score_sel / top - 1)
  and selected_vs_k0_percent = 100 (score_sel / score_k0 - 1), both on scores as vLLM does
  (the k0 figure is omitted without a baseline cell at that concurrency).

Health gates (specmon/decision/gates.py) come first: a cell whose repeats failed more than
1% of their requests, ran with a saturated client, on a server behind its own step model,
or counted too few requests is excluded from selection (as vLLM's tuner rejects a run with
any failed request) and listed in `excluded` with why; it still shows in the grid, marked.

Where specmon differs (vLLM refuses these inputs): fewer than 3 repeats still decide, marked
"few repeats" (1 repeat: MAD 0, score = median); a concurrency whose cells are all unstable
selects nothing and says why; k values measured elsewhere but absent here are listed as
missing and the decision is taken among the rest.

The schedule is vLLM's `num_speculative_tokens_per_batch_size`: inclusive [start, end, K]
ranges starting at 1, sorted, contiguous; batch size is proxied by client concurrency.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specmon.analysis.sweep_types import Cell, RepeatMeasurement
from specmon.decision.gates import Health, machine_wide
from specmon.decision.slo import Slo
from specmon.decision.stepcost import KModel
from specmon.export.common import atomic_write
from specmon.formatting import grid_lines, wrap_lines

MAX_RELATIVE_MAD = 0.10
MAD_TO_SIGMA = 1.4826
TIE_TOLERANCE = 0.01
MIN_REPEATS = 3
DRAWS = 200  # bootstrap draws for P(selected)
SCHEDULE_NAME = "speculative_k_schedule.json"
BATCH_SIZE_PROXY = "client concurrency"

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
    median: float  # output token throughput, tokens/s
    mad: float
    relative_mad: float
    score: float  # max(median - 1.4826 MAD, 0)
    unstable: bool
    few_repeats: bool
    medians: dict[str, float | None] = field(default_factory=dict)  # OTHER_FIGURES
    excluded: tuple[str, ...] = ()  # health gate reasons: never selected when not empty
    requests: int = 0
    errors: int = 0
    slowest: float = 0.0  # the slowest and fastest repeat's output token throughput
    fastest: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "concurrency": self.concurrency,
            "repeats": self.repeats,
            "median_output_token_throughput": self.median,
            "mad_output_token_throughput": self.mad,
            "relative_mad": None if math.isinf(self.relative_mad) else self.relative_mad,
            "score": self.score,
            "unstable": self.unstable,
            "few_repeats": self.few_repeats,
            "medians": dict(self.medians),
            "requests": self.requests,
            "errors": self.errors,
            "excluded": list(self.excluded),
        }


def _figure_median(repeats: Sequence[RepeatMeasurement], name: str) -> float | None:
    vals = [getattr(r, name) for r in repeats]
    present = [float(v) for v in vals if v is not None]
    return float(statistics.median(present)) if present else None


def _slo_figure(repeats: Sequence[RepeatMeasurement], name: str, p: str) -> float | None:
    vals = [r.latency_percentiles.get(name, {}).get(p) for r in repeats]
    present = [float(v) for v in vals if v is not None]
    return float(statistics.median(present)) if present else None


def slo_misses(cell: Cell, slo: Slo | None) -> list[str]:
    """Why the cell misses the SLO (the median over repeats of each repeat's percentile)."""
    if slo is None:
        return []
    p = slo.percentile
    return slo.misses(
        _slo_figure(cell.repeats, "ttft_ms", p), _slo_figure(cell.repeats, "tpot_ms", p)
    )


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
        score=max(med - MAD_TO_SIGMA * mad, 0.0),
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "selected_k": self.selected_k,
            "best_k": self.best_k,
            "selected_score": self.selected_score,
            "selected_median": self.selected_median,
            "selected_vs_best_percent": self.selected_vs_best_percent,
            "selected_vs_k0_percent": self.selected_vs_k0_percent,
            "candidates": [c.to_dict() for c in self.candidates],
            "unstable_ks": list(self.unstable_ks),
            "missing_ks": list(self.missing_ks),
            "few_repeats": self.few_repeats,
            "reason": self.reason,
            "notes": list(self.notes),
            "excluded": {str(k): list(v) for k, v in sorted(self.excluded.items())},
            "p_selected": self.p_selected,
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


def _select(stable: Sequence[CellStats]) -> CellStats:
    """The smallest k whose score is within the tie tolerance of the top score."""
    top = max(s.score for s in stable)
    return min((s for s in stable if s.score >= (1 - TIE_TOLERANCE) * top), key=lambda s: s.k)


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
        stats = [s for s in selectable([d for d in drawn if d]) if not s.unstable and s.score > 0]
        wins += bool(stats) and _select(stats).k == k
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


def _dominates(cell: CellStats, cells: Sequence[CellStats]) -> bool:
    """An unstable cell whose slowest repeat beats every other cell's fastest: no noise can
    reverse that order, so it stays selectable (seen on a real vLLM with a drafter that never
    agrees: k=0 repeats 192-406 tok/s, unstable, against 76-98 at k=1, which was selected)."""
    others = [c for c in cells if c is not cell]
    return bool(others) and all(cell.slowest > c.fastest for c in others)


def _no_decision_reason(
    stats: list[CellStats], healthy: list[CellStats], stable: list[CellStats]
) -> str | None:
    """Why no k can be selected at this load, or None when one can."""
    if not stats:
        return "no measured cell"
    if not healthy and all(w.startswith("misses the SLO") for s in stats for w in s.excluded):
        return "no k meets the SLO"
    if not healthy:
        return "every cell excluded by the health gates or the SLO"
    if not stable:
        return f"every cell is unstable (relative MAD > {MAX_RELATIVE_MAD:.0%})"
    if max(s.score for s in stable) <= 0:
        return "no stable cell has a positive score"
    return None


def _decide_one(concurrency: int, stats: list[CellStats], all_ks: set[int]) -> Decision:
    stats = sorted(stats, key=lambda s: s.k)
    missing = sorted(all_ks - {s.k for s in stats})
    unstable = [s.k for s in stats if s.unstable]
    few = any(s.few_repeats for s in stats)
    excluded = {s.k: list(s.excluded) for s in stats if s.excluded}
    healthy = selectable(stats)
    notes = _decision_notes(stats, missing, excluded, [s.k for s in healthy if s.excluded])
    best = max(healthy, key=lambda s: (s.median, -s.k)) if healthy else None
    stable = [s for s in healthy if not s.unstable or _dominates(s, healthy)]
    notes += [
        f"k={s.k} is unstable but its slowest repeat beats every other k's fastest: kept"
        for s in stable
        if s.unstable
    ]
    reason = _no_decision_reason(stats, healthy, stable)
    if reason is not None:
        return Decision(
            concurrency, None, None if best is None else best.k, None, None, None, None,
            stats, unstable, missing, few, reason, notes, excluded,
        )  # fmt: skip
    top = max(s.score for s in stable)
    sel = _select(stable)
    k0 = next((s for s in healthy if s.k == 0), None)
    if k0 is not None and k0.unstable:
        notes.append("the k=0 baseline is unstable: the speedup is uncertain")
    return Decision(
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


def decide(cells: Sequence[Cell], slo: Slo | None = None, bootstrap: bool = True) -> list[Decision]:
    """One decision per concurrency that appears in cells, sorted by concurrency; with an
    SLO, among the cells that meet it. `bootstrap` False leaves P(selected) out (the live
    grid redraws too often for 200 draws per load)."""
    by_conc: dict[int, list[CellStats]] = {}
    all_ks: set[int] = set()
    for cell in cells:
        by_conc.setdefault(cell.concurrency, [])
        st = summarize(cell, slo)
        if st is not None:
            by_conc[cell.concurrency].append(st)
            all_ks.add(cell.k)
    out = []
    for c in sorted(by_conc):
        d = _decide_one(c, by_conc[c], all_ks)
        if bootstrap and d.selected_k is not None:
            here = [cell for cell in cells if cell.concurrency == c]
            d = replace(d, p_selected=p_selected(here, d.selected_k, slo))
        out.append(d)
    return out


# --- schedule -------------------------------------------------------------------------


@dataclass
class _Range:
    start: int
    end: int
    k: int
    source: str  # "measured" | "carried" | "predicted"
    measured_at: list[int]


def _point_sources(
    anchors: dict[int, int], top: int, model: KModel | None
) -> list[tuple[int, int, str]]:
    """(batch size, K, source) for 1..top: anchors measured, gaps from the model or carried.

    A gap's model K is clamped between the anchors around it and kept monotone from one to
    the next (below the first anchor: no smaller than its K, non-increasing towards it), so
    model-filled neighbours never zig-zag against the measured anchors."""
    ordered = sorted(anchors)
    out = []
    current = anchors[ordered[0]]
    for b in range(1, top + 1):
        if b in anchors:
            current = anchors[b]
            out.append((b, current, "measured"))
        elif model is not None:
            out.append((b, _gap_k(b, anchors, ordered, model, out), "predicted"))
        else:
            # below the first anchor the first K is extended down; after, the previous K carries
            out.append((b, current, "carried"))
    return out


def _gap_k(
    b: int,
    anchors: dict[int, int],
    ordered: list[int],
    model: KModel,
    so_far: list[tuple[int, int, str]],
) -> int:
    nxt = min(c for c in ordered if c > b)
    prev_k = so_far[-1][1] if so_far else None
    want = model.best_k(b)
    if prev_k is None:  # batch 1 below the first anchor: at least its K
        return max(want, anchors[nxt])
    lo, hi = sorted((prev_k, anchors[nxt]))
    return min(max(want, lo), hi)


def zigzag_notes(anchors: dict[int, int], model: KModel | None) -> list[str]:
    """A measured K that rises and falls against both neighbours is kept (it was measured)
    and said so: 'measured k=3 at batch 16 beats the model's k=2 here'."""
    ordered = sorted(anchors)
    notes = []
    for prev, here, nxt in zip(ordered, ordered[1:], ordered[2:]):
        a, k, c = anchors[prev], anchors[here], anchors[nxt]
        if (k - a) * (k - c) > 0:  # a peak or a dip
            theirs = None if model is None else model.best_k(here)
            if theirs is not None and theirs != k:
                notes.append(f"measured k={k} at batch {here} beats the model's k={theirs} here")
            else:
                notes.append(
                    f"measured k={k} at batch {here} breaks the trend of its neighbours "
                    f"(k={a} at {prev}, k={c} at {nxt}); remeasure before deploying"
                )
    return notes


def _continues(previous: str, source: str) -> bool:
    # a carried K stays part of the measured range it continues
    return previous == source or (previous == "measured" and source == "carried")


def _ranges(points: list[tuple[int, int, str]]) -> list[_Range]:
    out: list[_Range] = []
    for b, k, src in points:
        last = out[-1] if out else None
        if last is not None and last.k == k and _continues(last.source, src):
            last.end = b
            if src == "measured":
                last.measured_at.append(b)
        else:
            out.append(_Range(b, b, k, src, [b] if src == "measured" else []))
    return out


def _merged(ranges: list[_Range]) -> list[list[int]]:
    """vLLM's list: adjacent ranges with the same K merged."""
    out: list[list[int]] = []
    for r in ranges:
        if out and out[-1][2] == r.k:
            out[-1][1] = r.end
        else:
            out.append([r.start, r.end, r.k])
    return out


def build_schedule(
    decisions: Sequence[Decision], model: KModel | None = None, complete: bool = True
) -> dict[str, Any]:
    """The `speculative_k_schedule.json` document from the decisions.

    Only concurrencies where every k was measured anchor the schedule (an interrupted sweep
    leaves the rest out, and says so; `complete` False is written into the file).
    Concurrencies between (and below) the anchors take the model's best k (marked
    predicted, kept monotone between anchors) when a model is given, otherwise the previous
    measured K carries (below the first, the first K extends down to 1). The last range ends
    at the largest anchor; vLLM carries that K to any larger batch. Decisions without a
    selection are gaps. Raises ValueError (why) when no concurrency can anchor it.
    """
    partial = [d.concurrency for d in decisions if d.selected_k is not None and d.missing_ks]
    anchors = {
        d.concurrency: d.selected_k
        for d in decisions
        if d.selected_k is not None and not d.missing_ks
    }
    if not anchors:
        why = "no concurrency has every k measured" if partial else "no concurrency selected a k"
        raise ValueError(f"{why}: nothing to schedule")
    top = max(anchors)
    ranges = _ranges(_point_sources(anchors, top, model))
    merged = _merged(ranges)
    by_conc = {d.concurrency: d for d in decisions if d.selected_k is not None}
    max_k = max(r[2] for r in merged)
    fragment: dict[str, Any] | None = (
        {"num_speculative_tokens": max_k, "num_speculative_tokens_per_batch_size": merged}
        if max_k > 0
        else None
    )
    notes = _schedule_notes(anchors, top, model, fragment) + zigzag_notes(anchors, model)
    if partial:
        notes.append(
            "left out (not every k measured there): concurrency "
            + ", ".join(map(str, sorted(partial)))
        )
    if not complete:
        notes.append("the sweep was interrupted: this schedule is incomplete, measure the rest")
    return {
        "complete": complete and not partial,
        "num_speculative_tokens_per_batch_size": merged,
        "batch_size_proxy": BATCH_SIZE_PROXY,
        "max_batch_size": top,
        "ranges": [_range_entry(r) for r in ranges],
        "selected_vs_best_percent": {
            str(c): d.selected_vs_best_percent for c, d in sorted(by_conc.items())
        },
        "selected_vs_k0_percent": {
            str(c): d.selected_vs_k0_percent for c, d in sorted(by_conc.items())
        },
        "speculative_config_fragment": fragment,
        "model_basis": None if model is None else model.basis,
        "left_out_concurrencies": sorted(partial),
        "notes": notes,
    }


def _range_entry(r: _Range) -> dict[str, Any]:
    """One range of the schedule document: where its k comes from, and measured where."""
    return {
        "start": r.start,
        "end": r.end,
        "k": r.k,
        "source": r.source,
        "measured": r.source == "measured",
        "predicted": r.source == "predicted",
        "measured_at": r.measured_at,
    }


def _schedule_notes(
    anchors: dict[int, int], top: int, model: KModel | None, fragment: dict[str, Any] | None
) -> list[str]:
    notes = [
        f"batch size is proxied by client concurrency; the last range ends at {top}, the "
        "largest measured concurrency, and vLLM keeps its K for larger batches"
    ]
    if model is None and min(anchors) > 1:
        notes.append(f"batch sizes below {min(anchors)} take the K measured at {min(anchors)}")
    if model is not None:
        notes.append(f"unmeasured batch sizes predicted by the model ({model.basis})")
    if fragment is None:
        notes.append("k=0 everywhere: run without --speculative-config")
    else:
        notes.append("merge speculative_config_fragment into your --speculative-config JSON")
    return notes


def validate_schedule(entries: Any) -> None:
    """Raise ValueError unless entries are vLLM-valid [start, end, K] ranges from 1, contiguous."""
    if not isinstance(entries, list) or not entries:
        raise ValueError("schedule must be a non-empty list of [start, end, K]")
    expected = 1
    for e in entries:
        if not (isinstance(e, list) and len(e) == 3 and all(type(v) is int for v in e)):
            raise ValueError(f"bad entry {e!r}: expected [start, end, K] integers")
        start, end, k = e
        if start != expected or end < start or k < 0:
            raise ValueError(f"bad entry {e!r}: ranges must start at {expected}, end >= start")
        expected = end + 1


def write_schedule(path: str | Path, schedule: dict[str, Any]) -> Path:
    """Write the schedule document atomically (a reader never sees half a file)."""
    validate_schedule(schedule["num_speculative_tokens_per_batch_size"])
    text = json.dumps(schedule, indent=2, allow_nan=False) + "\n"
    return atomic_write(path, text.encode("utf-8"))


# --- console --------------------------------------------------------------------------
# Whole at any width (issue 20 item 3): the grids' columns are as wide as their cells and
# split into blocks of concurrencies that fit the terminal; legends and notes wrap at
# spaces. No number is cut.

DEFAULT_WIDTH = 120  # piped output (a log, a file): as wide as before


def _num(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}"


def _cell_text(st: CellStats | None, selected: bool) -> str:
    if st is None:
        return "-"
    mark = (
        ("*" if selected else "")
        + ("x" if st.excluded else "")
        + ("!" if st.unstable else "")
        + ("?" if st.few_repeats else "")
    )
    return f"{_num(st.median)}±{_num(st.mad)}{mark}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.1f}%"


def _share(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _grid(cells: Sequence[Cell], decisions: Sequence[Decision], width: int) -> list[str]:
    concs = [d.concurrency for d in decisions]
    stats = {(s.k, s.concurrency): s for d in decisions for s in d.candidates}
    ks = sorted({c.k for c in cells})
    sel = {d.concurrency: d.selected_k for d in decisions}
    rows = [(f"k={k}", [_cell_text(stats.get((k, c)), sel[c] == k) for c in concs]) for k in ks]
    rows += [
        ("selected", ["-" if d.selected_k is None else str(d.selected_k) for d in decisions]),
        ("best med.", ["-" if d.best_k is None else str(d.best_k) for d in decisions]),
        ("P(sel.)", [_share(d.p_selected) for d in decisions]),
        ("vs k=0", [_pct(d.selected_vs_k0_percent) for d in decisions]),
        ("vs best", [_pct(d.selected_vs_best_percent) for d in decisions]),
    ]
    lines = ["output token throughput, tokens/s: median ± MAD over repeats, by k and concurrency"]
    lines += grid_lines("k \\ conc", [str(c) for c in concs], rows, width)
    lines.append(
        f"* selected (score = median - {MAD_TO_SIGMA}·MAD, ties within {TIE_TOLERANCE:.0%} to "
        "the smaller k)"
    )
    lines.append(
        f"! unstable (MAD > {MAX_RELATIVE_MAD:.0%} of median, never selected)  "
        f"? fewer than {MIN_REPEATS} repeats"
    )
    lines.append(f"P(sel.): share of {DRAWS} bootstrap draws over the repeats selecting the same k")
    lines.append("x excluded by a health gate (errors > 1%, saturated client, lagging server, ...)")
    lines.append("vs k=0 / vs best: score of the selected k against the baseline / top score")
    for d in decisions:
        if d.reason:
            lines.append(f"concurrency {d.concurrency}: nothing selected, {d.reason}")
        lines += [f"concurrency {d.concurrency}: {n}" for n in d.notes if n.startswith("k=")]
        lines += [f"concurrency {d.concurrency}: {n}" for n in d.notes if n.startswith("every")]
    return lines


def _schedule_lines(schedule: dict[str, Any] | None) -> list[str]:
    if schedule is None:
        return ["schedule: none (no concurrency with every k measured selected a k)"]
    entries = json.dumps(schedule["num_speculative_tokens_per_batch_size"])
    lines = ["schedule (num_speculative_tokens_per_batch_size, batch size = client concurrency):"]
    lines.append(f"  {entries}")  # wrapped at its spaces with the rest (wrap_lines)
    for r in schedule["ranges"]:
        at = f" (measured at {', '.join(map(str, r['measured_at']))})" if r["measured_at"] else ""
        lines.append(f"  {r['start']}-{r['end']}: k={r['k']} {r['source']}{at}")
    if not schedule.get("complete", True):
        lines.append('  INCOMPLETE ("complete": false in the schedule file)')
    said = ("measured k=", "left out", "the sweep was interrupted")
    lines += [f"  note: {n}" for n in schedule["notes"] if n.startswith(said)]
    return lines


def _model_lines(
    model: KModel | None, concs: Sequence[int], ks: Sequence[int], width: int
) -> list[str]:
    if model is None:
        return ["model: not fitted (needs 3+ timed cells at 2+ k)"]
    lines = [f"model: step time {model.to_dict()['formula']}", f"  basis: {model.basis}"]
    lines.append("leave-one-out error (refit without the cell, predict it):")
    rows = []
    for k in ks:
        errors = [model.loo_errors.get((k, c)) for c in concs]
        rows.append((f"k={k}", ["-" if e is None else f"{e * 100:+.1f}%" for e in errors]))
    return lines + grid_lines("k \\ conc", [str(c) for c in concs], rows, width)


def render_sweep_tables(
    cells: Sequence[Cell],
    decisions: Sequence[Decision],
    schedule: dict[str, Any] | None,
    model: KModel | None,
    width: int = DEFAULT_WIDTH,
) -> str:
    """The console summary of a sweep: throughput grid, decisions, schedule, model error;
    every line at most `width` columns (a word longer than that keeps its own line)."""
    concs = [d.concurrency for d in decisions]
    ks = sorted({c.k for c in cells})
    lines = _grid(cells, decisions, width) + [""] + _schedule_lines(schedule) + [""]
    lines += _model_lines(model, concs, ks, width)
    return "\n".join(wrap_lines(lines, width)) + "\n"
