"""The one lifecycle every runner shares (interfaces.RunLifecycle over a background thread):
LoadRunner, WorkerPool (its reader thread), ReplayFeeder, SweepControl and WatchRun.

A runner gives `_main()` (the thread's body) and `_request_stop()` (ask the body to end
soon: thread-safe, from any thread, also before start and after the end), and may give
`_launch()` (before the thread, on the caller's thread: preflight, child processes) and
`_started()` (after it: wait until it is ready). What `_main()` raises becomes `error`
(a runner may also set `error` itself, and `_failed` says what else a failure does).
"""

from __future__ import annotations

import threading


class BackgroundRun:
    """start / stop / join / finished / stopped_early / error over one daemon thread."""

    thread_name = "specmon-run"

    def __init__(self) -> None:
        self.error: BaseException | None = None  # what ended the run abnormally
        self._done = threading.Event()  # set in a finally when the thread ends
        self._thread: threading.Thread | None = None
        self._stop_early = False

    # the runner's parts -------------------------------------------------------------
    def _launch(self) -> None:
        """Before the thread starts, on the caller's thread."""

    def _started(self) -> None:
        """After the thread has started, on the caller's thread."""

    def _main(self) -> None:
        raise NotImplementedError

    def _request_stop(self) -> None:
        raise NotImplementedError

    def _failed(self, exc: BaseException) -> None:
        self.error = exc

    # RunLifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:  # idempotent: the TUI may call it again
            return
        self._launch()
        self._thread = threading.Thread(target=self._body, name=self.thread_name, daemon=True)
        self._thread.start()
        self._started()

    def _body(self) -> None:
        try:
            self._main()
        except BaseException as exc:  # reported through `error`, never lost
            self._failed(exc)
        finally:
            self._done.set()

    def stop(self) -> None:
        if not self._done.is_set():  # stopping a run that has ended is no cancel
            self._stop_early = True
        self._request_stop()

    def join(self, timeout: float | None = None) -> bool:
        # An Event, not Thread.join: a Ctrl-C that interrupts Thread.join can leave the thread
        # looking finished while it still runs (CPython 3.11).
        if self._thread is not None:
            self._done.wait(timeout)
        return self.finished

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    @property
    def stopped_early(self) -> bool:
        return self._stop_early
