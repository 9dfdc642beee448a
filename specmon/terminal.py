"""Writes to a terminal that went away: a closed tmux pane or ssh session leaves the process a
dead tty, where every write fails with EIO (ENXIO on some systems). A `print` that raises
there would end `specmon run` before its exports (seen: `tmux kill-session` as the load
started, rc 1 and no JSON), and Textual's output thread would die with the same error.

`guarded(on_gone)` wraps stdout and stderr (and `sys.__stderr__`, which Textual's driver
writes to) for the length of a command: a write or flush that finds the terminal gone points
that descriptor at /dev/null, calls `on_gone()` once (specmon/stops.py `hangup`: a stop as
by SIGHUP) and reports the text as written, so every later line, the exports' included,
goes on. Any other OSError (a full disk behind a redirect) still raises.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

GONE = (errno.EIO, errno.ENXIO)


class GuardedStream:
    """A text stream whose writes survive the terminal behind it going away."""

    def __init__(self, stream: Any, on_gone: Callable[[], None]) -> None:
        self._stream = stream
        self._on_gone = on_gone

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except OSError as exc:
            if exc.errno not in GONE:
                raise
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            if exc.errno not in GONE:
                raise
            self._gone()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, buffer, ...
        return getattr(self._stream, name)

    def _gone(self) -> None:
        detach(self._stream)
        self._on_gone()


_devnull_lock = threading.Lock()


def detach(stream: Any) -> None:
    """Point the stream's descriptor at /dev/null (the dead terminal takes nothing more);
    its buffered text then flushes there instead of failing again."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    with _devnull_lock:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        except OSError:
            pass


@contextlib.contextmanager
def guarded(on_gone: Callable[[], None]) -> Iterator[None]:
    """stdout, stderr and sys.__stderr__ guarded (see the module docstring), restored after."""
    saved = (sys.stdout, sys.stderr, sys.__stderr__)
    called = threading.Event()

    def once() -> None:
        if not called.is_set():
            called.set()
            on_gone()

    sys.stdout = GuardedStream(sys.stdout, once)  # type: ignore[assignment]
    sys.stderr = GuardedStream(sys.stderr, once)  # type: ignore[assignment]
    if saved[2] is not None:
        sys.__stderr__ = GuardedStream(saved[2], once)  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved[0], saved[1]
        sys.__stderr__ = saved[2]  # type: ignore[misc]


def tty_fds() -> tuple[int, ...]:
    """Which of stdin, stdout and stderr are a terminal now."""
    return tuple(fd for fd in (0, 1, 2) if os.isatty(fd))


def hung_up(fds: tuple[int, ...]) -> bool:
    """Whether a descriptor that was a terminal is one no more: a hung-up tty answers its
    ioctls with EIO, so isatty turns False the moment the pane or the ssh session closes
    (and after detach, /dev/null is no tty either)."""
    return any(not os.isatty(fd) for fd in fds)
