"""The sweep's k x concurrency grid as curves: output tokens/s (the median over a cell's
repeats, decision/cells.py `summarize`, the figure the grid prints) against concurrency, one
line per k, with axes. The sweep view (tui/sweep_app.py) shows it in place of the current
cell's panels on `c`; the grid stays the place for the exact figures and the decision.

x: the concurrencies in sweep order, evenly spaced (a sweep's grid is usually 1, 4, 16, 64:
even spacing reads as a log axis) and labelled with their values; y: tokens/s from 0. A cell
with no repeat yet, or one that failed, is no point: a k's line has a gap there.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual_plotext.plot import Plot

from specmon.decision.cells import summarize
from specmon.decision.sweep_types import Cell
from specmon.tui.widgets.plot import MARKER, RGB, Palette, ThemedPlot, nice_ticks, rgb, tick_labels

# one colour per k, cycled: the theme's, most distinct first (the line's own is $accent)
CURVE_CLASSES = ("curve--1", "curve--2", "curve--3", "curve--4", "curve--5")
Curve = tuple[int, tuple[tuple[int, float], ...]]  # k, its (concurrency index 1.., median)
POINT_MARKERS = ("o", "x", "+", "*", "#")  # a shape per k: the k's tell apart in monochrome
X_PAD = 0.25  # of a concurrency's step, left of the first and right of the last


def curves(ks: Sequence[int], concurrencies: Sequence[int], cells: Sequence[Cell]) -> list[Curve]:
    """Each k's measured medians as (concurrency's position 1..n, tokens/s), in sweep order."""
    by_key = {(c.k, c.concurrency): c for c in cells if c.error is None}
    out = []
    for k in ks:
        points = []
        for i, conc in enumerate(concurrencies, start=1):
            cell = by_key.get((k, conc))
            stats = summarize(cell) if cell is not None else None
            if stats is not None:
                points.append((i, stats.median))
        out.append((k, tuple(points)))
    return out


def runs(points: Sequence[tuple[int, float]]) -> list[list[tuple[int, float]]]:
    """Points split where a concurrency in between has none (no line across a gap)."""
    out: list[list[tuple[int, float]]] = []
    for x, y in points:
        if out and out[-1][-1][0] == x - 1:
            out[-1].append((x, y))
        else:
            out.append([(x, y)])
    return out


class SweepCurves(ThemedPlot):
    """Output tok/s against concurrency, one line per k."""

    COMPONENT_CLASSES = {"plot--line", *CURVE_CLASSES}
    DEFAULT_CSS = """
    SweepCurves { height: 1fr; width: 1fr; }
    SweepCurves > .curve--1 { color: $success; }
    SweepCurves > .curve--2 { color: $warning; }
    SweepCurves > .curve--3 { color: $secondary; }
    SweepCurves > .curve--4 { color: $error; }
    SweepCurves > .curve--5 { color: $primary; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.concurrencies: tuple[int, ...] = ()
        self.curves: tuple[Curve, ...] = ()

    def show(self, ks: Sequence[int], concurrencies: Sequence[int], cells: Sequence[Cell]) -> None:
        self.concurrencies = tuple(concurrencies)
        self.curves = tuple(curves(ks, concurrencies, cells))
        self.show_data((self.concurrencies, self.curves))

    def colours(self, palette: Palette) -> list[RGB]:
        """The line colours in k order: $accent, then the curve classes."""
        styles = [self.get_component_rich_style(name, partial=True) for name in CURVE_CLASSES]
        _, _, back, _ = self.colors
        return [palette.line, *(rgb(s.color, back) for s in styles)]

    def draw(self, plt: Plot, palette: Palette) -> None:
        plt.title("output tok/s (median of repeats) by concurrency")
        plt.xlabel("concurrency")
        colours = self.colours(palette)
        top = 0.0
        for n, (k, points) in enumerate(self.curves):
            colour = colours[n % len(colours)]
            for run in runs(points):
                plt.plot([x for x, _ in run], [y for _, y in run], marker=MARKER, color=colour)
            if points:  # each measured cell as its k's shape: the legend's, in any theme
                top = max(top, *(y for _, y in points))
                xs, ys = [x for x, _ in points], [y for _, y in points]
                shape = POINT_MARKERS[n % len(POINT_MARKERS)]
                plt.scatter(xs, ys, marker=shape, color=colour, label=f" k={k}")
        n = len(self.concurrencies)
        if n:
            plt.xlim(1 - X_PAD, n + X_PAD)  # the first and last points inside the frame
            plt.xticks(list(range(1, n + 1)), [str(c) for c in self.concurrencies])
        yt = nice_ticks(0.0, top * 1.05 or 1.0, max(3, (self.size.height - 4) // 3))
        plt.ylim(0.0, yt[-1])
        plt.yticks(yt, tick_labels(yt))


__all__ = ["SweepCurves", "curves", "runs"]
