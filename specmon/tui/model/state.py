"""What the screen model remembers between refresh ticks: the user's choices on the screen
(server, window, pause, draft cost, load knobs) and the 1 Hz views' last answers.

Plain data, no Textual: `build_model` reads and updates it; the screen's key bindings change
the choices (specmon/tui/main_screen.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specmon.interfaces import MonitorConfig, RunView, SessionView
from specmon.stats import MetricRow
from specmon.tui.tuning_view import CounterStatus, DraftCost, initial_draft_cost

if TYPE_CHECKING:
    from specmon.tui.model.screen import ScreenModel

Settings = dict[str, Any]  # knob name -> its current value (None: not set)


@dataclass
class UiState:
    """The screen's choices and the model's memory; `servers` is (label, session) in
    display order, one entry for a one-server run."""

    servers: list[tuple[str, SessionView]]
    draft_cost: DraftCost
    load_settings: Settings
    selected: int = 0
    window_index: int = 0
    paused_at: int | None = None  # len(results) when paused
    freeze_elapsed: float | None = None  # snapshot tests: a fixed clock
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
    last: ScreenModel | None = None

    @classmethod
    def of(cls, run: RunView | None, session: SessionView, config: MonitorConfig | None) -> UiState:
        return cls(
            servers=server_list(run, session),
            draft_cost=initial_draft_cost(config.draft_cost if config else None),
            load_settings=initial_settings(config),
        )

    @property
    def label(self) -> str:
        return self.servers[self.selected][0]

    @property
    def session(self) -> SessionView:
        return self.servers[self.selected][1]

    @property
    def multi(self) -> bool:
        return len(self.servers) > 1

    def tune_now(self) -> None:
        """The 1 Hz views at the next tick (a key changed what they show)."""
        self.tune_at = self.segments_at = 0.0

    def select(self, index: int) -> None:
        """Point the detailed panels at another server: its k and figures start afresh."""
        self.selected = index
        self.last = None
        self.tune_at = 0.0
        self.ks, self.k_seen = set(), 0


def server_list(run: RunView | None, session: SessionView) -> list[tuple[str, SessionView]]:
    """(label, session) per server when the run has several; else one entry."""
    servers = run.servers if run is not None else {}
    if len(servers) > 1:
        return [(label, pair[1]) for label, pair in servers.items()]
    label = next(iter(servers)) if servers else "run"
    return [(label, session)]


def initial_settings(config: MonitorConfig | None) -> Settings:
    """The run's load settings as the knobs start from (totals over every server)."""
    if config is None:
        return {"concurrency": None, "request_rate": None, "output_tokens": None}
    return {
        "concurrency": config.effective_concurrency or config.concurrency,
        "request_rate": config.request_rate,
        "output_tokens": config.output_tokens_mean,
    }
