"""A SweepRunner on its own thread, as a RunLifecycle (specmon/interfaces.py), for the live
sweep view: the screen's thread only reads `runner.now` and the recorded cells and calls
`stop()`; the grid runs here (docs/architecture.md, "k sweep").

It has no load knobs (interfaces.LoadKnobs): each cell's concurrency is the grid's.
"""

from __future__ import annotations

import threading

from specmon.decision.sweep_types import Cell
from specmon.interfaces import LoadProgress
from specmon.run.sweep.runner import SweepResult, SweepRunner
from specmon.sources.lifecycle import BackgroundRun


class SweepControl(BackgroundRun):
    """Runs `runner.run()` on the `specmon-sweep` thread; `result` once it has ended."""

    thread_name = "specmon-sweep"

    def __init__(self, runner: SweepRunner) -> None:
        super().__init__()
        self.runner = runner
        self.result: SweepResult | None = None
        # cells as the runner records them (its on_cell hook, chained), resumed ones first
        self._lock = threading.Lock()
        self._cells = {(c.k, c.concurrency): c for c in runner.ordered_cells()}
        previous = runner.on_cell

        def on_cell(cell: Cell) -> None:
            with self._lock:
                self._cells[(cell.k, cell.concurrency)] = cell
            if previous is not None:
                previous(cell)

        runner.on_cell = on_cell
        self._arm_cells: dict[tuple[str, int], Cell] = {}

        def on_arm_cell(name: str, cell: Cell) -> None:
            with self._lock:
                self._arm_cells[(name, cell.concurrency)] = cell

        runner.on_arm_cell = on_arm_cell

    def _main(self) -> None:
        self.result = self.runner.run()  # what it raises: `error`, for the screen and command

    def _request_stop(self) -> None:
        self.runner.stop()

    def cells(self) -> list[Cell]:
        """The cells recorded so far (kept from a resumed sweep included), in grid order."""
        with self._lock:
            return [cell for _, cell in sorted(self._cells.items())]

    def arm_cells(self) -> dict[str, list[Cell]]:
        """Each arm's cells recorded so far (arm name -> cells by concurrency), for the
        live arm rows; the arms not measured yet are absent."""
        with self._lock:
            items = sorted(self._arm_cells.items())
        out: dict[str, list[Cell]] = {}
        for (name, _), cell in items:
            out.setdefault(name, []).append(cell)
        return out

    # RunLifecycle (the rest is BackgroundRun's) -------------------------------------------
    @property
    def stopped_early(self) -> bool:
        return self.runner.stopping.is_set()  # also a stop signal that reached the runner

    def progress(self) -> LoadProgress:
        """Cells as requests: `total` cells in the grid, `completed` recorded so far."""
        settings = self.runner.settings
        total = len(settings.grid_ks) * len(settings.concurrencies)
        cells = self.cells()
        done, errors = len(cells), sum(1 for cell in cells if cell.error)
        phase = {"idle": "starting", "done": "done"}.get(self.runner.now.phase, "profiling")
        return LoadProgress(done, done, total, 0, errors, 0.0, phase)
