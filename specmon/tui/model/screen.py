"""`build_model`: everything the monitor's main screen shows, computed from the run once per
refresh tick, as frozen data. The widgets only paint their slice (tui/main_screen.py).

Reads: the screen's inputs (`ScreenInputs`: the run's servers, pollers and segment rows,
the control that drives it, the settings shown, the mode), the user's choices (`Choices`,
frozen) and the last model. Writes only the builder's memory (`ModelCache`: the 1 Hz
views' answers and when they are next due, the k values seen, the series bins), so one
call with a given `now` is one refresh, testable without a terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from specmon.interfaces import SeriesSource
from specmon.stats import MetricRow, row_value
from specmon.tui.model.figures import Acceptance, Headline, acceptance_of, run_headline
from specmon.tui.model.header import HeaderInfo, header_of
from specmon.tui.model.series import PLOT_EVERY_S, RECENT_S, WINDOWS, Fetch
from specmon.tui.model.state import Choices, ModelCache, ScreenInputs
from specmon.tui.model.tuning import Tuning, tuning_of
from specmon.tui.requests import Note, alarm_notes
from specmon.tui.tuning_view import WhatIf, what_if

if TYPE_CHECKING:
    from specmon.accumulator import RunSnapshot
    from specmon.pipeline import RequestResult
    from specmon.results_window import Tally

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
class FiguresKey:
    """What the figures are a function of: the user's choices, the shown server's results
    (the accumulator's version bumps on every one), the segment rows the what-if reads and
    the server's counters; equal keys, the same figures."""

    choices: Choices
    version: int
    rows_version: int
    counters: tuple[tuple[int, int], ...] | None


@dataclass(frozen=True)
class Figures:
    """The per-request panels of the shown server; recomputed only when their `key` moved."""

    key: FiguresKey
    spec_rows: Stats
    std_rows: Stats
    acceptance: Acceptance
    whatif: WhatIf | None
    headline: Headline
    whatif_subtitle: str
    plot: Plot


@dataclass(frozen=True)
class RequestRows:
    """Panel 5, the request log: the shown server's results (the log reads them by index,
    no copy), its count of rows so far with the retried and cancelled among them, and the
    alarms' lines, each after the row of the request it started with."""

    results: Sequence[RequestResult]
    tally: Tally
    notes: tuple[Note, ...]


@dataclass(frozen=True)
class ScreenModel:
    header: HeaderInfo
    figures: Figures
    tuning: Tuning | None  # None: the 1 Hz views were not due this tick
    # every server's latency row (label, std_rows), the shown one's from this tick; None
    # for a one-server run
    server_latency: tuple[tuple[str, Stats], ...] | None
    snapshot: RunSnapshot
    log: RequestRows
    # panel 3's data when due this tick (at most every PLOT_EVERY_S unless the window
    # moved): fetch(columns, min_column_s), the widget asks at its own width; None: keep
    series: Fetch | None = None
    recent_tok_s: float | None = None  # output tok/s of the last RECENT_S, with `series`
    paused: bool = False  # only the header moves (its count of arrivals since the pause)
    changed: bool = True  # `figures` differ from the last model's

    def title_suffixes(self) -> dict[str, str]:
        """What each panel's title says after its name, by panel id."""
        return {
            "panel-hist": self.figures.acceptance.title_suffix,
            "panel-plot": self.figures.plot.title_suffix,
        }


def build_model(
    inputs: ScreenInputs,
    choices: Choices,
    cache: ModelCache,
    now: float,
    last: ScreenModel | None = None,
) -> ScreenModel:
    """One refresh: `now` is time.monotonic() (when the 1 Hz views and the series are due);
    `last` the model the screen shows (kept while paused, its figures reused when their key
    did not move)."""
    cache.follow(choices.selected)
    session = inputs.session(choices)
    accumulator = session.accumulator
    if choices.paused_at is not None and last is not None:
        arrivals = len(accumulator.results) - choices.paused_at
        header = header_of(last.snapshot, inputs, choices, cache, arrivals)
        return replace(last, header=header, tuning=None, series=None, paused=True, changed=False)
    snap = accumulator.snapshot()
    control = inputs.control
    if control is not None and control.finished and cache.ended_at_s is None:
        cache.ended_at_s = float(snap.elapsed_s or 0.0)  # the load is over: the clock stops
    header = header_of(snap, inputs, choices, cache, None)
    tuning = tuning_of(inputs, choices, cache, snap, now)
    figures = _figures(snap, inputs, choices, cache, last)
    return ScreenModel(
        header=header,
        figures=figures,
        tuning=tuning,
        server_latency=_server_latency(inputs, choices, cache, snap),
        snapshot=snap,
        log=RequestRows(accumulator.results, accumulator.tally, tuple(alarm_notes(session))),
        series=(series := _series(inputs, choices, cache, figures, header.finished, now)),
        recent_tok_s=cache.recent_tok_s if series is not None else None,
        changed=last is None or figures is not last.figures,
    )


def _figures(
    snap: RunSnapshot,
    inputs: ScreenInputs,
    choices: Choices,
    cache: ModelCache,
    last: ScreenModel | None,
) -> Figures:
    label = inputs.label(choices)
    counters = cache.counters.get(label)
    seen = counters.histogram if counters is not None else None
    histogram = tuple(sorted(seen.items())) if seen is not None else None
    key = FiguresKey(choices, snap.version, cache.rows_version, histogram)
    if last is not None and last.figures.key == key:
        return last.figures
    acceptance = acceptance_of(snap, counters)
    estimate = what_if(
        acceptance.hist, acceptance.k, choices.draft_cost.given, cache.rows, label,
        row_value(snap.std_rows, "output_token_throughput", "avg"),
    )  # fmt: skip
    window_label, window = WINDOWS[choices.window_index]
    return Figures(
        key=key,
        spec_rows=snap.spec_rows,
        std_rows=snap.std_rows,
        acceptance=acceptance,
        whatif=estimate,
        # the what-if answer is in the headline, at every size; 6 opens the panel
        headline=run_headline(snap, acceptance, estimate, counters),
        whatif_subtitle=choices.draft_cost.label(),
        plot=Plot(window_label, window, isinstance(inputs.run, SeriesSource)),
    )


def _series(
    inputs: ScreenInputs,
    choices: Choices,
    cache: ModelCache,
    figures: Figures,
    finished: bool,
    now: float,
) -> Fetch | None:
    """Panel 3's data at most every PLOT_EVERY_S (the series fold every bin of the window);
    once the run is over only when the figures moved or the window changed, while it runs
    every PLOT_EVERY_S even when nothing landed (a stall must show as it happens: its
    columns marked, the last window's tok/s falling): the shown server's results folded
    into the cache's bins, or the run's own series (a watch's, per scrape)."""
    window = figures.plot.window_s
    idle = finished and figures.key == cache.series_of
    if window == cache.series_window and (idle or now - cache.series_at < PLOT_EVERY_S):
        return None
    cache.series_window, cache.series_of, cache.series_at = window, figures.key, now
    run, label = inputs.run, inputs.label(choices)
    if figures.plot.server_wide and isinstance(run, SeriesSource):
        # a watch's columns are never shorter than its scrape interval
        return lambda columns, _min_s: run.series(label, window, columns)
    bins = cache.bins
    seen = bins.seen
    bins.add(inputs.session(choices).accumulator.results)
    if bins.seen != seen or cache.series_grew_at is None:
        cache.series_grew_at = now
    # the bins' own clock: the newest end, plus the time since a result last landed while
    # the run goes on (the run clock starts before the warm-up and runs ahead of it: its
    # newest columns were blank and, once the run had ended, read as a stall)
    # (a frozen clock, the snapshot tests', lets no time pass: the picture is the data's)
    still = finished or choices.freeze_elapsed is not None
    end = bins.last_s() + (0.0 if still else now - cache.series_grew_at)
    # columns long enough to hold several request ends: a blank one is then a stall
    steady = bins.steady_column_s()
    cache.recent_tok_s = None if finished else bins.recent_tok_s(end, RECENT_S)
    return lambda columns, min_s: bins.series(window, end, columns, max(min_s, steady))


def _server_latency(
    inputs: ScreenInputs, choices: Choices, cache: ModelCache, snap: RunSnapshot
) -> tuple[tuple[str, Stats], ...] | None:
    """Every server's latency row; the shown one's from this tick's snapshot, the header's,
    so one server never shows two request-throughput figures."""
    if not inputs.multi or len(cache.server_std) != len(inputs.servers):
        return None
    stats = list(cache.server_std)
    stats[choices.selected] = snap.std_rows
    return tuple((label, std) for (label, _), std in zip(inputs.servers, stats))
