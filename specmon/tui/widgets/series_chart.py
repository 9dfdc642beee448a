"""Panel 3 with real axes: each time series as a plotext chart when the panel has the room,
the one-row sparklines (widgets/series.py SeriesView) when it does not.

`SeriesPanel` holds both and shows one: `chart_grid(width, height)` gives the charts' grid
(2x2 when each chart gets CHART_MIN_W columns side by side, else 4x1) once every chart gets
CHART_MIN_ROWS rows (a maximized panel, a tall terminal), else None: the sparklines (one row
each at 80x24). A chart is one series (`SeriesChart`): its name, unit and current value in
the title (the figure the sparkline's label prints), time since the start on x (seconds, or
minutes past TIME_IN_MINUTES_S), the value on y from the series' floor (AL 1, the others 0:
a chart that starts at its minimum makes noise look like a collapse), round ticks, and no
line across columns without data. The panel fetches the series once per paint for all four
charts, and a chart redraws only when its own column values changed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from textual import events
from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual_plotext.plot import Plot

from specmon.tui.model.series import NOW, SERIES, TIME, Fetch, SeriesSpec
from specmon.tui.widgets.plot import MARKER, Palette, ThemedPlot, nice_ticks, tick_labels
from specmon.tui.widgets.series import SeriesView

CHART_MIN_ROWS = 8  # title, x ticks, x label and five rows of plot
CHART_MIN_W = 36  # y ticks (up to 8) and about 28 columns of plot
Y_TICKS_W = 9  # what the y tick labels and the frame take of a chart's width
CELLS_PER_POINT = 2  # at most a column every two cells
# a point covers at least this much: on a steady simulator under load a 1 s point read up to
# 6% off the run's figure, a 2 s point up to 3.3% (requests starting and ending in it); the
# 10 s window gets 5 points, the sparklines keep 0.25 s columns
POINT_MIN_S = 2.0
HEADROOM = 0.04  # of the y range, above the highest point
TIME_IN_MINUTES_S = 300.0  # longer than this since the start: the time axis is in minutes
# each series' colour class (the sparklines use the same theme colours)
LINE_CLASS = {"al": "-al", "tok_s": "-tok", "ttft_p50": "-ttft", "err_pct": "-err"}


def chart_grid(width: int, height: int) -> tuple[int, int] | None:
    """(columns, rows) of the four charts in a width x height panel, or None: too low for
    charts (each would get fewer than CHART_MIN_ROWS rows), the sparklines instead."""
    for cols in (2, 1):
        rows = len(SERIES) // cols
        if width // cols >= CHART_MIN_W and height // rows >= CHART_MIN_ROWS:
            return cols, rows
    return None


def chart_columns(width: int, cols: int) -> int:
    """How many time columns to fetch for charts `width // cols` cells wide."""
    return max(8, (width // cols - Y_TICKS_W) // CELLS_PER_POINT)


def segments(times: Sequence[float], values: Sequence[float | None]) -> list[list[tuple]]:
    """The plotted points, split where a column has no (finite) value: a gap, never a line
    to 0."""
    out: list[list[tuple]] = []
    run: list[tuple] = []
    for t, v in zip(times, values):
        if v is None or not math.isfinite(v):
            if run:
                out.append(run)
            run = []
        else:
            run.append((t, v))
    if run:
        out.append(run)
    return out


def time_axis(times: Sequence[float]) -> tuple[float, str]:
    """(seconds per unit, the unit's name) for a time axis ending at times[-1]."""
    return (60.0, "min") if times and times[-1] > TIME_IN_MINUTES_S else (1.0, "s")


@dataclass(frozen=True)
class ChartData:
    """One series as its chart plots it."""

    times: tuple[float, ...]
    values: tuple[float | None, ...]
    current: float | None  # the source's current value (the label's), else the newest


def chart_data(data: dict[str, list[float | None]], key: str) -> ChartData:
    values = tuple(data.get(key, []))
    times = tuple(float(t) for t in data.get(TIME, []) if t is not None)
    if len(times) != len(values):  # a source without a time axis: the column's index
        times = tuple(float(i) for i in range(len(values)))
    if key + NOW in data:
        current = data[key + NOW][0]
    else:
        current = next((v for v in reversed(values) if v is not None), None)
    return ChartData(times, values, current)


class SeriesChart(ThemedPlot):
    """One time series with axes (in a SeriesPanel)."""

    DEFAULT_CSS = """
    SeriesChart { height: 1fr; width: 1fr; }
    SeriesChart.-al > .plot--line { color: $success; }
    SeriesChart.-tok > .plot--line { color: $accent; }
    SeriesChart.-ttft > .plot--line { color: $warning; }
    SeriesChart.-err > .plot--line { color: $error; }
    """

    def __init__(self, spec: SeriesSpec) -> None:
        super().__init__(id=f"chart-{spec.key.replace('_', '-')}", classes=LINE_CLASS[spec.key])
        self.spec = spec
        self.data = ChartData((), (), None)

    def show_series(self, data: dict[str, list[float | None]]) -> None:
        self.data = chart_data(data, self.spec.key)
        self.show_data(self.data)

    def draw(self, plt: Plot, palette: Palette) -> None:
        spec, data = self.spec, self.data
        now = "-" if data.current is None else format(data.current, spec.fmt)
        plt.title(f"{spec.title} · now {now}")
        scale, unit = time_axis(data.times)
        plt.xlabel(f"time since start ({unit})")
        points = segments(data.times, data.values)
        for run in points:
            xs = [t / scale for t, _ in run]
            plt.plot(xs, [v for _, v in run], marker=MARKER, color=palette.line)
        if data.times:
            x0, x1 = data.times[0] / scale, data.times[-1] / scale
            if x1 <= x0:  # one column: half a point either side (plotext divides by x1 - x0)
                x0, x1 = x0 - POINT_MIN_S / 2 / scale, x1 + POINT_MIN_S / 2 / scale
            plt.xlim(x0, x1)
            xt = [t for t in nice_ticks(x0, x1, max(3, self.size.width // 8)) if x0 <= t <= x1]
            plt.xticks(xt, tick_labels(xt))
        ys = [v for run in points for _, v in run]
        lo = min([spec.floor, *ys])
        hi = max(ys, default=lo + 1.0)
        # a little room above the highest point, so it is not drawn on the frame
        yt = nice_ticks(lo, hi + HEADROOM * (hi - lo), max(3, (self.size.height - 4) // 3))
        plt.ylim(yt[0], yt[-1])
        plt.yticks(yt, tick_labels(yt))


class SeriesPanel(Vertical):
    """Panel 3's contents: the sparklines or the charts, whichever the size allows."""

    DEFAULT_CSS = """
    SeriesPanel { height: 1fr; }
    SeriesPanel > Grid { display: none; grid-gutter: 0 2; }
    SeriesPanel.-charts > Grid { display: block; }
    SeriesPanel.-charts > SeriesView { display: none; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._fetch: Fetch | None = None
        self.grid: tuple[int, int] | None = None

    def compose(self) -> ComposeResult:
        yield SeriesView(id="series")
        with Grid(id="series-charts"):
            for spec in SERIES:
                yield SeriesChart(spec)

    def show(self, fetch: Fetch) -> None:
        """`fetch(columns, min_column_s)` gives the series binned (SeriesView.show)."""
        self._fetch = fetch
        self._paint()

    def on_resize(self, event: events.Resize) -> None:
        grid = chart_grid(event.size.width, event.size.height)
        self.grid = grid
        self.set_class(grid is not None, "-charts")
        if grid is not None:
            charts = self.query_one("#series-charts", Grid)
            charts.styles.grid_size_columns, charts.styles.grid_size_rows = grid
        self._paint()

    def _paint(self) -> None:
        if self._fetch is None:
            return
        if self.grid is None:
            self.query_one(SeriesView).show(self._fetch)
            return
        data = self._fetch(chart_columns(self.size.width, self.grid[0]), POINT_MIN_S)
        for chart in self.query(SeriesChart):
            chart.show_series(data)


__all__ = ["SeriesChart", "SeriesPanel", "chart_grid", "segments"]
