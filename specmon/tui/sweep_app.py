"""The live sweep view (`specmon sweep` / `specmon demo --sweep` without --headless).

The sweep runs on its own thread (sources/sweep_control.py SweepControl, a RunLifecycle);
this app samples it on a timer: the k x concurrency grid filling in with each finished
cell's median ± MAD, the cell and repeat being measured, the decision row forming
        arms = Arms(tuple(runner.arm_names()), self.control.arm_cells())
        narrow = self.size.width < NARROW_BELOW  # figures without decimals from 100 up
        view = grid_view(ks, concs, cells, now, settings.objective(), arms, narrow)
        self.query_one(SweepGrid).show(view)
and the acceptance panels of the current repeat's session; `c` swaps those panels for the
grid as curves (tokens/s against concurrency, one line per k: widgets/sweep_curves.py) and
back. q stops the sweep (the repeat in
flight is not kept) and closes; the command then writes the decisions and prints the tables.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.widgets import Footer, Static

from specmon.tui.app import keep_default_job_control
from specmon.tui.sweep_view import Arms, grid_view, log_tail, status_line
from specmon.tui.themes import load_themes, resolve_theme
from specmon.tui.view import SPEC_COLUMNS, SPEC_ROWS
from specmon.tui.widgets.histogram import HistogramView, PositionsView
from specmon.tui.widgets.panel import HPanel, Panel
from specmon.tui.widgets.stats_table import StatsTable
from specmon.tui.widgets.sweep import SweepGrid
from specmon.tui.widgets.sweep_curves import SweepCurves

REFRESH_HZ = 4.0
NARROW_BELOW = 100  # columns: the acceptance panel keeps its bars, not the positions


class SweepApp(App[int]):
    """`control`: a SweepControl (or anything with its members: runner.now / settings /
    stopping / dir / arm_names(), cells(), arm_cells(), stop(), finished, error)."""

    TITLE = "specmon sweep"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    #sweep-header { height: 2; padding: 0 1; background: $panel; text-wrap: nowrap;
                    text-overflow: ellipsis; }
    .panel { border: round $primary 80%; border-title-color: $accent;
             border-title-style: bold; padding: 0 1; }
    #panel-grid { height: auto; }
    #panel-serverlog { height: auto; max-height: 12; display: none; }
    #panel-serverlog.visible { display: block; }
    #row-cell { height: 1fr; }
    #panel-cellspec { width: 3fr; }
    #panel-cellhist { width: 2fr; }
    #cell-hist { width: 1fr; }
    #cell-positions { width: auto; }
    /* under 100 columns the histogram's bars keep the panel; the positions give way */
    Screen.narrow #cell-positions { display: none; }
    #panel-curves { height: 1fr; display: none; }
    Screen.curves #panel-curves { display: block; }
    Screen.curves #row-cell { display: none; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit_sweep", "Stop and quit"),
        Binding("c", "toggle_curves", "Curves"),
        Binding("s", "screenshot", "Save"),
        Binding("ctrl+c", "quit_sweep", "Quit", show=False, priority=True),
    ]

    def __init__(self, control: Any, *, theme_name: str | None = None) -> None:
        super().__init__()
        self.control = control
        self._theme_name = theme_name
        self._session: Any = None
        self._load_theme_files()

    def compose(self) -> ComposeResult:
        yield Static("", id="sweep-header", markup=False)
        with Panel(id="panel-grid", classes="panel"):
            yield SweepGrid(id="grid")
        with Panel(id="panel-serverlog", classes="panel"):
            yield Static("", id="server-log", markup=False)
        with Panel(id="panel-curves", classes="panel"):
            yield SweepCurves(id="curves")
        with Horizontal(id="row-cell"):
            with Panel(id="panel-cellspec", classes="panel"):
                yield StatsTable(SPEC_ROWS, SPEC_COLUMNS, "no cell measured yet", id="cell-spec")
            with HPanel(id="panel-cellhist", classes="panel"):
                yield HistogramView(id="cell-hist")
                yield PositionsView(id="cell-positions")
        yield Footer()

    def _load_theme_files(self) -> None:
        """Before the first paint, as the monitor does: a widget styled in on_mount would
        take Textual's default theme's colours (the CSS follows a theme change later)."""
        names = []
        for theme in load_themes():
            self.register_theme(theme)
            names.append(theme.name)
        no_color = "NO_COLOR" in os.environ
        self.theme = resolve_theme(self._theme_name, names or list(self.available_themes), no_color)

    def on_mount(self) -> None:
        keep_default_job_control()  # a hangup's SIGCONT must not restart Textual's output
        self.screen.set_class(self.size.width < NARROW_BELOW, "narrow")
        self.query_one(
            "#panel-grid"
        ).border_title = "Sweep · output tok/s, median ± MAD over repeats · * selected k"
        self.query_one("#panel-serverlog").border_title = "Server log"
        self.query_one("#panel-curves").border_title = "Sweep curves · c: back to the cell"
        self.refresh_data()
        self.set_interval(1.0 / REFRESH_HZ, self.refresh_data)

    def refresh_data(self) -> None:
        try:
            self._refresh()
        except NoMatches:  # closing: the widgets go before the timer stops
            pass

    def _refresh(self) -> None:
        runner = self.control.runner
        settings, now = runner.settings, runner.now
        if self.control.finished and runner.stopping.is_set():
            self.exit(0)  # stopped from outside (SIGTERM): nothing left to show
            return
        cells = self.control.cells()
        ks, concs = list(settings.grid_ks), list(settings.concurrencies)
        total = len(ks) * len(concs) + len(runner.arm_names()) * len(concs)
        done = len(cells) + sum(len(c) for c in self.control.arm_cells().values())
        line = status_line(now, done, total, runner.stopping.is_set())
        error = self.control.error if self.control.finished else None
        if error is not None:
            line = f"the sweep failed: {error}"
        head = (
            f"specmon sweep · k {','.join(map(str, ks))} · concurrency "
            f"{','.join(map(str, concs))} · {settings.repeats} repeat(s) · {runner.dir}"
        )  # one line each, cut rather than wrapped: the status line must stay in view
        self.query_one("#sweep-header", Static).update(
            Text(f"{head}\n{line}", no_wrap=True, overflow="ellipsis")
        )
        arms = Arms(tuple(runner.arm_names()), self.control.arm_cells())
        narrow = self.size.width < NARROW_BELOW  # figures without decimals from 100 up
        view = grid_view(ks, concs, cells, now, settings.objective(), arms, narrow)
        self.query_one(SweepGrid).show(view)
        if self.screen.has_class("curves"):  # drawn only while shown (it repaints on change)
            self.query_one(SweepCurves).show(ks, concs, cells)
        log_panel = self.query_one("#panel-serverlog")
        starting = now.phase == "starting"
        log_panel.set_class(starting, "visible")
        if starting:
            log_panel.border_title = f"Server log · {now.row} · {now.log_path}"
            self.query_one("#server-log", Static).update(
                log_tail(now.log_path) or "(no output yet)"
            )
        self._show_cell(runner.last_measured)

    def _show_cell(self, latest: Any) -> None:
        """The acceptance panels of the repeat being measured (the last one between cells):
        the runner's `last_measured`, so a repeat shorter than a refresh still shows."""
        if latest is not None and latest.session is not self._session:
            self._session = latest.session
            self.query_one("#panel-cellspec").border_title = (
                f"Spec decode · {latest.row} concurrency={latest.concurrency} "
                f"repeat {latest.repeat}"
            )
        if self._session is None:
            return
        acc = self._session.accumulator
        snap = acc.snapshot()
        hist = dict(snap.pooled_histogram or {})
        self.query_one("#cell-spec", StatsTable).show(snap.spec_rows)
        self.query_one(HistogramView).show(hist)
        self.query_one(PositionsView).show(hist, snap.num_spec_tokens)
        self.query_one("#panel-cellhist").border_title = "Accepted drafts per step"

    def on_resize(self, event: events.Resize) -> None:
        self.screen.set_class(event.size.width < NARROW_BELOW, "narrow")

    def action_toggle_curves(self) -> None:
        self.screen.toggle_class("curves")
        self.refresh_data()

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """An SVG of the screen into the sweep's folder, as the monitor's `s` does."""
        folder = self.control.runner.dir
        folder.mkdir(parents=True, exist_ok=True)
        saved = self.save_screenshot(path=str(folder))
        self.notify(f"saved {saved}", timeout=4)

    def action_quit_sweep(self) -> None:
        self.control.stop()  # the repeat in flight is cancelled and not kept
        self.exit(0)
