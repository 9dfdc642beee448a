"""The declared seams between a run's parts (docs/architecture.md, "Run control and view").

* `RunLifecycle`: start, stop and watch a run. Every runner has it: `LoadRunner` (one event
  loop), `WorkerPool` (N processes), `MultiRun` (one runner per server), `ReplayFeeder`
  (a finished run fed back), `SweepControl`, `WatchRun`.
* `LoadKnobs`: steer the load; only the runners that send requests have them.
* `ResultsView` / `SessionView`: one server's accumulated results, as the screen and the
  headless progress line read them (`RunAccumulator` / `RunSession`).
* `RunView`: the run as a whole for the monitor: its servers, each one's /metrics poller and
  the live segments table. `MonitoredRun` is both (what `SpecmonApp` drives).
* `MonitorConfig`: the run's settings the monitor shows (header, knobs' starting values).

Only declarations here (and the plain `LoadProgress` record they return, and `knobs_of`); nothing imports
Textual, aiohttp or the load generator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from specmon.accumulator import RunSnapshot
    from specmon.config import RunConfig
    from specmon.pipeline import RequestResult
    from specmon.results_window import Tally
    from specmon.server.scrape import ServerCounterView
    from specmon.specdecode.method import SpecMethod

PHASES = ("starting", "warmup", "profiling", "stopping", "done")  # in the order a run moves


@dataclass(frozen=True, slots=True)
class LoadProgress:
    sent: int  # profiling requests sent
    completed: int  # profiling requests finished (including errors)
    total: int | None  # --request-count, None for duration / unbounded runs
    in_flight: int
    errors: int
    loop_lag_ms: float  # worst event-loop lag over the last second
    phase: str = "profiling"  # one of PHASES
    warmup_completed: int = 0
    lag_warning: bool = False  # the client is saturated: latencies include its own delay
    elapsed_s: float = 0.0  # seconds since profiling began
    # Connection failures (nothing reached a server) are retried after a backoff and do not
    # use up --request-count: `retries` counts those attempts (each one is also recorded as a
    # `connection_error`), `down_since` is the wall-clock time (time.time()) of the first
    # failure of the current outage, None while the server answers.
    retries: int = 0
    down_since: float | None = None
    # share of the last second the load loop's thread was running or waiting for a core
    # (sources/load/loop_health.py); at >= 0.9 the client is the bottleneck
    loop_busy: float = 0.0


@runtime_checkable
class RunLifecycle(Protocol):
    """Start, stop and watch a run; every member is thread-safe. Every runner has it, through
    the one implementation they share (sources/lifecycle.py BackgroundRun) or, for a run
    made of runners (MultiRun), over theirs.

    `error` is what ended the run abnormally (None when it ended normally or still runs).
    `join` waits on an Event set when the run's thread ends, and returns `finished`.
    """

    @property
    def finished(self) -> bool: ...

    @property
    def stopped_early(self) -> bool: ...

    @property
    def error(self) -> BaseException | None: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def join(self, timeout: float | None = None) -> bool: ...

    def progress(self) -> LoadProgress: ...


@runtime_checkable
class LoadKnobs(Protocol):
    """Steer the load while it runs (each real change starts a load segment). Only a run
    that sends requests has them (LoadRunner, WorkerPool, MultiRun); a replay, a watch and
    the sweep's control do not, and the monitor offers the knobs only where they are."""

    def set_concurrency(self, value: int | None) -> None: ...

    def set_request_rate(self, value: float | None, mode: str | None = None) -> None: ...

    def set_output_tokens(self, mean: int | None, stddev: float = 0.0) -> None: ...


def knobs_of(control: object) -> LoadKnobs | None:
    """The load knobs of a run, None for one that drives no load (a replay, a watch)."""
    return control if isinstance(control, LoadKnobs) else None


@runtime_checkable
class LandingCount(Protocol):
    """A runner that knows how many requests it sent that are not recorded yet ("unlanded"),
    for the live /metrics verdict (server/server_view.py SessionProbe)."""

    def unlanded(self, landed: int, progress: LoadProgress) -> int | None:
        """`landed`: results recorded so far, read before `progress`; None: unknown now."""
        ...


@runtime_checkable
class LoadControl(RunLifecycle, LoadKnobs, LandingCount, Protocol):
    """What MultiRun drives per server (LoadRunner, WorkerPool)."""


