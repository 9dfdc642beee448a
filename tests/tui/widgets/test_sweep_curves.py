"""The sweep's k x concurrency curves (issue 20 item 1, "where it reads better"): the cells'
medians by hand, a gap where a cell is missing, and the chart readable in every theme."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult

from specmon.decision.sweep_types import Cell, RepeatMeasurement
from specmon.tui.themes import load_themes
from specmon.tui.widgets.sweep_curves import SweepCurves, curves, runs


def cell(k: int, c: int, tputs: tuple[float, ...]) -> Cell:
    return Cell(k, c, [RepeatMeasurement(t, 1.0, 8, acceptance_length=2.0) for t in tputs])


# medians by hand: (100, 110, 90) -> 100; (150, 152, 148) -> 150; (300, 280, 310) -> 300;
# k=2 at c=4 failed (no point); k=2 at c=16 (400, 410, 390) -> 400; k=4 not measured yet
CELLS = [
    cell(0, 1, (100, 110, 90)),
    cell(0, 4, (300, 280, 310)),
    cell(2, 1, (150, 152, 148)),
    Cell(2, 4, [], error="server failed to start"),
    cell(2, 16, (400, 410, 390)),
]


def test_curves_are_the_cells_medians_in_sweep_order():
    assert curves([0, 2, 4], [1, 4, 16], CELLS) == [
        (0, ((1, 100.0), (2, 300.0))),
        (2, ((1, 150.0), (3, 400.0))),
        (4, ()),
    ]


def test_a_missing_concurrency_splits_the_line():
    assert runs([(1, 150.0), (3, 400.0)]) == [[(1, 150.0)], [(3, 400.0)]]
    assert runs([(1, 1.0), (2, 2.0), (4, 4.0)]) == [[(1, 1.0), (2, 2.0)], [(4, 4.0)]]


class CurvesHarness(App[None]):
    def __init__(self, theme: str) -> None:
        super().__init__()
        self.wanted_theme = theme

    def compose(self) -> ComposeResult:
        yield SweepCurves(id="curves")

    def on_mount(self) -> None:
        for theme in load_themes():
            self.register_theme(theme)
        self.theme = self.wanted_theme
        self.query_one(SweepCurves).show([0, 2, 4], [1, 4, 16], CELLS)


@pytest.mark.parametrize("theme", ["dark", "light", "monochrome"])
async def test_curves_render_with_axes_and_read_in_every_theme(theme, monkeypatch):
    from tui.screens.test_tui_contrast import low_contrast

    monkeypatch.delenv("NO_COLOR", raising=False)
    app = CurvesHarness(f"specmon-{theme}")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        text = app.query_one(SweepCurves).render().plain
        assert "output tok/s (median of repeats) by concurrency" in text
        assert "k=0" in text and "k=2" in text  # the legend
        assert "concurrency" in text
        lines = text.splitlines()
        assert any(line.split() == ["1", "4", "16"] for line in lines)  # x ticks, sweep order
        assert any(line.strip().startswith("400") for line in lines)  # y ticks from 0 to 400+
        assert low_contrast(app) == []


async def test_one_concurrency_and_no_cells_draw(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    for ks, concurrencies, cells in (([0], [1], CELLS[:1]), ([0, 2], [1, 4], [])):
        app = CurvesHarness("specmon-dark")
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            chart = app.query_one(SweepCurves)
            chart.show(ks, concurrencies, cells)
            await pilot.pause()
            assert "chart not drawn" not in chart.render().plain
