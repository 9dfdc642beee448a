"""Stops by signal: SIGINT, SIGTERM and SIGHUP, handled the same way from process start to exit.

One process-wide handler (installed first thing by `python -m specmon` / cli.main) counts the
signals and acts by stage (docs/architecture.md, "Stops and exit status"):

* "setup" (imports, input checks, preflight): raise `Stopped` at once, so a slow server or
  a long read never holds the stop back; the run then writes an empty, complete summary.
  During imports only a flag is set (`interruptible=False`): an exception there would leave
  half-imported modules behind; `check()` raises it at the next checkpoint.
* "load": set a flag only. The headless loop and the TUI poll it (or get a callback) and stop
  the load with a graceful drain. A handler that raises in the middle of threading or queue
  code can leave a lock held and hang the run: that was the cause of a hang at stop.
* "export": never interrupt. The second signal prints EXPORT_WARNING; the third force-quits
  with 128 + signal.

Only Ctrl-C escalates: once a stop is under way, a repeated SIGHUP or SIGTERM changes nothing
(a dropped ssh connection can deliver several hangups, a supervisor may repeat its SIGTERM),
so only an interactive third Ctrl-C abandons the exports. A signal the process inherited as
ignored stays ignored for the whole run: SIGHUP under `nohup specmon ...`, SIGINT in a bash
background job (`specmon ... &` in a script). A terminal that went away (EIO on a write,
specmon/terminal.py) stops the run as SIGHUP does (`hangup`). Once the command has returned
(`done`), a late signal exits 128 + N at once.

Exit status after a stop by signal: 128 + the first signal's number (shell convention).
"""

from __future__ import annotations

# imported before everything else by the console script (cli.py) and `python -m specmon`:
# only cheap standard modules, so the handlers are in place as early as possible
import atexit
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

import specmon  # its recording handler comes first (specmon/__init__.py): install() takes over

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType
    from typing import Any

SIGNALS = tuple(
    s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None
)
EXPORT_WARNING = "specmon: writing exports, press Ctrl-C again to abandon"
DRAIN_WARNING = (
    "specmon: stopping: in-flight requests drain (--drain-timeout), then the exports are "
    "written; press Ctrl-C again to abandon"
)
REPEAT_NOTE = "specmon: already stopping; only Ctrl-C three times abandons the exports"


class Stopped(BaseException):
    """A stop signal arrived during setup (a BaseException: `except Exception` never eats it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _State:
    def __init__(self) -> None:
        self.first: int | None = None  # the first signal's number
        self.count = 0
        self.stage = "setup"
        self.interruptible = False
        self.callbacks: list[Callable[[int], None]] = []
        self.abandon_callbacks: list[Callable[[], None]] = []
        self.installed = False
        self.previous: dict[int, Any] = {}  # the handlers install() replaced
        self.ignored: set[int] = set()  # inherited as SIG_IGN: kept so for the whole run
        self.repeat_noted = False
        self.failure: str | None = None  # a stop that is no signal: the first failed write


_state = _State()


def install() -> None:
    """Handle SIGINT/SIGTERM/SIGHUP in this process (main thread only; idempotent). Takes
    over from the recording handler specmon/__init__.py installs first in `specmon` and
    `python -m specmon`: the signals it recorded count as this run's first ones, and the
    dispositions it replaced are what uninstall() restores."""
    if _state.installed or threading.current_thread() is not threading.main_thread():
        return
    reset()  # a fresh count for this run (an in-process caller may run several)
    early_previous = specmon.early_previous
    _state.ignored.clear()
    for signum in SIGNALS:
        if signal.getsignal(signum) == signal.SIG_IGN:
            # nohup (SIGHUP), a bash background job (SIGINT): ignored from the process's
            # start, so ignored to its end; a signal then never depends on when it lands
            _state.ignored.add(signum)
            continue
        replaced = signal.signal(signum, _handler)
        _state.previous[signum] = early_previous.pop(signum, replaced)
    _state.installed = True
    _take_early_signals()


def _take_early_signals() -> None:
    """The signals the early handler recorded, handled now as if they came now (stage
    "setup", not interruptible: counted, raised by the next check())."""
    early = specmon.early_signals
    while early:
        _handler(early.pop(0), None)


def uninstall() -> None:
    """The handlers from before install() again (commands other than run/demo stop the
    usual way; an in-process caller of cli.main gets its own back)."""
    if not _state.installed or threading.current_thread() is not threading.main_thread():
        return
    for signum, previous in _state.previous.items():
        signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
    _state.previous.clear()
    _state.installed = False


def reset() -> None:
    """Back to a fresh state: no signal seen, stage setup, no callbacks."""
    _state.first, _state.count, _state.stage = None, 0, "setup"
    _state.interruptible = False
    _state.repeat_noted = False
    _state.failure = None
    _state.callbacks.clear()
    _state.abandon_callbacks.clear()


def _say(line: str) -> None:
    """One line on stderr from the handler; never raises (a closed terminal gives EIO)."""
    try:
        os.write(2, (line + "\n").encode())
    except OSError:
        pass


def _handler(signum: int, _frame: FrameType | None) -> None:
    if _state.stage == "done":  # the exports are written: end now, as the signal says
        exit_now(128 + (_state.first or signum))
    if _state.first is not None and signum != signal.SIGINT:  # the stop is under way
        if not _state.repeat_noted:
            _state.repeat_noted = True
            _say(REPEAT_NOTE)
        return
    _state.count += 1
    if _state.first is None:
        _state.first = signum
    if _state.stage == "export" or (_state.stage == "load" and _state.count > 1):
        if _state.count >= 3:
            _say("specmon: abandoned the exports")
            for abandon in list(_state.abandon_callbacks):
                try:  # what must not outlive this process (a sweep's server)
                    abandon()
                except Exception:
                    pass
            os._exit(128 + (_state.first or signum))
        if _state.count == 2 and _state.stage == "load":  # still draining
            _say(DRAIN_WARNING)
        elif _state.count == 2:
            _say(EXPORT_WARNING)
        elif _state.stage == "export":  # the first signal of the run came during the export
            _say("specmon: stop signal during the export: finishing it")
        return
    if _state.stage == "setup" and _state.interruptible:
        raise Stopped(signum)
    for callback in list(_state.callbacks):
        callback(signum)


def exit_now(status: int) -> None:
    """Flush what the command printed, then leave with `status` (no finalizer runs: the
    exports are on disk, and a default action here would end the process as -N)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed or dead stream, or a flush already under way
            pass
    os._exit(status)


