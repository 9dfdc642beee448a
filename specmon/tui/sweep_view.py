"""View-model of the live sweep view: the k x concurrency grid filling in, the decision row
forming, the arm rows (the schedule the sweep wrote, each --variant: median ± MAD and how
they compare with the best fixed k, analysis/arms.py) filling in after the grid, the
current cell and the server's log tail. No Textual here (like tuning_view):
plain strings, testable without a terminal. Medians, MADs and decisions come from
specmon/decision/cells.py (`summarize`, `decide`: median - 1.4826 MAD of output token
throughput, unstable above relative MAD 10%, ties within 1% to the smaller k).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from specmon.analysis.arms import arm_reports
from specmon.decision.cells import decide, summarize
from specmon.decision.margin import Margin
from specmon.decision.slo import Slo
from specmon.decision.sweep_types import Cell
from specmon.run.sweep.measure import SweepNow

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
    speedup: tuple[str, ...]  # "vs k=0", then per concurrency (with its 90% interval)
    margin: tuple[str, ...] = ()  # "over runner-up", then per concurrency (the same)
    # per arm two rows: ("arm NAME", median ± MAD per concurrency) and ("  vs best k",
    # "+1.2% (k=3)" per concurrency); empty for a sweep without arms
    arm_rows: tuple[tuple[str, ...], ...] = ()
    current_arm: tuple[int, int] | None = None  # (row in arm_rows, column) being measured


def cell_text(cell: Cell, compact: bool = False) -> str:
    """'1234.5 ± 6.7' (median ± MAD of output tok/s); '!' marks an unstable cell.
    compact (a narrow terminal): no decimals from 100 up, '1235 ± 6.7'."""
    if cell.error is not None:
        return "error"
    stats = summarize(cell)
    if stats is None:
        return PENDING
    mark = " !" if stats.unstable else ""
    return f"{_fig(stats.median, compact)} ± {_fig(stats.mad, compact)}{mark}"


def _margin_text(m: Margin) -> str:
    """'+6.3% [+2..+10]': the point to a tenth, its 90% interval to whole percent (a
    column's width)."""
    band = "" if m.low is None or m.high is None else f" [{100 * m.low:+.0f}..{100 * m.high:+.0f}]"
    return f"{100 * m.value:+.1f}%{band}"


def _fig(value: float, compact: bool) -> str:
    return f"{value:.0f}" if compact and abs(value) >= 100 else f"{value:.1f}"


@dataclass(frozen=True)
class Arms:
    """The arms of a sweep for the live view: their names in the order they run, and the
    cells each has recorded so far (SweepControl.arm_cells)."""

    names: tuple[str, ...] = ()
    cells: Mapping[str, Sequence[Cell]] | None = None


def grid_view(
    ks: Sequence[int],
    concurrencies: Sequence[int],
    cells: Sequence[Cell],
    now: SweepNow,
    slo: Slo | None = None,
    arms: Arms | None = None,
    compact: bool = False,
) -> GridView:
    """The grid as far as it has been measured; decisions over the finished cells (under
    the sweep's --slo, as its table and sweep.json decide); the arm rows as far as they
    have been measured, against the finished fixed-k cells."""
    by_key = {(c.k, c.concurrency): c for c in cells}
    rows = []
    for k in ks:
        texts = [_slot_text(by_key.get((k, c)), now, compact, k=k, c=c) for c in concurrencies]
        rows.append((f"k={k}", *texts))
    measured = [c for c in cells if c.measured]
    made = {d.concurrency: d for d in decide(measured, slo, bootstrap=False)}
    picks, selected, speed, margin = [], [], [], []
    for c in concurrencies:
        d = made.get(c)
        k_sel = None if d is None else d.selected_k
        picks.append(PENDING if d is None else ("-" if k_sel is None else f"k={k_sel}"))
        selected.append(list(ks).index(k_sel) if k_sel is not None and k_sel in ks else -1)
        pct = None if d is None else d.selected_vs_k0_percent
        over_k0 = None if d is None or not k_sel else d.over_k0
        speed.append(_margin_text(over_k0) if over_k0 else "-" if pct is None else f"{pct:+.1f}%")
        over = None if d is None else d.over_runner_up
        margin.append("-" if over is None else _margin_text(over))
    current = None
    at_k, at_c = now.k, now.concurrency
    if now.phase == "measuring" and now.arm is None and at_k in ks and at_c in concurrencies:
        assert at_k is not None and at_c is not None
        current = (list(ks).index(at_k), list(concurrencies).index(at_c))
    arm_rows, current_arm = _arm_rows(arms or Arms(), concurrencies, measured, now, compact, slo)
    return GridView(
        headers=("k", *(f"c={c}" for c in concurrencies)),
        rows=tuple(rows),
        current=current,
        selected=tuple(selected),
        decision=("selected k", *picks),
        speedup=("vs k=0", *speed),
        margin=("over runner-up", *margin),
        arm_rows=arm_rows,
        current_arm=current_arm,
    )


def _arm_rows(
    arms: Arms,
    concs: Sequence[int],
    fixed: Sequence[Cell],
    now: SweepNow,
    compact: bool,
    slo: Slo | None,
) -> tuple[tuple[tuple[str, ...], ...], tuple[int, int] | None]:
    """Two rows per arm (its median ± MAD, then vs the best fixed k measured there)."""
    recorded = dict(arms.cells or {})
    measured = {n: [c for c in cs if c.measured] for n, cs in recorded.items()}
    done = {n: cs for n, cs in measured.items() if cs}
    reports = {r.name: r for r in arm_reports(done, fixed, slo)}
    rows: list[tuple[str, ...]] = []
    current = None
    for i, name in enumerate(arms.names):
        by_c = {cell.concurrency: cell for cell in recorded.get(name, ())}
        texts = [_slot_text(by_c.get(c), now, compact, arm=name, c=c) for c in concs]
        points = {p.concurrency: p for p in reports[name].points} if name in reports else {}
        vs = []
        for c in concs:
            p = points.get(c)
            if p is None or p.output_token_throughput is None:
                vs.append(PENDING)  # not measured yet
            elif p.vs_best_percent is None:
                vs.append("-")  # no healthy fixed-k cell here to compare with
            else:
                vs.append(f"{p.vs_best_percent:+.1f}% (k={p.best_k})")
        rows += [(f"arm {name}", *texts), ("  vs best k", *vs)]
        at = now.concurrency
        if now.phase == "measuring" and now.arm == name and at is not None and at in concs:
            current = (2 * i, list(concs).index(at))
    return tuple(rows), current


def _slot_text(
    cell: Cell | None,
    now: SweepNow,
    compact: bool,
    *,
    c: int,
    k: int | None = None,
    arm: str | None = None,
) -> str:
    """A grid slot: the repeat being measured, 'starting' while its server starts, the
    finished cell's median ± MAD, or pending."""
    mine = now.arm == arm and (arm is not None or now.k == k)
    if now.phase == "measuring" and mine and now.concurrency == c:
        return f"▶ repeat {now.repeat}/{now.repeats}"
    if now.phase == "starting" and mine and cell is None:
        return "starting"
    return PENDING if cell is None else cell_text(cell, compact)


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
