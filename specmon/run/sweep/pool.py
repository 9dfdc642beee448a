"""Where a sweep's arms run: `ArmPool`, and the local pool (`--executor local`): arms on
threads of this process, as many at once as there are slots, each slot a disjoint GPU
slice (`--gpus 0,1,2,3 --gpus-per-server 2`: two slots); without --gpus one slot, so one
arm at a time. An arm whose own run failed (not its server: that is a failed cell) is
retried once on another free slot, then reported as failed cells, never left out. The
Ray pool is run/sweep/ray_pool.py."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Protocol

from specmon.run.sweep.arm import ArmHooks, ArmJob, ArmOutcome, ArmRun, ArmSpec, run_arm
from specmon.run.sweep.measure import Measurer, TimedCell, new_cell

OnOutcome = Callable[[ArmOutcome], None]
# the arm with only its concurrencies still unrecorded (None: none left), for a retry
Pending = Callable[[ArmSpec], ArmSpec | None]


class ArmPool(Protocol):
    """Runs arms; `run` returns once every arm has an outcome or the sweep stopped."""

    slots: int  # how many arms may run at once (Ray: the cluster's GPUs / per arm)

    def run(
        self, specs: list[ArmSpec], on_outcome: OnOutcome, keep_going: Callable[[], bool],
        pending: Pending,
    ) -> None: ...  # fmt: skip

    def stop(self) -> None:
        """End every running arm (their servers' groups stopped); from any thread."""

    def abandon(self) -> None:
        """The process exits now: kill what can be killed at once (a signal handler)."""


@dataclass
class Queued:
    spec: ArmSpec
    attempt: int = 1
    avoid: int | None = None  # the slot (or node) where its last attempt died


def failed_outcome(spec: ArmSpec, run: ArmRun) -> ArmOutcome:
    """An arm that failed twice: a failed cell at each concurrency it had left, naming why
    (the health gate excludes them; the table and the schedule file name them)."""
    why = f"{spec.label}: the arm failed twice, last on {run.node}: {run.fault}"
    cells = [
        TimedCell(new_cell(spec.row, c, why), run.started, run.ended) for c in spec.concurrencies
    ]
    return ArmOutcome(spec, run, cells, server_failed=True)


def retry_or_fail(
    item: Queued, outcome: ArmOutcome, pending: Pending, stopping: threading.Event
) -> Queued | ArmOutcome | None:
    """After an arm's fault: the retry to queue (first fault), or the failed outcome
    (second), or None (nothing left to measure, or the sweep is stopping)."""
    left = pending(item.spec)
    if left is None or stopping.is_set():
        return None
    if item.attempt == 1:
        return Queued(left, 2, item.avoid)
    return failed_outcome(left, outcome.run)


class LocalPool:
    """Arms on this machine's GPU slices, one thread per running arm."""

    def __init__(
        self, job: ArmJob, slices: list[list[str]], stopping: threading.Event, hooks: ArmHooks
    ) -> None:
        self.job = job
        self.slices = slices
        self.slots = len(slices)
        self.stopping = stopping
        self.hooks = hooks
        self._measurers: dict[int, Measurer] = {}  # slot -> the running arm's Measurer
        self._lock = threading.Lock()

    def run(
        self, specs: list[ArmSpec], on_outcome: OnOutcome, keep_going: Callable[[], bool],
        pending: Pending,
    ) -> None:  # fmt: skip
        queue = [Queued(spec) for spec in specs]
        running: dict[Future[ArmOutcome], tuple[Queued, int]] = {}
        free = list(range(self.slots))
        with ThreadPoolExecutor(self.slots, thread_name_prefix="specmon-arm") as threads:
            while True:
                while queue and free and keep_going() and not self.stopping.is_set():
                    item = queue.pop(0)
                    slot = _pick(free, item.avoid)
                    running[threads.submit(self._arm, item, slot)] = (item, slot)
                if not running:
                    return
                done, _ = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in done:
                    item, slot = running.pop(future)
                    free.append(slot)
                    self._finished(item, slot, future.result(), queue, on_outcome, pending)

    def _finished(
        self, item: Queued, slot: int, outcome: ArmOutcome, queue: list[Queued],
        on_outcome: OnOutcome, pending: Pending,
    ) -> None:  # fmt: skip
        on_outcome(outcome)
        if outcome.run.fault is None:
            return
        item.avoid = slot
        after = retry_or_fail(item, outcome, pending, self.stopping)
        if isinstance(after, Queued):
            self.hooks.say(f"specmon sweep: {item.spec.label}: retrying on another slot")
            queue.insert(0, after)
        elif after is not None:
            on_outcome(after)

    def _arm(self, item: Queued, slot: int) -> ArmOutcome:
        def measurers(measurer: Measurer | None) -> None:
            with self._lock:
                if measurer is None:
                    self._measurers.pop(slot, None)
                else:
                    self._measurers[slot] = measurer
            if measurer is not None and self.stopping.is_set():
                measurer.stop()  # a stop that came while it was being set up

        gpus = self.slices[slot]
        return run_arm(
            self.job, item.spec, gpus, self.stopping, attempt=item.attempt, hooks=self.hooks,
            measurers=measurers,
        )  # fmt: skip

    def stop(self) -> None:
        with self._lock:
            measurers = list(self._measurers.values())
        for measurer in measurers:
            measurer.stop()

    def abandon(self) -> None:
        pass  # the arms' servers are killed by the runner (it holds them: ArmHooks.on_server)


def _pick(free: list[int], avoid: int | None) -> int:
    """A free slot, another than `avoid` when there is one."""
    for slot in free:
        if slot != avoid:
            free.remove(slot)
            return slot
    return free.pop(0)
