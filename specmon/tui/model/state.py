"""What `build_model` reads besides the run's data, split by who changes it:

* `ScreenInputs`: fixed when the screen opens (the run, the control that drives it, the
  settings shown, the mode, the servers in display order).
* `Choices`: the user's choices on the screen (server, window, pause, draft cost, load
  knobs), frozen: a key makes a new one (`dataclasses.replace`), so a model is a function
  of the choices it was given.
* `ModelCache`: the builder's memory between ticks (when the 1 Hz views are next due and
  their last answers, the k values seen, the series bins). Only the builder writes it, to
  skip work or fold results incrementally; the last model is handed back in by the
  screen, which keeps it.

Plain data, no Textual: the screen's key bindings replace the choices
(specmon/tui/main_screen.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from specmon.analysis.groups import GroupedTable
from specmon.interfaces import MonitorConfig, RunLifecycle, RunView, SessionView
from specmon.stats import MetricRow
from specmon.tui.model.series import Fetch, SeriesBins
from specmon.tui.modes import Mode
from specmon.tui.tuning_view import CounterStatus, DraftCost, initial_draft_cost


@dataclass(frozen=True)
class LoadSettings:
    """The load as the knobs set it now (totals over every server; None: not set)."""

    concurrency: int | None = None
    request_rate: float | None = None
    output_tokens: int | None = None

    def get(self, name: str) -> float | int | None:
        """A knob's value (`name` one of the three fields)."""
        if name == "request_rate":
            return self.request_rate
        return self.concurrency if name == "concurrency" else self.output_tokens

    def with_value(self, name: str, value: float | int) -> LoadSettings:
        """A knob's new value (`name` one of the three fields)."""
        if name == "request_rate":
            return replace(self, request_rate=float(value))
        if name == "concurrency":
            return replace(self, concurrency=int(value))
        return replace(self, output_tokens=int(value))

    @classmethod
    def of(cls, config: MonitorConfig | None) -> LoadSettings:
        """The run's settings as the knobs start from (a replay has none)."""
        if config is None:
            return cls()
        concurrency = config.effective_concurrency or config.concurrency
        return cls(concurrency, config.request_rate, config.output_tokens_mean)


@dataclass(frozen=True)
class Choices:
    """The user's choices; `selected` indexes ScreenInputs.servers."""

    draft_cost: DraftCost
    load: LoadSettings = LoadSettings()
    selected: int = 0
    window_index: int = 0
    paused_at: int | None = None  # len(results) when paused
    freeze_elapsed: float | None = None  # snapshot tests: a fixed clock

    @classmethod
    def of(cls, config: MonitorConfig | None) -> Choices:
        return cls(
            draft_cost=initial_draft_cost(config.draft_cost if config else None),
            load=LoadSettings.of(config),
        )


@dataclass(frozen=True, eq=False)
class ScreenInputs:
    """What the screen shows, fixed when it opens; `servers` is (label, session) in display
    order, one entry for a one-server run."""

    run: RunView | None
    control: RunLifecycle | None
    config: MonitorConfig | None
    mode: Mode
    servers: tuple[tuple[str, SessionView], ...]

    @classmethod
    def of(
        cls,
        run: RunView | None,
        control: RunLifecycle | None,
        session: SessionView,
        config: MonitorConfig | None,
        mode: Mode,
    ) -> ScreenInputs:
        return cls(run, control, config, mode, server_list(run, session))

    @property
    def multi(self) -> bool:
        return len(self.servers) > 1

    def label(self, choices: Choices) -> str:
        return self.servers[choices.selected][0]

    def session(self, choices: Choices) -> SessionView:
        return self.servers[choices.selected][1]


@dataclass
class ModelCache:
    """The builder's memory between ticks; `shown` is the server it remembers for (another
    choice of server starts its per-server memory afresh)."""

    shown: int = 0
    ended_at_s: float | None = None  # the run's elapsed time when its end was first seen
    # the 1 Hz views (servers, segments, /metrics): when they are next due (monotonic s)
    tune_at: float = 0.0
    segments_at: float = 0.0  # the segments table's own, spaced by its cost (SEGMENTS_DUTY)
    counters: dict[str, CounterStatus] = field(default_factory=dict)
    rows: list[dict[str, Any]] | None = None  # the last segment rows (what-if's k)
    rows_version: int = 0
    server_std: list[dict[str, MetricRow]] = field(default_factory=list)
    ks: set[int] = field(default_factory=set)  # every k the results have named
    k_seen: int = 0  # results folded into `ks`
    bins: SeriesBins = field(default_factory=SeriesBins)  # panel 3, the shown server's
    series_at: float = float("-inf")  # when panel 3's series were last handed out
    series_window: float | None = None
    series_of: object = None  # the figures' key they were handed out with
    recent_tok_s: float | None = None  # output tok/s of the last RECENT_S at that time
    series_grew_at: float | None = None  # when a result last landed in the bins
    # (table kind, id of the results list): the per-category and per-context-length tables
    # of a session that keeps none of its own
    group_tables: dict[tuple[str, int], GroupedTable] = field(default_factory=dict)

    def tune_now(self) -> None:
        """The 1 Hz views at the next tick (a key changed what they show)."""
        self.tune_at = self.segments_at = 0.0

    def follow(self, selected: int) -> None:
        """Another server is shown: its k, figures and series start afresh."""
        if selected == self.shown:
            return
        self.shown, self.tune_at = selected, 0.0
        self.ks, self.k_seen = set(), 0
        self.bins = SeriesBins()
        self.series_unshown()

    def series_unshown(self) -> None:
        """Panel 3's series at the next build: the last ones handed out were never shown (a
        finished run hands them out once, so a lost hand-out left the panel empty)."""
        self.series_at, self.series_of = float("-inf"), None


def server_list(run: RunView | None, session: SessionView) -> tuple[tuple[str, SessionView], ...]:
    """(label, session) per server when the run has several; else one entry."""
    servers = run.servers if run is not None else {}
    if len(servers) > 1:
        return tuple((label, pair[1]) for label, pair in servers.items())
    label = next(iter(servers)) if servers else "run"
    return ((label, session),)


__all__ = ["Choices", "Fetch", "LoadSettings", "ModelCache", "ScreenInputs", "server_list"]