@runtime_checkable
class ResultsView(Protocol):
    """One server's results so far (RunAccumulator). `results` is append-only in meaning:
    len() counts every profiling result; the newest RESULTS_WINDOW are held in memory and
    older ones are read back from the JSONL (specmon/results_window.py)."""

    @property
    def results(self) -> Sequence[RequestResult]: ...

    @property
    def tally(self) -> Tally:
        """The rows of `results` so far, and the retried and cancelled among them (counted
        as they were appended: a reader that starts late reads no evicted row back)."""
        ...

    @property
    def warmup_count(self) -> int: ...

    @property
    def num_spec_tokens(self) -> int | None: ...

    @property
    def request_throughput(self) -> float | None:
        """Valid requests/s so far (AIPerf's request_throughput), without a snapshot."""
        ...

    def snapshot(self) -> RunSnapshot:
        """The statistics now, typed (cheap: the screen takes one at every refresh)."""
        ...

    def mark_finished(self) -> None: ...


@runtime_checkable
class SessionView(Protocol):
    """One server's session as the monitor reads it (RunSession)."""

    @property
    def accumulator(self) -> ResultsView: ...

    @property
    def artifact_dir(self) -> Path | None: ...

    # the speculative method and drafter the header names (None: unknown)
    spec_method: SpecMethod | None


class CounterSource(Protocol):
    """A live /metrics poller (server/scrape.py ServerCounterPoller)."""

    def latest(self) -> ServerCounterView: ...


# The time series' column times: data[SERIES_TIME] is each column's middle in seconds from
# the run's (or the watch's) start, the chart's time axis (tui/widgets/series_chart.py).
SERIES_TIME = "@t"


@runtime_checkable
class SeriesSource(Protocol):
    """A run that draws its own time series (sources/watch.py WatchRun: one point per
    scrape, server-wide), instead of the monitor binning per-request results: the
    tui/widgets/series.py keys per column, and SERIES_TIME."""

    def series(
        self, label: str, window_s: float | None, columns: int
    ) -> dict[str, list[float | None]]: ...


@runtime_checkable
class RunView(Protocol):
    """The run as the monitor reads it.

    `servers`: label -> (that server's control, or None when only the whole run has one;
    its session), in display order. `poller(label)`: None without /metrics polling.
    `segment_rows(draft_cost)`: the live segments table, None when the run has none (a
    replay); `draft_cost` is the cost its recommendations use: "run" (the run's
    --draft-cost), None (unknown: advise's stated assumption) or a number (the TUI's +/-).
    """

    @property
    def servers(self) -> Mapping[str, tuple[RunLifecycle | None, SessionView]]: ...

    def poller(self, label: str) -> CounterSource | None: ...

    def segment_rows(
        self, draft_cost: float | str | None = "run"
    ) -> list[dict[str, Any]] | None: ...


@runtime_checkable
class MonitoredRun(RunLifecycle, RunView, Protocol):
    """What the live monitor drives and reads: MultiRun, ReplayFeeder, WatchRun; the load
    knobs too where the run has them (`knobs_of`)."""


_OWN = ("targets", "load_label")  # MonitorConfig's fields that RunConfig has not


@dataclass
class MonitorConfig:
    """The run's settings as the monitor shows them; every field optional (a replay knows
    few). `targets`: the servers' URLs (or the replayed file)."""

    targets: list[str] = field(default_factory=list)
    model: str | None = None
    load_label: str | None = None  # replaces the load description built from the knobs
    concurrency: int | None = None
    effective_concurrency: int | None = None
    request_rate: float | None = None
    request_rate_mode: str | None = None
    request_count: int | None = None
    benchmark_duration: float | None = None
    output_tokens_mean: int | None = None
    draft_cost: float | None = None
    refresh_hz: float = 4.0
    theme: str | None = None
    artifact_dir: str | None = None
    # a published prompt set (--dataset): the per-category panel gets its layout slot
    dataset: str | None = None

    @classmethod
    def of_run(cls, config: RunConfig) -> MonitorConfig:
        try:
            targets = [url for _, url in config.targets()]
        except Exception:  # a half-built config must not break the header
            targets = list(config.url or [])
        # every other field is the RunConfig field of the same name (load_label is the
        # monitor's own: a replay's or a watch's description of what it shows)
        same = {f.name: getattr(config, f.name) for f in fields(cls) if f.name not in _OWN}
        return cls(targets=targets, **same)
