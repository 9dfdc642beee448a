"""Measuring one row of a sweep (a k or an arm) against one server URL: each cell's
repeats, each repeat a session + load runner of `specmon run`'s (`make_repeat`), with the
warm-up in a run of its own and specmon sim's fidelity figures around each repeat. Used by
an arm (run/sweep/arm.py, its own server) and by the `--url` form (servers given)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specmon.config import RunConfig
from specmon.decision.slo import percentiles_of_summary
from specmon.decision.sweep_types import Cell, RepeatMeasurement
from specmon.errors import UserError
from specmon.interfaces import LoadControl
from specmon.run.sweep.servers import server_failure
from specmon.run.sweep.settings import ARM_K, SweepSettings, row_dir, row_label
from specmon.server.health import HealthDelta, HealthSample
from specmon.server.process import ServerProcess
from specmon.server.scrape import fetch_counters
from specmon.session import RunSession
from specmon.specdecode.method import SpecMethod
from specmon.stats import row_value, summary_rows

# a repeat's session and runner for its config (run/assemble.py make_repeat: `specmon run`'s)
MakeRepeat = Callable[[RunConfig], tuple[RunSession, LoadControl]]
STOP_JOIN_S = 10.0  # a stopped load drains its requests within this


def measurement_of(session: Any, artifact_dir: Path) -> RepeatMeasurement:
    """One repeat's figures from its session's summary (the same numbers as its export)."""
    acc = session.accumulator
    summary = acc.summary()
    rows = summary_rows(summary)
    itl = row_value(rows, "inter_token_latency", "p50")
    return RepeatMeasurement(
        output_token_throughput=row_value(rows, "output_token_throughput") or 0.0,
        request_throughput=row_value(rows, "request_throughput") or 0.0,
        request_count=int(row_value(rows, "request_count") or 0),
        ttft_ms=row_value(rows, "time_to_first_token", "p50"),
        itl_ms=itl,
        tpot_ms=itl,  # AIPerf's ITL is per request (latency - TTFT) / (OSL - 1): the TPOT
        itl_mean_ms=row_value(rows, "inter_token_latency"),
        ttft_mean_ms=row_value(rows, "time_to_first_token"),
        request_latency_mean_ms=row_value(rows, "request_latency"),
        request_latency_ms=row_value(rows, "request_latency", "p50"),
        acceptance_length=row_value(rows, "spec_decode_token_weighted_acceptance_length"),
        histogram=acc.pooled_histogram_sorted() if acc.spec_request_count else {},
        error_count=int(row_value(rows, "error_request_count") or 0),
        artifact_dir=str(artifact_dir),
        latency_percentiles=percentiles_of_summary(summary),
    )


def lag_sample(url: str) -> HealthSample | None:
    """The server's health series now (for specmon sim's step-lag counters); None when
    /metrics cannot be read: the repeat then has no lag share, never a made-up one."""
    try:
        return fetch_counters(url).health
    except UserError:
        return None


def server_lag_share(before: HealthSample | None, after: HealthSample | None) -> float | None:
    """Δlag / Δformula seconds of specmon sim's steps between two scrapes (None otherwise)."""
    if before is None or after is None:
        return None
    return HealthDelta.between(before, after).sim_lag_share


def with_sim_fidelity(
    measured: RepeatMeasurement, before: HealthSample | None, after: HealthSample | None
) -> RepeatMeasurement:
    """The repeat with specmon sim's own figures between two scrapes around it: its lag
    share, the formula ITL of the requests that finished (the client's mean ITL is held
    against it: RepeatMeasurement.per_token_off_share), its writes' ITL share and mean
    batch, and how many requests it timed. Another server publishes none: the repeat is
    returned as it was.

    The scrapes bracket the repeat alone: a sweep warms up in a run of its own before
    them, so the simulator timed the requests the client measured (server_requests)."""
    if before is None or after is None:
        return measured
    delta = HealthDelta.between(before, after)
    return replace(
        measured,
        server_lag_share=delta.sim_lag_share,
        formula_itl_ms=delta.sim_itl_formula_ms,
        written_itl_share=delta.sim_itl_written_share,
        server_mean_batch=delta.sim_mean_batch,
        server_ttft_ms=delta.sim_ttft_written_ms,
        server_requests=None if delta.sim_requests_timed is None else int(delta.sim_requests_timed),
    )


