"""Panel 3 with real axes (issue 20 item 1): plotext charts when the panel has the height,
the one-row sparklines when it has not; ticks, units and the plotted points checked by hand
on hand-made series, and the charts pinned as snapshots."""

from __future__ import annotations

import pytest
from support.tui_fixtures import accumulate, run_captures, session_view
from textual.app import App, ComposeResult
from textual.color import Color

from specmon.tui.app import SpecmonApp
from specmon.tui.widgets.plot import nice_ticks, tick_labels
from specmon.tui.widgets.series import SeriesView
from specmon.tui.widgets.series_chart import (
    SeriesChart,
    SeriesPanel,
    chart_data,
    chart_grid,
    segments,
    time_axis,
)


@pytest.fixture(autouse=True)
def _colour(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)


def test_nice_ticks_by_hand():
    # 0..7,200 in about 5 ticks: raw spacing 1,800 -> the next round step is 2,000
    assert nice_ticks(0, 7200, 5) == [0, 2000, 4000, 6000, 8000]
    assert tick_labels([0, 2000, 4000]) == ["0", "2,000", "4,000"]
    # AL 1..3.4 in 4: raw 0.8 -> 1; the last tick at or above 3.4
    assert nice_ticks(1.0, 3.4, 4) == [1, 2, 3, 4]
    # 0..1 in 5: raw 0.25, a round step itself; its labels need two decimals
    assert nice_ticks(0, 1, 5) == [0, 0.25, 0.5, 0.75, 1.0]
    assert tick_labels([0, 0.25, 0.5]) == ["0.00", "0.25", "0.50"]
    # a flat series (errors all 0): 0..1 rather than a zero-height axis
    assert nice_ticks(0, 0, 3) == [0, 0.5, 1.0]


def test_chart_grid_follows_the_room():
    # 2x2 when two charts of 36 columns fit side by side and each gets 8 rows
    assert chart_grid(156, 43) == (2, 2)
    assert chart_grid(72, 16) == (2, 2)
    # 70 columns: one chart across, four stacked, 8 rows each from 32 rows
    assert chart_grid(70, 32) == (1, 4)
    assert chart_grid(70, 31) is None  # 7 rows each: sparklines
    assert chart_grid(156, 4) is None  # the 80x24 / 160x48 layouts' 1-row series
    assert chart_grid(30, 48) is None  # too narrow for axes


def test_segments_leave_gaps_where_a_column_has_no_value():
    times = [0.5, 1.5, 2.5, 3.5, 4.5]
    assert segments(times, [1.0, 2.0, None, 4.0, None]) == [[(0.5, 1.0), (1.5, 2.0)], [(3.5, 4.0)]]
    assert segments(times, [None] * 5) == []


def test_segments_treat_a_non_finite_value_as_a_gap():
    inf = float("inf")
    assert segments([1.0, 2.0, 3.0], [1.0, inf, float("nan")]) == [[(1.0, 1.0)]]


def test_time_axis_turns_to_minutes_past_five_minutes():
    assert time_axis([10.0, 300.0]) == (1.0, "s")
    assert time_axis([10.0, 301.0]) == (60.0, "min")


def test_chart_data_takes_the_sources_current_value_and_time_axis():
    data = {"tok_s": [1000.0, None], "tok_s@now": [1500.0], "@t": [1.0, 3.0]}
    d = chart_data(data, "tok_s")
    assert (d.times, d.values, d.current) == ((1.0, 3.0), (1000.0, None), 1500.0)
    # no time axis from the source: the column index; no current value: the newest value
    d = chart_data({"al": [2.0, 2.5, None]}, "al")
    assert (d.times, d.current) == ((0.0, 1.0, 2.0), 2.5)


# Hand-made series: 2 s columns over 0..40 s; tokens/s climbs 1,000 -> 2,900 with a gap,
# AL steady at 2.5 then 3.0, TTFT 40 ms, no errors.
TIMES = [1.0 + 2 * i for i in range(20)]
KNOWN = {
    "@t": TIMES,
    "tok_s": [1000.0 + 100 * i if i not in (7, 8) else None for i in range(20)],
    "al": [2.5 if i < 10 else 3.0 for i in range(20)],
    "ttft_p50": [40.0] * 20,
    "err_pct": [0.0] * 20,
    "tok_s@now": [2900.0],
}


class SeriesHarness(App[None]):
    """A SeriesPanel alone, fed KNOWN; `height` rows of it."""

    def __init__(self, height: int | None = None, theme: str = "specmon-dark") -> None:
        super().__init__()
        self.height = height
        self.wanted_theme = theme

    def compose(self) -> ComposeResult:
        yield SeriesPanel(id="series-panel")

    def on_mount(self) -> None:
        from specmon.tui.themes import load_themes

        for theme in load_themes():
            self.register_theme(theme)
        self.theme = self.wanted_theme
        panel = self.query_one(SeriesPanel)
        if self.height is not None:
            panel.styles.height = self.height
        panel.show(lambda columns, min_s: {k: list(v) for k, v in KNOWN.items()})


