"""The live monitor: a small Textual app around one MainScreen (tui/main_screen.py).

The load runs on its own thread (LoadRunner) and feeds a RunSession; the screen only reads
the run at `refresh_hz` through the screen model (tui/model/), and each widget repaints only
when its slice changed. Nothing here runs per record. This module holds what is the app's
own: the themes, the stop signals (specmon/stops.py), the refresh timer, quitting, and the
keys that work on every screen (help, explain, screenshot, theme). What it reads and drives
is declared in specmon/interfaces.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches

from specmon import stops, terminal
from specmon.interfaces import MonitorConfig, MonitoredRun, SessionView
from specmon.tui.main_screen import MainScreen
from specmon.tui.modes import WATCH, Mode, mode_of
from specmon.tui.panels import PANELS as PANEL_TABLE
from specmon.tui.panels import PanelSpec, keyed, panel_bindings, panel_help
from specmon.tui.screens.explain import ExplainScreen
from specmon.tui.screens.help import HelpScreen
from specmon.tui.themes import load_themes, resolve_theme, restyle

if TYPE_CHECKING:
    from specmon.config import RunConfig

# panel ids in key order (1, 2, ...): what tests and docs call "panel n"
PANELS = tuple(p.id for p in keyed(PANEL_TABLE))
# how often the monitor checks that its terminal is still there (one ioctl per fd)
TERMINAL_CHECK_S = 0.5
CTRL_C_STATUS = 128 + signal.SIGINT  # Ctrl-C in the TUI ends the run as SIGINT does headless


def app_bindings(panels: Sequence[PanelSpec]) -> list[BindingType]:
    """The monitor's keys; the panels' from their declarations. The main screen's actions
    are named `screen.<action>`, so they do nothing while a help or detail screen is on top.
    """
    maximize = panel_bindings(panels)
    return [
        Binding("q", "quit_monitor", "Quit"),
        Binding("ctrl+c", "quit_monitor(True)", "Quit", show=False, priority=True),
        Binding("p", "screen.pause", "Pause"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("e", "explain", "Explain"),
        Binding("slash", "screen.filter", "Filter", key_display="/", show=False),
        Binding("s", "screenshot", "Save"),
        *maximize[:1],  # the footer's one entry for every panel key
        Binding("w", "screen.cycle_window", "Window"),
        Binding("t", "cycle_theme", "Theme", show=False),
        *maximize[1:],
        Binding("c", "screen.sort_categories(False)", "Sort categories", show=False),
        Binding("C", "screen.sort_categories(True)", "reverse the category order", show=False),
        Binding("x", "screen.sort_contexts(False)", "Sort context lengths", show=False),
        Binding("X", "screen.sort_contexts(True)", "reverse the context order", show=False),
        Binding(
            "plus,equals_sign", "screen.draft_cost(1)", "Draft cost", key_display="+/-", show=False
        ),
        Binding("minus", "screen.draft_cost(-1)", "lower the draft cost c", show=False),
        Binding(
            "right_square_bracket",
            "screen.next_server(1)",
            "Server",
            key_display="[/]",
            show=False,
        ),
        Binding("left_square_bracket", "screen.next_server(-1)", "previous server", show=False),
        Binding(
            "greater_than_sign", "screen.load_knob('concurrency', 1)", "Load", key_display="</>"
        ),
        Binding(
            "less_than_sign", "screen.load_knob('concurrency', -1)", "lower concurrency", show=False
        ),
        Binding("R", "screen.load_knob('request_rate', 1)", "raise request rate", show=False),
        Binding("r", "screen.load_knob('request_rate', -1)", "lower request rate", show=False),
        Binding("O", "screen.load_knob('output_tokens', 1)", "raise output length", show=False),
        Binding("o", "screen.load_knob('output_tokens', -1)", "lower output length", show=False),
        Binding("escape", "screen.restore", "Restore", show=False),
    ]


class SpecmonApp(App[int]):
    """The monitor over `session` (the first server's); `runner` is None for a finished run
    shown as it is (nothing to stop or steer); `config` None when no settings are known.
    A subclass with other `PANEL_SPECS` gets their keys, titles and help lines."""

    CSS_PATH = Path(__file__).with_name("specmon.tcss")  # also for a subclass elsewhere
    TITLE = "specmon"
    ENABLE_COMMAND_PALETTE = False
    ESCAPE_TO_MINIMIZE = False  # our escape action restores and re-focuses the log
    ALLOW_IN_MAXIMIZED_VIEW = "#header, Footer"  # a maximized panel keeps the header
    PANEL_SPECS: ClassVar[tuple[PanelSpec, ...]] = PANEL_TABLE
    BINDINGS: ClassVar[list[BindingType]] = app_bindings(PANEL_TABLE)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        if "BINDINGS" not in cls.__dict__:  # keys from the subclass's own panels
            cls.BINDINGS = app_bindings(cls.PANEL_SPECS)
        super().__init_subclass__(**kwargs)

    def __init__(
        self,
        session: SessionView,
        runner: MonitoredRun | None = None,
        config: MonitorConfig | None = None,
        *,
        source: Mode | str = "live",
        artifact_dir: str | os.PathLike[str] | None = None,
        freeze_elapsed: float | None = None,
        theme_name: str | None = None,
    ) -> None:
        super().__init__()
        self.runner = runner
        self.mode = mode_of(source)
        self.main = MainScreen(runner, session, config, self.mode, self.PANEL_SPECS)
        self.main.choices = replace(self.main.choices, freeze_elapsed=freeze_elapsed)
        self.artifact_dir = Path(
            artifact_dir or (config and config.artifact_dir) or session.artifact_dir or "."
        )
        self.refresh_hz = float((config and config.refresh_hz) or 4.0)
        self.theme_names: list[str] = []
        self._requested_theme = theme_name or (config.theme if config else None)
        self._marked = False  # the run's end was seen (and said, if it failed)
        self._tty_fds: tuple[int, ...] = ()  # the terminal's descriptors (set at mount)
        self._stop_callback: Callable[[int], None] | None = None
        self._load_theme_files()

    def _load_theme_files(self) -> None:
        for theme in load_themes():
            self.register_theme(theme)
            self.theme_names.append(theme.name)
        no_color = "NO_COLOR" in os.environ
        self.theme = resolve_theme(
            self._requested_theme, self.theme_names or list(self.available_themes), no_color
        )

    def get_default_screen(self) -> MainScreen:
        return self.main

    def on_mount(self) -> None:
        keep_default_job_control()
        self.set_interval(1.0 / self.refresh_hz, self.refresh_data)
        self._catch_signals(True)
        self._tty_fds = terminal.tty_fds()
        self.set_interval(TERMINAL_CHECK_S, self._watch_terminal)
        if self.runner is not None and stops.pending_stop():
            # a stop that came after the load started but before the screen was up (no
            # callback was registered yet to hear it): the run ends now, as it would have
            # (once the screen is up: quitting under its mount would leave it half-built)
            self.call_after_refresh(self.action_quit_monitor)

    def _watch_terminal(self) -> None:
        """A closed pane or ssh session need not bring this process a SIGHUP (the shell
        that gets it may outlive the pane) nor a failed write (stderr, which Textual draws
        on, may be a file), and a dead tty reads as endless EOF: the monitor would run its
        whole load and never exit. The terminal's descriptors stop being a tty the moment
        it closes: that ends the run as SIGHUP does (exports, exit 129). A stop that the
        quick paths missed is acted on here too: after a hangup Textual can stay busy
        resizing to a terminal that has no size, so a quit waiting for the next refresh
        (on_mount's) may never come; this timer still runs."""
        if self.runner is None:
            return
        if terminal.hung_up(self._tty_fds):
            stops.hangup()
        if stops.pending_stop():
            self.action_quit_monitor()

    def on_unmount(self) -> None:
        self._catch_signals(False)

    def _catch_signals(self, on: bool) -> None:
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

    # -- the refresh tick -------------------------------------------------------------
    def refresh_data(self) -> None:
        """One refresh of the main screen (the timer's tick; tests call it directly)."""
        if self._run_ended():
            return
        try:
            self.main.refresh_data()
        except NoMatches:  # the app is closing: widgets go before the timer stops
            pass

    def _run_ended(self) -> bool:
        """Notice once that the run ended; True when the screen closes with it (a watch's
        --duration, SIGTERM or SIGHUP)."""
        runner = self.runner
        if runner is None or not runner.finished or self._marked:
            return False
        if self.mode.ends_with_run:
            self.exit()
            return True
        self._marked = True
        error = runner.error
        if error is not None and not isinstance(error, KeyboardInterrupt):
            self.notify(f"the load loop stopped: {error}", severity="error", timeout=30)
        return False

    # -- the keys of every screen -----------------------------------------------------
    def action_quit_monitor(self, ctrl_c: bool = False) -> None:
        if self.runner is not None:
            self.runner.stop()  # in-flight requests are cancelled and recorded
        if ctrl_c:  # a key in the TUI, where headless gets SIGINT: the same exit status
            stops.note_stop(signal.SIGINT)
        self.exit(CTRL_C_STATUS if ctrl_c else 0)

    def action_help(self) -> None:
        keys = [b for b in self.BINDINGS if isinstance(b, Binding)]
        self.push_screen(HelpScreen(keys, panel_help(self.PANEL_SPECS)))

    def action_explain(self) -> None:
        self.push_screen(ExplainScreen())

    def action_cycle_theme(self) -> None:
        names = self.theme_names or sorted(self.available_themes)
        nxt = names[(names.index(self.theme) + 1) % len(names)] if self.theme in names else names[0]
        self.theme = nxt
        self.call_after_refresh(self._restyle)  # once the new theme's CSS is applied
        self.notify(f"theme {nxt}", timeout=2)

    def _restyle(self) -> None:
        restyle(self)
        self.main.repaint_all()

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        self.artifact_dir.mkdir(parents=True, exist_ok=True)
        path = self.save_screenshot(path=str(self.artifact_dir))
        self.notify(f"saved {path}", timeout=4)


def run_monitor(config: RunConfig, runner: MonitoredRun, session: SessionView) -> int:
    """Open the monitor over a started runner; returns when the user quits (q / Ctrl-C).

    Quitting asks the runner to stop at once; the caller joins it, writes the exports
    (session.finish) and prints where they are once the screen has closed. A stop signal
    that came before the screen opens ends the run without opening it.
    """
    if terminal.hung_up((sys.stdout.fileno(),)):  # a tty when the monitor was chosen:
        stops.hangup()  # the terminal went away before the screen opens
    if stops.pending_stop():
        runner.stop()
        return 0
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
    app = SpecmonApp(session, watch, config, source=WATCH)
    try:
        code = app.run()
    finally:
        watch.stop()
    return int(code or 0)


def keep_default_job_control() -> None:
    """A hangup brings SIGHUP and SIGCONT (the kernel signals the terminal's foreground group
    with both). Textual's driver answers SIGCONT by starting application mode again: a second
    output thread, which dies writing to the vanished terminal, and the shutdown then blocks
    for ever handing it its stop (seen: a monitor alive an hour after its pane closed, stuck in
    WriterThread.stop). specmon never suspends (Ctrl-Z is a key in raw mode), so SIGCONT and
    SIGTSTP keep their default actions."""
    for signum in (signal.SIGCONT, signal.SIGTSTP):
        try:
            signal.signal(signum, signal.SIG_DFL)
        except ValueError:  # not the main thread (an embedding caller): leave them
            pass


def detach_from_terminal() -> None:
    """After a hangup (the ssh session or the tmux pane closed) the terminal is gone: writes
    to it fail, Textual's output thread stops, and its shutdown then blocks handing it the
    last frames. Pointing stdin/stdout/stderr at /dev/null lets the screen close normally,
    so the run drains and writes its exports (docs/stopping.md)."""
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:
        pass
