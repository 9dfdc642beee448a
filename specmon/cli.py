"""`specmon` entry point: dispatches to one module per subcommand.

Each module in specmon/commands/ exposes `add_arguments(parser)` and `main(args) -> int`.
Modules are imported lazily so `specmon sim` never pays for Textual, and so on.
Without a subcommand (`specmon --url ...`) the default is `run`.
"""

from __future__ import annotations

import sys

import specmon
from specmon import stops

# The console script (`specmon ...`) imports this module first, after specmon/__init__.py's
# recording handler: the real handlers take over before any other import, so a signal in
# the first instants still ends in a valid, empty summary (python -m specmon does the same
# in __main__.py). Imported by anything else (a test, a library), the handlers wait for main().
if specmon.early_installed:
    stops.install()

import argparse
import gc
import importlib
from typing import NoReturn

from specmon import __version__, terminal
from specmon.constants import GC_THRESHOLDS
from specmon.errors import UserError

COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("specmon.commands.run", "drive a server and monitor acceptance (the default)"),
    "demo": ("specmon.commands.demo", "run against a built-in simulated vLLM"),
    "sim": ("specmon.commands.sim", "serve a simulated vLLM with speculative decoding"),
    "report": ("specmon.commands.report", "turn a raw capture into AIPerf-compatible exports"),
    "replay": ("specmon.commands.replay", "open the monitor over a finished run"),
    "tune": ("specmon.commands.tune", "estimate acceptance and speedup at other k"),
    "compare": ("specmon.commands.compare", "compare two or more runs side by side"),
    "sweep": ("specmon.commands.sweep", "measure every k x concurrency and pick k per load"),
    "watch": ("specmon.commands.watch", "observe live servers from /metrics, sending no load"),
}

# The commands that turn a stop signal into complete exports (specmon/stops.py); the others
# keep Python's default handlers (`specmon sim` ends on SIGTERM at once).
STOPPABLE = ("run", "demo", "sweep")


def _top_help() -> str:
    lines = [
        f"specmon {__version__}: live speculative-decoding monitor",
        "",
        "usage: specmon [COMMAND] [options]   (default command: run)",
        "",
        "commands:",
    ]
    lines += [f"  {name:<9} {desc}" for name, (_, desc) in COMMANDS.items()]
    lines += ["", "`specmon COMMAND --help` lists a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Exit status: 0 normal end, 2 user error, 1 internal error, 128 + N after a stop by
    signal N (docs/stopping.md)."""
    stops.install()
    try:
        return _main(argv)
    except stops.Stopped as exc:  # a stop during setup that no command turned into exports
        return 128 + exc.signum
    finally:
        if specmon.early_installed:  # `specmon ...`: the process ends next; a late signal
            stops.done()  # then exits 128 + N, never -N (the default action)
        else:  # an in-process caller gets its own handlers back
            stops.uninstall()


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print(_top_help())
        return 0
    if argv and argv[0] == "--version":
        print(f"specmon {__version__}")
        return 0
    name = argv.pop(0) if argv and argv[0] in COMMANDS else "run"
    if name not in STOPPABLE:
        stops.uninstall()
        if stops.requested() is not None:
            return stops.exit_status(0)
    if name in STOPPABLE:  # a terminal that goes away mid-run stops it as SIGHUP does
        with terminal.guarded(stops.hangup):
            return _run_command(name, argv)
    return _run_command(name, argv)


def _run_command(name: str, argv: list[str]) -> int:
    module_name, desc = COMMANDS[name]
    if specmon.early_installed:  # this process is specmon: its own collector settings
        gc.set_threshold(*GC_THRESHOLDS)  # before the imports (constants.py: why)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:  # a command not built yet
        if exc.name == module_name:
            print(
                f"specmon: error: command '{name}' is not available in this build", file=sys.stderr
            )
            return 2
        raise
    parser = _OneLineParser(prog=f"specmon {name}", description=desc)
    module.add_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a bad flag (2, one line already said)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return int(module.main(args) or 0)
    except UserError as exc:
        print(f"specmon: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:  # a handler other than specmon.stops was in place
        return 130
    except BrokenPipeError:
        # `specmon tune ... | head`: the reader left; exit quietly like other CLI tools.
        _silence_stdout()
        return 0


class _OneLineParser(argparse.ArgumentParser):
    """A bad flag or value is one line and status 2 in every command, as the commands whose
    options are declared in config.py already say it (`config._one_line_error`)."""

    def error(self, message: str) -> NoReturn:
        print(f"specmon: error: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


def _silence_stdout() -> None:
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
