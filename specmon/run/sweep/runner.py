"""The k sweep runner: the grid as arms, one server per arm, every concurrency, repeated.

Each row of the grid (the baseline k = 0 first when given, then each k; after them the
schedule just drafted and each --variant) is one arm (run/sweep/arm.py): its server started
as its own process group (output in `server-k{k}.log`), ready once /v1/models lists the
model, each (k, concurrency) cell run `repeats` times with the ordinary LoadRunner +
RunSession (AIPerf-compatible exports in `k{k}/c{c}/r{rep}/`), then the server stopped
(SIGTERM to the group, SIGKILL after a grace period). The arms run one at a time, side by
side on a local GPU pool (run/sweep/pool.py) or as Ray tasks (run/sweep/ray_pool.py).
`sweep.json` is rewritten atomically after every cell, so a stop (Ctrl-C, SIGTERM) or a
crash keeps every finished cell, and `--resume` skips the cells measured with the same
settings hash. The decision math, the schedule and the model live in specmon/decision, the
console tables in specmon/analysis (see docs/architecture.md, "k sweep").
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from specmon.analysis.arms import ArmReport, arm_reports, render_arms
from specmon.analysis.sweep import render_sweep_tables
from specmon.config import RunConfig
from specmon.decision import stepcost
from specmon.decision.cells import Decision, decide, trust_of
from specmon.decision.schedule import SCHEDULE_NAME, build_schedule, write_schedule
from specmon.decision.stepcost import KModel
from specmon.decision.sweep_types import SWEEP_JSON, Cell
from specmon.errors import UserError
from specmon.export.common import atomic_write
from specmon.run.sweep.arm import ArmHooks, ArmJob, ArmOutcome, ArmRun, ArmSpec
from specmon.run.sweep.measure import MakeRepeat, Measurer, SweepNow, TimedCell
from specmon.run.sweep.pool import ArmPool, LocalPool
from specmon.run.sweep.settings import (
    SCHEDULE_ARM,
    SCHEMA,
    Placement,
    SweepSettings,
    row_label,
)
from specmon.server.models import list_models
from specmon.server.process import ServerProcess
from specmon.text_guard import mask_secrets


@dataclass
class SweepResult:
    cells: list[Cell]
    stopped: bool
    decisions: list[Decision] | None = None
    model: KModel | None = None
    schedule: dict[str, Any] | None = None
    arms: dict[str, list[Cell]] = field(default_factory=dict)  # arm name -> its cells
    arm_reports: list[ArmReport] | None = None  # after conclude


class SweepRunner:
    """Runs the grid; `stop()` (from a signal handler or another thread) ends it cleanly.

    Live views read `now` (a SweepNow: the arm that moved last) and `last_measured` (the
    latest repeat's SweepNow, kept between repeats) and get `on_cell(cell)` as each cell of
    the grid is recorded, `on_arm_cell(name, cell)` as each arm's cell is, and
    `on_repeat(now)` as each repeat's session starts (on the arms' threads)."""

    def __init__(
        self,
        settings: SweepSettings,
        load_config: RunConfig,
        artifact_dir: str | Path,
        *,
        make_repeat: MakeRepeat,
        out: TextIO | None = None,
        previous: list[dict[str, Any]] | None = None,
        on_cell: Callable[[Cell], None] | None = None,
        on_repeat: Callable[[SweepNow], None] | None = None,
        placement: Placement | None = None,
    ) -> None:
        self.settings = settings
        self.load_config = load_config
        self.make_repeat = make_repeat
        self.dir = Path(artifact_dir)
        self.out = out or sys.stdout
        self.hash = settings.settings_hash()
        self.on_cell = on_cell
        self.on_arm_cell: Callable[[str, Cell], None] | None = None
        self.on_repeat = on_repeat
        self.last_measured: SweepNow | None = None
        self.now = SweepNow(repeats=settings.repeats)
        # cells kept from an earlier run of this sweep: (k, c) -> (cell, its settings hash)
        self.cells: dict[tuple[int, int], tuple[Cell, str]] = {}
        self._kept_at_once: dict[tuple[int | str, int], int | None] = {}
        for entry in previous or []:
            cell = Cell.from_dict(entry)
            self.cells[(cell.k, cell.concurrency)] = (cell, entry.get("settings_hash", ""))
            self._kept_at_once[(cell.k, cell.concurrency)] = entry.get("arms_at_once")
        self.stopping = threading.Event()
        self.placement = placement or Placement()
        self.arm_cells: dict[tuple[str, int], Cell] = {}  # (arm, concurrency) -> cell
        self.cell_times: dict[tuple[int | str, int], tuple[float, float]] = {}
        self.arm_runs: list[ArmRun] = []  # every arm run so far, retries included
        self._records = threading.RLock()  # the recorded cells and sweep.json, across arms
        self._servers: dict[int | str, ServerProcess] = {}  # arms' servers, for abandon()
        self._url_measurer: Measurer | None = None
        self.pool: ArmPool = self._make_pool()

    def _make_pool(self) -> ArmPool:
        job = ArmJob(self.settings, self.load_config, str(self.dir), self.make_repeat)
        hooks = ArmHooks(self._say, self._on_arm_cell, self._on_now, self._on_server, self._on_run)
        if self.placement.executor == "ray":
            from specmon.run.sweep.ray_pool import RayPool

            return RayPool(job, self.placement, self.stopping, self._say)
        return LocalPool(job, self.placement.local_slices(), self.stopping, hooks)

    # control ----------------------------------------------------------------------
    def stop(self) -> None:
        self.stopping.set()
        self.pool.stop()
        measurer = self._url_measurer
        if measurer is not None:
            measurer.stop()

    def abandon(self) -> None:
        """The process is about to exit without cleaning up (a third stop signal): kill the
        servers it started, groups and all, so nothing is left running. Called from a signal
        handler: one syscall per server, no locks."""
        for server in list(self._servers.values()):
            server.kill_now()
        self.pool.abandon()

    def is_done(self, k: int, c: int) -> bool:
        kept = self.cells.get((k, c))
        if kept is None:
            return False
        cell, cell_hash = kept
        return (
            cell.error is None
            and cell_hash == self.hash
            and len(cell.repeats) >= self.settings.repeats
        )

    # the grid -------------------------------------------------------------------------
    def run(self) -> SweepResult:
        self.dir.mkdir(parents=True, exist_ok=True)
        skipped = sum(
            self.is_done(k, c) for k in self.settings.grid_ks for c in self.settings.concurrencies
        )
        if skipped:
            self._say(f"specmon sweep: resuming: {skipped} cell(s) already measured, skipped")
        self.save()
        started = time.monotonic()
        try:
            if self.settings.urls:
                self._run_urls()
            else:
                self._run_serve()
        finally:
            self.now = SweepNow("done", repeats=self.settings.repeats)
            self.wall_s = time.monotonic() - started
        self._say(self.timing_line())
        return SweepResult(self.ordered_cells(), self.stopping.is_set(), arms=self.arms())

    wall_s: float | None = None  # the grid's wall time, once run() has ended

    def timing_line(self) -> str:
        """The sweep's wall time beside the sum of its arms' own times: the speed-up."""
        line = f"specmon sweep: wall time {self.wall_s or 0.0:.1f} s"
        if not self.arm_runs:
            return line
        total = sum(run.wall_s for run in self.arm_runs)
        return (
            f"{line}; {len(self.arm_runs)} arm run(s) took {total:.1f} s together "
            f"({self.placement.executor}, up to {self.pool.slots} at once)"
        )

    @property
    def now(self) -> SweepNow:
        return self._now

    @now.setter
    def now(self, now: SweepNow) -> None:
        # the latest repeat that started measuring is kept after it ends (`last_measured`):
        # a view sampling on a timer can miss a short repeat's "measuring" phase, never its
        # session (one attribute write each, so a reader on another thread sees either whole)
        if now.phase == "measuring":
            self.last_measured = now
        self._now = now

    def _run_serve(self) -> None:
        specs = self._grid_specs()
        alone = [s for s in specs if s.row == 0] if self.placement.isolate_baseline else []
        for batch in (alone, [s for s in specs if s not in alone]):
            if batch and not self._run_batch(batch):
                return
        self._run_arms()

    def _grid_specs(self) -> list[ArmSpec]:
        """One arm per k with cells still to measure, in grid order (the baseline first)."""
        specs = []
        for k in self.settings.grid_ks:
            todo = tuple(c for c in self.settings.concurrencies if not self.is_done(k, c))
            template = self.settings.baseline_serve if k == 0 else self.settings.serve
            if todo and template is not None:
                specs.append(ArmSpec(k, template, todo))
        return specs

    def _run_batch(self, specs: list[ArmSpec]) -> bool:
        """These arms, side by side as far as the pool has slots; False when the sweep is
        not to go on (stopped, or --stop-on-error after a server failed)."""
        if self.stopping.is_set():
            return False
        failed = threading.Event()

        def on_outcome(outcome: ArmOutcome) -> None:
            self._on_outcome(outcome)
            if outcome.server_failed:
                failed.set()

        def keep_going() -> bool:
            return not (self.settings.stop_on_error and failed.is_set())

        self.pool.run(specs, on_outcome, keep_going, self._pending)
        if not keep_going():
            self._say("specmon sweep: stopping (--stop-on-error)")
            return False
        return not self.stopping.is_set()

    def _pending(self, spec: ArmSpec) -> ArmSpec | None:
        """The arm with only the concurrencies not recorded yet (an arm retried after its
        task died part-way); None when nothing is left."""
        with self._records:
            todo = tuple(c for c in spec.concurrencies if (spec.row, c) not in self.cell_times)
        return ArmSpec(spec.row, spec.template, todo, spec.schedule) if todo else None

    # arms beyond fixed k: the schedule just drafted, then each --variant -----------------
    def _run_arms(self) -> None:
        if self.stopping.is_set():
            return
        concs = tuple(self.settings.concurrencies)
        specs = []
        if self.settings.verify_schedule:
            schedule = self._draft_schedule()
            if schedule is not None:
                template = self.settings.schedule_template()
                specs.append(ArmSpec(SCHEDULE_ARM, template, concs, schedule))
        specs += [ArmSpec(name, cmd, concs) for name, cmd in self.settings.variants.items()]
        if specs:
            self._run_batch(specs)

    def _draft_schedule(self) -> dict[str, Any] | None:
        """The schedule of the fixed-k cells (as conclude() will write it), written now so
        the "schedule" arm's server can read it; None (and why) when there is none to run."""
        measured = [c for c in self.ordered_cells() if c.measured]
        decisions = decide(measured, self.settings.objective(), bootstrap=False)
        try:
            model: KModel | None = stepcost.fit(measured)
        except Exception:  # too few cells to fit: the schedule carries measured k only
            model = None
        try:
            schedule = build_schedule(decisions, model)
        except ValueError as exc:
            self._say(f"specmon sweep: arm schedule not measured: {exc}")
            return None
        if schedule["speculative_config_fragment"] is None:
            self._say("specmon sweep: arm schedule not measured: it is k=0 everywhere")
            return None
        write_schedule(self.dir / SCHEDULE_NAME, schedule)
        return schedule

    # what the arms report ---------------------------------------------------------------
    def _on_outcome(self, outcome: ArmOutcome) -> None:
        """An arm ended (or failed for good): its run, and its cells when they did not
        arrive one by one (a Ray task hands them back at its end)."""
        with self._records:
            if not any(run is outcome.run for run in self.arm_runs):
                self.arm_runs.append(outcome.run)
            if not outcome.cells_recorded:
                for timed in outcome.cells:
                    self._on_arm_cell(outcome.spec, timed)
            self.save()
        self._say(arm_line(outcome.run))

    def _on_arm_cell(self, spec: ArmSpec, timed: TimedCell) -> None:
        with self._records:
            self.cell_times[(spec.row, timed.cell.concurrency)] = (timed.started, timed.ended)
            self._record(timed.cell, spec.row)

    def _on_run(self, run: ArmRun) -> None:
        with self._records:
            self.arm_runs.append(run)

    def _on_now(self, now: SweepNow) -> None:
        self.now = now
        if now.phase == "measuring" and self.on_repeat is not None:
            self.on_repeat(now)

    def _on_server(self, spec: ArmSpec, server: ServerProcess | None) -> None:
        if server is None:
            self._servers.pop(spec.row, None)
        else:
            self._servers[spec.row] = server

    def arms_at_once(self, row: int | str, c: int) -> int | None:
        """How many arms ran while this cell was measured, its own included (a cell kept
        from an earlier run: as that run recorded it)."""
        times = self.cell_times.get((row, c))
        if times is None:
            return self._kept_at_once.get((row, c))
        start, end = times
        return sum(1 for run in self.arm_runs if run.started <= end and (run.ended or end) >= start)

    def _run_urls(self) -> None:
        """Servers that cannot be restarted: one concurrency at a time across all of them."""
        models: dict[int, str] = {}
        for k, url in sorted(self.settings.urls.items()):
            ids = list_models(url, self.load_config.api_key)
            model = self.load_config.model
            if not ids or (model is not None and model not in ids):
                raise UserError(f"--url k{k}={url}: /v1/models does not answer or list the model")
            models[k] = model or ids[0]
        self._url_measurer = measurer = Measurer(
            self.settings, self.load_config, self.dir, self.make_repeat, self.stopping,
            self._say, self._on_now,
        )  # fmt: skip
        for c in self.settings.concurrencies:
            for k, url in sorted(self.settings.urls.items()):
                if self.stopping.is_set():
                    return
                if self.is_done(k, c):
                    continue
                started = time.time()
                cell = measurer.measure_cell(k, c, url, models[k])
                if cell is None:
                    return
                with self._records:
                    self.cell_times[(k, c)] = (started, time.time())
                    self._record(cell)
                if cell.error and self.settings.stop_on_error:
                    self._say("specmon sweep: stopping (--stop-on-error)")
                    return

    # bookkeeping ------------------------------------------------------------------------
    def _record(self, cell: Cell, row: int | str | None = None) -> None:
        if isinstance(row, str):  # an arm: kept apart from the grid's cells (never a k)
            self.arm_cells[(row, cell.concurrency)] = cell
            self.save()
            self._say(cell_line(cell, row_label(row)))
            if self.on_arm_cell is not None:
                self.on_arm_cell(row, cell)
            return
        self.cells[(cell.k, cell.concurrency)] = (cell, self.hash)
        self.save()
        self._say(cell_line(cell))
        if self.on_cell is not None:
            self.on_cell(cell)

    def arm_names(self) -> list[str]:
        """The arms this sweep measures after the grid, in order: the schedule it writes
        (--verify-schedule), then each --variant."""
        schedule = [SCHEDULE_ARM] if self.settings.verify_schedule else []
        return schedule + list(self.settings.variants)

    def arms(self) -> dict[str, list[Cell]]:
        """arm name -> its cells by concurrency, in the order the arms ran."""
        out: dict[str, list[Cell]] = {}
        for (name, _), cell in self.arm_cells.items():
            out.setdefault(name, []).append(cell)
        return {name: sorted(cells, key=lambda c: c.concurrency) for name, cells in out.items()}

    def ordered_cells(self) -> list[Cell]:
        return [cell for _, (cell, _) in sorted(self.cells.items())]

    def save(self, extra: dict[str, Any] | None = None) -> Path:
        """sweep.json, atomically: settings, hash, every cell (with the hash it was measured
        under and how many arms ran beside it), where each arm ran."""
        with self._records:
            doc: dict[str, Any] = {
                "schema": SCHEMA,
                "settings": self.settings.to_dict(),
                "settings_hash": self.hash,
                "placement": self.placement.to_dict(),
                "cells": [
                    dict(cell.to_dict(), settings_hash=h, arms_at_once=self.arms_at_once(k, c))
                    for (k, c), (cell, h) in sorted(self.cells.items())
                ],
            }
            if self.arm_cells:  # "k" of an arm cell is ARM_K: not a k
                doc["arm_cells"] = [
                    dict(cell.to_dict(), arm=name, arms_at_once=self.arms_at_once(name, c))
                    for (name, c), cell in self.arm_cells.items()
                ]
            doc["arm_runs"] = [run.to_dict() for run in self.arm_runs]
            doc.update(extra or {})
            path = self.dir / SWEEP_JSON
            atomic_write(path, json.dumps(doc, indent=2).encode() + b"\n")
        return path

    def _say(self, line: str) -> None:
        print(mask_secrets(line), file=self.out, flush=True)

    # the end: decisions, model, schedule --------------------------------------------------
    def conclude(self, result: SweepResult) -> SweepResult:
        """Decide, fit, write the schedule and the final sweep.json; a failure of the analysis
        is reported and leaves the measured cells in sweep.json."""
        measured = [cell for cell in result.cells if cell.measured]
        extra: dict[str, Any] = {"complete": not result.stopped, "wall_s": self.wall_s}
        extra["arm_time_s"] = round(sum(run.wall_s for run in self.arm_runs), 3)
        try:
            result.decisions = decide(measured, self.settings.objective())
            extra["decisions"] = [d.to_dict() for d in result.decisions]
            extra.update(trust_of(result.decisions, not result.stopped))
            try:
                result.model = stepcost.fit(measured)
                extra["model"] = result.model.to_dict()
            except Exception as exc:  # too few cells or k values to fit: decisions still stand
                extra["model"] = None
                extra["model_error"] = str(exc)
                self._say(f"specmon sweep: model not fitted: {exc}")
            try:
                result.schedule = build_schedule(
                    result.decisions, result.model, complete=not result.stopped
                )
            except ValueError as exc:  # nothing can anchor a schedule: none, and why
                extra["schedule_error"] = str(exc)
                self._say(f"specmon sweep: no schedule written: {exc}")
            else:
                write_schedule(self.dir / SCHEDULE_NAME, result.schedule)
            if result.arms:
                result.arm_reports = self._arm_reports(result)
                extra["arms"] = [report.to_dict() for report in result.arm_reports]
        except Exception as exc:
            extra["analysis_error"] = f"{type(exc).__name__}: {exc}"
            self._say(f"specmon sweep: warning: no decisions ({type(exc).__name__}: {exc})")
        self.save(extra)
        return result

    def _arm_reports(self, result: SweepResult) -> list[ArmReport]:
        return arm_reports(result.arms, result.cells, self.settings.objective())

    def tables(self, result: SweepResult) -> str | None:
        if result.decisions is None:
            return None
        from specmon.export.console import output_width

        width = output_width(self.out)  # the terminal's columns (120 when piped)
        text = render_sweep_tables(
            result.cells, result.decisions, result.schedule, result.model, width
        )
        if result.arm_reports:
            text += "\n" + "\n".join(render_arms(result.arm_reports, width)) + "\n"
        return text


