"""A sweep's console tables (the throughput grid, the decisions, the schedule, the model's
error), from the decisions of specmon/decision/cells.py and the schedule of
specmon/decision/schedule.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from specmon.decision.cells import (
    DRAWS,
    MAD_TO_SIGMA,
    MAX_RELATIVE_MAD,
    MIN_REPEATS,
    TIE_TOLERANCE,
    CellStats,
    Decision,
    decision_lines,
    trust_lines,
)
from specmon.decision.stepcost import KModel
from specmon.decision.sweep_types import Cell
from specmon.formatting import grid_lines, wrap_lines

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
    lines += decision_lines(decisions)
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
    if "trust" in schedule:  # a schedule written before the verdict existed has none
        lines += [f"  {line}" for line in trust_lines(schedule)]
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
