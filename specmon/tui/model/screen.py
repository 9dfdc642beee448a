"""`build_model`: everything the monitor's main screen shows, computed from the run once per
refresh tick, as frozen data. The widgets only paint their slice (tui/main_screen.py).

Reads: the run (`RunView`: servers, pollers, segment rows), the control that drives it, the
settings shown, the mode and the screen's choices (`UiState`). Writes only `UiState`'s
memory (the 1 Hz views' answers and when they are next due, the k values seen), so one
call with a given `now` is one refresh, testable without a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from specmon.interfaces import MonitorConfig, RunLifecycle, RunView, SeriesSource
from specmon.stats import MetricRow
from specmon.tui.model.figures import Acceptance, Headline, acceptance_of, run_headline
from specmon.tui.model.header import HeaderInfo, header_of
from specmon.tui.model.series import WINDOWS
from specmon.tui.model.state import UiState
from specmon.tui.model.tuning import Tuning, tuning_of
from specmon.tui.modes import Mode
from specmon.tui.tuning_view import WhatIf, what_if

if TYPE_CHECKING:
    from specmon.accumulator import RunSnapshot

Stats = dict[str, MetricRow]  # tag -> its typed statistics


@dataclass(frozen=True)
class Plot:
    """Panel 3: the window the time series covers, and whose series they are."""

    window_label: str
    window_s: float | None
    server_wide: bool  # one point per scrape of /metrics (a watch), not per request

    @property
    def title_suffix(self) -> str:
        wide = " · server-wide (/metrics)" if self.server_wide else ""
        return f" · window {self.window_label} (w){wide}"


@dataclass(frozen=True)
class Figures:
    """The per-request panels of the shown server; recomputed only when the run's counts,
    the window, the draft cost, the server or the segment rows moved (`key`)."""

    key: tuple[object, ...]
    spec_rows: Stats
    std_rows: Stats
    acceptance: Acceptance
    whatif: WhatIf | None
    headline: Headline
    whatif_subtitle: str
    plot: Plot


@dataclass(frozen=True)
class ScreenModel:
    header: HeaderInfo
    figures: Figures
    tuning: Tuning | None  # None: the 1 Hz views were not due this tick
    # every server's latency row (label, std_rows), the shown one's from this tick; None
    # for a one-server run
    server_latency: tuple[tuple[str, Stats], ...] | None
    snapshot: RunSnapshot
    paused: bool = False  # only the header moves (its count of arrivals since the pause)
    changed: bool = True  # `figures` differ from the last model's

    def title_suffixes(self) -> dict[str, str]:
        """What each panel's title says after its name, by panel id."""
        return {
            "panel-hist": self.figures.acceptance.title_suffix,
            "panel-plot": self.figures.plot.title_suffix,
        }


def build_model(
    run: RunView | None,
    control: RunLifecycle | None,
    config: MonitorConfig | None,
    mode: Mode,
    ui: UiState,
    now: float,
) -> ScreenModel:
    """One refresh: `now` is time.monotonic() (when the 1 Hz views are due)."""
    accumulator = ui.session.accumulator
    last = ui.last
    if ui.paused_at is not None and last is not None:
        arrivals = len(accumulator.results) - ui.paused_at
        header = header_of(last.snapshot, run, control, config, mode, ui, arrivals)
        return replace(last, header=header, tuning=None, paused=True, changed=False)
    snap = accumulator.snapshot()
    if control is not None and control.finished and ui.ended_at_s is None:
        ui.ended_at_s = float(snap.elapsed_s or 0.0)  # the load is over: the clock stops
    header = header_of(snap, run, control, config, mode, ui, None)
    tuning = tuning_of(run, mode, ui, snap, now)
    figures = _figures(snap, ui, isinstance(run, SeriesSource))
    changed = last is None or figures is not last.figures
    model = ScreenModel(header, figures, tuning, _server_latency(ui, snap), snap, False, changed)
    ui.last = model
    return model


def _figures(snap: RunSnapshot, ui: UiState, server_series: bool) -> Figures:
    counters = ui.counters.get(ui.label)
    key = (
        snap.request_count,
        snap.error_count,
        snap.warmup_count,
        len(ui.session.accumulator.results),
        ui.window_index,
        ui.draft_cost,
        ui.selected,
        ui.rows_version,
        counters.histogram if counters is not None else None,
    )
    if ui.last is not None and ui.last.figures.key == key:
        return ui.last.figures
    acceptance = acceptance_of(snap, counters)
    estimate = what_if(acceptance.hist, acceptance.k, ui.draft_cost.given, ui.rows, ui.label)
    label, window = WINDOWS[ui.window_index]
    return Figures(
        key=key,
        spec_rows=snap.spec_rows,
        std_rows=snap.std_rows,
        acceptance=acceptance,
        whatif=estimate,
        # the what-if answer is in the headline, at every size; 6 opens the panel
        headline=run_headline(snap, acceptance, estimate, counters),
        whatif_subtitle=ui.draft_cost.label(),
        plot=Plot(label, window, server_series),
    )


def _server_latency(ui: UiState, snap: RunSnapshot) -> tuple[tuple[str, Stats], ...] | None:
    """Every server's latency row; the shown one's from this tick's snapshot, the header's,
    so one server never shows two request-throughput figures."""
    if not ui.multi or len(ui.server_std) != len(ui.servers):
        return None
    stats = list(ui.server_std)
    stats[ui.selected] = snap.std_rows
    return tuple((label, std) for (label, _), std in zip(ui.servers, stats))
