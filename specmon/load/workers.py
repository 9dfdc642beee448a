"""--workers N: the load spread over N processes, one event loop each, merged into one run.

Each child runs a LoadRunner whose sink sends capture dicts (orjson bytes) back over one
multiprocessing queue; a reader thread in the parent feeds them to the single RunSession.
Timestamps stay comparable: perf_counter_ns is CLOCK_MONOTONIC, shared by all processes.
The shares: concurrency, rate, request and warmup counts are split as evenly as integers
allow; constant-rate workers are phase-shifted so N streams interleave instead of bursting.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import signal
import threading
import time
from typing import Any

import orjson

from specmon.capture import RawCapture
from specmon.config import RunConfig
from specmon.load.generator import LoadProgress
from specmon.load.runner import LoadRunner, RunLifecycle, preflight
from specmon.segments import SegmentLog

PROGRESS_EVERY_S = 0.25


def split_int(total: int, parts: int) -> list[int]:
    """10 over 3 -> [4, 3, 3]: shares differ by at most one and sum to the total."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


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
        share = dict(base, workers=1, concurrency=concurrency[i], request_count=counts[i],
                     warmup_request_count=warmups[i], random_seed=seed * 1000 + i)
        offset = 0.0
        if config.request_rate is not None:
            share["request_rate"] = config.request_rate / n
            offset = i / config.request_rate if config.request_rate_mode == "constant" else 0.0
        out.append((share, offset))
    return out


def _worker_main(index: int, share: dict[str, Any], offset: float, control: Any, results: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    worker_id = f"worker-{index}"

    def sink(capture: dict[str, Any]) -> None:
        results.put(("cap", orjson.dumps(capture)))

    runner = LoadRunner(RunConfig(**share), None, sink=sink, worker_id=worker_id,
                        arrival_offset_s=offset)
    error = None
    try:
        runner.start()
        next_report = 0.0
        while not runner.join(0.05):
            _apply_controls(runner, control)
            if time.monotonic() >= next_report:
                next_report = time.monotonic() + PROGRESS_EVERY_S
                results.put(("progress", index, runner.progress()))
        error = runner.error
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, not raised
        error = exc
    results.put(("progress", index, runner.progress()))
    results.put(("done", index, None if error is None else f"{type(error).__name__}: {error}"))


def _apply_controls(runner: LoadRunner, control: Any) -> None:
    while True:
        try:
            command, *values = control.get_nowait()
        except queue.Empty:
            return
        getattr(runner, command)(*values)


class WorkerPool(RunLifecycle):
    """The LoadRunner interface over N worker processes."""

    def __init__(self, config: RunConfig, session: Any) -> None:
        self.config = config
        self.session = session
        self.error: BaseException | None = None
        self._ctx = mp.get_context("spawn")  # no fork: the parent may run threads (TUI, reader)
        self._results = self._ctx.Queue()
        self._controls: list[Any] = []
        self._processes: list[Any] = []
        self._progress: dict[int, LoadProgress] = {}
        self._reader: threading.Thread | None = None
        self._done = threading.Event()
        self._stop_early = False
        self._shares: list[tuple[dict[str, Any], float]] = []
        self.segment_log = SegmentLog(config.effective_concurrency, config.request_rate,
                                      config.output_tokens_mean)

    def start(self) -> None:
        if self._processes:
            return
        if self.config.model is None:
            self.config.model = preflight(self.config)
        self._shares = worker_configs(self.config)
        for index, (share, offset) in enumerate(self._shares):
            control = self._ctx.Queue()
            proc = self._ctx.Process(target=_worker_main, name=f"specmon-worker-{index}",
                                     args=(index, share, offset, control, self._results), daemon=True)
            proc.start()
            self._controls.append(control)
            self._processes.append(proc)
        self._reader = threading.Thread(target=self._read, name="specmon-workers-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            self._read_until_done()
        except BaseException as exc:  # noqa: BLE001 - reported by the caller after join
            self.error = exc
            self._broadcast("stop")
        finally:
            self._done.set()

    def _read_until_done(self) -> None:
        running = set(range(len(self._processes)))
        errors = []
        while running:
            try:
                message = self._results.get(timeout=0.5)
            except queue.Empty:
                running -= {i for i in running if not self._processes[i].is_alive()}
                continue
            if message[0] == "cap":
                self.session.add(RawCapture(**orjson.loads(message[1])))
            elif message[0] == "progress":
                self._progress[message[1]] = message[2]
            elif message[0] == "done":
                running.discard(message[1])
                if message[2]:
                    errors.append(f"worker {message[1]}: {message[2]}")
        for proc in self._processes:
            proc.join(5)
        if errors:
            self.error = RuntimeError("; ".join(errors))

    def stop(self) -> None:
        if not self.finished:
            self._stop_early = True
        self._broadcast("stop")

    def _started(self) -> bool:
        return self._reader is not None

    @property
    def worker_count(self) -> int:
        return len(self._processes)

    def progress(self) -> LoadProgress:
        parts = list(self._progress.values())
        if not parts:
            return LoadProgress(0, 0, self.config.request_count, 0, 0, 0.0, "starting")
        phases = {p.phase for p in parts}
        phase = "warmup" if "warmup" in phases else ("done" if phases == {"done"} else "profiling")
        return LoadProgress(
            sent=sum(p.sent for p in parts), completed=sum(p.completed for p in parts),
            total=self.config.request_count, in_flight=sum(p.in_flight for p in parts),
            errors=sum(p.errors for p in parts), loop_lag_ms=max(p.loop_lag_ms for p in parts),
            phase=phase, warmup_completed=sum(p.warmup_completed for p in parts),
            lag_warning=any(p.lag_warning for p in parts), elapsed_s=max(p.elapsed_s for p in parts))

    # run-time knobs, split like the start-up shares; a change starts a segment ----------
    def set_concurrency(self, value: int | None) -> None:
        shares = split_int(value, len(self._controls)) if value else [None] * len(self._controls)
        for control, share in zip(self._controls, shares):
            control.put(("set_concurrency", max(share, 1) if share is not None else None))
        self._segment(self.segment_log.change(concurrency=value))

    def set_request_rate(self, value: float | None, mode: str | None = None) -> None:
        share = value / len(self._controls) if value and self._controls else value
        self._broadcast("set_request_rate", share, mode)
        self._segment(self.segment_log.change(request_rate=value))

    def set_output_tokens(self, mean: int | None, stddev: float = 0.0) -> None:
        self._broadcast("set_output_tokens", mean, stddev)
        self._segment(self.segment_log.change(output_tokens=mean))

    def _segment(self, segment: int | None) -> None:
        # the children number their own segments alike; say it explicitly so they agree
        if segment is not None:
            self._broadcast("set_segment", segment)

    @property
    def segment(self) -> int:
        return self.segment_log.current

    def set_segment(self, segment: int | None) -> None:
        self._broadcast("set_segment", segment)

    def _broadcast(self, command: str, *values: Any) -> None:
        for control in self._controls:
            control.put((command, *values))
