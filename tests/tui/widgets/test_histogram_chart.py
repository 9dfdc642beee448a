"""Panel 2 maximized (issue 20 item 1, "where it reads better"): the pooled acceptance
histogram as a plotext bar chart with axes, in place of the text bars."""

from __future__ import annotations

import pytest
from support.tui_fixtures import accumulate, run_captures, session_view
from textual.app import App, ComposeResult

from specmon.tui.app import SpecmonApp
from specmon.tui.widgets.histogram import HistogramView
from specmon.tui.widgets.histogram_chart import HistogramChart


@pytest.fixture(autouse=True)
def _colour(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)


class ChartHarness(App[None]):
    """A HistogramChart alone, fed `hist`."""

    def __init__(self, hist: dict[int, int]) -> None:
        super().__init__()
        self.hist = hist

    def compose(self) -> ComposeResult:
        yield HistogramChart(id="hist-chart")

    def on_mount(self) -> None:
        self.query_one(HistogramChart).show(self.hist)


async def test_known_histogram_bars_and_labels():
    """h = {0: 2, 1: 1, 2: 1}: 4 steps, shares 50%, 25%, 25% (by hand), buckets 0, 1, 2."""
    app = ChartHarness({0: 2, 1: 1, 2: 1})
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        text = app.query_one(HistogramChart).render().plain
        assert "% of 4 verify steps" in text
        assert "50.0%" in text and text.count("25.0%") == 2
        assert "accepted drafts per verify step" in text
        assert "█" in text  # the bars are drawn
        lines = text.splitlines()
        x_ticks = next(line for line in reversed(lines) if line.split() == ["0", "1", "2"])
        assert x_ticks  # one tick per bucket under the bars


async def test_no_records_yet_says_so():
    app = ChartHarness({})
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert "waiting for spec-decode records" in app.query_one(HistogramChart).render().plain


async def test_maximizing_panel_2_shows_the_chart_instead_of_the_bars():
    app = SpecmonApp(
        session_view(accumulate(run_captures(60))), None, None, source="replay", freeze_elapsed=15.0
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        bars, chart = app.screen.query_one(HistogramView), app.screen.query_one(HistogramChart)
        assert bars.display and not chart.display
        await pilot.press("2")
        await pilot.pause()
        assert chart.display and not bars.display and chart.size.height > 30
        # the recorded run's 407 steps (tests/support/tui_fixtures), as the text bars count them
        assert "% of 407 verify steps" in chart.render().plain
        await pilot.press("escape")
        await pilot.pause()
        assert bars.display and not chart.display


@pytest.mark.parametrize("hist", [{0: 5}, {3: 1}, {0: 1, 9: 1}])
async def test_edge_histograms_draw(hist):
    """One bucket, leading empty buckets (0..2 at 0%), a folded '>=' bucket: all drawn."""
    app = ChartHarness(hist)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        text = app.query_one(HistogramChart).render().plain
        assert "chart not drawn" not in text and "verify steps" in text
