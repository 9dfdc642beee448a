"""The k sweep runner: one server per k (or given URLs), every concurrency, repeated.

For each k (the baseline k = 0 first when given) the `--serve` template is started as its
own process group with its output in `server-k{k}.log`, ready once /v1/models lists the
model; each (k, concurrency) cell then runs `repeats` times with the ordinary LoadRunner +
RunSession (AIPerf-compatible exports in `k{k}/c{c}/r{rep}/`), and the server is stopped
(SIGTERM to the group, SIGKILL after a grace period). `sweep.json` is rewritten atomically
after every cell, so a stop (Ctrl-C, SIGTERM) or a crash keeps every finished cell, and
`--resume` skips the cells measured with the same settings hash. The decision math, the
schedule and the model live in specmon/decision, the console tables in specmon/analysis
(see docs/architecture.md, "k sweep").
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import socket
import statistics
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO, cast

from specmon.analysis.arms import ArmReport, arm_reports, render_arms
from specmon.analysis.sweep import render_sweep_tables
from specmon.config import RunConfig
from specmon.decision import stepcost
from specmon.decision.cells import Decision, decide
from specmon.decision.schedule import SCHEDULE_NAME, build_schedule, write_schedule
from specmon.decision.slo import Slo, percentiles_of_summary, slo_option
from specmon.decision.stepcost import KModel
from specmon.decision.sweep_types import SWEEP_JSON, Cell, RepeatMeasurement
from specmon.errors import UserError
from specmon.export.common import atomic_write
from specmon.interfaces import LoadControl
from specmon.records import int_keys
from specmon.server.health import HealthDelta, HealthSample
from specmon.server.models import list_models
from specmon.server.process import ServerProcess, shell
from specmon.server.scrape import fetch_counters
from specmon.session import RunSession
from specmon.stats import row_value, summary_rows

# a repeat's session and runner for its config (run/assemble.py make_repeat: `specmon run`'s)
MakeRepeat = Callable[[RunConfig], tuple[RunSession, LoadControl]]
SCHEMA = "specmon-sweep/1"
PLACEHOLDERS = ("{k}", "{port}", "{python}", "{schedule}")
STOP_GRACE_S = 15.0  # SIGTERM -> SIGKILL; vLLM ends its engine tree in a few seconds
LOG_TAIL_LINES = 12
# RunConfig fields the sweep sets per cell, or that do not change what is measured
_PER_CELL_FIELDS = (
    "url",
    "concurrency",
    "request_count",
    "benchmark_duration",
    "warmup_request_count",
    "segments",
    "segment_duration",
    "segment_requests",
)
# (slo: the objective is SweepSettings.slo, outside the hash: it decides, it is not measured)
_NOT_MEASURED = ("artifact_dir", "headless", "refresh_hz", "theme", "api_key", "server_metrics",
                 "selector", "prometheus_port", "prometheus_host",
                 "slo")  # fmt: skip


@dataclass
class SweepSettings:
    """Everything that defines a sweep (stored in sweep.json; the hash decides --resume)."""

    ks: list[int]
    concurrencies: list[int]
    serve: str | None = None  # template with {k} {port} {python} [{schedule}]
    baseline_serve: str | None = None  # template with {port} {python}: k = 0
    urls: dict[int, str] = field(default_factory=dict)  # --url kN=URL: k -> base URL
    repeats: int = 3
    segment_requests: int | None = None
    segment_duration: float | None = None
    warmup_request_count: int = 0
    ready_timeout: float = 600.0
    stop_on_error: bool = False
    load: dict[str, Any] = field(default_factory=dict)  # the run flags, less _PER_CELL_FIELDS
    slo: str | None = None  # --slo ttft=S,tpot=MS[,p=90]: what the decisions must meet
    # arms beyond fixed k (measured after the k rows, never "the best k"; re-measured on
    # --resume, so they are left out of the hash): --variant NAME='CMD {port}' ...
    variants: dict[str, str] = field(default_factory=dict)
    verify_schedule: bool = False  # measure the schedule just written as the arm "schedule"
    # the schedule arm's own command (default --serve): {port} {schedule} [{k} {python}]
    schedule_serve: str | None = None

    def __post_init__(self) -> None:
        if (self.serve is None) == (not self.urls):
            raise UserError("give either --serve 'COMMAND' or --url kN=URL ..., not both")
        if self.urls and (self.baseline_serve or self.ks != sorted(self.urls)):
            raise UserError(
                "with --url kN=URL the labels give k: drop --num-spec-tokens / --baseline-serve"
            )
        if self.serve is not None and not self.ks:
            raise UserError("--serve needs --num-spec-tokens K,K,... (the k values to measure)")
        if self.serve is not None:
            for template, name in (
                (self.serve, "--serve"),
                (self.baseline_serve, "--baseline-serve"),
            ):
                if template is not None and "{port}" not in template:
                    raise UserError(f"{name} needs the {{port}} placeholder: '{template}'")
            if "{k}" not in self.serve:
                raise UserError(f"--serve needs the {{k}} placeholder: '{self.serve}'")
            if 0 in self.ks:
                raise UserError("k=0 is the baseline: give its command with --baseline-serve")
        if (self.segment_requests is None) == (self.segment_duration is None):
            raise UserError("give exactly one of --segment-requests N or --segment-duration S")
        if self.repeats < 1:
            raise UserError("--repeats must be at least 1")
        slo_option(self.slo)  # a malformed --slo: a UserError now, not at the end
        self._check_arms()

    def _check_arms(self) -> None:
        if (self.variants or self.verify_schedule) and self.serve is None:
            raise UserError("--variant and --verify-schedule need --serve (servers it starts)")
        if self.schedule_serve is not None:
            if not self.verify_schedule:
                raise UserError("--schedule-serve is the command of --verify-schedule's arm")
            for needed in ("{port}", "{schedule}"):
                if needed not in self.schedule_serve:
                    raise UserError(
                        f"--schedule-serve needs the {needed} placeholder: '{self.schedule_serve}'"
                    )
        for name, template in self.variants.items():
            if not ARM_NAME.fullmatch(name) or name == SCHEDULE_ARM:
                raise UserError(
                    f"--variant '{name}': name it with letters, digits, '.', '_' or '-' "
                    f"(not '{SCHEDULE_ARM}')"
                )
            if "{port}" not in template:
                raise UserError(f"--variant {name} needs the {{port}} placeholder: '{template}'")
            if SCHEDULE_PLACEHOLDER in template:
                raise UserError(f"--variant {name}: {{schedule}} is for --serve / --schedule-serve")
        if self.verify_schedule and schedule_placement(self.schedule_template()) is None:
            raise UserError(
                "--verify-schedule: --serve has no {schedule} placeholder (a JSON file holding "
                "the speculative-config fragment), no '\"num_speculative_tokens\": {k}' in its "
                "--speculative-config JSON and no `specmon sim`: cannot add the schedule"
            )

    def schedule_template(self) -> str:
        """The command of the schedule arm: --schedule-serve, else --serve."""
        return self.schedule_serve or self.serve or ""

    def objective(self) -> Slo | None:
        return slo_option(self.slo)

    @property
    def grid_ks(self) -> list[int]:
        """The k values in the order they run: the baseline (0) first."""
        if self.urls:
            return sorted(self.urls)
        return ([0] if self.baseline_serve else []) + list(self.ks)

    def settings_hash(self) -> str:
        """A cell measured under the same hash is not measured again on --resume. The grid
        (ks, concurrencies) and how failures are handled are left out: a resumed sweep may
        add k or concurrency values."""
        data = asdict(self)
        # the SLO changes the decision, not what a cell measures
        for key in ("ks", "concurrencies", "ready_timeout", "stop_on_error", "urls", "slo") + (
            "variants",
            "verify_schedule",
            "schedule_serve",
        ):
            data.pop(key)
        data["urls"] = {str(k): u for k, u in sorted(self.urls.items())}
        blob = json.dumps(data, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["urls"] = {str(k): u for k, u in sorted(self.urls.items())}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepSettings:
        data = dict(data)
        data["urls"] = int_keys(data.get("urls"))
        return cls(**data)


def load_settings_of(config: RunConfig) -> dict[str, Any]:
    """The run flags that shape what a cell measures (SweepSettings.load)."""
    return config.model_dump(exclude=set(_PER_CELL_FIELDS) | set(_NOT_MEASURED))


def parse_url_labels(entries: list[str]) -> dict[int, str]:
    """['k2=http://h:1', 'k0=http://h:2'] -> {2: ..., 0: ...}; the label names the k."""
    from specmon.config import split_url_label

    out: dict[int, str] = {}
    for entry in entries:
        label, target = split_url_label(entry)
        if not label or not label.startswith("k") or not label[1:].isdigit():
            raise UserError(f"--url '{entry}': label it with its k, e.g. k2=http://HOST:PORT")
        k = int(label[1:])
        if k in out:
            raise UserError(f"--url: k{k} given twice")
        out[k] = target.rstrip("/")
    return out


# --------------------------------------------------------------------------------------
# Servers.


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


ARM_NAME = re.compile(r"[A-Za-z0-9._-]+")
SCHEDULE_ARM = "schedule"
SCHEDULE_PLACEHOLDER = "{schedule}"
ARM_K = -1  # the k of an arm's Cell: not a k (arms are kept apart from the grid's cells)
# where vLLM's schedule goes: beside num_speculative_tokens in the --speculative-config JSON
_VLLM_K = re.compile(r'"num_speculative_tokens"\s*:\s*\{k\}')


def schedule_placement(template: str) -> str | None:
    """How a schedule is added to the --serve template: "file" (the {schedule} placeholder:
    the path of a JSON file holding the speculative-config fragment, for a wrapper script),
    "vllm" (into the JSON), "sim" (`specmon sim --spec-schedule`) or None (not known)."""
    if SCHEDULE_PLACEHOLDER in template:
        return "file"
    if _VLLM_K.search(template):
        return "vllm"
    return "sim" if "specmon sim" in template else None


def schedule_command(template: str, schedule: dict[str, Any], path: Path, port: int) -> str:
    """The --serve command with the schedule: k is the schedule's largest K (vLLM's and the
    simulator's num_speculative_tokens is the schedule's maximum). With {schedule} the
    fragment is written to a file beside `path` and the placeholder names it."""
    entries = schedule["num_speculative_tokens_per_batch_size"]
    max_k = max(int(entry[2]) for entry in entries)
    placement = schedule_placement(template)
    if placement == "file":
        fragment = write_fragment(
            path.parent, SCHEDULE_ARM, schedule["speculative_config_fragment"]
        )
        return substitute(template, max_k, port, fragment)
    if placement == "vllm":
        extra = ', "num_speculative_tokens_per_batch_size": ' + json.dumps(entries)
        template = _VLLM_K.sub(lambda m: m.group(0) + extra, template, count=1)
    else:
        template = f"{template} --spec-schedule {shlex.quote(str(path))}"
    return substitute(template, max_k, port)


def write_fragment(directory: Path, row: int | str, fragment: dict[str, Any]) -> Path:
    """The speculative-config fragment a {schedule} placeholder names, written atomically:
    `{"num_speculative_tokens": k}` for a fixed k, the schedule's fragment (with
    `num_speculative_tokens_per_batch_size`) for the schedule arm."""
    name = (
        f"speculative-config-k{row}.json"
        if isinstance(row, int)
        else f"speculative-config-{row}.json"
    )
    return atomic_write(directory / name, (json.dumps(fragment) + "\n").encode("utf-8"))


def row_label(row: int | str) -> str:
    """A row of the sweep: an int is a fixed k, a str an arm's name."""
    return f"k={row}" if isinstance(row, int) else f"arm {row}"