def k_mismatch(k: int, reported: int | None, spec_requests: int) -> str | None:
    """Why a server's payloads contradict the k it was started / labelled with, or None."""
    if k == 0 and spec_requests:
        return f"the baseline (k=0) server reports speculation (num_spec_tokens {reported})"
    if k > 0 and reported is not None and reported != k:
        return f"the server for k={k} reports num_spec_tokens {reported}"
    return None


@dataclass(frozen=True)
class SweepNow:
    """Where the sweep is, for a live view (replaced whole, so any thread reads it whole).

    phase: "idle" (not started), "starting" (the server for k is starting: its log is at
    `log_path`), "measuring" (repeat `repeat` of `repeats` of (k, concurrency), its session
    in `session`) or "done". `session` is the repeat's RunSession (a SessionView)."""

    phase: str = "idle"
    k: int | None = None
    concurrency: int | None = None
    repeat: int = 0  # 1-based; 0 before the first repeat of the cell
    repeats: int = 0
    log_path: Path | None = None
    session: Any = None
    arm: str | None = None  # an arm's name (k is then None)

    @property
    def row(self) -> str:
        return f"arm {self.arm}" if self.arm is not None else f"k={self.k}"


def new_cell(row: int | str, c: int, error: str | None = None) -> Cell:
    return Cell(row if isinstance(row, int) else ARM_K, c, error=error)


@dataclass(frozen=True)
class TimedCell:
    """A cell with the wall-clock times (time.time()) it was measured between: how many
    arms ran beside it is read from these (run/sweep/runner.py)."""

    cell: Cell
    started: float
    ended: float


