"""--workers N: the load spread over N processes, one event loop each, merged into one run.

Each child runs a LoadRunner whose sink sends raw captures (orjson bytes) back over one
multiprocessing queue; a reader thread in the parent feeds them to the single RunSession.
Timestamps stay comparable: perf_counter_ns is CLOCK_MONOTONIC, shared by all processes.
The shares: concurrency, rate, request and warmup counts are split as evenly as integers
allow; constant-rate workers are phase-shifted so N streams interleave instead of bursting.
With warmup, every worker stops after its warmup and waits for the parent's "go": the parent
sends it once all have warmed up (after its own `before_profiling` hook, e.g. restarting the
/metrics window), with one common start instant so the phase shifts still hold.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import orjson

from specmon.capture import RawCapture
from specmon.config import RunConfig
from specmon.errors import ServerUnreachable, UserError
from specmon.export.safe_json import dumps_safe
from specmon.interfaces import LoadProgress
from specmon.run.load.control import SegmentKnobs, knob_shares, merge_progress, split_int
from specmon.run.load.runner import LoadRunner, preflight
from specmon.segment_plan import SegmentLog
from specmon.sources.datasets import sub_shard
from specmon.sources.lifecycle import BackgroundRun
from specmon.sources.load.generator import Spell, merge_spells

__all__ = ["WorkerPool", "effective_workers", "split_int", "worker_configs"]

_USER_ERROR = "UserError: "  # how a worker's "done" message names a user error
_UNREACHABLE = "ServerUnreachable: "  # ... and a --max-outage stop
PROGRESS_EVERY_S = 0.25  # progress is also sent as soon as the counts change
GO_LEAD_S = 0.05  # the "go" names an instant this far ahead, so every worker starts at once


def effective_workers(config: RunConfig) -> int:
    """No more workers than there are concurrency slots or requests to share."""
    n = config.workers
    if config.concurrency is not None or config.request_rate is None:
        n = min(n, config.effective_concurrency or n)
    if config.request_count is not None:
        n = min(n, config.request_count)
    return max(1, n)


def worker_configs(config: RunConfig) -> list[tuple[dict[str, Any], float]]:
    """(config dict, arrival offset in seconds) for each worker."""
    n = effective_workers(config)
    base = config.model_dump()
    concurrency = split_int(config.concurrency, n) if config.concurrency else [None] * n
    counts = split_int(config.request_count, n) if config.request_count else [None] * n
    warmups = split_int(config.warmup_request_count, n)
    seed = config.random_seed if config.random_seed is not None else 0
    out = []
    for i in range(n):
        share = dict(
            base,
            workers=1,
            concurrency=concurrency[i],
            request_count=counts[i],
            warmup_request_count=warmups[i],
            random_seed=seed * 1000 + i,
            # each dataset row once overall: worker i of n takes rows i, i+n, ...
            dataset_shard=sub_shard(config.dataset_shard, i, n)
            if config.dataset
            else config.dataset_shard,
        )
        offset = 0.0
        if config.request_rate is not None:
            share["request_rate"] = config.request_rate / n
            offset = i / config.request_rate if config.request_rate_mode == "constant" else 0.0
        out.append((share, offset))
    return out


class _Gate:
    """A worker's side of the warmup handshake: report "warm", wait for "go" or "stop"."""

    def __init__(self, index: int, results: Any) -> None:
        self.index = index
        self.results = results
        self.released = threading.Event()
        self.stopped = False
        self.start_at = 0.0  # perf_counter instant at which every worker starts profiling

    def open(self, start_at: float) -> None:
        self.start_at = start_at
        self.released.set()

    def cancel(self) -> None:
        self.stopped = True
        self.released.set()

    def announce(self) -> None:
        self.results.put(("warm", self.index))

    def sleep_until_start(self) -> None:
        delay = self.start_at - time.perf_counter()
        if delay > 0 and not self.stopped:
            time.sleep(delay)

    def hold(self, runner: LoadRunner) -> None:
        """The runner's before_profiling hook (load thread, nothing in flight): blocking here
        keeps the profiling requests back until the parent says go."""
        self.announce()
        self.released.wait()
        generator = runner.generator
        if self.stopped and generator is not None:  # the loop is blocked: the queued stop
            generator.request_stop()  # has not reached it yet
        self.sleep_until_start()


PARENT_SIGNALS = (signal.SIGINT, signal.SIGHUP)  # the parent's to handle, not a worker's


