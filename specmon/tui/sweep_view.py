"""View-model of the live sweep view: the k x concurrency grid filling in, the decision row
forming, the current cell and the server's log tail. No Textual here (like tuning_view):
plain strings, testable without a terminal. Medians, MADs and decisions come from
specmon/decision/cells.py (`summarize`, `decide`: median - 1.4826 MAD of output token
throughput, unstable above relative MAD 10%, ties within 1% to the smaller k).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specmon.analysis.sweep_types import Cell
from specmon.decision.cells import decide, summarize
from specmon.decision.slo import Slo
from specmon.sources.sweep import SweepNow

PENDING = "·"
LOG_LINES = 8
TAIL_BYTES = 16384


@dataclass(frozen=True)
class GridView:
    """What the grid widget shows: headers, one row per k, the decision rows, notes."""

    headers: tuple[str, ...]  # "k", then "c=1", "c=4", ...
    rows: tuple[tuple[str, ...], ...]  # per k: "k=0", then one text per concurrency
    current: tuple[int, int] | None  # (row, column) of the cell being measured
    selected: tuple[int, ...]  # per concurrency: the row index of the selected k (-1: none)
    decision: tuple[str, ...]  # "selected k", then per concurrency
    speedup: tuple[str, ...]  # "vs k=0", then per concurrency


def cell_text(cell: Cell) -> str:
    """'1234.5 ± 6.7' (median ± MAD of output tok/s); '!' marks an unstable cell."""
    if cell.error is not None:
        return "error"
    stats = summarize(cell)
    if stats is None:
        return PENDING
    mark = " !" if stats.unstable else ""
    return f"{stats.median:.1f} ± {stats.mad:.1f}{mark}"


def grid_view(
    ks: Sequence[int],
    concurrencies: Sequence[int],
    cells: Sequence[Cell],
    now: SweepNow,
    slo: Slo | None = None,
) -> GridView:
    """The grid as far as it has been measured; decisions over the finished cells (under
    the sweep's --slo, as its table and sweep.json decide)."""
    by_key = {(c.k, c.concurrency): c for c in cells}
    rows = []
    for k in ks:
        texts = [_slot_text(by_key.get((k, c)), k, c, now) for c in concurrencies]
        rows.append((f"k={k}", *texts))
    measured = [c for c in cells if c.error is None and c.repeats]
    made = {d.concurrency: d for d in decide(measured, slo, bootstrap=False)} if measured else {}
    picks, selected, speed = [], [], []
    for c in concurrencies:
        d = made.get(c)
        k_sel = None if d is None else d.selected_k
        picks.append(PENDING if d is None else ("-" if k_sel is None else f"k={k_sel}"))
        selected.append(list(ks).index(k_sel) if k_sel is not None and k_sel in ks else -1)
        pct = None if d is None else d.selected_vs_k0_percent
        speed.append("-" if pct is None else f"{pct:+.1f}%")
    current = None
    at_k, at_c = now.k, now.concurrency
    if now.phase == "measuring" and at_k in ks and at_c in concurrencies:
        assert at_k is not None and at_c is not None
        current = (list(ks).index(at_k), list(concurrencies).index(at_c))
    return GridView(
        headers=("k", *(f"c={c}" for c in concurrencies)),
        rows=tuple(rows),
        current=current,
        selected=tuple(selected),
        decision=("selected k", *picks),
        speedup=("vs k=0", *speed),
    )


def _slot_text(cell: Cell | None, k: int, c: int, now: SweepNow) -> str:
    if now.phase == "measuring" and (now.k, now.concurrency) == (k, c):
        return f"▶ repeat {now.repeat}/{now.repeats}"
    if now.phase == "starting" and now.k == k and cell is None:
        return "starting"
    return PENDING if cell is None else cell_text(cell)


def status_line(now: SweepNow, done: int, total: int, stopping: bool = False) -> str:
    """One line: where the sweep is and how many cells are recorded."""
    count = f"{done}/{total} cells"
    if stopping and now.phase != "done":
        return f"stopping: the repeat in flight is not kept · {count}"
    if now.phase == "starting":
        return f"{now.row}: starting the server (log below) · {count}"
    if now.phase == "measuring":
        return (
            f"measuring {now.row} concurrency={now.concurrency} "
            f"repeat {now.repeat}/{now.repeats} · {count}"
        )
    if now.phase == "done":
        return f"sweep finished · {count} · q closes and prints the tables"
    return f"waiting to start · {count}"


def log_tail(path: Path | None, lines: int = LOG_LINES) -> str:
    """The last lines of the server's log ('' when there is none yet)."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as log:  # the end only: a server's log can grow large
            log.seek(max(0, log.seek(0, 2) - TAIL_BYTES))
            text = log.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