def done() -> None:
    """The command has returned (its exports written) and the process is about to exit: a
    signal from now on exits 128 + N at once instead of taking the default action (killed,
    status -N). For `specmon ...` / `python -m specmon` only; cli.main calls it.

    The interpreter's teardown puts the default actions back after the atexit callbacks.
    The one registered here (atexit runs the last registered first) blocks the stop
    signals and exits 128 + N for one already pending; one that comes later still stays
    blocked and goes with the process (the status is the run's own), never -N."""
    _state.stage = "done"
    atexit.register(_block_at_exit)


def _block_at_exit() -> None:
    blocked = [s for s in SIGNALS if s not in _state.ignored]
    signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    pending = [s for s in blocked if s in signal.sigpending()]
    if pending:
        exit_now(128 + (_state.first or pending[0]))
    # The mask is the main thread's only: a daemon thread (the scrape loop, a pipe copier)
    # would take the signal with the default action the teardown puts back (-N). SIG_IGN
    # is process-wide and the teardown leaves it in place: the run's own status stands.
    for signum in blocked:
        signal.signal(signum, signal.SIG_IGN)


def hangup() -> None:
    """The terminal went away (a write to it failed with EIO: specmon/terminal.py): a stop
    as by SIGHUP, from any thread, unless SIGHUP is ignored (nohup: the run goes on and its
    output is discarded). During the load the on_stop callbacks get SIGHUP (they only
    schedule work); before it, the next check() raises; at the export, the status is 129."""
    sighup = getattr(signal, "SIGHUP", None)
    if sighup is None or sighup in _state.ignored or _state.first is not None:
        return
    _state.count += 1
    _state.first = sighup
    if _state.stage == "load":
        for callback in list(_state.callbacks):
            try:
                callback(sighup)
            except Exception:
                pass


def note_stop(signum: int) -> None:
    """Count a stop the user asked for without a signal, as that signal: Ctrl-C is a key
    in the TUI (the terminal is in raw mode), and must end the run as SIGINT does headless
    (exit 130; a later real signal is the second one)."""
    _state.count += 1
    if _state.first is None:
        _state.first = signum


def stage(name: str, *, interruptible: bool = False) -> None:
    """Enter a stage: "setup" (interruptible: raise Stopped now), "load" or "export"."""
    _state.stage = name
    _state.interruptible = interruptible
    if interruptible:
        check()


def check() -> None:
    """Raise Stopped when a signal came during setup (a checkpoint after imports)."""
    if _state.stage == "setup" and _state.first is not None:
        raise Stopped(_state.first)


def requested() -> int | None:
    """The first stop signal's number, or None."""
    return _state.first


def on_stop(callback: Callable[[int], None]) -> None:
    """Call `callback(signum)` from the handler on a stop during the load. It runs on the main
    thread between two bytecodes: it must only set flags or schedule work (no locks)."""
    _state.callbacks.append(callback)


def remove_callback(callback: Callable[[int], None]) -> None:
    if callback in _state.callbacks:
        _state.callbacks.remove(callback)


def on_abandon(callback: Callable[[], None]) -> None:
    """Call `callback()` right before a third signal force-quits (os._exit skips every
    finally): for what must not outlive the process, such as a server it started. Same
    rules as on_stop: from the signal handler, no locks."""
    _state.abandon_callbacks.append(callback)


def fail(message: str) -> None:
    """Stop the run as a signal would, for a reason that is no signal (the first failed
    write: disk full). Any thread may call it: during the load the on_stop callbacks get 0
    (they only schedule work) and the headless loop polls failure(); exit status 1."""
    if _state.failure is not None:
        return
    _state.failure = message
    if _state.stage == "load" and _state.first is None:
        for callback in list(_state.callbacks):
            try:  # called from the thread whose write failed: it must not raise there
                callback(0)
            except Exception:
                pass


def pending_stop() -> bool:
    """A stop (a signal, or fail()) came during the load: what a screen that opens after the
    load started must still honour (its on_stop callback came too late to hear it). False
    outside the load stage, so a finished in-process run's stop never closes a new screen."""
    return _state.stage == "load" and (_state.first is not None or _state.failure is not None)


def failure() -> str | None:
    """Why the run stopped itself (fail), or None."""
    return _state.failure


def exit_status(default: int) -> int:
    """128 + signal after a stop by signal, 1 after a failure (fail), else `default`."""
    if _state.first is not None:
        return 128 + _state.first
    return 1 if _state.failure is not None else default


def name(signum: int | None = None) -> str:
    value = signum if signum is not None else _state.first
    return signal.Signals(value).name if value is not None else "none"
