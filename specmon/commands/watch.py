"""`specmon watch --url URL [--url ...]`: observe live servers from /metrics, no load.

Server-wide acceptance (rate, length, per position, the derived accepted-drafts histogram)
and the health series, per scrape (`--interval S`), per server and label set
(specmon/sources/watch.py). `--headless` prints one line per scrape and server; otherwise
the monitor opens over a WatchRun. The time series goes to the artifact dir
(watch_timeseries.csv / .jsonl). Stops on q, Ctrl-C, SIGTERM, SIGHUP or after
`--duration S`, with the files complete. `--prometheus-port` serves the endpoint while the
watch goes on (no requests are sent, so only the process's own series are there).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any

from specmon.config import RUN_OPTIONS, RunConfig, build_config
from specmon.errors import UserError

# the run options that mean something without load (declared once in config.py)
WATCH_FIELDS = (
    "url",
    "headless",
    "artifact_dir",
    "theme",
    "refresh_hz",
    "prometheus_port",
    "prometheus_host",
)
DEFAULT_INTERVAL_S = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    exclude = [spec.field for spec in RUN_OPTIONS.specs if spec.field not in WATCH_FIELDS]
    RUN_OPTIONS.add_arguments(parser, exclude=exclude, config_flags=False)
    group = parser.add_argument_group("watch options")
    group.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL_S,
        metavar="S",
        help=f"seconds between scrapes (default {DEFAULT_INTERVAL_S:g})",
    )
    group.add_argument(
        "--duration", type=float, default=None, metavar="S", help="stop after S seconds"
    )


def main(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        raise UserError(f"--interval {args.interval:g}: give a number of seconds > 0")
    if args.duration is not None and args.duration <= 0:
        raise UserError(f"--duration {args.duration:g}: give a number of seconds > 0")
    config = build_config(args)
    if not config.url:
        raise UserError("specmon watch needs --url URL (a server's base URL or its /metrics)")
    return execute(config, args.interval, args.duration)


def default_dir() -> str:
    return str(Path("artifacts") / time.strftime("watch-%Y%m%d-%H%M%S"))


def execute(config: RunConfig, interval_s: float, duration_s: float | None, out: Any = None) -> int:
    from specmon.server.scrape import metrics_url
    from specmon.sinks.prometheus import close_exporters, exporter_for
    from specmon.sources.watch import WatchRun, headless_line

    out = out or sys.stdout
    targets = {label: base for label, base in config.targets()}
    for base in targets.values():
        metrics_url(base)  # a bad URL fails here, before anything starts
    artifact_dir = config.artifact_dir or default_dir()
    headless = config.headless or not sys.stdout.isatty()

    def on_row(row: Any) -> None:
        print(headless_line(row), file=out, flush=True)

    watch = WatchRun(
        targets, artifact_dir, interval_s, duration_s, on_row=on_row if headless else None
    )
    exporter_for(config.prometheus_port, config.prometheus_host)
    signals: list[int] = []  # the stop signals received, first first
    try:
        if headless:
            _run_headless(watch, config, out, signals)
        else:
            _run_monitor(watch, config, artifact_dir, signals)
    finally:
        watch.stop()
        watch.join(15)
        close_exporters()
    rows = watch.writer.rows if watch.writer is not None else 0
    print(f"time series ({rows} rows) written to {artifact_dir}", file=out, flush=True)
    return _exit_status(watch, signals)


def _exit_status(watch: Any, signals: list[int]) -> int:
    """README, "specmon watch": 128 + signal after a stop by signal, else 2 when no server
    was ever reached, 1 when scrapes failed after a start, 0; why on stderr."""
    status, lines = watch.outcome()
    for line in lines:
        print(f"specmon watch: {line}", file=sys.stderr, flush=True)
    if watch.error is not None:
        print(f"specmon watch: error: {type(watch.error).__name__}: {watch.error}", file=sys.stderr)
        status = 1
    return 128 + signals[0] if signals else status


def _stopper(watch: Any, signals: list[int]) -> Any:
    def handler(signum: int, _frame: Any) -> None:
        signals.append(signum)
        watch.stop()

    return handler


def _run_headless(watch: Any, config: RunConfig, out: Any, signals: list[int]) -> None:
    print(
        "specmon watch: " + ", ".join(f"{k}={v}" for k, v in config.targets()) + " (no load)",
        file=out,
        flush=True,
    )
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    handlers = {sig: signal.signal(sig, _stopper(watch, signals)) for sig in stops}
    try:
        watch.start()
        while not watch.join(0.2):
            pass
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def _run_monitor(watch: Any, config: RunConfig, artifact_dir: str, signals: list[int]) -> None:
    from specmon.interfaces import MonitorConfig
    from specmon.sources.watch import NO_LOAD_LABEL
    from specmon.tui.app import run_watch_monitor

    monitor = MonitorConfig.of_run(config)
    monitor.load_label = NO_LOAD_LABEL
    monitor.artifact_dir = artifact_dir
    handlers = {
        sig: signal.signal(sig, _stopper(watch, signals)) for sig in (signal.SIGTERM, signal.SIGHUP)
    }
    watch.start()
    try:
        run_watch_monitor(monitor, watch)
    except KeyboardInterrupt:
        signals.append(signal.SIGINT)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
