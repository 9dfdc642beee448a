"""The monitor's main screen: the panels of tui/panels.py, painted from one ScreenModel per
refresh tick (tui/model/), and the keys that steer what it shows.

Each widget paints only its slice of the model and repaints only when its slice changed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from textual import on
from textual.app import ComposeResult
from textual.css.query import NoMatches
from textual.events import Resize
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Input

from specmon.interfaces import (
    MonitorConfig,
    MonitoredRun,
    ResultsView,
    SessionView,
    knobs_of,
)
from specmon.tui.layout import Fitter
from specmon.tui.model import (
    Choices,
    Figures,
    ModelCache,
    RequestRows,
    ScreenInputs,
    ScreenModel,
    Tuning,
    build_model,
)
from specmon.tui.model.series import WINDOWS
from specmon.tui.modes import Mode
from specmon.tui.panels import PanelSpec, build_layout, by_id
from specmon.tui.requests import log_title
from specmon.tui.screens.detail import RequestDetail
from specmon.tui.tuning_view import next_setting
from specmon.tui.widgets.categories import CategoriesView
from specmon.tui.widgets.contexts import ContextView
from specmon.tui.widgets.header import RunHeader
from specmon.tui.widgets.headline import HeadlineView, Recent
from specmon.tui.widgets.health import HealthView
from specmon.tui.widgets.histogram import HistogramView, PositionsView
from specmon.tui.widgets.histogram_chart import HistogramChart
from specmon.tui.widgets.panel import Slot
from specmon.tui.widgets.request_log import RequestLog
from specmon.tui.widgets.series_chart import SeriesPanel
from specmon.tui.widgets.server_latency import ServerLatencyView
from specmon.tui.widgets.stats_table import StatsTable
from specmon.tui.widgets.tuning import CountersView, SegmentsView, ServersView, WhatIfView


class MainScreen(Screen[None]):
    """The panels over one run; `run` None for a finished run shown as it is."""

    def __init__(
        self,
        run: MonitoredRun | None,
        session: SessionView,
        config: MonitorConfig | None,
        mode: Mode,
        panels: Sequence[PanelSpec],
    ) -> None:
        super().__init__()
        self.run, self.config, self.mode, self.panels = run, config, mode, panels
        self.inputs = ScreenInputs.of(run, run, session, config, mode)
        self.choices = Choices.of(config)  # replaced, never changed, by the keys
        self.cache = ModelCache()  # the model builder's memory
        self.model: ScreenModel | None = None  # the last one built
        self.fitter = Fitter(self)
        self._painted: Figures | None = None  # the figures the panels show now
        self._alarms_told: set[str] = set()  # alarm names already told in a notification
        self._log_suffix = ""  # what the log's title says after its name now

    @property
    def multi(self) -> bool:
        return self.inputs.multi

    @property
    def session(self) -> SessionView:
        """The shown server's session."""
        return self.inputs.session(self.choices)

    @property
    def accumulator(self) -> ResultsView:
        """The shown server's results."""
        return self.session.accumulator

    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        yield from build_layout(self.panels)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.set_class(self.multi, "multi")
        self.fitter.resize(self.app.size.width, self.app.size.height, self.multi)
        if self.mode.no_requests:  # the per-request panels say why they stay empty
            for table in self.query(StatsTable):
                table.set_empty(self.mode.no_requests)
            self._title("panel-log", f" · {self.mode.no_requests}")
        self.refresh_data()
        self.query_one(RequestLog).focus()

    def on_resize(self, event: Resize) -> None:
        self.fitter.resize(event.size.width, event.size.height, self.multi)
        self.query_one(HeadlineView).forget_shown()  # one line below 80x24, three above
        self._painted = None  # so the next paint repaints the figures (the headline among them)
        self.cache.tune_at = 0.0  # the servers view switches between columns and a strip
        # size-dependent views (the servers' columns) repaint once the new layout is done,
        # not at the next timer tick (a snapshot taken before it would be of the old size)
        self.call_after_refresh(self.refresh_data)

    def _title(self, panel_id: str, suffix: str = "") -> None:
        self.query_one(f"#{panel_id}").border_title = by_id(self.panels, panel_id).title + suffix

    def repaint_all(self) -> None:
        """Every panel again (a new theme's colours), not only those whose data moved."""
        self.model = self._painted = None
        self.refresh_data()

    # -- the refresh tick -------------------------------------------------------------
    def refresh_data(self) -> None:
        """One model of the run; each widget repaints only when its slice changed."""
        try:
            self.fitter.fit(self.multi)
            now = time.monotonic()
            self.model = build_model(self.inputs, self.choices, self.cache, now, self.model)
            self.paint(self.model)
        except NoMatches:
            # the app is closing (widgets go before the timer stops), or under load a tick
            # came before the panels were mounted: this model was not painted
            self.cache.series_unshown()

    def paint(self, model: ScreenModel) -> None:
        self.query_one(RunHeader).show(model.header)
        for name in set(model.header.alarms) - self._alarms_told:  # once, as the stderr line
            self._alarms_told.add(name)
            self.notify(f"acceptance alarm: {name} (docs/monitoring.md)", severity="warning")
        if model.paused:
            return
        if model.tuning is not None:
            self._paint_tuning(model.tuning)
        if model.server_latency is not None:
            self.query_one(ServerLatencyView).show(model.server_latency, self.choices.selected)
        if model.series is not None:
            self.query_one(SeriesPanel).show(model.series)
            self.query_one(HeadlineView).show_recent(Recent(model.recent_tok_s))
        if model.figures is self._painted:
            self._paint_log(model.log)
            return
        with self.app.batch_update():
            self._paint_figures(model.figures)
            for panel_id, suffix in model.title_suffixes().items():
                self._title(panel_id, suffix)
            self._paint_log(model.log)
        self._painted = model.figures  # only once every slice is painted

    def _paint_log(self, rows: RequestRows) -> None:
        """New rows, new alarm lines, and the counts in the title with the rows just taken
        in (not a message later). Cheap when nothing moved: a length, a few alarms."""
        self.query_one(RequestLog).show(rows)
        self._show_log_counts()

    def _paint_figures(self, f: Figures) -> None:
        self.query_one("#spec-table", StatsTable).show(f.spec_rows)
        hist = f.acceptance.hist
        self.query_one(HistogramView).show(hist)
        self.query_one(HistogramChart).show(hist)  # drawn only while 2 is maximized
        self.query_one(PositionsView).show(hist, f.acceptance.k)
        self.query_one(WhatIfView).show(f.whatif, f.acceptance.title_suffix)
        self.query_one(HeadlineView).show(f.headline)
        self.query_one("#panel-whatif").border_subtitle = f.whatif_subtitle
        self.query_one("#latency-table", StatsTable).show(f.std_rows)

    def _paint_tuning(self, t: Tuning) -> None:
        if t.health is not None:
            health = self.query_one(HealthView)
            health.show_view(t.health)
            self.query_one("#slot-health", Slot).set_class(health.has_health, "-filled")
        self.query_one(CountersView).show(list(t.counter_lines))
        if t.segments is not None:
            self.query_one(SegmentsView).show(list(t.segments.cells), t.segments.hint)
        if self.multi:
            # maximized, the servers get their columns even in the compact layout
            compact = self.has_class("compact") and self.maximized is None
            self.query_one(ServersView).show(t.cards, self.choices.selected, compact)
        categories = self.query_one(CategoriesView)
        categories.show(t.categories)
        # its own place in large layouts for a --dataset run (categories are what it asks);
        # otherwise (the built-in prompts' categories) key 9 shows it maximized
        shown = categories.has_rows and self.config is not None and bool(self.config.dataset)
        self.query_one("#slot-categories", Slot).set_class(shown, "-filled")
        self.query_one(ContextView).show(t.contexts)  # under it, in panel 9

    # -- log messages -----------------------------------------------------------------
    @on(RequestLog.PendingChanged)
    def _log_counts(self, event: RequestLog.PendingChanged) -> None:
        self._show_log_counts()  # a scroll or a filter changed them between ticks

    def _show_log_counts(self) -> None:
        """The log's counts in its title, read from the log now: a count carried by a
        message arrives after the rows it counts are on screen (a busy machine showed '57
        shown' over rows up to #130)."""
        if not self.mode.has_requests:
            return  # the title says why the log stays empty
        log = self.query_one(RequestLog)
        # In the title: the compact layout has no bottom border to carry a subtitle.
        suffix = " · " + log_title(log.counts, log.filter_text)
        if suffix != self._log_suffix:  # a title set each tick would repaint its panel
            self._log_suffix = suffix
            self._title("panel-log", suffix)

    @on(RequestLog.Open)
    def _open_request(self, event: RequestLog.Open) -> None:
        self.app.push_screen(RequestDetail(self.accumulator.results[event.index], event.index))

    @on(Input.Submitted, "#log-filter")
    def _apply_filter(self, event: Input.Submitted) -> None:
        self.query_one(RequestLog).set_filter(event.value)
        self._close_filter()

    # -- keys (the app's bindings name them "screen.<action>") -------------------------
    def choose(self, choices: Choices) -> None:
        """A key's new choices; the model follows at once."""
        self.choices = choices
        self.refresh_data()

    def action_pause(self) -> None:
        paused = self.choices.paused_at is None
        # unpaused, the choices differ from the figures' key: every panel catches up at once
        self.set_class(paused, "paused")
        at = len(self.accumulator.results) if paused else None
        self.choose(replace(self.choices, paused_at=at))

    def action_filter(self) -> None:
        box = self.query_one("#log-filter", Input)
        box.value = self.query_one(RequestLog).filter_text
        box.add_class("visible")
        box.focus()

    def _close_filter(self) -> None:
        self.query_one("#log-filter", Input).remove_class("visible")
        self.query_one(RequestLog).focus()

    def action_cycle_window(self) -> None:
        index = (self.choices.window_index + 1) % len(WINDOWS)
        self.choose(replace(self.choices, window_index=index))

    def action_draft_cost(self, direction: int) -> None:
        before = self.choices.draft_cost
        cost = before.step(direction)
        value = cost.value
        if value == before.value:  # at a bound: say so rather than nothing
            self.notify(f"draft cost c is already {value:.2f} (its range is 0-2)", timeout=3)
            return
        self.cache.tune_now()
        self.choose(replace(self.choices, draft_cost=cost))
        # with several servers the what-if panel may be off screen: say what moved
        self.notify(
            f"draft cost c={value:.2f}: what-if (6), server cards (8) and segments (7) re-advised",
            timeout=3,
        )

    def action_sort_categories(self, reverse: bool) -> None:
        column = self.query_one(CategoriesView).cycle_sort(reverse)
        self.notify(f"categories sorted by {column.replace('_', ' ')}", timeout=2)

    def action_sort_contexts(self, reverse: bool) -> None:
        column = self.query_one(ContextView).cycle_sort(reverse)
        self.notify(f"context lengths sorted by {column.replace('_', ' ')}", timeout=2)

    def action_next_server(self, step: int) -> None:
        if not self.multi:
            self.notify("one server: nothing to switch to", timeout=2)
            return
        self.select_server((self.choices.selected + step) % len(self.inputs.servers))

    def select_server(self, index: int) -> None:
        """Point the detailed panels (1-7) and the request log at another server."""
        self.choices = replace(self.choices, selected=index)
        self.model = None  # the last model is another server's
        self.refresh_data()
        self.notify(f"showing server {self.inputs.label(self.choices)}", timeout=2)

    def action_load_knob(self, name: str, direction: int) -> None:
        """Raise or lower a load setting; the runner starts a new segment."""
        run, settings = knobs_of(self.run), self.choices.load
        if run is None:
            self.notify("load keys work in live runs only", timeout=3)
            return
        if name == "request_rate" and not settings.request_rate:
            self.notify(
                "this run is concurrency-driven: r/R change the rate of a --request-rate "
                "run; use < and >",
                timeout=4,
            )
            return
        value = next_setting(settings.get(name), direction, integer=name != "request_rate")
        if name == "concurrency":
            run.set_concurrency(int(value))
        elif name == "request_rate":
            run.set_request_rate(value)
        else:
            run.set_output_tokens(int(value))
        self.cache.tune_now()
        self.notify(f"{name.replace('_', ' ')} -> {value:g}: new segment", timeout=3)
        # the header says the new value at once, not at the next tick
        self.choose(replace(self.choices, load=settings.with_value(name, value)))

    def action_maximize_panel(self, panel_id: str) -> None:
        spec = by_id(self.panels, panel_id)
        if len(self.inputs.servers) < spec.min_servers:
            self.notify(spec.why_not, timeout=4)
            return
        self.minimize()
        self.maximize(self.query_one(f"#{panel_id}", Widget), container=False)
        self.cache.tune_at = 0.0  # the servers view picks columns or a strip by the room it has
        self.refresh_data()

    def action_restore(self) -> None:
        box = self.query_one("#log-filter", Input)
        if box.has_class("visible"):
            self._close_filter()
        elif self.maximized is not None:
            self.minimize()
            self.query_one(RequestLog).focus()
            self.cache.tune_at = 0.0
            self.refresh_data()