def substitute(template: str, k: int, port: int, schedule: Path | None = None) -> str:
    """Fill {k} {port} {python} {schedule} (shell-quoted); any other brace (JSON) is left
    alone. {schedule} needs the fragment file's path."""
    values = {"{k}": str(k), "{port}": str(port), "{python}": sys.executable}
    if schedule is not None:
        values[SCHEDULE_PLACEHOLDER] = str(schedule)
    elif SCHEDULE_PLACEHOLDER in template:
        raise ValueError("substitute: {schedule} in the template and no fragment file")
    out = template
    for placeholder in PLACEHOLDERS:
        if placeholder in values:
            out = out.replace(placeholder, shlex.quote(values[placeholder]))
    return out


class ServerFailed(Exception):
    """The server for one k could not be started or died; the message names k and log."""


def start_server(command: str, k: int, port: int, log_path: Path) -> ServerProcess:
    """The --serve command for one k, logging to `log_path` (server/process.py)."""
    return ServerProcess(shell(command), f"http://127.0.0.1:{port}", log_path)


def server_failure(server: ServerProcess, k: int | str, what: str) -> ServerFailed:
    """The failure with its log's last line on the first line (a cell's error shows only
    that line: `command not found` must be there), then the log's last lines."""
    tail = server.log_tail(LOG_TAIL_LINES)
    said = [line.strip() for line in tail.splitlines() if line.strip()]
    last = said[-1] if said and not said[-1].startswith("$ ") else "(nothing after its command)"
    return ServerFailed(
        f"server for {row_label(k)} {what}; {server.log_path} ends: {last}\n{tail}".rstrip()
    )


