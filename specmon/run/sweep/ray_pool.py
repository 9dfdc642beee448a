"""`--executor ray`: each arm a Ray task (not an actor: an actor keeps its GPU for its
lifetime) with `num_gpus=--gpus-per-server`. The task runs run/sweep/arm.py's `run_arm` on
the node Ray picks, server and load together on that node's loopback, so the network
between the driver and the cluster never enters a measurement; the driver gathers the
outcomes as arms finish (`ray.wait`) and records them as a local sweep does.

A stop cancels every running task (a KeyboardInterrupt in it: the arm stops its load and
its server's group), then, after the server's grace, cancels by force; a worker killed by
force takes its server's group with it (server/watchdog.py). A task or node that dies is
retried once, then its arm is reported as failed cells. Ray is an optional extra
(`pip install 'specmon[ray]'`)."""

from __future__ import annotations

import concurrent.futures
import io
import logging
import os
import signal
import tarfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specmon.errors import UserError
from specmon.run.sweep.arm import ArmHooks, ArmJob, ArmOutcome, ArmRun, ArmSpec, node_name, run_arm
from specmon.run.sweep.pool import OnOutcome, Pending, Queued, retry_or_fail
from specmon.run.sweep.servers import STOP_GRACE_S
from specmon.run.sweep.settings import Placement, row_dir

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
LOCAL_OBJECT_STORE = 200 * 1024 * 1024  # arms hand back cells, not data: keep it small
ARM_LOG = "arm-{row}.log"  # a task's progress lines, beside its server's log


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError(
            "--executor ray needs Ray: pip install 'specmon[ray]' (or pip install 'ray>=2.40')"
        ) from None
    return ray


def connect(placement: Placement) -> Any:
    """Ray, connected: to --ray-address, else to a running cluster, else a local one
    (`--ray-num-gpus N` GPUs, logical ones allowed: Ray acts as if the machine had them).
    Waits for the start `start_connecting` began, when one was begun."""
    global _early
    early, _early = _early, None
    if early is not None:
        ray = early.result()
        _own_handlers_again()
        return ray
    return _connect_now(placement)


