"""`specmon run` (the default command): drive a server, monitor acceptance, write exports.

Headless: a progress line every few seconds (reads well when piped), then the console
tables and the exports. Ctrl-C and SIGTERM stop the load and still write complete exports.
Without --headless the Textual monitor runs on the main thread over the same run. The run
is assembled and driven in specmon/run/; this module parses the flags and picks the screen.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from specmon.config import RunConfig, add_run_arguments, build_config
from specmon.decision.slo import slo_option
from specmon.run import execute as run_execute


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)


def main(args: argparse.Namespace) -> int:
    config = build_config(args)
    return execute(config, save_config_path=getattr(args, "save_config", None))


def execute(
    config: RunConfig, *, save_config_path: str | None = None, out: TextIO | None = None
) -> int:
    """The run of `config`, headless or under the Textual monitor (specmon/run/execute.py)."""
    check_theme_early(config)
    check_slo_early(config)
    return run_execute.execute(config, open_monitor, out or sys.stdout, save_config_path)


def check_theme_early(config: RunConfig) -> None:
    """A misspelt --theme fails before any server is contacted, not after the load started;
    in every mode (a headless run draws no theme, but a typo in a script must not pass)."""
    if not config.theme:
        return
    try:
        from specmon.tui.themes import check_theme
    except ImportError:  # no Textual: the run goes headless and ignores the theme
        return
    check_theme(config.theme)


def check_slo_early(config: RunConfig) -> None:
    """A malformed --slo fails before any server is contacted (decision/slo.py's parser;
    the options cannot parse it: config.py sits below the decision package)."""
    slo_option(config.slo)


def open_monitor(config: RunConfig, out: TextIO) -> run_execute.Monitor | None:
    """The Textual monitor, or None to run headless (--headless, a pipe, no Textual)."""
    if config.headless:
        return None
    if not sys.stdout.isatty():
        print("specmon: stdout is not a terminal: running headless", file=out)
        return None
    try:
        from specmon.tui.app import run_monitor
    except ImportError as exc:
        print(f"specmon: the live monitor is unavailable ({exc}); running headless", file=out)
        return None
    return run_monitor
