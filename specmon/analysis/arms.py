"""Arms beside the fixed k: each arm (the "schedule" the sweep wrote, a --variant server) per
concurrency against the best fixed k and against k=0 measured at the same concurrency.

Pure: cells in, reports and text out. An arm is never "the best k" (it is not a k): it is
reported beside the decisions. The best fixed k at a concurrency is the decision's
(specmon/decision/cells.py `best_median`: the highest median output token throughput among
the cells that decision chose among, k=0 included: those that pass the health gates and
the SLO, or, when none does, those flagged only for machine-wide reasons); medians, not
scores, so the arm's median is compared like for like. Against a k=0 cell the decision
could not choose there is no "vs k=0" (as in the grid), and the point's flags say why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specmon.analysis.sweep import DEFAULT_WIDTH
from specmon.decision.cells import best_median, selectable, summarize
from specmon.decision.slo import Slo
from specmon.decision.sweep_types import Cell
from specmon.formatting import grid_lines, wrap_lines
from specmon.records import json_record, stored_as


@dataclass(frozen=True)
class ArmPoint:
    """One arm at one concurrency."""

    concurrency: int
    output_token_throughput: float | None  # median over repeats, tok/s; None: not measured
    best_k: int | None  # the best fixed k here (None: no healthy fixed-k cell)
    best_k_throughput: float | None = field(metadata=stored_as("best_k_output_token_throughput"))
    # (arm / best fixed k - 1) * 100
    vs_best_percent: float | None = field(metadata=stored_as("vs_best_k_percent"))
    vs_k0_percent: float | None  # (arm / k=0 - 1) * 100; None without a k=0 cell
    flags: tuple[str, ...] = ()  # health gates, instability, the cell's error

    def to_dict(self) -> dict[str, Any]:
        return json_record(self)


@dataclass(frozen=True)
class ArmReport:
    name: str
    points: tuple[ArmPoint, ...]

    def to_dict(self) -> dict[str, Any]:
        return json_record(self)

    def summary(self) -> str:
        """'schedule: vs the best fixed k -0.9% at 1, +2.0% at 4; vs k=0 +41.0% at 1, ...'"""
        return (
            f"{self.name}: "
            + _series([(p.concurrency, p.vs_best_percent) for p in self.points], "the best fixed k")
            + "; "
            + _series([(p.concurrency, p.vs_k0_percent) for p in self.points], "k=0")
        )


def _series(values: list[tuple[int, float | None]], against: str) -> str:
    known = [f"{v:+.1f}% at {c}" for c, v in values if v is not None]
    return f"vs {against} " + (", ".join(known) if known else "not comparable")


def _percent(value: float | None, ref: float | None) -> float | None:
    if value is None or ref is None or ref <= 0:
        return None
    return (value / ref - 1.0) * 100.0


def _point(arm: Cell | None, c: int, cells: Sequence[Cell], slo: Slo | None) -> ArmPoint:
    fixed = [st for x in cells if x.concurrency == c and x.measured and (st := summarize(x, slo))]
    usable = selectable(fixed)  # the cells the decision at c chose among
    top = best_median(fixed)
    best_k, best = (None, None) if top is None else (top.k, top.median)
    k0_stats = next((s for s in fixed if s.k == 0), None)
    stats = summarize(arm, slo) if arm is not None and arm.error is None else None
    flags: list[str] = []
    if arm is None:
        flags.append("not measured")
    elif arm.error:
        flags.append(arm.error.splitlines()[0])
    if stats is not None:
        flags += list(stats.excluded) + (["unstable"] if stats.unstable else [])
    if k0_stats is not None and k0_stats not in usable:  # as the grid: no speedup over it
        flags.append("k=0 excluded: " + "; ".join(k0_stats.excluded))
        k0_stats = None
    if top is None:
        flags.append("no fixed-k cell here passes the gates: no best fixed k")
    elif top.excluded:  # every cell failed a machine-wide gate: the decision's fallback too
        reasons = sorted({why for s in usable for why in s.excluded})
        flags.append("every fixed-k cell here flagged, compared anyway: " + "; ".join(reasons))
    median = stats.median if stats is not None else None
    return ArmPoint(
        concurrency=c,
        output_token_throughput=median,
        best_k=best_k,
        best_k_throughput=best,
        vs_best_percent=_percent(median, best),
        vs_k0_percent=_percent(median, k0_stats.median if k0_stats else None),
        flags=tuple(flags),
    )


def arm_reports(
    arms: Mapping[str, Sequence[Cell]], cells: Sequence[Cell], slo: Slo | None = None
) -> list[ArmReport]:
    """Each arm at every concurrency of the fixed-k grid (and any it measured beyond)."""
    concs = sorted(
        {c.concurrency for c in cells} | {c.concurrency for a in arms.values() for c in a}
    )
    out = []
    for name, arm_cells in arms.items():
        by_c = {cell.concurrency: cell for cell in arm_cells}
        out.append(ArmReport(name, tuple(_point(by_c.get(c), c, cells, slo) for c in concs)))
    return out


def render_arms(reports: Sequence[ArmReport], width: int = DEFAULT_WIDTH) -> list[str]:
    """The arms table: per arm, median tok/s, vs the best fixed k and vs k=0 per load; at
    most `width` columns (formatting.grid_lines: concurrencies in blocks that fit)."""
    if not reports:
        return []
    concs = [p.concurrency for p in reports[0].points]
    rows: list[tuple[str, list[str]]] = []
    for report in reports:
        pts = report.points
        rows.append((report.name, [_num(p.output_token_throughput) for p in pts]))
        rows.append(("  vs best k", [_vs(p.vs_best_percent, p.best_k) for p in pts]))
        rows.append(("  vs k=0", [_vs(p.vs_k0_percent) for p in pts]))
    lines = ["arms (median output tok/s; vs the best fixed k and vs k=0 at the same load):"]
    lines += grid_lines("arm \\ conc", [str(c) for c in concs], rows, width)
    for report in reports:
        for p in report.points:
            if p.flags:
                lines.append(f"  {report.name} at {p.concurrency}: " + "; ".join(p.flags))
    lines += [r.summary() for r in reports]
    lines.append("an arm is not a k: it never becomes the selected or the best k")
    return wrap_lines(lines, width)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _vs(percent: float | None, k: int | None = None) -> str:
    if percent is None:
        return "-"
    return f"{percent:+.1f}%" + ("" if k is None else f" (k={k})")