@contextlib.contextmanager
def _parent_signals_blocked() -> Iterator[None]:
    """Block PARENT_SIGNALS while a worker is spawned: the child inherits the mask through
    exec, so a SIGHUP to the process group while it starts up stays pending there until
    _worker_main ignores it (it would kill a worker still importing). In the parent a
    signal meanwhile is only delayed, never lost."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, PARENT_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _worker_main(
    index: int, share: dict[str, Any], offset: float, control: Any, results: Any, hold: bool = False
) -> None:
    # the parent decides when to stop: a Ctrl-C or a closed terminal (SIGHUP to the whole
    # process group) reaches the parent, which drains every worker (specmon/stops.py).
    # Blocked since the spawn (_parent_signals_blocked): ignored from now on.
    for signum in PARENT_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, PARENT_SIGNALS)
    worker_id = f"worker-{index}"

    def sink(capture: RawCapture) -> None:
        # the raw-capture object (hostile values made safe), rebuilt field by field there
        results.put(("cap", index, dumps_safe(capture.to_dict())))

    runner = LoadRunner(
        RunConfig(**share), None, sink=sink, worker_id=worker_id, arrival_offset_s=offset
    )
    gate = _Gate(index, results)
    error = None
    try:
        if hold and share["warmup_request_count"]:
            runner.before_profiling = partial(gate.hold, runner)
        elif hold:  # no warmup share: wait for the others before the first request
            gate.announce()
            while not gate.released.wait(0.05):
                _apply_controls(runner, control, gate)
            gate.sleep_until_start()
        runner.start()
        _report_until_done(index, runner, control, results, gate)
        error = runner.error
    except BaseException as exc:
        error = exc
    results.put(("progress", index, runner.progress()))
    results.put(("outages", index, runner.outage_spells()))  # for the end-of-run verdict
    results.put(("done", index, None if error is None else f"{type(error).__name__}: {error}"))


def _report_until_done(
    index: int, runner: LoadRunner, control: Any, results: Any, gate: _Gate
) -> None:
    """Apply the parent's commands; send progress when its counts change (the parent's live
    probe reads sent-but-not-received from it) and every PROGRESS_EVERY_S anyway."""
    next_report, last_counts = 0.0, None
    while not runner.join(0.05):
        _apply_controls(runner, control, gate)
        progress = runner.progress()
        counts = (progress.in_flight, progress.completed, progress.warmup_completed, progress.phase)
        if counts != last_counts or time.monotonic() >= next_report:
            next_report, last_counts = time.monotonic() + PROGRESS_EVERY_S, counts
            results.put(("progress", index, progress))


def _apply_controls(runner: LoadRunner, control: Any, gate: _Gate) -> None:
    while True:
        try:
            command, *values = control.get_nowait()
        except queue.Empty:
            return
        if command == "go":
            gate.open(*values)
            continue
        if command == "stop":
            gate.cancel()
        getattr(runner, command)(*values)


class WorkerPool(SegmentKnobs, BackgroundRun):
    """interfaces.LoadControl over N worker processes; the lifecycle's thread is the reader
    that feeds their captures to the session."""

    thread_name = "specmon-workers-reader"

    def __init__(self, config: RunConfig, session: Any) -> None:
        super().__init__()
        self.config = config
        self.session = session
        self._ctx = mp.get_context("spawn")  # no fork: the parent may run threads (TUI, reader)
        with _parent_signals_blocked():  # its lock may start the resource tracker
            self._results = self._ctx.Queue()
        self._controls: list[Any] = []
        self._processes: list[Any] = []
        self._progress: dict[int, LoadProgress] = {}
        self._shares: list[tuple[dict[str, Any], float]] = []
        self._received: dict[int, int] = {}  # worker -> captures fed to the session
        self._running: set[int] = set()  # workers whose "done" has not arrived
        self._warm: set[int] = set()  # workers waiting for "go" after their warmup
        self._finished: set[int] = set()  # workers whose "done" arrived
        self._spells: dict[int, list[Spell]] = {}  # each worker's unreachable spells, at its end
        self._released = False
        self.before_profiling: Callable[[], None] | None = None  # after every warmup, before
        #                                                           any profiling request
        self.segment_log = SegmentLog(
            config.effective_concurrency, config.request_rate, config.output_tokens_mean
        )

    def _launch(self) -> None:
        if self.config.model is None:
            self.config.model = preflight(self.config)
        self._shares = worker_configs(self.config)
        hold = bool(self.config.warmup_request_count)
        self._released = not hold
        self._running = set(range(len(self._shares)))
        with _parent_signals_blocked():  # also the resource tracker the queues start
            for index, (share, offset) in enumerate(self._shares):
                control = self._ctx.Queue()
                proc = self._ctx.Process(
                    target=_worker_main,
                    name=f"specmon-worker-{index}",
                    args=(index, share, offset, control, self._results, hold),
                    daemon=True,
                )
                proc.start()
                self._controls.append(control)
                self._processes.append(proc)

    def _failed(self, exc: BaseException) -> None:
        self.error = exc
        self._broadcast("stop")

    def _main(self) -> None:
        errors: list[str] = []
        dropped: set[int] = set()
        next_check = 0.0
        while self._running:
            # a worker that died without "done" is dropped; checked on a clock, since the
            # others' progress reports (also while they wait for go) keep the queue busy
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + 0.5
                dead = {i for i in self._running if not self._processes[i].is_alive()}
                dropped |= dead
                self._running -= dead
                self._release_when_warm()
            try:
                message = self._results.get(timeout=0.5)
            except queue.Empty:
                continue
            self._handle(message, errors)
        while dropped:  # what a dropped worker sent before it exited is still in the queue
            try:
                self._handle(self._results.get(timeout=0.1), errors)
            except queue.Empty:
                break
        for proc in self._processes:
            proc.join(5)
        for index in sorted(dropped - self._finished):  # its "done" never came
            code = self._processes[index].exitcode
            errors.append(f"worker {index}: exited (code {code}) before finishing its share")
        if errors and not isinstance(self.error, (UserError, ServerUnreachable)):
            self.error = RuntimeError("; ".join(errors))

    def _handle(self, message: tuple[Any, ...], errors: list[str]) -> None:
        kind, index = message[0], message[1]
        if kind == "cap":
            self.session.add(RawCapture(**orjson.loads(message[2])))
            self._received[index] = self._received.get(index, 0) + 1
        elif kind == "progress":
            self._progress[index] = message[2]
        elif kind == "warm":
            self._warm.add(index)
        elif kind == "outages":
            self._spells[index] = message[2]
        elif kind == "done":
            self._running.discard(index)
            self._finished.add(index)
            self._worker_done(index, message[2], errors)
        self._release_when_warm()

    def _worker_done(self, index: int, why: str | None, errors: list[str]) -> None:
        """A worker's end: a user error or a --max-outage stop ends the whole run as it
        would end one process (the others see the same server); anything else is listed."""
        if not why:
            return
        for prefix, kind in ((_USER_ERROR, UserError), (_UNREACHABLE, ServerUnreachable)):
            if why.startswith(prefix):
                if self.error is None:
                    self.error = kind(why[len(prefix) :])  # e.g. wrong --model
                    self._broadcast("stop")
                return
        errors.append(f"worker {index}: {why}")

    def outage_spells(self) -> list[Spell]:
        """The server's unreachable spells: every worker's, overlapping ones joined (each
        worker noticed the outage on its own connections, at about the same moments)."""
        return merge_spells([spell for spells in self._spells.values() for spell in spells])

    def _release_when_warm(self) -> None:
        """Once every worker still running waits after its warmup, run the hook and say go.
        Each worker sent its warmup captures before "warm" on the same queue, so all of them
        are in the session by now, and no profiling request has been sent yet."""
        if self._released or not self._running <= self._warm:
            return
        self._released = True
        # no hook when no worker is left to profile (all stopped or failed in warmup)
        if self.before_profiling is not None and not self._stop_early and self._running:
            try:
                self.before_profiling()
            except Exception as exc:
                self.error = exc
                self._broadcast("stop")
                return
        if not self._stop_early:  # a stop during the hook: the workers' "stop" releases them
            self._broadcast("go", time.perf_counter() + GO_LEAD_S)

    def unlanded(self, landed: int | None = None, progress: LoadProgress | None = None) -> int:
        """Requests sent and not yet fed to the session, from the workers' latest progress
        reports (the arguments of interfaces.LandingCount are not needed here). A report may lag the worker's sends, so a worker still running counts at
        least one: a live verdict never takes "nothing in flight" for granted while it runs."""
        total = 0
        for index in range(len(self._processes)):
            report = self._progress.get(index)
            sent = (
                0
                if report is None
                else report.in_flight + report.completed + report.warmup_completed + report.retries
            )
            unlanded = max(0, sent - self._received.get(index, 0))
            total += max(unlanded, 1) if index in self._running else unlanded
        return total

    def _request_stop(self) -> None:
        self._broadcast("stop")

    def progress(self) -> LoadProgress:
        return merge_progress(list(self._progress.values()), total=self.config.request_count)

    # run-time knobs (SegmentKnobs), shared like the start-up shares ----------------------
    def _apply(self, knob: str, args: tuple[Any, ...], segment: int | None) -> None:
        value, *rest = args
        for control, share in zip(self._controls, knob_shares(knob, value, len(self._controls))):
            control.put((f"set_{knob}", share, *rest))
        # the children number their own segments alike; say it explicitly so they agree
        if segment is not None:
            self._broadcast("set_segment", segment)

    def set_segment(self, segment: int | None) -> None:
        self._broadcast("set_segment", segment)

    def _broadcast(self, command: str, *values: Any) -> None:
        for control in self._controls:
            control.put((command, *values))
