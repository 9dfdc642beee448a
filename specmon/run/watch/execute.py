"""Assembling and driving `specmon watch`: a WatchRun over the servers' /metrics (no load),
headless (one line per scrape and server) or under the monitor the command hands in; the
time series goes to the artifact dir (run/watch/runner.py)."""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from specmon.analysis.alerts import AlertRule, AlertTracker
from specmon.config import RunConfig
from specmon.interfaces import MonitorConfig
from specmon.run.watch.fleet import FLEET, FleetWatchRun
from specmon.run.watch.runner import NO_LOAD_LABEL, WatchRow, WatchRun, headless_line
from specmon.server.promql import FleetQuery
from specmon.server.scrape import metrics_url
from specmon.sinks.prometheus import PrometheusExporter, close_exporters, exporter_for

# shows the watch until the user quits (tui/app.py run_watch_monitor)
WatchMonitor = Callable[[MonitorConfig, WatchRun], object]
ALERT_STATUS = 3  # docs/monitoring.md, "specmon watch" exit statuses: an --alert held


@dataclass(frozen=True)
class FleetOptions:
    """`specmon watch --prometheus URL [--selector ...] [--by LABEL] [--alert-each]`."""

    prometheus: str  # the query API's URL
    query: FleetQuery
    alert_each: bool = False  # --alert on every replica's row, not only the fleet's


def default_dir() -> str:
    return str(Path("artifacts") / time.strftime("watch-%Y%m%d-%H%M%S"))


def execute_watch(
    config: RunConfig,
    interval_s: float,
    duration_s: float | None,
    monitor: WatchMonitor | None,
    out: TextIO | None = None,
    alert: AlertRule | None = None,
    fleet: FleetOptions | None = None,
) -> int:
    """Watch until q, a stop signal, `duration_s` or (headless) `alert` holding; the files
    are complete either way."""
    out = out or sys.stdout
    artifact_dir = config.artifact_dir or default_dir()
    tracker = AlertTracker(alert) if alert is not None else None
    alerted: list[str] = []
    each = fleet is None or fleet.alert_each  # a /metrics watch alerts on every server

    def on_row(row: WatchRow) -> None:
        if exporter is not None:
            export_row(exporter, row)
        if monitor is not None:
            return
        print(headless_line(row), file=out, flush=True)
        if tracker is None or alerted or not (each or row.server == FLEET):
            return
        line = tracker.update(row.server, row.t_s, alert_value(row, tracker.rule.metric))
        if line is not None:
            alerted.append(line)
            print(line, file=out, flush=True)
            print(line, file=sys.stderr, flush=True)  # the reason, as every exit status's
            watch.stop()

    watch = _make_watch(config, artifact_dir, interval_s, duration_s, on_row, fleet, out)
    exporter = exporter_for(config.prometheus_port, config.prometheus_host)
    signals: list[int] = []  # the stop signals received, first first
    try:
        if monitor is None:
            _run_headless(watch, config, out, signals)
        else:
            _run_monitor(monitor, watch, config, artifact_dir, signals)
    finally:
        watch.stop()
        watch.join(15)
        close_exporters()
    rows = watch.writer.rows if watch.writer is not None else 0
    if isinstance(watch, FleetWatchRun):
        print(f"spec-decode counters found: {watch.found()}", file=out, flush=True)
    print(f"time series ({rows} rows) written to {artifact_dir}", file=out, flush=True)
    if alerted and not signals:
        return ALERT_STATUS
    return _exit_status(watch, signals)


def _make_watch(
    config: RunConfig,
    artifact_dir: str,
    interval_s: float,
    duration_s: float | None,
    on_row: Callable[[WatchRow], None],
    fleet: FleetOptions | None,
    out: TextIO,
) -> WatchRun:
    """A /metrics watch over --url, or a fleet watch over --prometheus."""
    if fleet is None:
        targets = {label: base for label, base in config.targets()}
        for base in targets.values():
            metrics_url(base)  # a bad URL fails here, before anything starts
        return WatchRun(targets, artifact_dir, interval_s, duration_s, on_row=on_row)

    def note(line: str) -> None:
        print(f"specmon watch: {line}", file=out, flush=True)

    return FleetWatchRun(
        fleet.prometheus, fleet.query, artifact_dir, interval_s, duration_s, on_row, note
    )


def export_row(exporter: PrometheusExporter, row: WatchRow) -> None:
    """The row's acceptance as specmon_watch_* gauges (a missing figure: no sample)."""
    figs = row.interval
    exporter.set_watch(
        row.server,
        figs.acceptance_length if figs is not None else None,
        figs.acceptance_rate if figs is not None else None,
        figs.per_position if figs is not None else None,
    )


def alert_value(row: WatchRow, metric: str) -> float | None:
    """The row's figure an --alert names (analysis/alerts.py METRICS); None: not in it."""
    if metric == "tps":
        return row.health.generation_tokens_per_s
    if row.interval is None:  # the baseline scrape, or a failed one
        return None
    return row.interval.acceptance_length if metric == "al" else row.interval.acceptance_rate


def _exit_status(watch: WatchRun, signals: list[int]) -> int:
    """docs/monitoring.md, "specmon watch": 128 + signal after a stop by signal, else 2 when no server
    was ever reached, 1 when scrapes failed after a start, 0; why on stderr."""
    status, lines = watch.outcome()
    for line in lines:
        print(f"specmon watch: {line}", file=sys.stderr, flush=True)
    if watch.error is not None:
        print(f"specmon watch: error: {type(watch.error).__name__}: {watch.error}", file=sys.stderr)
        status = 1
    return 128 + signals[0] if signals else status


def _run_headless(watch: WatchRun, config: RunConfig, out: TextIO, signals: list[int]) -> None:
    if isinstance(watch, FleetWatchRun):
        sel = f" {{{watch.query.selector}}}" if watch.query.selector else ""
        what = f"fleet at {watch.client.url}{sel}, a row per {watch.query.by} (no load)"
    else:
        what = ", ".join(f"{k}={v}" for k, v in config.targets()) + " (no load)"
    print(f"specmon watch: {what}", file=out, flush=True)
    with _stopping_on(watch, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP), signals):
        watch.start()
        while not watch.join(0.2):
            pass


def _run_monitor(
    monitor: WatchMonitor,
    watch: WatchRun,
    config: RunConfig,
    artifact_dir: str,
    signals: list[int],
) -> None:
    shown = MonitorConfig.of_run(config)
    shown.load_label = NO_LOAD_LABEL
    shown.artifact_dir = artifact_dir
    with _stopping_on(watch, (signal.SIGTERM, signal.SIGHUP), signals):
        watch.start()
        try:
            monitor(shown, watch)
        except KeyboardInterrupt:
            signals.append(signal.SIGINT)


@contextlib.contextmanager
def _stopping_on(
    watch: WatchRun, stops: tuple[signal.Signals, ...], signals: list[int]
) -> Iterator[None]:
    """Within the block, each of `stops` stops the watch and is noted in `signals` (first
    first); the old handlers come back."""

    def stop(signum: int, _frame: object) -> None:
        signals.append(signum)
        watch.stop()

    previous = {sig: signal.signal(sig, stop) for sig in stops}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
