"""`specmon watch --url URL [--url ...]`: observe live servers from /metrics, no load.

Server-wide acceptance (rate, length, per position, the derived accepted-drafts histogram)
and the health series, per scrape (`--interval S`), per server and label set
(specmon/run/watch/runner.py). `--headless` prints one line per scrape and server; otherwise
the monitor opens over a WatchRun (assembled in specmon/run/watch/execute.py). The time series goes
to the artifact dir (watch_timeseries.csv / .jsonl). Stops on q, Ctrl-C, SIGTERM, SIGHUP or after
`--duration S`, with the files complete. `--prometheus-port` serves the endpoint while the
watch goes on (no requests are sent, so only the process's own series are there).
`--alert EXPR` (analysis/alerts.py) ends a headless watch with exit status 3 once EXPR holds.
`--prometheus URL [--selector '{...}'] [--by LABEL]` reads a fleet through a Prometheus query
API instead (run/watch/fleet.py, docs/fleet.md): a row per replica and a fleet row.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TextIO

from specmon.analysis.alerts import AlertRule, parse_alert
from specmon.config import RUN_OPTIONS, RunConfig, build_config, seconds
from specmon.errors import UserError

if TYPE_CHECKING:
    from specmon.run.watch.execute import FleetOptions, WatchMonitor

# the run options that mean something without load (declared once in config.py)
WATCH_FIELDS = (
    "url",
    "headless",
    "artifact_dir",
    "theme",
    "refresh_hz",
    "prometheus_port",
    "prometheus_host",
    "selector",
)
DEFAULT_INTERVAL_S = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    exclude = [spec.field for spec in RUN_OPTIONS.specs if spec.field not in WATCH_FIELDS]
    RUN_OPTIONS.add_arguments(parser, exclude=exclude, config_flags=False)
    group = parser.add_argument_group("watch options")
    group.add_argument(
        "--interval",
        type=seconds,
        default=DEFAULT_INTERVAL_S,
        metavar="S",
        help=f"seconds between scrapes (default {DEFAULT_INTERVAL_S:g})",
    )
    group.add_argument(
        "--duration", type=seconds, default=None, metavar="S", help="stop after S seconds"
    )
    group.add_argument(
        "--alert",
        default=None,
        metavar="EXPR",
        help="e.g. 'al<1.5 for 60s' (al|acc|tps, < or >, number, for Ns): print the alert "
        "and exit 3 once it holds that long (implies --headless)",
    )
    group.add_argument(
        "--alert-each",
        action="store_true",
        help="with --prometheus: apply --alert to every replica, not only the fleet row",
    )
    group.add_argument(
        "--prometheus",
        default=None,
        metavar="URL",
        help="read the fleet through this Prometheus-compatible query API (Prometheus, "
        "Thanos, VictoriaMetrics) instead of scraping --url; see docs/fleet.md",
    )
    group.add_argument(
        "--by",
        default="instance",
        metavar="LABEL",
        help="with --prometheus: the label that names a replica (instance, pod, model_name, ...; "
        "default instance)",
    )


def main(args: argparse.Namespace) -> int:
    alert = parse_alert(args.alert) if args.alert is not None else None
    config = build_config(args)
    fleet = _fleet(args, config)
    if not config.url and fleet is None:
        raise UserError(
            "specmon watch needs --url URL (a server's base URL or its /metrics) "
            "or --prometheus URL (a fleet's query API)"
        )
    if alert is not None:
        config.headless = True  # alerting runs under cron or a wrapper, not on a screen
    return execute(config, args.interval, args.duration, alert=alert, fleet=fleet)


def _fleet(args: argparse.Namespace, config: RunConfig) -> FleetOptions | None:
    """The --prometheus watch's options, checked; None for a /metrics watch."""
    from specmon.run.watch.execute import FleetOptions
    from specmon.server.promql import FleetQuery, api_url, check_label, check_selector

    if args.prometheus is None:
        if config.selector:
            raise UserError("--selector goes with --prometheus URL (the fleet's query API)")
        return None
    if config.url:
        raise UserError("give --url (scrape servers) or --prometheus (query a fleet), not both")
    query = FleetQuery(check_selector(config.selector), check_label(args.by))
    return FleetOptions(api_url(args.prometheus), query, args.alert_each)


def execute(
    config: RunConfig,
    interval_s: float,
    duration_s: float | None,
    out: TextIO | None = None,
    alert: AlertRule | None = None,
    fleet: FleetOptions | None = None,
) -> int:
    """The watch (specmon/run/watch/execute.py), under the monitor on a terminal without --headless."""
    from specmon.commands.run import check_theme_early
    from specmon.run.watch.execute import execute_watch

    check_theme_early(config)  # an unknown --theme is an error headless too
    headless = config.headless or not sys.stdout.isatty()
    monitor = None if headless else _monitor()
    return execute_watch(config, interval_s, duration_s, monitor, out, alert, fleet)


def _monitor() -> WatchMonitor:
    from specmon.tui.app import run_watch_monitor

    return run_watch_monitor
