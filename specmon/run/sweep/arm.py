"""One arm of a sweep, a self-contained unit of work: start its server (a k, the baseline,
a --variant or the schedule) on its GPU slice, wait until it is ready, warm up, measure every
pending concurrency's repeats, stop the server's whole process group, and hand back the
cells. The same `run_arm` runs one arm at a time, several on a local GPU pool
(run/sweep/pool.py) or as a Ray task (run/sweep/ray_pool.py): the sequential sweep is the
one-slot case."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specmon.config import RunConfig
from specmon.decision.schedule import SCHEDULE_NAME
from specmon.export.common import atomic_write
from specmon.records import json_record
from specmon.run.sweep.measure import MakeRepeat, Measurer, SweepNow, TimedCell, new_cell
from specmon.run.sweep.servers import (
    STOP_GRACE_S,
    ServerFailed,
    free_port,
    schedule_command,
    start_server,
    substitute,
    wait_ready,
    write_fragment,
)
from specmon.run.sweep.settings import (
    SCHEDULE_PLACEHOLDER,
    SweepSettings,
    row_dir,
    row_label,
)
from specmon.server.process import ServerProcess
from specmon.sim import presets
from specmon.specdecode.method import of_command
from specmon.text_guard import mask_secrets


@dataclass(frozen=True)
class ArmSpec:
    """What one arm measures: its row (a k, or an arm's name), its server's template and
    the concurrencies still to measure; the schedule arm carries the schedule it serves."""

    row: int | str
    template: str
    concurrencies: tuple[int, ...]
    schedule: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        return row_label(self.row)

    @property
    def log_name(self) -> str:
        return f"server-{row_dir(self.row)}.log"

    def command(self, port: int, gpus: list[str], artifact_dir: Path) -> str:
        if self.schedule is None:
            k = self.row if isinstance(self.row, int) else 0
            fragment = (  # a wrapper script's {schedule}: this k's speculative config
                write_fragment(artifact_dir, k, {"num_speculative_tokens": k})
                if SCHEDULE_PLACEHOLDER in self.template and isinstance(self.row, int)
                else None
            )
            return substitute(self.template, k, port, gpus, fragment)
        path = artifact_dir / SCHEDULE_NAME
        if not path.exists():  # on another node than the driver, which wrote it
            atomic_write(path, json.dumps(self.schedule, indent=2).encode() + b"\n")
        return schedule_command(self.template, self.schedule, path, port, gpus)


@dataclass
class ArmRun:
    """Where and when an arm ran (sweep.json "arm_runs"): its executor, node, GPU ids,
    wall-clock start and end (time.time()), the attempt, and a fault that ended it."""

    row: int | str
    executor: str
    node: str
    gpus: list[str]
    started: float
    ended: float = 0.0
    attempt: int = 1
    fault: str | None = None  # the task or node died (not the server: that is a cell error)
    # the speculative method and drafter its server command names (SpecMethod.to_json)
    spec_method: dict[str, str | None] | None = None

    @property
    def wall_s(self) -> float:
        return max(0.0, self.ended - self.started)

    def to_dict(self) -> dict[str, Any]:
        return dict(json_record(self), wall_s=round(self.wall_s, 3))


@dataclass
class ArmOutcome:
    """An arm's cells (with their times) and where it ran; `stopped`: the sweep stopped it."""

    spec: ArmSpec
    run: ArmRun
    cells: list[TimedCell] = field(default_factory=list)
    stopped: bool = False
    server_failed: bool = False
    cells_recorded: bool = False  # each cell went to ArmHooks.on_cell as it was measured
    exports: bytes | None = None  # the arm's files, packed, from a node not the driver's


@dataclass(frozen=True)
class ArmJob:
    """What every arm of one sweep shares (pickled whole into a Ray task)."""

    settings: SweepSettings
    load_config: RunConfig
    artifact_dir: str
    make_repeat: MakeRepeat


@dataclass
class ArmHooks:
    """The live side of an arm run in the driver's process (none in a Ray task): progress
    lines, each cell as it is recorded, where the arm is, and its server once started (so a
    third stop signal can kill it)."""

    say: Callable[[str], None] = print
    on_cell: Callable[[ArmSpec, TimedCell], None] | None = None
    on_now: Callable[[SweepNow], None] | None = None
    on_server: Callable[[ArmSpec, ServerProcess | None], None] | None = None
    on_run: Callable[[ArmRun], None] | None = None  # the run as it starts (ended = 0)


def node_name() -> str:
    return socket.gethostname()


def run_arm(
    job: ArmJob,
    spec: ArmSpec,
    gpus: list[str],
    stopping: threading.Event,
    *,
    where: tuple[str, str] = ("local", ""),
    attempt: int = 1,
    hooks: ArmHooks | None = None,
    measurers: Callable[[Measurer | None], None] | None = None,
) -> ArmOutcome:
    """Start, measure, stop one arm (see the module docstring); `where`: (executor, node).
    Whatever the arm raises is its fault (`run.fault`, for the pool to retry), the server
    stopped all the same. `measurers`: told the arm's Measurer while it runs (None after),
    so the driver's stop() can end the repeat in progress."""
    hooks = hooks or ArmHooks()
    run = ArmRun(spec.row, where[0], where[1] or node_name(), gpus, time.time(), attempt=attempt)
    outcome = ArmOutcome(spec, run, cells_recorded=hooks.on_cell is not None)
    if hooks.on_run is not None:
        hooks.on_run(run)

    def record(timed: TimedCell) -> None:
        outcome.cells.append(timed)
        if hooks.on_cell is not None:
            hooks.on_cell(spec, timed)

    try:
        _serve(job, spec, gpus, stopping, hooks, record, outcome, measurers)
    except Exception as exc:  # the arm's own failure (not its server's): retried once
        run.fault = f"{type(exc).__name__}: {exc}"
    finally:
        run.ended = time.time()
        outcome.stopped = stopping.is_set()
    return outcome


def _serve(
    job: ArmJob,
    spec: ArmSpec,
    gpus: list[str],
    stopping: threading.Event,
    hooks: ArmHooks,
    record: Callable[[TimedCell], None],
    outcome: ArmOutcome,
    measurers: Callable[[Measurer | None], None] | None,
) -> None:
    """The arm's server up, its cells measured, the server's group stopped."""
    directory = Path(job.artifact_dir)
    port = free_port()
    command = spec.command(port, gpus, directory)
    on_gpus = f" on GPU {','.join(gpus)}" if gpus else ""
    hooks.say(
        f"specmon sweep: {spec.label}: starting `{mask_secrets(command)}`{on_gpus} (pid {os.getpid()})"
    )
    method = of_command(command) or presets.method_of_command(command)
    outcome.run.spec_method = method.to_json() if method is not None else None
    server = start_server(command, port, directory / spec.log_name, gpus)
    measurer = Measurer(
        job.settings, job.load_config, directory, job.make_repeat, stopping, hooks.say, hooks.on_now
    )
    measurer.spec_method = method
    measurer.server = server
    if hooks.on_server is not None:
        hooks.on_server(spec, server)
    if measurers is not None:
        measurers(measurer)
    try:
        _measure(job, spec, measurer, record, outcome)
    finally:
        server.stop(STOP_GRACE_S)
        if measurers is not None:
            measurers(None)
        if hooks.on_server is not None:
            hooks.on_server(spec, None)


def _measure(
    job: ArmJob,
    spec: ArmSpec,
    measurer: Measurer,
    record: Callable[[TimedCell], None],
    outcome: ArmOutcome,
) -> None:
    server = measurer.server
    assert server is not None
    fixed, arm = (spec.row, None) if isinstance(spec.row, int) else (None, spec.row)
    if measurer.on_now is not None:
        repeats = job.settings.repeats
        measurer.on_now(
            SweepNow("starting", fixed, repeats=repeats, log_path=server.log_path, arm=arm)
        )
    todo = list(spec.concurrencies)
    try:
        model = wait_ready(
            server,
            spec.row,
            job.load_config.model,
            job.settings.ready_timeout,
            job.load_config.api_key,
            measurer.stopping,
        )
        measurer.say(f"specmon sweep: {spec.label}: ready at {server.url} (model {model})")
        outcome.server_failed = measurer.measure_row(spec.row, todo, server.url, model, record)
    except ServerFailed as exc:
        if not measurer.stopping.is_set():
            outcome.server_failed = True
            now = time.time()
            for c in todo:
                record(TimedCell(new_cell(spec.row, c, str(exc)), now, now))
