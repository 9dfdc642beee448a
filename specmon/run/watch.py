"""Assembling and driving `specmon watch`: a WatchRun over the servers' /metrics (no load),
headless (one line per scrape and server) or under the monitor the command hands in; the
time series goes to the artifact dir (sources/watch.py)."""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from specmon.config import RunConfig
from specmon.interfaces import MonitorConfig
from specmon.server.scrape import metrics_url
from specmon.sinks.prometheus import close_exporters, exporter_for
from specmon.sources.watch import NO_LOAD_LABEL, WatchRow, WatchRun, headless_line

# shows the watch until the user quits (tui/app.py run_watch_monitor)
WatchMonitor = Callable[[MonitorConfig, WatchRun], object]


def default_dir() -> str:
    return str(Path("artifacts") / time.strftime("watch-%Y%m%d-%H%M%S"))


def execute_watch(
    config: RunConfig,
    interval_s: float,
    duration_s: float | None,
    monitor: WatchMonitor | None,
    out: TextIO | None = None,
) -> int:
    """Watch until q, a stop signal or `duration_s`; the files are complete either way."""
    out = out or sys.stdout
    targets = {label: base for label, base in config.targets()}
    for base in targets.values():
        metrics_url(base)  # a bad URL fails here, before anything starts
    artifact_dir = config.artifact_dir or default_dir()

    def on_row(row: WatchRow) -> None:
        print(headless_line(row), file=out, flush=True)

    watch = WatchRun(
        targets, artifact_dir, interval_s, duration_s, on_row=on_row if monitor is None else None
    )
    exporter_for(config.prometheus_port, config.prometheus_host)
    try:
        if monitor is None:
            _run_headless(watch, config, out)
        else:
            _run_monitor(monitor, watch, config, artifact_dir)
    finally:
        watch.stop()
        watch.join(15)
        close_exporters()
    rows = watch.writer.rows if watch.writer is not None else 0
    print(f"time series ({rows} rows) written to {artifact_dir}", file=out, flush=True)
    return 0


def _run_headless(watch: WatchRun, config: RunConfig, out: TextIO) -> None:
    print(
        "specmon watch: " + ", ".join(f"{k}={v}" for k, v in config.targets()) + " (no load)",
        file=out,
        flush=True,
    )
    with _stopping_on(watch, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)):
        watch.start()
        while not watch.join(0.2):
            pass


def _run_monitor(
    monitor: WatchMonitor, watch: WatchRun, config: RunConfig, artifact_dir: str
) -> None:
    shown = MonitorConfig.of_run(config)
    shown.load_label = NO_LOAD_LABEL
    shown.artifact_dir = artifact_dir
    with _stopping_on(watch, (signal.SIGTERM, signal.SIGHUP)):
        watch.start()
        try:
            monitor(shown, watch)
        except KeyboardInterrupt:
            pass


@contextlib.contextmanager
def _stopping_on(watch: WatchRun, signals: tuple[signal.Signals, ...]) -> Iterator[None]:
    """Within the block, each of `signals` stops the watch; the old handlers come back."""
    handlers = {sig: signal.signal(sig, lambda *_: watch.stop()) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
