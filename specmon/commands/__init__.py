"""The subcommands: each module parses its flags and hands the work to the library."""

from __future__ import annotations

import argparse


def add_slo_argument(parser: argparse.ArgumentParser, purpose: str) -> None:
    """--slo of a command that reads finished runs (slo_option parses it); `purpose` says what
    the command does with it."""
    parser.add_argument("--slo", default=None, metavar="ttft=S,tpot=MS[,p=90]", help=purpose)


def add_runs_argument(parser: argparse.ArgumentParser, name: str, what: str) -> None:
    """The finished runs a reading command is given (one or more, positional); `what` says
    which kinds of path it reads."""
    parser.add_argument(name, nargs="+", metavar=name.rstrip("s").upper(), help=what)
