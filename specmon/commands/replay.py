"""`specmon replay FILE`: the live monitor over a finished run.

FILE is a profile_export.jsonl (specmon's or AIPerf's) or a specmon raw capture. Records
are fed into a RunSession that writes nothing, at full speed or paced by their recorded
end times (`--speed 1` = real time, 2 = twice as fast), so a run can be reviewed later.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from specmon.config import non_negative, positive
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

if TYPE_CHECKING:
    from specmon.session import RunSession

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
        metavar="FILE|DIR",
        help="profile_export.jsonl (specmon or AIPerf), a specmon raw capture, or an artifact dir",
    )
    parser.add_argument(
        "--speed",
        type=non_negative,
        default=0.0,
        metavar="X",
        help="pace by recorded timestamps, X times real time (default: full speed)",
    )
    parser.add_argument("--theme", default=None, help="theme name (see themes/*.toml)")
    parser.add_argument(
        "--refresh-hz", type=positive, default=4.0, help="screen refreshes per second"
    )


def build(args: argparse.Namespace) -> tuple[MonitorConfig, ReplayFeeder, RunSession]:
    """The replay the flags ask for (specmon/run/replay.py)."""
    from specmon.run.replay import assemble_replay

    replay = assemble_replay(args.file, args.speed, args.refresh_hz, args.theme)
    return replay.config, replay.feeder, replay.session


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