def cell_line(cell: Cell, row: str | None = None) -> str:
    """The headless line printed as each cell finishes (`row`: an arm's label)."""
    head = f"cell {row or f'k={cell.k}'} concurrency={cell.concurrency}:"
    if cell.error is not None:
        first = cell.error.splitlines()[0] if cell.error else ""
        return f"{head} error: {first}"
    tput = [r.output_token_throughput for r in cell.repeats]
    med = statistics.median(tput)
    spread = f" (min {min(tput):.1f}, max {max(tput):.1f})" if len(tput) > 1 else ""
    als = [r.acceptance_length for r in cell.repeats if r.acceptance_length is not None]
    al = f", accept-len {statistics.median(als):.2f}" if als else ""
    ttfts = [r.ttft_ms for r in cell.repeats if r.ttft_ms is not None]
    ttft = f", TTFT p50 {statistics.median(ttfts):.1f} ms" if ttfts else ""
    behind = f"; {cell.server_behind}" if cell.server_behind else ""
    return f"{head} {len(tput)} repeat(s), output {med:.1f} tok/s median{spread}{al}{ttft}{behind}"


def arm_line(run: ArmRun) -> str:
    """The headless line printed as each arm ends: where it ran and how long it took."""
    gpus = f" GPU {','.join(run.gpus)}" if run.gpus else ""
    fault = f"; failed: {run.fault}" if run.fault else ""
    retry = f" (attempt {run.attempt})" if run.attempt > 1 else ""
    return (
        f"specmon sweep: {row_label(run.row)}{retry} ran {run.wall_s:.1f} s on "
        f"{run.node}{gpus} ({run.executor}){fault}"
    )
