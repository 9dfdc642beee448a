"""specmon: a live speculative-decoding monitor and load generator.

The console script (`specmon`: pip writes `from specmon.cli import main`) and `python -m
specmon` run this file before any other specmon line, so it takes the stop signals first,
before a single further import: a handler that only records SIGINT, SIGTERM and SIGHUP (an
inherited SIG_IGN stays ignored for the whole run: SIGHUP under nohup, SIGINT in a bash
background job). specmon/stops.py replaces it a few
imports later (`stops.install`) and takes what it recorded as its own first signals, so a
stop that early still ends in a valid, empty run with exit status 128 + N. Imported any
other way (a test, a library, a spawned worker), it installs nothing.
"""

import signal as _signal
import sys as _sys

__version__ = "0.1.0"

# What the early handler saw and replaced, for specmon/stops.py to take over: the signal
# numbers in arrival order, and each signal's disposition from before (what stops.uninstall
# restores). Both stay empty when nothing was installed here.
early_signals: list[int] = []
early_previous: dict[int, object] = {}

_EARLY_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


def _record(signum: int, _frame: object) -> None:
    early_signals.append(signum)


def _is_entry_point(argv: list[str], orig_argv: list[str]) -> bool:
    """Whether this process is `specmon ...` (the console script) or `python -m specmon`."""
    if argv and argv[0].rsplit("/", 1)[-1] == "specmon":
        return True
    # `python [options] -m specmon`: while -m imports the package, argv[0] is "-m"
    args = iter(orig_argv[1:])
    for arg in args:
        if arg == "-m":
            return next(args, None) == "specmon"
        if arg.startswith("-m"):
            return arg[2:] == "specmon"
        if arg in ("-W", "-X"):  # options that take a value
            next(args, None)
        elif arg == "-c" or not arg.startswith("-"):  # a command or a script: not us
            return False
    return False


def _install_early() -> None:
    for name in _EARLY_SIGNALS:
        signum = getattr(_signal, name, None)
        if signum is None:
            continue
        if _signal.getsignal(signum) == _signal.SIG_IGN:
            continue  # nohup, a bash background job: stays ignored (stops.install too)
        early_previous[signum] = _signal.signal(signum, _record)


# whether the recording handler went in (this process is `specmon` or `python -m specmon`)
early_installed = _is_entry_point(_sys.argv, getattr(_sys, "orig_argv", []))
if early_installed:
    _install_early()
