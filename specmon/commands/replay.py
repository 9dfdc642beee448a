"""`specmon replay FILE`: the live monitor over a finished run.

FILE is a profile_export.jsonl (specmon's or AIPerf's) or a specmon raw capture. Records
are fed into a RunSession that writes nothing, at full speed or paced by their recorded
end times (`--speed 1` = real time, 2 = twice as fast), so a run can be reviewed later.
"""

from __future__ import annotations

import argparse
from typing import Any

from specmon.errors import UserError
from specmon.interfaces import MonitorConfig
from specmon.sources.replay import (
    RAW,
    RECORDS,
    ReplayFeeder,
    ReplayItem,
    ReplaySource,
    detect_kind,
    load_source,
)

__all__ = [
    "RAW",
    "RECORDS",
    "ReplayFeeder",
    "ReplayItem",
    "ReplaySource",
    "add_arguments",
    "build",
    "detect_kind",
    "load_source",
    "main",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        metavar="FILE",
        help="profile_export.jsonl (specmon or AIPerf) or a specmon raw capture",
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=0.0,
        metavar="X",
        help="pace by recorded timestamps, X times real time (default: full speed)",
    )
    parser.add_argument("--theme", default=None, help="theme name (see themes/*.toml)")
    parser.add_argument("--refresh-hz", type=float, default=4.0, help="screen refreshes per second")


def build(args: argparse.Namespace) -> tuple[MonitorConfig, ReplayFeeder, Any]:
    from specmon.session import RunSession

    if args.speed < 0:
        raise UserError(f"--speed must be >= 0 (0 = full speed), got {args.speed:g}")
    if not 0 < args.refresh_hz <= 60:
        raise UserError(f"--refresh-hz must be in (0, 60], got {args.refresh_hz:g}")
    source = load_source(args.file)
    session = RunSession(None, "summary", live=False, keep_responses=True)
    pace = f"x{args.speed:g}" if args.speed else "full speed"
    config = MonitorConfig(
        targets=[str(source.path)],
        model=source.model,
        refresh_hz=args.refresh_hz,
        theme=args.theme,
        artifact_dir=str(source.path.parent),
        load_label=f"replay of {source.kind}, {len(source.items)} records, {pace}",
    )
    return config, ReplayFeeder(source, session, args.speed), session


def main(args: argparse.Namespace) -> int:
    from specmon.tui.app import SpecmonApp

    config, feeder, session = build(args)
    app = SpecmonApp(session, feeder, config, source="replay")
    feeder.start()
    try:
        app.run()
    finally:
        feeder.stop()
        feeder.join(5)
    skipped = feeder.source.skipped
    if skipped:
        print(f"specmon replay: skipped {len(skipped)} bad line(s), first: {skipped[0]}")
    print(f"replayed {feeder.fed} of {len(feeder.source.items)} records from {feeder.source.path}")
    return 0
