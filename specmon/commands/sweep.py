"""`specmon sweep`: measure every (k, concurrency) cell, pick k per load, write the schedule.

  specmon sweep --serve 'vllm serve M --port {port} --speculative-config \\
      '"'"'{"method": "ngram", "num_speculative_tokens": {k}}'"'"'' \\
      --baseline-serve 'vllm serve M --port {port}' --num-spec-tokens 1,2,3 --concurrency 1,4,16

Placeholders: {k}, {port} (a free loopback port), {python} (this Python); other braces (JSON)
are left as written. Or `--url k2=URL --url k4=URL` for servers that cannot be restarted.
On a terminal without --headless the live sweep view (specmon/tui/sweep_app.py) shows the grid
filling in; q stops. The sweep is assembled and driven in specmon/run/sweep/execute.py. Headless: one line per finished cell, then the tables and the schedule.
Ctrl-C, SIGTERM and SIGHUP stop cleanly through specmon/stops.py (exit 128 + the signal);
`--resume DIR` continues (see specmon/run/sweep/runner.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from specmon import stops
from specmon.config import RUN_OPTIONS, RunConfig, build_config
from specmon.errors import UserError

if TYPE_CHECKING:
    from specmon.run.sweep.control import SweepControl
    from specmon.run.sweep.options import SweepOptions
    from specmon.run.sweep.runner import SweepSettings

DEFAULT_SEED = 0  # every cell gets the same prompts unless --random-seed says otherwise


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from specmon.run.sweep.options import PER_CELL_RUN_OPTIONS, SWEEP_OPTIONS

    RUN_OPTIONS.add_arguments(parser, exclude=PER_CELL_RUN_OPTIONS)
    SWEEP_OPTIONS.add_arguments(parser, config_flags=False)


def main(args: argparse.Namespace) -> int:
    from specmon.run.sweep.runner import read_sweep

    stops.stage("setup", interruptible=True)  # until the first server starts: stop at once

    options = _options(args)
    previous = read_sweep(options.resume) if options.resume else None
    if previous is not None and options.serve is None and not getattr(args, "url", None):
        settings, config = _settings_from(previous)  # `--resume DIR` alone: the same sweep
    else:
        settings, config = _settings_from_args(args, options)
    if options.resume and config.artifact_dir and Path(config.artifact_dir) != Path(options.resume):
        raise UserError("--resume DIR continues the sweep in DIR: drop --artifact-dir")
    artifact_dir = options.resume or config.artifact_dir or default_dir()
    return execute(settings, config, artifact_dir, previous=previous)


def _settings_from_args(
    args: argparse.Namespace, options: SweepOptions
) -> tuple[SweepSettings, RunConfig]:
    config = build_config(args, defaults={"streaming": True})  # TTFT and ITL need streaming
    if config.random_seed is None:
        config.random_seed = DEFAULT_SEED
    return options.settings(config), config


def _options(args: argparse.Namespace) -> SweepOptions:
    """The sweep's options (flags > SPECMON_SWEEP_* > defaults), checked by their model."""
    from specmon.run.sweep.options import SWEEP_OPTIONS

    return SWEEP_OPTIONS.build(args)


def _settings_from(previous: dict[str, Any]) -> tuple[SweepSettings, RunConfig]:
    from specmon.run.sweep.runner import SweepSettings

    settings = SweepSettings.from_dict(previous["settings"])
    config = build_config(overrides=dict(settings.load))
    return settings, config


def default_dir() -> str:
    return str(Path("artifacts") / time.strftime("sweep-%Y%m%d-%H%M%S"))


def execute(
    settings: SweepSettings,
    config: RunConfig,
    artifact_dir: str,
    *,
    previous: dict[str, Any] | None = None,
    out: TextIO | None = None,
) -> int:
    """The sweep (specmon/run/sweep/execute.py), under the live view on a terminal without
    --headless, else headless."""
    from specmon.commands.run import check_theme_early
    from specmon.run.sweep.execute import execute_sweep

    check_theme_early(config)  # an unknown --theme is an error headless too
    out = out or sys.stdout
    live = not config.headless and out is sys.stdout and sys.stdout.isatty()
    screen = TextualSweepScreen() if live else None
    cells = (previous or {}).get("cells")
    return execute_sweep(
        settings, config, artifact_dir, screen=screen, previous_cells=cells, out=out
    )


class TextualSweepScreen:
    """The live sweep view (tui/sweep_app.py) as run/sweep/execute.py's SweepScreen."""

    def show(self, control: SweepControl, theme: str | None) -> None:
        from specmon.tui.sweep_app import SweepApp

        SweepApp(control, theme_name=theme).run()

    def detach(self) -> None:
        from specmon.tui.app import detach_from_terminal

        detach_from_terminal()