class Measurer:
    """Measures cells against one server for a sweep; `stop()` (any thread) ends the
    repeat in progress. `on_now(now)`: each SweepNow as the row moves on (a live view)."""

    def __init__(
        self,
        settings: SweepSettings,
        load_config: RunConfig,
        artifact_dir: Path,
        make_repeat: MakeRepeat,
        stopping: threading.Event,
        say: Callable[[str], None],
        on_now: Callable[[SweepNow], None] | None = None,
    ) -> None:
        self.settings = settings
        self.load_config = load_config
        self.dir = artifact_dir
        self.make_repeat = make_repeat
        self.spec_method: SpecMethod | None = None  # what the arm's --serve line names
        self.stopping = stopping
        self.say = say
        self.on_now = on_now
        self._runner: LoadControl | None = None
        # re-entrant: stop() may run in a signal handler on the thread that holds it (headless)
        self._lock = threading.RLock()
        self._warmed: set[int | str] = set()
        self.server: ServerProcess | None = None  # the row's own server (None with --url)

    def stop(self) -> None:
        with self._lock:
            if self._runner is not None:
                self._runner.stop()

    def _now(self, now: SweepNow) -> None:
        if self.on_now is not None:
            self.on_now(now)

    def measure_row(
        self,
        k: int | str,
        todo: list[int],
        url: str,
        model: str,
        record: Callable[[TimedCell], None],
    ) -> bool:
        """Every pending concurrency of one row (k or arm) against its own server
        (`self.server`), each cell handed to `record`; True when the server failed."""
        server = self.server
        assert server is not None
        for i, c in enumerate(todo):
            if self.stopping.is_set():
                return False
            started = time.time()
            cell = self.measure_cell(k, c, url, model)
            if cell is None:
                return False
            if not server.alive:
                error = server_failure(
                    server, k, f"exited with status {server.proc.returncode} during concurrency {c}"
                )
                for rest in todo[i:]:
                    record(TimedCell(new_cell(k, rest, str(error)), started, time.time()))
                return True
            record(TimedCell(cell, started, time.time()))
        return False

    # one cell -------------------------------------------------------------------------
    def measure_cell(self, k: int | str, c: int, url: str, model: str) -> Cell | None:
        """All repeats of (k, c) (k: a fixed k, or an arm's name); None when stopped
        part-way (the cell is not kept)."""
        cell = new_cell(k, c)
        for rep in range(self.settings.repeats):
            self.say(
                f"specmon sweep: {row_label(k)} concurrency={c} "
                f"repeat {rep + 1}/{self.settings.repeats}"
            )
            repeat, reported, spec_requests = self._run_repeat(k, c, rep, url, model)
            if repeat is None:
                return None
            # an arm is not one k: its payloads' k may vary (a schedule) or be anything
            mismatch = k_mismatch(k, reported, spec_requests) if isinstance(k, int) else None
            if mismatch:
                cell.error = mismatch
                return cell
            if repeat.request_count == 0:
                cell.error = (
                    f"no valid request at {row_label(k)} concurrency {c} "
                    f"({repeat.error_count} errors)"
                )
                return cell
            cell.repeats.append(repeat)
        return cell

    def _run_repeat(
        self, k: int | str, c: int, rep: int, url: str, model: str
    ) -> tuple[RepeatMeasurement | None, int | None, int]:
        repeat_dir = self.dir / row_dir(k) / f"c{c}" / f"r{rep + 1}"
        if k not in self._warmed and self.settings.warmup_request_count:
            # warm up in a run of its own, before the repeat's first /metrics scrape: the
            # simulator's figures between the scrapes (formula ITL, lag) then cover exactly
            # the requests the client measured (inside the repeat, a few warm-up requests
            # of other acceptance moved the formula's mean ITL by 1.6-3.6% at c=1)
            warm_dir = self.dir / row_dir(k) / "warmup"
            warm = self._cell_config(url, model, c, warm_dir, self.settings.warmup_request_count)
            what = f"{row_label(k)} concurrency {c} (warm-up)"
            if self._drive(*self.make_repeat(warm), what) is None:
                return None, None, 0
        self._warmed.add(k)
        config = self._cell_config(url, model, c, repeat_dir)
        session, runner = self.make_repeat(config)
        if self.spec_method is not None and session.spec_method is None:  # no --spec-method
            session.set_spec_method(self.spec_method)
        fixed, arm = (k, None) if isinstance(k, int) else (None, k)
        self._now(
            SweepNow(
                "measuring", fixed, c, rep + 1, self.settings.repeats, session=session, arm=arm
            )
        )
        lag_before = lag_sample(url)
        saturated = self._drive(session, runner, f"{row_label(k)} concurrency {c}")
        if saturated is None:
            return None, None, 0
        acc = session.accumulator
        measured = replace(measurement_of(session, repeat_dir), client_saturated=saturated)
        measured = with_sim_fidelity(measured, lag_before, lag_sample(url))
        return measured, acc.num_spec_tokens, acc.spec_request_count

    def _drive(self, session: Any, runner: LoadControl, what: str) -> bool | None:
        """Runs one load (`what`: which, for the error line) to its end and finishes its
        session: whether the client's loop was saturated at any poll (a health gate of the
        cell), or None when the sweep is stopping (before or during the run). A load loop
        that failed raises UserError, a warm-up's as much as a repeat's."""
        with self._lock:
            if self.stopping.is_set():
                return None
            self._runner = runner
        saturated = False
        try:
            runner.start()
            while not runner.join(0.2):
                saturated = saturated or bool(getattr(runner.progress(), "lag_warning", False))
                server = self.server  # None with --url: no server of its own
                if server is not None and not server.alive:
                    # the load loop retries a dead server until it returns: this one will
                    # not (it is ours), so end the repeat; measure_row records the failure
                    runner.stop()
                    runner.join()
                    break
        except BaseException:  # a Ray cancel's KeyboardInterrupt: no load left running
            runner.stop()
            runner.join(STOP_JOIN_S)
            raise
        finally:
            with self._lock:
                self._runner = None
            session.finish(was_cancelled=self.stopping.is_set())
        if self.stopping.is_set():
            return None
        error = getattr(runner, "error", None)
        if error is not None and not isinstance(error, KeyboardInterrupt):
            raise UserError(f"the load loop failed at {what}: {error}")
        return saturated

    def _cell_config(
        self, url: str, model: str, c: int, where: Path, requests: int | None = None
    ) -> RunConfig:
        """One repeat's load (or, given `requests`, a warm-up of that many requests)."""
        s = self.settings
        data = self.load_config.model_dump()
        data.update(
            url=[url],
            model=model,
            concurrency=c,
            request_count=requests if requests is not None else s.segment_requests,
            benchmark_duration=None if requests is not None else s.segment_duration,
            warmup_request_count=0,  # a sweep warms up in a run of its own (_run_repeat)
            segments=None,
            segment_duration=None,
            segment_requests=None,
            artifact_dir=str(where),
            headless=True,
        )
        return RunConfig(**data)