def _own_handlers_again() -> None:
    """Ray's core worker installs its own C-level SIGTERM handler as the driver connects
    (it logs, then the process aborts at exit), whatever thread connected: the Python
    handlers (specmon/stops.py's) are installed again over it, on the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in STOP_SIGNALS:
        handler = signal.getsignal(sig)
        if handler is not None:
            signal.signal(sig, handler)


def _connect_now(placement: Placement) -> Any:
    ray = import_ray()
    if ray.is_initialized():
        return ray
    if threading.current_thread() is not threading.main_thread():
        return _init(ray, placement)  # no handler installed off the main thread
    # ray.init installs its own SIGTERM handler (log and exit 1): specmon's stop handlers
    # (specmon/stops.py) are put back, so a SIGTERM stops the sweep as without Ray
    saved = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        return _init(ray, placement)
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


# Ray being started on a thread of its own (start_connecting), until connect() takes it
_early: concurrent.futures.Future[Any] | None = None


def start_connecting(placement: Placement) -> None:
    """Begin connect() on a thread now, so Ray's start (seconds: its head processes, then
    the workers that preload this module) overlaps the sweep's own set-up; RayPool waits for
    it. A thread that is not the main one: ray.init installs no signal handler there."""
    import_ray()  # not installed: the one-line error now, on the command's thread
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def start() -> None:
        try:
            future.set_result(_quietly(_connect_now, placement))
        except BaseException as exc:  # handed to the thread that waits for it
            future.set_exception(exc)
            return
        # a local cluster's processes share this thread's fate (Ray's PR_SET_PDEATHSIG
        # fires when the thread that started them ends, not the process): the thread
        # stays until the process exits (seen: GCS killed, the driver aborting 60 s later)
        threading.Event().wait()

    global _early
    _early = future
    threading.Thread(target=start, name="specmon-ray-init", daemon=True).start()


def _quietly(call: Callable[[Placement], Any], placement: Placement) -> Any:
    """Ray's warning that a thread other than the main one installs no SIGTERM handler is
    what specmon wants (its own handlers stay): not printed."""
    logger = logging.getLogger("ray._private.worker")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return call(placement)
    finally:
        logger.setLevel(level)


def _init(ray: Any, placement: Placement) -> Any:
    quiet = {"log_to_driver": False, "logging_level": "warning"}
    if placement.ray_address is not None:
        try:
            ray.init(address=placement.ray_address, **quiet)
        except (ConnectionError, RuntimeError) as exc:
            raise UserError(f"--ray-address {placement.ray_address}: {exc}") from None
        return ray
    if placement.ray_num_gpus is None:
        try:
            ray.init(address="auto", **quiet)
            return ray
        except (ConnectionError, RuntimeError):
            pass  # no cluster running: start a local one
    _start_local(ray, placement, quiet)
    return ray


def _start_local(ray: Any, placement: Placement, quiet: dict[str, Any]) -> None:
    """A local cluster with as little fixed cost as Ray allows: no dashboard, no usage
    report (nothing to reach from a test box), and as many workers started with it as arms
    can run at once, each importing this module (and run_arm's) while Ray comes up, so an
    arm's task starts without a Python start and an import on its own path."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    slots = (placement.ray_num_gpus or 0) // placement.gpus_per_server
    ray.init(
        num_cpus=max(os.cpu_count() or 1, slots),  # Ray starts this many workers at once
        num_gpus=placement.ray_num_gpus or 0,
        include_dashboard=False,
        object_store_memory=LOCAL_OBJECT_STORE,
        _system_config={"preload_python_modules": [__name__]},
        **quiet,
    )


def arm_task(job: ArmJob, spec: ArmSpec, attempt: int, driver_node: str) -> ArmOutcome:
    """The Ray task: one arm on the GPUs Ray gave it. Progress lines go to the arm's log in
    the artifact dir; on another node than the driver's, the arm's files come back packed."""
    import ray

    gpus = [str(gpu) for gpu in ray.get_gpu_ids()]
    node = node_name()  # the host: where the server and the load ran
    log = Path(job.artifact_dir) / ARM_LOG.format(row=row_dir(spec.row))
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as out:

        def say(line: str) -> None:
            print(line, file=out, flush=True)

        outcome = run_arm(
            job, spec, gpus, threading.Event(), where=("ray", node), attempt=attempt,
            hooks=ArmHooks(say=say),
        )  # fmt: skip
    if node != driver_node:
        outcome.exports = pack(Path(job.artifact_dir), spec)
    return outcome


def pack(directory: Path, spec: ArmSpec) -> bytes:
    """The arm's files (its row's exports, its server's and its own log) as a tar."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in (row_dir(spec.row), spec.log_name, ARM_LOG.format(row=row_dir(spec.row))):
            if (directory / name).exists():
                tar.add(directory / name, arcname=name)
    return buffer.getvalue()


def unpack(directory: Path, exports: bytes) -> None:
    with tarfile.open(fileobj=io.BytesIO(exports), mode="r:gz") as tar:
        tar.extractall(directory, filter="data")


class RayPool:
    """Arms as Ray tasks; `slots`: the cluster's GPUs over --gpus-per-server."""

    def __init__(
        self,
        job: ArmJob,
        placement: Placement,
        stopping: threading.Event,
        say: Callable[[str], None],
    ) -> None:
        self.ray = connect(placement)
        self.job = job
        self.stopping = stopping
        self.say = say
        self.gpus = placement.gpus_per_server
        total = int(self.ray.cluster_resources().get("GPU", 0))
        if total < self.gpus:
            raise UserError(
                f"--executor ray: the cluster has {total} GPU(s), fewer than "
                f"--gpus-per-server {self.gpus} (a local one: --ray-num-gpus N)"
            )
        self.slots = total // self.gpus
        self.node = node_name()
        self._task = self.ray.remote(arm_task).options(
            num_gpus=self.gpus,
            num_cpus=0,
            max_retries=0,  # retried here, once, by hand
        )
        self._running: dict[Any, Queued] = {}
        self._lock = threading.Lock()

    def _submit(self, item: Queued) -> None:
        ref = self._task.remote(self.job, item.spec, item.attempt, self.node)
        with self._lock:
            self._running[ref] = item

    def run(
        self, specs: list[ArmSpec], on_outcome: OnOutcome, keep_going: Callable[[], bool],
        pending: Pending,
    ) -> None:  # fmt: skip
        queue = [Queued(spec) for spec in specs]
        while True:
            while queue and keep_going() and not self.stopping.is_set():
                self._submit(queue.pop(0))
            if self.stopping.is_set():
                self._cancel_all(on_outcome)
                return
            with self._lock:
                refs = list(self._running)
            if not refs:
                return
            ready, _ = self.ray.wait(refs, num_returns=1, timeout=0.5)
            for ref in ready:
                with self._lock:
                    item = self._running.pop(ref)
                self._gathered(item, ref, queue, on_outcome, pending)

    def _gathered(
        self, item: Queued, ref: Any, queue: list[Queued], on_outcome: OnOutcome,
        pending: Pending,
    ) -> None:  # fmt: skip
        outcome = self._outcome(item, ref)
        if outcome.exports:
            unpack(Path(self.job.artifact_dir), outcome.exports)
        on_outcome(outcome)
        if outcome.run.fault is None:
            return
        after = retry_or_fail(item, outcome, pending, self.stopping)
        if isinstance(after, Queued):
            self.say(f"specmon sweep: {item.spec.label}: {outcome.run.fault}; retrying once")
            queue.insert(0, after)
        elif after is not None:
            on_outcome(after)

    def _outcome(self, item: Queued, ref: Any) -> ArmOutcome:
        """The task's outcome, or (its worker or node died) an outcome naming the fault."""
        try:
            outcome: ArmOutcome = self.ray.get(ref)
            return outcome
        except Exception as exc:  # WorkerCrashedError, NodeDiedError, TaskCancelledError, ...
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            now = time.time()
            run = ArmRun(item.spec.row, "ray", "?", [], now, now, item.attempt)
            run.fault = f"{type(exc).__name__}: {first}".rstrip(": ")
            return ArmOutcome(item.spec, run)

    def _cancel_all(self, on_outcome: OnOutcome) -> None:
        """Every running arm cancelled: a KeyboardInterrupt in each task first (its arm
        stops its load and its server), by force after the server's grace (the watchdog
        then ends the server's group); arms that finished meanwhile are recorded."""
        with self._lock:
            refs = list(self._running)
        for ref in refs:
            self.ray.cancel(ref, force=False)
        deadline = time.monotonic() + STOP_GRACE_S + 5
        while refs and time.monotonic() < deadline:
            ready, refs = self.ray.wait(refs, num_returns=len(refs), timeout=0.5)
            for ref in ready:
                self._record_if_done(ref, on_outcome)
        for ref in refs:
            self.ray.cancel(ref, force=True)
            with self._lock:
                self._running.pop(ref, None)

    def _record_if_done(self, ref: Any, on_outcome: OnOutcome) -> None:
        with self._lock:
            item = self._running.pop(ref)
        outcome = self._outcome(item, ref)
        if outcome.run.fault is None or outcome.cells:
            on_outcome(outcome)

    def stop(self) -> None:
        pass  # run() sees `stopping` within half a second and cancels the tasks

    def abandon(self) -> None:
        with self._lock:
            refs = list(self._running)
        for ref in refs:
            try:
                self.ray.cancel(ref, force=True)
            except Exception:
                pass
