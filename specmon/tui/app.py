"""The live monitor: a Textual app that samples the run accumulator on a timer.

The load runs on its own thread (LoadRunner) and feeds a RunSession; this app only reads
`session.accumulator` (snapshot(), results, timeline()) at `refresh_hz`, and each widget
repaints only when its data changed. Nothing here runs per record. What it reads and drives
is declared in specmon/interfaces.py: the session is a SessionView, the runner a
MonitoredRun (RunLifecycle + RunView), the settings shown a MonitorConfig.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.events import Resize
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Input, Static

from specmon import stops
from specmon.formatting import saturation_text
from specmon.interfaces import (
    MonitorConfig,
    MonitoredRun,
    RunLifecycle,
    SeriesSource,
    SessionView,
    knobs_of,
)
from specmon.specdecode.fidelity import SERVER_WIDE
from specmon.tui.requests import LOG_HEADER
from specmon.tui.screens.detail import RequestDetail
from specmon.tui.screens.explain import ExplainScreen
from specmon.tui.screens.help import HelpScreen
from specmon.tui.themes import load_themes, resolve_theme, restyle
from specmon.tui.tuning_view import (
    CounterStatus,
    counter_status,
    initial_draft_cost,
    next_setting,
    recommendation_text,
    segment_cells,
    what_if,
)
from specmon.tui.view import (
    LATENCY_COLUMNS,
    LATENCY_ROWS,
    SPEC_COLUMNS,
    SPEC_ROWS,
)
from specmon.tui.widgets.categories import CategoriesView
from specmon.tui.widgets.header import HeaderInfo, RunHeader
from specmon.tui.widgets.headline import HeadlineView, headline_of
from specmon.tui.widgets.health import HealthView
from specmon.tui.widgets.histogram import HistogramView, PositionsView
from specmon.tui.widgets.panel import HPanel, Panel, Slot
from specmon.tui.widgets.request_log import RequestLog
from specmon.tui.widgets.series import SeriesBins, SeriesView
from specmon.tui.widgets.server_latency import ServerLatencyView
from specmon.tui.widgets.stats_table import StatsTable
from specmon.tui.widgets.timeline import WINDOWS
from specmon.tui.widgets.tuning import (
    CountersView,
    SegmentsView,
    ServerCard,
    ServersView,
    WhatIfView,
)

if TYPE_CHECKING:
    from specmon.accumulator import RunSnapshot
    from specmon.config import RunConfig

W = TypeVar("W", bound=Widget)

PANELS = (
    "panel-spec",
    "panel-hist",
    "panel-plot",
    "panel-latency",
    "panel-log",
    "panel-whatif",
    "panel-segments",
    "panel-servers",
    "panel-categories",
)
PANEL_TITLES = (
    "1 Spec Decode",
    "2 Accepted drafts per step",
    "3 Time series",
    "4 Latency & throughput",
    "5 Requests",
    "6 What if k were different",
    "7 Segments · server counters",
    "8 Servers side by side",
    "9 Per category (c sort, C reverse)",
)
PLOT_EVERY_S = 1.0
TUNE_EVERY_S = 1.0  # servers, segments and /metrics views: 1 Hz is plenty and bounds their cost
SEGMENTS_DUTY = 0.05  # segment_rows() is incremental (~1 ms a refresh); this bounds the first
#                       call (folds in every result so far) and runners that re-read all
COMPACT_BELOW = (100, 36)  # width, height under which the compact layout is used
WIDE_FROM = 150  # side-by-side top row from this width; between the two: "medium"
TUNE_ROW_FROM = 44  # rows a one-server wide layout needs before the what-if row fits too
# Where the panels a size shows still need more rows than the terminal has (a health slot, a
# long what-if, several servers), these classes shed rows in this order until the main screen
# needs no scrolling, so the header and the headline never scroll away (specmon.tcss "Fit").
FIT_STEPS = ("fit-1", "fit-2", "fit-3", "fit-4")
FIXED_ROWS = ("#header", "#panel-head", "#panel-servers", "#row-top", "#row-tune", "Footer")
# the 1fr rows: they take what is left, down to their min-height, which fit-1 lowers to these
# (the series at one row each, the log at four rows under its header)
FLEX_ROWS = {"#row-mid": 6, "#panel-log": 5}


class SpecmonApp(App[int]):
    """The monitor over `session` (the first server's); `runner` is None for a finished run
    shown as it is (nothing to stop or steer); `config` None when no settings are known."""

    CSS_PATH = "specmon.tcss"
    TITLE = "specmon"
    ENABLE_COMMAND_PALETTE = False
    ESCAPE_TO_MINIMIZE = False  # our escape action restores and re-focuses the log
    ALLOW_IN_MAXIMIZED_VIEW = "#header, Footer"  # a maximized panel keeps the header
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit_monitor", "Quit"),
        Binding("ctrl+c", "quit_monitor", "Quit", show=False, priority=True),
        Binding("p", "pause", "Pause"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("e", "explain", "Explain"),
        Binding("slash", "filter", "Filter", key_display="/", show=False),
        Binding("s", "screenshot", "Save"),
        Binding("1", "maximize(1)", "Max", key_display="1-8"),  # one footer entry
        Binding("w", "cycle_window", "Window"),
        Binding("t", "cycle_theme", "Theme", show=False),
        Binding("2", "maximize(2)", "Histogram", show=False),
        Binding("3", "maximize(3)", "AL over time", show=False),
        Binding("4", "maximize(4)", "Latency", show=False),
        Binding("5", "maximize(5)", "Requests", show=False),
        Binding("6", "maximize(6)", "What-if", show=False),
        Binding("7", "maximize(7)", "Segments", show=False),
        Binding("8", "maximize(8)", "Servers", show=False),
        Binding("9", "maximize(9)", "Categories", show=False),
        Binding("c", "sort_categories(False)", "Sort categories", show=False),
        Binding("C", "sort_categories(True)", "reverse the category order", show=False),
        Binding("plus,equals_sign", "draft_cost(1)", "Draft cost", key_display="+/-", show=False),
        Binding("minus", "draft_cost(-1)", "lower the draft cost c", show=False),
        Binding("right_square_bracket", "next_server(1)", "Server", key_display="[/]", show=False),
        Binding("left_square_bracket", "next_server(-1)", "previous server", show=False),
        Binding("greater_than_sign", "load_knob('concurrency', 1)", "Load", key_display="</>"),
        Binding("less_than_sign", "load_knob('concurrency', -1)", "lower concurrency", show=False),
        Binding("R", "load_knob('request_rate', 1)", "raise request rate", show=False),
        Binding("r", "load_knob('request_rate', -1)", "lower request rate", show=False),
        Binding("O", "load_knob('output_tokens', 1)", "raise output length", show=False),
        Binding("o", "load_knob('output_tokens', -1)", "lower output length", show=False),
        Binding("escape", "restore", "Restore", show=False),
    ]

    def __init__(
        self,
        session: SessionView,
        runner: MonitoredRun | None = None,
        config: MonitorConfig | None = None,
        *,
        source: str = "live",
        artifact_dir: str | Path | None = None,
        freeze_elapsed: float | None = None,
        theme_name: str | None = None,
    ) -> None:
        super().__init__()
        self.session = session
        self.accumulator = session.accumulator
        self.runner = runner
        self.config = config
        self.source = source
        self.artifact_dir = Path(
            artifact_dir or (config and config.artifact_dir) or session.artifact_dir or "."
        )
        self.freeze_elapsed = freeze_elapsed  # snapshot tests: a fixed clock
        self.refresh_hz = float((config and config.refresh_hz) or 4.0)
        self.window_index = 0
        self.paused_at: int | None = None  # len(results) when paused
        self.theme_names: list[str] = []
        self._last_key: tuple | None = None
        self._last_snapshot: RunSnapshot | None = None
        self._marked = False
        self._bins = SeriesBins()
        self._plot_key: int | None = None
        self._plot_at = 0.0
        self._plot_stale = False
        self._ks: set[int] = set()
        self._k_seen = 0
        self._requested_theme = theme_name or (config.theme if config else None)
        self.draft_cost = initial_draft_cost(config.draft_cost if config else None)
        self.servers = _server_list(runner, session)  # [(label, session)]; one when single
        self.selected = 0
        self.load_settings = _initial_settings(config)
        self._counters: dict[str, CounterStatus] = {}
        self._tune_at = 0.0
        self._fit_level = 0  # how many FIT_STEPS the main screen has now
        self._fit_seen = -1  # the screen's virtual height when the last step was taken
        self._segments_at = 0.0  # next time the segments table may be recomputed
        self._server_std: list[dict[str, dict]] = []  # per server, from the last 1 Hz tick
        self._rows: list[dict[str, Any]] | None = None  # the last segment rows (what-if's k)
        self._rows_version = 0
        self._load_theme_files()

    # -- setup ------------------------------------------------------------------------
    def _load_theme_files(self) -> None:
        for theme in load_themes():
            self.register_theme(theme)
            self.theme_names.append(theme.name)
        no_color = "NO_COLOR" in os.environ
        self.theme = resolve_theme(
            self._requested_theme, self.theme_names or list(self.available_themes), no_color
        )

    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        with Panel(id="panel-head", classes="panel"):
            yield HeadlineView(id="headline")
        with Panel(id="panel-servers", classes="panel"):
            yield ServersView(id="servers")
        with Horizontal(id="row-top"):
            with Panel(id="panel-spec", classes="panel"):
                yield StatsTable(
                    SPEC_ROWS, SPEC_COLUMNS, "no spec-decode records yet", id="spec-table"
                )
            # the histogram with the server's health from /metrics under it (shown, class
            # -filled, while a poller has it): beside the percentile table both keep their
            # width, and the row its height
            with Vertical(id="col-hist"):
                with HPanel(id="panel-hist", classes="panel"):
                    yield HistogramView(id="histogram")
                    yield PositionsView(id="positions")
                with Slot(id="slot-health"), Panel(id="panel-health", classes="panel"):
                    yield HealthView(id="health")
        with Horizontal(id="row-tune"):
            with Panel(id="panel-whatif", classes="panel"):
                yield WhatIfView(id="whatif")
            with Panel(id="panel-segments", classes="panel"):
                yield CountersView(id="counters")
                yield SegmentsView(id="segments")
            yield Slot(id="slot-sweep")
        with Horizontal(id="row-mid"):
            with Panel(id="panel-plot", classes="panel"):
                yield SeriesView(id="series")
            with Panel(id="panel-latency", classes="panel"):
                yield StatsTable(
                    LATENCY_ROWS, LATENCY_COLUMNS, "no completed requests yet", id="latency-table"
                )
                yield ServerLatencyView(id="server-latency")
            # shown (class -filled) once requests carry categories: --dataset runs
            with Slot(id="slot-categories"), Panel(id="panel-categories", classes="panel"):
                yield CategoriesView(id="categories")
        with Panel(id="panel-log", classes="panel"):
            yield Static(LOG_HEADER, id="log-header", markup=False)
            yield RequestLog(id="request-log")
            yield Input(
                placeholder="filter (text, 'error', category); enter applies, esc closes",
                id="log-filter",
            )
        yield Footer(compact=True)

    def on_mount(self) -> None:
        for panel_id, title in zip(PANELS, PANEL_TITLES):
            self._q(f"#{panel_id}", Widget).border_title = title
        self.screen.set_class(len(self.servers) > 1, "multi")
        self._widget(RequestLog).set_source(self.accumulator.results)
        self._apply_layout(self.size.width, self.size.height)
        self.refresh_data()
        self.set_interval(1.0 / self.refresh_hz, self.refresh_data)
        self._widget(RequestLog).focus()
        self._catch_sigterm(True)
        if self.source == "watch":
            self._say_watch_mode()

    def _say_watch_mode(self) -> None:
        """`specmon watch` sends no requests: the per-request panels say so."""
        from specmon.sources.watch import NO_REQUESTS

        for table in ("#spec-table", "#latency-table"):
            self._q(table, StatsTable).set_empty(NO_REQUESTS)
        self._q("#panel-log", Widget).border_title = f"{PANEL_TITLES[4]} · {NO_REQUESTS}"

    def on_unmount(self) -> None:
        self._catch_sigterm(False)

    _stop_callback: Callable[[int], None] | None = None  # registered with specmon.stops

    def _catch_sigterm(self, on: bool) -> None:
        """SIGTERM, SIGHUP and SIGINT quit like q (specmon/stops.py calls back from its
        handler), so a killed live run still drains and writes its exports."""
        if self.runner is None:
            return
        if not on:
            if self._stop_callback is not None:
                stops.remove_callback(self._stop_callback)
            return
        loop = asyncio.get_running_loop()

        def quit_soon(signum: int) -> None:
            if signum == signal.SIGHUP:
                detach_from_terminal()
            try:  # from the signal handler: schedule only
                loop.call_soon_threadsafe(self.action_quit_monitor)
            except RuntimeError:  # the loop has closed: the caller is already stopping
                pass

        self._stop_callback = quit_soon
        stops.on_stop(quit_soon)

    def _q(self, selector: str, expect_type: type[W]) -> W:
        """Query the main screen (a help or detail screen may be on top)."""
        return self._main_screen().query_one(selector, expect_type)

    def _widget(self, widget_type: type[W]) -> W:
        """The main screen's one widget of this type."""
        return self._main_screen().query_one(widget_type)

    def _main_screen(self) -> Screen:
        """The bottom screen. While the app shuts down the stack empties before the timers
        stop; `App.screen` would then raise ScreenStackError from a timer tick, so say
        NoMatches, which refresh_data expects of a closing app."""
        if not self.screen_stack:
            raise NoMatches("the app is closing: no screen")
        return self.screen_stack[0]

    def on_resize(self, event: Resize) -> None:
        self._apply_layout(event.size.width, event.size.height)
        # size-dependent views (the servers' columns) repaint once the new layout is done,
        # not at the next timer tick (a snapshot taken before it would be of the old size)
        self.call_after_refresh(self.refresh_data)

    def _apply_layout(self, width: int, height: int) -> None:
        compact = width < COMPACT_BELOW[0] or height < COMPACT_BELOW[1]
        medium = not compact and width < WIDE_FROM
        if self.screen_stack:
            self.screen_stack[0].set_class(compact, "compact")
            self.screen_stack[0].set_class(medium, "medium")
            short = not compact and not medium and len(self.servers) == 1 and height < TUNE_ROW_FROM
            self.screen_stack[0].set_class(short, "short")
            self.screen_stack[0].set_class(height >= TUNE_ROW_FROM, "tall")
            self._tune_at = 0.0  # the servers view switches between columns and a strip
            self.screen_stack[0].remove_class(*FIT_STEPS)  # a new size: fit from scratch
            for selector in FLEX_ROWS:
                self.screen_stack[0].query_one(selector).styles.min_height = None  # the CSS's
            self._fit_level, self._fit_seen = 0, -1
            self.call_after_refresh(self._fit_height)

    def _fit_height(self) -> None:
        """Shed optional rows (FIT_STEPS) while the main screen's rows need more than its
        height: checked after each layout and on every refresh tick, as panels grow or slots
        fill. The rows to shed are computed from the last layout's heights, and nothing is
        decided again until a layout has taken the last step into account."""
        if not self.screen_stack or self._fit_level >= len(FIT_STEPS):
            return
        main = self.screen_stack[0]
        if main.maximized is not None or main.max_scroll_y <= 0:
            return
        if main.virtual_size.height == self._fit_seen:
            return  # the last step is not laid out yet
        over = self._rows_needed(main) - main.size.height
        level = self._fit_level
        for saving in self._fit_savings(main)[level:]:
            if over <= 0:
                break
            over -= saving
            level += 1
        if self._fit_level == 0 < level:
            for selector, rows in FLEX_ROWS.items():
                widget = main.query_one(selector)
                widget.styles.min_height = min(rows, _min_rows(widget))
        main.add_class(*FIT_STEPS[self._fit_level : level])
        self._fit_level, self._fit_seen = level, main.virtual_size.height

    def _rows_needed(self, main: Screen) -> int:
        """The rows the shown panels need: the fixed rows as laid out, the 1fr rows at their
        min-height."""
        fixed = sum(w.outer_size.height for w in main.query(",".join(FIXED_ROWS)) if w.display)
        flex = sum(_min_rows(w) for w in main.query(",".join(FLEX_ROWS)) if w.display)
        return fixed + flex

    def _fit_savings(self, main: Screen) -> tuple[int, int, int, int]:
        """Rows each of FIT_STEPS frees: the 1fr rows down to FLEX_ROWS, the tuning row,
        the slots in the top row (the top row then as tall as its other panels), the whole
        top row (several servers only)."""
        flex = sum(
            max(0, _min_rows(w) - FLEX_ROWS[f"#{w.id}"])
            for w in main.query(",".join(FLEX_ROWS))
            if w.display
        )
        tune, top = main.query_one("#row-tune"), main.query_one("#row-top")
        tune_rows = tune.outer_size.height if tune.display else 0
        top_rows = top.outer_size.height if top.display else 0
        without_slots = min(top_rows, _rows_without_slots(top))
        # with the slots gone the top row is `without_slots` tall: that is what hiding it frees
        multi = without_slots if len(self.servers) > 1 else 0
        return flex, tune_rows, top_rows - without_slots, multi

    # -- the refresh tick -------------------------------------------------------------
    def refresh_data(self) -> None:
        """Sample the accumulator once; only widgets whose data changed repaint."""
        try:
            self._refresh_data()
        except NoMatches:  # the app is closing: widgets go before the timer stops
            pass

    def _refresh_data(self) -> None:
        results = self.accumulator.results
        if self.paused_at is not None and self._last_snapshot is not None:
            self._show_header(self._last_snapshot, len(results) - self.paused_at)
            return
        if self.runner is not None and self.runner.finished and not self._marked:
            if self.source == "watch":  # --duration, SIGTERM or SIGHUP ended the watch
                self.exit()
                return
            self._marked = True  # the load is over: stop the elapsed clock
            self.accumulator.mark_finished()
            error = self.runner.error
            if error is not None and not isinstance(error, KeyboardInterrupt):
                self.notify(f"the load loop stopped: {error}", severity="error", timeout=30)
        self._fit_height()
        snap = self.accumulator.snapshot()
        self._last_snapshot = snap
        self._show_header(snap, None)
        self._refresh_tuning(snap)
        self._show_server_latency(snap)
        counters = self._counters.get(self._label())
        key = (
            snap.request_count,
            snap.error_count,
            snap.warmup_count,
            len(results),
            self.window_index,
            self.draft_cost,
            self.selected,
            self._rows_version,
            counters.histogram if counters is not None else None,
        )
        if key == self._last_key:
            if self._plot_stale:
                self._show_plot(snap)
            return
        self._last_key = key
        with self.batch_update():
            self._q("#spec-table", StatsTable).show(snap.spec_stats)
            hist, k, source = self._acceptance_source(snap)
            self._widget(HistogramView).show(hist)
            self._widget(PositionsView).show(hist, k)
            estimate = what_if(hist, k, self.draft_cost.given, self._rows, self._label())
            self._widget(WhatIfView).show(estimate, source)
            # The what-if answer is in the headline, at every size; 6 opens the panel.
            self._q("#panel-hist", Widget).border_title = PANEL_TITLES[1] + source
            self._show_headline(snap, estimate, hist, source)
            self._q("#panel-whatif", Widget).border_subtitle = self.draft_cost.label()
            self._q("#latency-table", StatsTable).show(snap.std_stats)
            self._show_plot(snap)
            self._widget(RequestLog).sync()

    def _label(self) -> str:
        return self.servers[self.selected][0]

    def _acceptance_source(self, snap: RunSnapshot) -> tuple[dict[int, int], int | None, str]:
        """The per-request pooled histogram; the server's counters when no response had any."""
        hist = dict(snap.pooled_histogram or {})
        counters = self._counters.get(self._label())
        if sum(hist.values()) == 0 and counters is not None and counters.histogram:
            return dict(counters.histogram), counters.k, " · server-wide (/metrics)"
        return hist, snap.num_spec_tokens, ""

    # -- the 1 Hz tuning views: servers side by side, segments, the server's counters ---
    def _refresh_tuning(self, snap: RunSnapshot) -> None:
        now = time.monotonic()
        if now - self._tune_at < TUNE_EVERY_S:
            return
        self._tune_at = now
        # one snapshot per server per tick, shared by the counters and the server columns
        snaps = [
            snap if i == self.selected else session.accumulator.snapshot()
            for i, (_, session) in enumerate(self.servers)
        ]
        self._poll_counters(snaps)
        self._show_segments()  # first: the cards and the what-if read its rows' k
        if len(self.servers) > 1:
            main = self._main_screen()
            # maximized, the servers get their columns even in the compact layout
            compact = main.has_class("compact") and main.maximized is None
            self._widget(ServersView).show(self._cards(snaps), self.selected, compact)
            self._server_std = [s.std_stats or {} for s in snaps]
        categories = self._widget(CategoriesView)
        categories.sync(self._results())
        # its own place in large layouts for a --dataset run (categories are what it asks);
        # otherwise (the built-in prompts' categories) key 9 shows it maximized
        shown = categories.has_rows and self.config is not None and bool(self.config.dataset)
        self._q("#slot-categories", Slot).set_class(shown, "-filled")

    def _results(self) -> Any:
        return self.servers[self.selected][1].accumulator.results

    def action_sort_categories(self, reverse: bool) -> None:
        column = self._widget(CategoriesView).cycle_sort(self._results(), reverse)
        self.notify(f"categories sorted by {column.replace('_', ' ')}", timeout=2)

    def _show_server_latency(self, snap: RunSnapshot) -> None:
        """Every server's latency row; the selected one's from this tick's snapshot, the
        header's, so one server never shows two request-throughput figures."""
        if len(self.servers) < 2 or len(self._server_std) != len(self.servers):
            return
        stats = list(self._server_std)
        stats[self.selected] = snap.std_stats or {}
        rows = [(label, std) for (label, _), std in zip(self.servers, stats)]
        self._widget(ServerLatencyView).show(rows, self.selected)

    def _poll_counters(self, snaps: list[RunSnapshot]) -> None:
        lines: list[str] = []
        for i, (label, _) in enumerate(self.servers):
            poller = self.runner.poller(label) if self.runner is not None else None
            if poller is None:
                self._counters.pop(label, None)
                continue
            self._counters[label] = status = counter_status(
                poller.latest(), snaps[i], reconciled=self.source != "watch"
            )
            if i == self.selected:
                lines = status.lines
                health = self._widget(HealthView)
                health.show_view(poller.latest())
                self._q("#slot-health", Slot).set_class(health.has_health, "-filled")
        if not lines:
            lines = [
                "server /metrics: not polled (no counters or polling off)"
                if self.runner is not None
                else "server /metrics: not available in a replay"
            ]
        self._widget(CountersView).show(lines)

    def _cards(self, snaps: list[RunSnapshot]) -> list[ServerCard]:
        cards = []
        for (label, _), s in zip(self.servers, snaps):
            hist, k, source = self._server_hist(label, s)
            spec = s.spec_stats or {}
            al = (spec.get("spec_decode_acceptance_length") or {}).get("avg")
            rate = (spec.get("spec_decode_overall_draft_acceptance_rate") or {}).get("avg")
            counters = self._counters.get(label)
            if source and counters is not None and counters.histogram:  # counters alone
                total = sum(hist.values())
                al = 1 + sum(j * n for j, n in hist.items()) / total if total else None
            estimate = what_if(hist, k, self.draft_cost.given, self._rows, label)
            cards.append(
                ServerCard(
                    label=label,
                    k=k,
                    requests=int(s.request_count),
                    acceptance_length=al,
                    acceptance_rate=rate,
                    histogram=tuple(sorted(hist.items())),
                    recommendation=recommendation_text(estimate),
                    source=" · server-wide" if source else "",
                    survival=tuple(p.unconditional or 0.0 for p in estimate.estimate.positions)
                    if estimate
                    else (),
                )
            )
        return cards

    def _server_hist(self, label: str, snap: RunSnapshot) -> tuple[dict[int, int], int | None, str]:
        hist = dict(snap.pooled_histogram or {})
        counters = self._counters.get(label)
        if sum(hist.values()) == 0 and counters is not None and counters.histogram:
            return dict(counters.histogram), counters.k, "server-wide"
        return hist, snap.num_spec_tokens, ""

    def _show_segments(self) -> None:
        if self.runner is None:
            self._widget(SegmentsView).show([], "segments: live runs only")
            return
        started = time.monotonic()
        if started < self._segments_at:
            return
        try:  # the live +/- cost: the table's recommendation moves with the what-if's
            rows = self.runner.segment_rows(draft_cost=self.draft_cost.given)
        except Exception as exc:
            self._widget(SegmentsView).show([], f"segments unavailable: {exc}")
            return
        if rows is None:  # a run without a segments table (a replay, a watch)
            self._widget(SegmentsView).show(
                [],
                "segments: none in watch mode (no load of its own to change)"
                if self.source == "watch"
                else "segments: < > concurrency, r R rate, o O output length; each change starts one",
            )
            return
        if rows != self._rows:
            self._rows, self._rows_version = rows, self._rows_version + 1
        # a slow call (the first one, or a runner that re-reads every result) spaces the next
        self._segments_at = started + (time.monotonic() - started) / SEGMENTS_DUTY
        self._widget(SegmentsView).show(
            segment_cells(rows),
            "segments appear with the first requests; < > concurrency, r R rate, o O output length",
        )

    def _elapsed(self, snap: RunSnapshot) -> float:
        return (
            self.freeze_elapsed if self.freeze_elapsed is not None else float(snap.elapsed_s or 0.0)
        )

    def _show_header(self, snap: RunSnapshot, paused_arrivals: int | None) -> None:
        runner, config = self.runner, self.config
        info = HeaderInfo(
            target=_target(config),
            model=str((config and config.model) or "-"),
            engine=str(snap.engine or "-"),
            k=self._k_text(snap),
            load=_load_text(self.config, self.load_settings),
            elapsed_s=self._elapsed(snap),
            completed=int(snap.request_count),
            errors=int(snap.error_count),
            error_kinds=dict(snap.error_summary or {}),
            failure=_failure(runner),
            request_count=config.request_count if config else None,
            request_throughput=(snap.std_stats.get("request_throughput") or {}).get("avg"),
            duration_s=config.benchmark_duration if config else None,
            paused_arrivals=paused_arrivals,
            finished=runner.finished if runner is not None else self.source != "live",
            source=self.source,
            **_runner_progress(self._shown_runner()),
        )
        if info.request_count is None:  # a replay knows its record count: no "(until q)"
            done, total = _known_total(runner)
            info = replace(info, request_count=total, progress_done=done)
        self._widget(RunHeader).show(info)

    def _shown_runner(self) -> RunLifecycle | None:
        """The runner of the server the panels show: the header's counts are that server's,
        so its in-flight count and phase must be too (not the sum over every server)."""
        if self.runner is not None and len(self.servers) > 1:
            own = self.runner.servers[self._label()][0]
            if own is not None:
                return own
        return self.runner

    def _k_text(self, snap: RunSnapshot) -> int | str | None:
        """k of the run; several servers at different k (demo --num-spec-tokens 2,4) show all."""
        if len(self.servers) > 1:
            ks = [s.accumulator.num_spec_tokens for _, s in self.servers]
            shown = ",".join("?" if k is None else str(k) for k in ks)
            return f"{shown} · showing {self._label()} ([ ] switch)"
        results = self.accumulator.results
        for result in results[self._k_seen :] if self._k_seen < len(results) else ():
            k = result.spec.num_spec_tokens if result.spec is not None else None
            if k is not None:
                self._ks.add(k)
        self._k_seen = len(results)
        if len(self._ks) > 1:
            return ",".join(str(k) for k in sorted(self._ks))
        counters = self._counters.get(self._label())
        return snap.num_spec_tokens or (counters.k if counters else None)

    def _show_plot(self, snap: RunSnapshot) -> None:
        label, window = WINDOWS[self.window_index]
        now_mono = time.monotonic()
        if self._plot_key == self.window_index and now_mono - self._plot_at < PLOT_EVERY_S:
            self._plot_stale = True  # the series fold every bin of the window: 1 Hz is plenty
            return
        self._plot_key, self._plot_at, self._plot_stale = self.window_index, now_mono, False
        title = f"{PANEL_TITLES[2]} · window {label} (w)"
        runner = self.runner
        if isinstance(runner, SeriesSource):  # server-wide, one point per scrape (watch)
            server = self._label()
            self._widget(SeriesView).show(lambda columns: runner.series(server, window, columns))
            self._q("#panel-plot", Widget).border_title = f"{title} · server-wide (/metrics)"
            return
        self._bins.add(self.accumulator.results)
        now = max(self._bins.last_s(), self._elapsed(snap))
        bins = self._bins
        self._widget(SeriesView).show(lambda columns: bins.series(window, now, columns))
        self._q("#panel-plot", Widget).border_title = title

    def _show_headline(
        self, snap: RunSnapshot, estimate: Any, hist: dict[int, int], source: str
    ) -> None:
        # the basis kchoice names (docs/tuning.md), after the measured steps it rests on
        steps = sum(hist.values())
        said = estimate.text.split(" · ", 1)[1] if estimate and " · " in estimate.text else ""
        where = f" {source.strip(' ·')}" if source else ""
        basis = f"{steps:,} steps{where}" + (f", {said}" if said else "") if estimate else ""
        spec, fidelity = snap.spec_stats or {}, snap.fidelity
        counters = self._counters.get(self._label())
        if source and not spec and counters is not None:  # no per-request stats: the server's
            spec, fidelity = _server_wide_spec(counters), SERVER_WIDE
        self._widget(HeadlineView).show(
            headline_of(
                spec,
                snap.std_stats or {},
                int(snap.error_count),
                recommendation_text(estimate),
                basis,
                fidelity,
            )
        )

    # -- log messages -----------------------------------------------------------------
    @on(RequestLog.PendingChanged)
    def _log_counts(self, event: RequestLog.PendingChanged) -> None:
        if self.source == "watch":
            return  # the title says why the log stays empty (_say_watch_mode)
        log = self._widget(RequestLog)
        parts = [f"{event.shown:,} shown"]
        if log.filter_text:
            parts.append(f"filter '{log.filter_text}' of {event.total:,}")
        parts.append(f"{event.pending:,} new (end follows)" if event.pending else "following")
        # In the title: the compact layout has no bottom border to carry a subtitle.
        self._q("#panel-log", Widget).border_title = "5 Requests · " + " · ".join(parts)

    @on(RequestLog.Open)
    def _open_request(self, event: RequestLog.Open) -> None:
        self.push_screen(RequestDetail(self.accumulator.results[event.index], event.index))

    @on(Input.Submitted, "#log-filter")
    def _apply_filter(self, event: Input.Submitted) -> None:
        self._widget(RequestLog).set_filter(event.value)
        self._close_filter()

    # -- actions ----------------------------------------------------------------------
    def action_quit_monitor(self) -> None:
        if self.runner is not None:
            self.runner.stop()  # in-flight requests are cancelled and recorded
        self.exit(0)

    def action_pause(self) -> None:
        if self.paused_at is None:
            self.paused_at = len(self.accumulator.results)
        else:
            self.paused_at = None
            self._last_key = None
        self.screen_stack[0].set_class(self.paused_at is not None, "paused")
        self.refresh_data()

    def action_help(self) -> None:
        self.push_screen(HelpScreen([b for b in self.BINDINGS if isinstance(b, Binding)]))

    def action_explain(self) -> None:
        self.push_screen(ExplainScreen())

    def action_filter(self) -> None:
        box = self._q("#log-filter", Input)
        box.value = self._widget(RequestLog).filter_text
        box.add_class("visible")
        box.focus()

    def _close_filter(self) -> None:
        self._q("#log-filter", Input).remove_class("visible")
        self._widget(RequestLog).focus()

    def action_cycle_window(self) -> None:
        self.window_index = (self.window_index + 1) % len(WINDOWS)
        self.refresh_data()

    def action_cycle_theme(self) -> None:
        names = self.theme_names or sorted(self.available_themes)
        nxt = names[(names.index(self.theme) + 1) % len(names)] if self.theme in names else names[0]
        self.theme = nxt
        self.call_after_refresh(self._restyle)  # once the new theme's CSS is applied
        self.notify(f"theme {nxt}", timeout=2)

    def _restyle(self) -> None:
        restyle(self)
        self._last_key = None
        self.refresh_data()

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        self.artifact_dir.mkdir(parents=True, exist_ok=True)
        path = self.save_screenshot(path=str(self.artifact_dir))
        self.notify(f"saved {path}", timeout=4)

    def action_draft_cost(self, direction: int) -> None:
        self.draft_cost = self.draft_cost.step(direction)
        self._tune_at = self._segments_at = 0.0
        self.refresh_data()

    def action_next_server(self, step: int) -> None:
        if len(self.servers) < 2:
            self.notify("one server: nothing to switch to", timeout=2)
            return
        self.select_server((self.selected + step) % len(self.servers))

    def select_server(self, index: int) -> None:
        """Point the detailed panels (1-7) and the request log at another server."""
        self.selected = index
        label, session = self.servers[index]
        self.session = session
        self.accumulator = session.accumulator
        self._bins = SeriesBins()
        self._plot_key = None
        self._last_key = None
        self._tune_at = 0.0
        self._widget(RequestLog).set_source(self.accumulator.results)
        self.refresh_data()
        self.notify(f"showing server {label}", timeout=2)

    def action_load_knob(self, name: str, direction: int) -> None:
        """Raise or lower a load setting; the runner starts a new segment."""
        runner = knobs_of(self.runner)
        if runner is None:
            self.notify("load keys work in live runs only", timeout=3)
            return
        if name == "request_rate" and not self.load_settings.get("request_rate"):
            self.notify(
                "this run is concurrency-driven: r/R change the rate of a --request-rate "
                "run; use < and >",
                timeout=4,
            )
            return
        value = next_setting(
            self.load_settings.get(name), direction, integer=name != "request_rate"
        )
        self.load_settings[name] = value
        if name == "concurrency":
            runner.set_concurrency(int(value))
        elif name == "request_rate":
            runner.set_request_rate(value)
        else:
            runner.set_output_tokens(int(value))
        self._tune_at = self._segments_at = 0.0
        self.notify(f"{name.replace('_', ' ')} -> {value:g}: new segment", timeout=3)
        self.refresh_data()  # the header says the new value at once, not at the next tick

    def action_maximize(self, number: int) -> None:
        if self.screen is not self.screen_stack[0]:
            return  # a help or detail screen is on top
        if PANELS[number - 1] == "panel-servers" and len(self.servers) < 2:
            self.notify(
                "one server: 8 compares several (--url A --url B, demo --num-spec-tokens 2,4)",
                timeout=4,
            )
            return
        panel = self._q(f"#{PANELS[number - 1]}", Widget)
        self.screen.minimize()
        self.screen.maximize(panel, container=False)
        self._tune_at = 0.0  # the servers view picks columns or a strip by the room it has
        self.refresh_data()

    def action_restore(self) -> None:
        box = self._q("#log-filter", Input)
        if box.has_class("visible"):
            self._close_filter()
        elif self.screen.maximized is not None:
            self.screen.minimize()
            self._widget(RequestLog).focus()
            self._tune_at = 0.0
            self.refresh_data()


def _server_list(runner: MonitoredRun | None, session: SessionView) -> list[tuple[str, Any]]:
    """(label, session) per server when the run has several; else one entry."""
    servers = runner.servers if runner is not None else {}
    if len(servers) > 1:
        return [(label, pair[1]) for label, pair in servers.items()]
    label = next(iter(servers)) if servers else "run"
    return [(label, session)]


def _initial_settings(config: MonitorConfig | None) -> dict[str, Any]:
    """The run's load settings as the knobs start from (totals over every server)."""
    if config is None:
        return {"concurrency": None, "request_rate": None, "output_tokens": None}
    return {
        "concurrency": config.effective_concurrency or config.concurrency,
        "request_rate": config.request_rate,
        "output_tokens": config.output_tokens_mean,
    }


def _failure(runner: RunLifecycle | None) -> str | None:
    error = runner.error if runner is not None and runner.finished else None
    if error is None or isinstance(error, KeyboardInterrupt):
        return None
    return f"{type(error).__name__}: {error}"


def _runner_progress(runner: RunLifecycle | None) -> dict[str, Any]:
    """In-flight count and phase, for a runner that sends requests (not a replay)."""
    if runner is None or knobs_of(runner) is None:
        return {}
    try:
        p = runner.progress()
    except Exception:  # a progress read must never break the screen
        return {}
    return {
        "in_flight": p.in_flight,
        "phase": p.phase,
        "retries": p.retries,
        "down_since": p.down_since,
        "saturation": saturation_text(p) if p.lag_warning else None,
    }


def _target(config: MonitorConfig | None) -> str:
    return ", ".join(config.targets) or "-" if config is not None else "-"


def _known_total(runner: RunLifecycle | None) -> tuple[int | None, int | None]:
    """(done, total) a runner counts itself (a replay: records fed of its file's count,
    warmup records included), or (None, None)."""
    if runner is None:
        return None, None
    try:
        p = runner.progress()
    except Exception:  # a progress read must never break the screen
        return None, None
    return (p.completed, p.total) if p.total else (None, None)


def _load_text(config: MonitorConfig | None, settings: dict[str, Any]) -> str:
    """The load as it is now: the knobs' current values (`>` shows at once), not the start."""
    if config is None:
        return "replay"
    if config.load_label:
        return config.load_label
    rate = settings.get("request_rate", config.request_rate)
    conc = settings.get("concurrency") or config.concurrency
    parts = []
    if rate:
        parts.append(f"rate {rate:g}/s {config.request_rate_mode or ''}".rstrip())
    if conc or not rate:
        parts.append(f"concurrency {conc or 1}")
    if config.request_count:
        parts.append(f"count {config.request_count}")
    if config.benchmark_duration:
        parts.append(f"duration {config.benchmark_duration:g}s")
    return ", ".join(parts)


def _min_rows(widget: Widget) -> int:
    """A widget's min-height in rows (0 when it has none)."""
    scalar = widget.styles.min_height
    return int(scalar.value) if scalar is not None else 0


def _rows_without_slots(widget: Widget) -> int:
    """A layout container's height with its slots empty: its shown children stacked (a
    vertical layout) or side by side (the tallest); a panel counts as laid out."""
    if isinstance(widget, Slot) or not widget.display:
        return 0
    if isinstance(widget, (Panel, HPanel)) or not isinstance(widget, (Horizontal, Vertical)):
        return widget.outer_size.height
    rows = [_rows_without_slots(child) for child in widget.children]
    layout = widget.styles.layout
    return sum(rows) if layout is not None and layout.name == "vertical" else max(rows, default=0)


def _server_wide_spec(counters: CounterStatus) -> dict[str, dict]:
    """The headline's acceptance blocks from the server's counters (1 + Δaccepted / Δdrafts,
    Δaccepted / Δdraft_tokens: docs/metrics.md §11); per-request figures stay absent."""
    spec: dict[str, dict] = {}
    if counters.acceptance_length is not None:
        # pooled over every verify step, 1 + Σa / Σs: the token-weighted acceptance length
        # (docs/metrics.md §6); the per-request mean needs requests
        spec["spec_decode_token_weighted_acceptance_length"] = {"avg": counters.acceptance_length}
    if counters.acceptance_rate is not None:
        # pooled over every step: the overall rate (the per-request mean needs requests)
        spec["spec_decode_overall_draft_acceptance_rate"] = {"avg": 100 * counters.acceptance_rate}
    return spec


def run_monitor(config: RunConfig, runner: MonitoredRun, session: SessionView) -> int:
    """Open the monitor over a started runner; returns when the user quits (q / Ctrl-C).

    Quitting asks the runner to stop at once; the caller joins it, writes the exports
    (session.finish) and prints where they are once the screen has closed.
    """
    app = SpecmonApp(session, runner, MonitorConfig.of_run(config))
    try:
        code = app.run()
    finally:
        if runner is not None:
            runner.stop()
    return int(code or 0)


def run_watch_monitor(config: MonitorConfig, watch: MonitoredRun) -> int:
    """The monitor over a `specmon watch` (sources/watch.py WatchRun): no load, so the
    per-request panels stay empty and say why; acceptance and health come from /metrics."""
    (_, session), *_ = watch.servers.values()
    app = SpecmonApp(session, watch, config, source="watch")
    try:
        code = app.run()
    finally:
        watch.stop()
    return int(code or 0)


def detach_from_terminal() -> None:
    """After a hangup (the ssh session or the tmux pane closed) the terminal is gone: writes
    to it fail, Textual's output thread stops, and its shutdown then blocks handing it the
    last frames. Pointing stdin/stdout/stderr at /dev/null lets the screen close normally,
    so the run drains and writes its exports (README, "Stopping and exit status")."""
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:
        pass