async def test_known_series_plot_their_points_with_units():
    app = SeriesHarness()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        panel = app.query_one(SeriesPanel)
        assert panel.grid == (2, 2)
        tok = app.query_one("#chart-tok-s", SeriesChart)
        # the plotted runs: columns 0..6 and 9..19, nothing drawn across the gap
        runs = segments(tok.data.times, tok.data.values)
        assert [len(r) for r in runs] == [7, 11]
        assert runs[-1][-1] == (39.0, 2900.0)
        text = tok.render().plain
        assert "output tok/s · now 2,900" in text
        assert "time since start (s)" in text
        for label in ("0", "1,000", "2,000", "3,000"):  # y ticks from 0 (the floor)
            assert label in text
        al = app.query_one("#chart-al", SeriesChart).render().plain
        assert "AL (tokens/step) · now 3.00" in al


async def test_one_row_per_series_stays_a_sparkline():
    app = SeriesHarness(height=4)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        panel = app.query_one(SeriesPanel)
        assert panel.grid is None
        assert app.query_one(SeriesView).display
        assert not app.query_one("#series-charts").display
        lines = str(app.query_one(SeriesView).render()).splitlines()
        assert len(lines) == 4 and lines[1].startswith("out tok/s") and "2,900" in lines[1]


def recorded_app() -> SpecmonApp:
    return SpecmonApp(
        session_view(accumulate(run_captures(60))), None, None, source="replay", freeze_elapsed=15.0
    )


async def test_maximizing_panel_3_turns_sparklines_into_charts():
    app = recorded_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        panel = app.screen.query_one(SeriesPanel)
        assert panel.grid is None and panel.query_one(SeriesView).display
        await pilot.press("3")
        await pilot.pause()
        assert panel.grid == (2, 2)
        assert not panel.query_one(SeriesView).display
        charts = list(panel.query(SeriesChart))
        assert len(charts) == 4 and all(c.display and c.size.height >= 8 for c in charts)
        # the recorded run's throughput chart has points, and its title says the current
        tok = panel.query_one("#chart-tok-s", SeriesChart)
        assert any(v is not None for v in tok.data.values)
        await pilot.press("escape")
        await pilot.pause()
        assert panel.grid is None and panel.query_one(SeriesView).display


def test_snapshot_known_series_charts_160x48(snap_compare):
    assert snap_compare(SeriesHarness(), terminal_size=(160, 48))


def test_snapshot_known_series_light_160x48(snap_compare):
    assert snap_compare(SeriesHarness(theme="specmon-light"), terminal_size=(160, 48))


def test_snapshot_known_series_one_row_80x24(snap_compare):
    assert snap_compare(SeriesHarness(height=4), terminal_size=(80, 24))


def test_snapshot_monitor_series_maximized_160x48(snap_compare):
    assert snap_compare(recorded_app(), terminal_size=(160, 48), press=["3"])


def _backgrounds(text) -> set[tuple[int, int, int]]:
    """Every background colour the rendered chart paints (as r, g, b)."""
    out = set()
    for span in text.spans:
        style = span.style
        if not isinstance(style, str) and style.bgcolor is not None:
            out.add(tuple(style.bgcolor.get_truecolor()))
    return out


async def test_charts_take_the_new_theme_on_t():
    """`t` while the charts show: each redraws on the new theme's background, in colours
    that read there (a chart keeping the dark background in the light theme would still
    pass the contrast check: the background itself is compared)."""
    from tui.screens.test_tui_contrast import low_contrast

    app = recorded_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        for expected in ("specmon-light", "specmon-monochrome", "specmon-dark"):
            await pilot.press("t")
            await pilot.pause()
            await pilot.pause()
            assert app.theme == expected
            back = Color.parse(app.current_theme.background).rgb
            for chart in app.screen.query(SeriesChart):
                assert _backgrounds(chart.render()) == {back}, (expected, chart.id)
            assert low_contrast(app) == [], expected


async def test_a_chart_draws_again_only_when_its_data_changed(monkeypatch):
    """Low CPU: the panel fetches at each paint, but a chart whose values did not move is not
    drawn again (plotext builds the whole figure each time); new values draw once."""
    drawn: list[str] = []
    original = SeriesChart.draw

    def counting(self, plt, palette):
        drawn.append(self.spec.key)
        original(self, plt, palette)

    monkeypatch.setattr(SeriesChart, "draw", counting)
    app = SeriesHarness()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        panel = app.query_one(SeriesPanel)
        first = len(drawn)
        assert first >= 4  # each chart drew at least once
        panel.show(lambda columns, min_s: {k: list(v) for k, v in KNOWN.items()})
        await pilot.pause()
        assert len(drawn) == first  # the same values: nothing drawn
        moved = {k: list(v) for k, v in KNOWN.items()}
        moved["tok_s"] = [*moved["tok_s"][:-1], 3000.0]
        panel.show(lambda columns, min_s: moved)
        await pilot.pause()
        assert drawn[first:] == ["tok_s"]  # only the chart whose values moved


async def test_a_single_column_draws_around_its_one_point():
    """A run shorter than one 2 s point has one column (its middle at 1 s): the x axis spans
    half a point either side (0..2 s) instead of a zero-width axis plotext cannot divide."""
    app = SeriesHarness()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        panel = app.query_one(SeriesPanel)
        one = {"@t": [1.0], "tok_s": [500.0], "al": [2.0], "ttft_p50": [40.0], "err_pct": [0.0]}
        panel.show(lambda columns, min_s: one)
        await pilot.pause()
        text = app.query_one("#chart-tok-s", SeriesChart).render().plain
        assert "chart not drawn" not in text
        assert "output tok/s · now 500" in text and "time since start (s)" in text
