"""Assembling and driving a k sweep (`specmon sweep`, `specmon demo --sweep`): the
SweepRunner with each repeat's session and runner (the same as `specmon run`'s), headless
or under the live sweep view the command hands in; then the decisions, the tables and
sweep.json (docs/architecture.md, "k sweep")."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TextIO

from specmon import stops
from specmon.config import RunConfig
from specmon.decision.sweep_types import SWEEP_JSON
from specmon.run.assemble import make_repeat
from specmon.run.sweep.control import SweepControl
from specmon.run.sweep.runner import SweepResult, SweepRunner
from specmon.run.sweep.settings import Placement, SweepSettings
from specmon.sinks.prometheus import close_exporters, exporter_for

PROGRESS_LOG = "sweep-progress.log"  # the live view's copy of the headless lines


class SweepScreen(Protocol):
    """The live sweep view (tui/sweep_app.py), handed in by the command."""

    def show(self, control: SweepControl, theme: str | None) -> None:
        """Until the user quits (q stops the sweep; a finished one stays until q)."""

    def detach(self) -> None:
        """The terminal hung up: let the screen close without it."""


def execute_sweep(
    settings: SweepSettings,
    config: RunConfig,
    artifact_dir: str,
    *,
    screen: SweepScreen | None = None,
    previous_cells: list[dict[str, object]] | None = None,
    out: TextIO | None = None,
    placement: Placement | None = None,
) -> int:
    """Run the sweep, headless or under `screen`; Ctrl-C / SIGTERM / q stop it and keep every
    finished cell. `previous_cells`: an earlier sweep.json's cells (--resume). Exit 1 when a
    cell failed, 128 + the signal after a stop."""
    out = out or sys.stdout
    runner = SweepRunner(
        settings,
        config,
        artifact_dir,
        make_repeat=make_repeat,
        out=_progress_log(artifact_dir) if screen is not None else out,
        previous=previous_cells,
        placement=placement,  # --executor ray connects (or starts Ray) here, before the screen
    )
    on_stop = _stop_handler(runner, screen, out)
    # up before the first server is ready; every repeat's session feeds it (make_session)
    exporter_for(config.prometheus_port, config.prometheus_host)
    stops.stage("load")  # a signal from here on stops the sweep; the finished cells stay
    stops.on_stop(on_stop)
    stops.on_abandon(runner.abandon)  # a third signal: no server is left behind
    try:
        result = run_live(runner, screen, config.theme) if screen is not None else runner.run()
    finally:
        stops.remove_callback(on_stop)
        close_exporters()
    stops.stage("export")  # the decisions and sweep.json: a second signal never cuts them
    runner.out = out  # the screen has closed: the rest goes to the terminal
    result = runner.conclude(result)
    tables = runner.tables(result) if result.cells else None
    if tables:
        print("\n" + tables, file=out)
    print(f"sweep written to {Path(artifact_dir) / SWEEP_JSON}", file=out, flush=True)
    if result.stopped:  # q, or 128 + the signal that stopped it (README, "Exit status")
        return stops.exit_status(128 + signal.SIGINT)
    return 1 if any(cell.error for cell in result.cells) else 0


def _stop_handler(
    runner: SweepRunner, screen: SweepScreen | None, out: TextIO
) -> Callable[[int], None]:
    def on_stop(signum: int) -> None:
        """From the process-wide stop handler (specmon/stops.py): flags and prints only."""
        if screen is not None and signum == signal.SIGHUP:  # the terminal is gone
            screen.detach()
        if not runner.stopping.is_set():
            name = (  # 0: no signal, a failed write (specmon/stops.py fail)
                "Ctrl-C"
                if signum == signal.SIGINT
                else signal.Signals(signum).name
                if signum
                else str(stops.failure())
            )
            print(
                f"specmon sweep: stopping ({name}): finished cells are kept", file=out, flush=True
            )
        runner.stop()

    return on_stop


def _progress_log(artifact_dir: str) -> TextIO:
    """Where the runner's progress lines go while the screen is up (not over it)."""
    Path(artifact_dir).mkdir(parents=True, exist_ok=True)
    return open(Path(artifact_dir) / PROGRESS_LOG, "a", encoding="utf-8")


def run_live(runner: SweepRunner, screen: SweepScreen, theme: str | None = None) -> SweepResult:
    """The sweep on its thread under the live view; returns its SweepResult once the user
    has quit (q stops it; a finished sweep stays on screen until q)."""
    control = SweepControl(runner)
    control.start()
    try:
        screen.show(control, theme)
    finally:
        control.stop()
        control.join()
        log = runner.out
        if log is not sys.stdout and hasattr(log, "close"):
            log.close()
    if control.error is not None:
        raise control.error
    return control.result or SweepResult(runner.ordered_cells(), True, arms=runner.arms())
