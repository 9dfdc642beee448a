"""A SweepRunner on its own thread, as a RunControl (specmon/interfaces.py), for the live
sweep view: the screen's thread only reads `runner.now` and the recorded cells and calls
`stop()`; the grid runs here (docs/architecture.md, "k sweep").

The load knobs do nothing: each cell's concurrency is the grid's, so `drives_load` is False.
"""

from __future__ import annotations

import threading

from specmon.analysis.sweep_types import Cell
from specmon.interfaces import LoadProgress
from specmon.sources.sweep import SweepResult, SweepRunner


class SweepControl:
    """Runs `runner.run()` on the `specmon-sweep` thread; `result` once it has ended."""

    def __init__(self, runner: SweepRunner) -> None:
        self.runner = runner
        self.result: SweepResult | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._main, name="specmon-sweep", daemon=True)
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

    def _main(self) -> None:
        try:
            self.result = self.runner.run()
        except BaseException as exc:  # reported by the screen and the command, never lost
            self._error = exc
        finally:
            self._done.set()

    def cells(self) -> list[Cell]:
        """The cells recorded so far (kept from a resumed sweep included), in grid order."""
        with self._lock:
            return [cell for _, cell in sorted(self._cells.items())]

    # RunControl ------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self._done.is_set()

    @property
    def stopped_early(self) -> bool:
        return self.runner.stopping.is_set()

    @property
    def error(self) -> BaseException | None:
        return self._error

    @property
    def drives_load(self) -> bool:
        return False

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.runner.stop()

    def join(self, timeout: float | None = None) -> bool:
        # on the Event, not Thread.join (docs/architecture.md, "Lifecycle")
        return self._done.wait(timeout)

    def progress(self) -> LoadProgress:
        """Cells as requests: `total` cells in the grid, `completed` recorded so far."""
        settings = self.runner.settings
        total = len(settings.grid_ks) * len(settings.concurrencies)
        cells = self.cells()
        done, errors = len(cells), sum(1 for cell in cells if cell.error)
        phase = {"idle": "starting", "done": "done"}.get(self.runner.now.phase, "profiling")
        return LoadProgress(done, done, total, 0, errors, 0.0, phase)

    def set_concurrency(self, value: int | None) -> None:
        """The grid fixes every cell's concurrency."""

    def set_request_rate(self, value: float | None, mode: str | None = None) -> None:
        """The grid fixes every cell's load."""

    def set_output_tokens(self, mean: int | None, stddev: float = 0.0) -> None:
        """The grid fixes every cell's load."""
