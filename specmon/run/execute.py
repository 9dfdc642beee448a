"""Driving an assembled `specmon run` / `demo`: headless or under the monitor the command
hands in, then the exports (never interrupted by a signal) and the exit status.

The monitor is a callable, so this room imports no screen: `commands/run.py` loads the
Textual one (`tui/app.py run_monitor`) and passes it, or None to run headless.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from specmon import stops, terminal
from specmon.config import RunConfig
from specmon.decision.gates import MAX_ERROR_RATE
from specmon.errors import ServerUnreachable, UserError
from specmon.run.assemble import assemble, empty_run, exports_line
from specmon.run.headless import HeadlessProgress, describe_run, print_results, wait_printing
from specmon.run.multi import MultiRun
from specmon.session import RunSession
from specmon.sinks.prometheus import close_exporters

# shows the run until the user quits (tui/app.py run_monitor); the load runs meanwhile
Monitor = Callable[[RunConfig, MultiRun, RunSession], object]
# how long a stop may wait for the screen to close before the run ends without it
SCREEN_GRACE_S = 10.0
# called once the inputs passed: the monitor to run under, None to run headless
OpenMonitor = Callable[[RunConfig, TextIO], Monitor | None]


def execute(
    config: RunConfig,
    open_monitor: OpenMonitor,
    out: TextIO,
    save_config_path: str | None = None,
) -> int:
    """Check every input, preflight, then one session + runner per server, headless or under
    the monitor; the exports and the exit status (docs/stopping.md)."""
    try:
        multi = assemble(config, out, save_config_path)
    except stops.Stopped as stop:
        return empty_run(config, stop.signum, out)
    try:
        monitor = open_monitor(config, out)
        if monitor is not None:
            return run_with_monitor(monitor, config, multi, out)
        return run_headless(config, multi, out)
    finally:
        close_exporters()


def run_with_monitor(monitor: Monitor, config: RunConfig, multi: MultiRun, out: TextIO) -> int:
    """The monitor gets the MultiRun as its runner (same interface; `.servers` for side by
    side) and the first server's session. q, Ctrl-C (a key in the TUI), SIGTERM, SIGHUP and
    SIGINT quit the screen (the app registers with specmon.stops); the load drains, then
    the exports."""
    stops.stage("load")
    started = stops.requested() is None
    if started:
        multi.start()
    closed = threading.Event()
    _rescue_a_stuck_screen(multi, config, out, closed)
    try:
        if started:
            monitor(config, multi, multi.primary.session)
    finally:
        closed.set()
        multi.stop()
        if started:
            _drain(multi, out)
        _write_exports(multi, config, out)
    print(
        exports_line(config.artifact_dir, [run.session for run in multi.runs]), file=out, flush=True
    )
    print_results(multi, out)  # the headless run's console tables, once the screen is gone
    return stops.exit_status(_exit_status(multi, out, config.fail_on_errors))


def _rescue_a_stuck_screen(
    multi: MultiRun, config: RunConfig, out: TextIO, closed: threading.Event
) -> None:
    """A stop must reach the exports whatever the screen is doing. After `tmux
    kill-session` as the monitor starts, Textual was seen laying out for ever for a
    terminal that has no size: its timers never ran, the run never ended. This thread,
    outside Textual, notices a terminal gone (its descriptors no longer a tty: a stop as
    SIGHUP); when the screen has not closed SCREEN_GRACE_S later, it drains the load,
    writes the exports and ends the process with the run's exit status. A screen on a live
    terminal is never cut short (a busy machine may take seconds to close it)."""
    fds = terminal.tty_fds()

    def watch() -> None:
        since: float | None = None
        while not closed.wait(0.25):
            gone = terminal.hung_up(fds)
            if gone:
                stops.hangup()
            if not (gone and stops.pending_stop()):  # a live screen closes on its own
                since = None
                continue
            since = since if since is not None else time.monotonic()
            if time.monotonic() - since >= SCREEN_GRACE_S and not closed.is_set():
                multi.stop()
                _drain(multi, out)
                _write_exports(multi, config, out)
                line = exports_line(config.artifact_dir, [r.session for r in multi.runs])
                print(line, file=out, flush=True)
                stops.exit_now(stops.exit_status(0))

    threading.Thread(target=watch, name="specmon-screen-rescue", daemon=True).start()


def run_headless(config: RunConfig, multi: MultiRun, out: TextIO) -> int:
    print(describe_run(config), file=out, flush=True)
    printer = HeadlessProgress(multi)
    stops.stage("load")
    if stops.requested() is None:  # a signal while the sessions were built: nothing to run
        multi.start()
        wait_printing(multi, config.drain_timeout, out, printer)
    print(printer.line(), file=out, flush=True)
    _write_exports(multi, config, out)
    print_results(multi, out)
    print(
        exports_line(config.artifact_dir, [run.session for run in multi.runs]), file=out, flush=True
    )
    if stops.failure() is not None:  # disk full: the files hold what was written
        print(f"specmon: error: {stops.failure()}", file=sys.stderr, flush=True)
    return stops.exit_status(_exit_status(multi, out, config.fail_on_errors))


def _drain(multi: MultiRun, out: TextIO) -> None:
    """Wait for the load to end after a stop: in-flight requests get --drain-timeout."""
    in_flight = multi.progress().in_flight
    if in_flight and not multi.finished:
        print(
            f"specmon: waiting up to {multi.config.drain_timeout:g} s for {in_flight} "
            f"in-flight request(s)",
            file=out,
            flush=True,
        )
    while not multi.join(0.2):
        pass


def _write_exports(multi: MultiRun, config: RunConfig, out: TextIO) -> None:
    """The exports, never interrupted by a signal (specmon/stops.py, stage "export")."""
    stops.stage("export")
    print(f"specmon: writing exports to {config.artifact_dir}", file=out, flush=True)
    multi.finish()


def _exit_status(multi: MultiRun, out: TextIO, fail_on_errors: bool = False) -> int:
    error = multi.error
    if error is not None and not isinstance(error, KeyboardInterrupt):
        if isinstance(error, UserError):
            raise error
        if isinstance(error, ServerUnreachable):  # --max-outage: the exports are complete
            print(f"specmon: {error}", file=sys.stderr, flush=True)
            return 1
        print(f"specmon: error: the load loop failed: {type(error).__name__}: {error}", file=out)
        return 1
    return _all_failed_status(multi, out, fail_on_errors)


def _all_failed_status(multi: MultiRun, out: TextIO, fail_on_errors: bool = False) -> int:
    """1 when requests were made and none succeeded, or with --fail-on-errors when more than
    MAX_ERROR_RATE of them failed (the health gate that excludes the run's measurements;
    docs/stopping.md), else 0."""
    accs = [run.session.accumulator for run in multi.runs]
    valid = sum(acc.request_count for acc in accs)
    errors = sum(acc.error_count for acc in accs)
    if valid == 0 and errors > 0:
        print(f"specmon: error: every request failed ({errors} errors)", file=out)
        return 1
    if fail_on_errors and errors / (valid + errors) > MAX_ERROR_RATE:
        share = 100 * errors / (valid + errors)
        print(
            f"specmon: error: {errors} of {valid + errors} requests failed ({share:.1f}% > "
            f"{MAX_ERROR_RATE:.0%}): measurements excluded, exit 1 (--fail-on-errors)",
            file=out,
        )
        return 1
    return 0