def wait_ready(
    server: ServerProcess,
    k: int | str,
    model: str | None,
    timeout: float,
    api_key: str | None,
    stopping: threading.Event,
) -> str:
    """Until /v1/models lists `model` (or any model when None); the model, or ServerFailed."""
    ready = server.wait_ready(model, timeout, api_key, stopping, poll_s=0.25)
    if ready is not None:
        return ready
    if stopping.is_set():
        raise ServerFailed(f"server for {row_label(k)}: stopped before it was ready")
    if not server.alive:
        code = server.proc.returncode
        raise server_failure(server, k, f"exited with status {code} before it was ready")
    listed = f" (never listed model '{model}')" if model else ""
    raise server_failure(server, k, f"was not ready within {timeout:g} s{listed}")


# --------------------------------------------------------------------------------------
# Measuring.


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


@dataclass
class SweepResult:
    cells: list[Cell]
    stopped: bool
    decisions: list[Decision] | None = None
    model: KModel | None = None
    schedule: dict[str, Any] | None = None
    arms: dict[str, list[Cell]] = field(default_factory=dict)  # arm name -> its cells
    arm_reports: list[ArmReport] | None = None  # after conclude


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


class SweepRunner:
    """Runs the grid; `stop()` (from a signal handler or another thread) ends it cleanly.

    Live views read `now` (a SweepNow) and `last_measured` (the latest repeat's SweepNow,
    kept between repeats) and get `on_cell(cell)` as each cell of the grid is recorded,
    `on_arm_cell(name, cell)` as each arm's cell is, and `on_repeat(now)` as each repeat's
    session starts (all on the sweep's thread)."""

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
        for entry in previous or []:
            cell = Cell.from_dict(entry)
            self.cells[(cell.k, cell.concurrency)] = (cell, entry.get("settings_hash", ""))
        self.stopping = threading.Event()
        self._runner: LoadControl | None = None
        self._process: ServerProcess | None = None  # the server started, ready or not
        # re-entrant: stop() may run in a signal handler on the thread that holds it (headless)
        self._lock = threading.RLock()
        self._warmed: set[int | str] = set()
        self.arm_cells: dict[tuple[str, int], Cell] = {}  # (arm, concurrency) -> cell

    # control ----------------------------------------------------------------------
    def stop(self) -> None:
        self.stopping.set()
        with self._lock:
            if self._runner is not None:
                self._runner.stop()

    def abandon(self) -> None:
        """The process is about to exit without cleaning up (a third stop signal): kill the
        server it started, group and all, so nothing is left running. Called from a signal
        handler: one syscall, no locks."""
        server = self._process
        if server is not None:
            server.kill_now()

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
        try:
            if self.settings.urls:
                self._run_urls()
            else:
                self._run_serve()
        finally:
            self.now = SweepNow("done", repeats=self.settings.repeats)
        return SweepResult(self.ordered_cells(), self.stopping.is_set(), arms=self.arms())

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
        for k in self.settings.grid_ks:
            todo = [c for c in self.settings.concurrencies if not self.is_done(k, c)]
            if not todo or self.stopping.is_set():
                continue
            template = self.settings.baseline_serve if k == 0 else self.settings.serve
            assert template is not None
            port = free_port()
            fragment = (  # a wrapper script's {schedule}: this k's speculative config
                write_fragment(self.dir, k, {"num_speculative_tokens": k})
                if SCHEDULE_PLACEHOLDER in template
                else None
            )
            if self._serve_row(k, substitute(template, k, port, fragment), port, todo):
                if self.settings.stop_on_error:
                    self._say("specmon sweep: stopping (--stop-on-error)")
                    return
        self._run_arms()

    def _serve_row(self, row: int | str, command: str, port: int, todo: list[int]) -> bool:
        """Start the server of one row (a k or an arm), measure `todo`, stop it; True when
        the server failed."""
        label = row_label(row)
        self._say(f"specmon sweep: {label}: starting `{command}`")
        log_name = f"server-k{row}.log" if isinstance(row, int) else f"server-arm-{row}.log"
        server = start_server(command, 0, port, self.dir / log_name)
        self._process = server
        k, arm = (row, None) if isinstance(row, int) else (None, row)
        self.now = SweepNow(
            "starting", k, repeats=self.settings.repeats, log_path=server.log_path, arm=arm
        )
        try:
            model = wait_ready(
                server,
                row,
                self.load_config.model,
                self.settings.ready_timeout,
                self.load_config.api_key,
                self.stopping,
            )
            self._say(f"specmon sweep: {label}: ready at {server.url} (model {model})")
            return self._measure_row(row, todo, server.url, model, server)
        except ServerFailed as exc:
            failed = not self.stopping.is_set()
            if failed:
                for c in todo:
                    self._record(_new_cell(row, c, str(exc)), row)
            return failed
        finally:
            server.stop(STOP_GRACE_S)
            self._process = None

    # arms beyond fixed k: the schedule just drafted, then each --variant -----------------
    def _run_arms(self) -> None:
        concs = list(self.settings.concurrencies)
        if self.settings.verify_schedule and not self.stopping.is_set():
            schedule = self._draft_schedule()
            if schedule is not None:
                port = free_port()
                path = self.dir / SCHEDULE_NAME
                command = schedule_command(self.settings.schedule_template(), schedule, path, port)
                self._serve_row(SCHEDULE_ARM, command, port, concs)
        for name, template in self.settings.variants.items():
            if self.stopping.is_set():
                return
            port = free_port()
            self._serve_row(name, substitute(template, 0, port), port, concs)

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

    def _measure_row(
        self, k: int | str, todo: list[int], url: str, model: str, server: ServerProcess
    ) -> bool:
        """Every pending concurrency of one row (k or arm); True when the server failed."""
        for i, c in enumerate(todo):
            if self.stopping.is_set():
                return False
            cell = self._measure_cell(k, c, url, model)
            if cell is None:
                return False
            if not server.alive:
                error = server_failure(
                    server, k, f"exited with status {server.proc.returncode} during concurrency {c}"
                )
                for rest in todo[i:]:
                    self._record(_new_cell(k, rest, str(error)), k)
                return True
            self._record(cell, k)
        return False

    def _run_urls(self) -> None:
        """Servers that cannot be restarted: one concurrency at a time across all of them."""
        models: dict[int, str] = {}
        for k, url in sorted(self.settings.urls.items()):
            ids = list_models(url, self.load_config.api_key)
            model = self.load_config.model
            if not ids or (model is not None and model not in ids):
                raise UserError(f"--url k{k}={url}: /v1/models does not answer or list the model")
            models[k] = model or ids[0]
        for c in self.settings.concurrencies:
            for k, url in sorted(self.settings.urls.items()):
                if self.stopping.is_set():
                    return
                if self.is_done(k, c):
                    continue
                cell = self._measure_cell(k, c, url, models[k])
                if cell is None:
                    return
                self._record(cell)
                if cell.error and self.settings.stop_on_error:
                    self._say("specmon sweep: stopping (--stop-on-error)")
                    return

    # one cell -------------------------------------------------------------------------
    def _measure_cell(self, k: int | str, c: int, url: str, model: str) -> Cell | None:
        """All repeats of (k, c) (k: a fixed k, or an arm's name); None when stopped
        part-way (the cell is not kept)."""
        cell = _new_cell(k, c)
        for rep in range(self.settings.repeats):
            self._say(
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
        row_dir = f"k{k}" if isinstance(k, int) else f"arm-{k}"
        repeat_dir = self.dir / row_dir / f"c{c}" / f"r{rep + 1}"
        if k not in self._warmed and self.settings.warmup_request_count:
            # warm up in a run of its own, before the repeat's first /metrics scrape: the
            # simulator's figures between the scrapes (formula ITL, lag) then cover exactly
            # the requests the client measured (inside the repeat, a few warm-up requests
            # of other acceptance moved the formula's mean ITL by 1.6-3.6% at c=1)
            warm_dir = self.dir / row_dir / "warmup"
            warm = self._cell_config(url, model, c, warm_dir, self.settings.warmup_request_count)
            what = f"{row_label(k)} concurrency {c} (warm-up)"
            if self._drive(*self.make_repeat(warm), what) is None:
                return None, None, 0
        self._warmed.add(k)
        config = self._cell_config(url, model, c, repeat_dir)
        session, runner = self.make_repeat(config)
        fixed, arm = (k, None) if isinstance(k, int) else (None, k)
        self.now = SweepNow(
            "measuring", fixed, c, rep + 1, self.settings.repeats, session=session, arm=arm
        )
        if self.on_repeat is not None:
            self.on_repeat(self.now)
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
                server = self._process  # None with --url: no server of its own
                if server is not None and not server.alive:
                    # the load loop retries a dead server until it returns: this one will
                    # not (it is ours), so end the repeat; _measure_row records the failure
                    runner.stop()
                    runner.join()
                    break
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
        """sweep.json, atomically: settings, hash, every cell (with the hash it was measured under)."""
        doc: dict[str, Any] = {
            "schema": SCHEMA,
            "settings": self.settings.to_dict(),
            "settings_hash": self.hash,
            "cells": [
                dict(cell.to_dict(), settings_hash=h) for _, (cell, h) in sorted(self.cells.items())
            ],
        }
        if self.arm_cells:  # "k" of an arm cell is ARM_K: not a k
            doc["arm_cells"] = [
                dict(cell.to_dict(), arm=name) for (name, _), cell in self.arm_cells.items()
            ]
        doc.update(extra or {})
        path = self.dir / SWEEP_JSON
        atomic_write(path, json.dumps(doc, indent=2).encode() + b"\n")
        return path

    def _say(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    # the end: decisions, model, schedule --------------------------------------------------
    def conclude(self, result: SweepResult) -> SweepResult:
        """Decide, fit, write the schedule and the final sweep.json; a failure of the analysis
        is reported and leaves the measured cells in sweep.json."""
        measured = [cell for cell in result.cells if cell.measured]
        extra: dict[str, Any] = {"complete": not result.stopped}
        try:
            result.decisions = decide(measured, self.settings.objective())
            extra["decisions"] = [d.to_dict() for d in result.decisions]
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


def _new_cell(row: int | str, c: int, error: str | None = None) -> Cell:
    return Cell(row if isinstance(row, int) else ARM_K, c, error=error)


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


def read_sweep(artifact_dir: str | Path) -> dict[str, Any]:
    """An earlier sweep.json (for --resume); one-line error when missing or unreadable."""
    path = Path(artifact_dir) / SWEEP_JSON
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"--resume {artifact_dir}: no {SWEEP_JSON} there") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"--resume {artifact_dir}: cannot read {SWEEP_JSON} ({exc})") from None
    if doc.get("schema") != SCHEMA:
        raise UserError(f"--resume {artifact_dir}: {SWEEP_JSON} is not a {SCHEMA} document")
    return cast(dict[str, Any], doc)
