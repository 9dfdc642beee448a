"""Charts with real axes: plotext (through textual-plotext) in the theme's colours.

`ThemedPlot` is the base of every chart: it paints the plot area and the axes in the
widget's own background, the ticks, labels and title in its text colour (`$text`) and the
data in its `plot--line` component colour, all resolved from the theme when it renders, so
a theme change (`t`) only needs a refresh. It draws only when `show_data` is given data that
differs from what it shows (plotext builds the whole figure on every render). `nice_ticks`
and `tick_labels` are pure, checked by hand in tests/tui/widgets/test_series_chart.py.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from rich.color import Color as RichColor
from rich.text import Text
from textual.app import RenderResult
from textual.color import Color
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot

RGB = tuple[int, int, int]
STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)  # tick spacings per decade
# 2x2 quadrant blocks per cell: braille (2x4) is smoother but comes from fallback fonts
# wider than a cell in many terminals and in the SVG screenshots, stretching the line
MARKER = "hd"


def nice_ticks(lo: float, hi: float, count: int) -> list[float]:
    """About `count` round ticks covering lo..hi: a spacing of 1, 2, 2.5 or 5 times a power
    of ten, the first tick at or below lo and the last at or above hi."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0, 1.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(1, count - 1)
    decade = 10.0 ** math.floor(math.log10(raw))
    step = next(s * decade for s in STEPS if s * decade >= raw * (1 - 1e-9))
    first = math.floor(lo / step + 1e-9)
    last = math.ceil(hi / step - 1e-9)
    return [round(i * step, 12) for i in range(first, last + 1)]


def tick_labels(ticks: Sequence[float]) -> list[str]:
    """Each tick with as many decimals as its spacing needs (0.25 steps: two), and thousands
    separators."""
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    decimals = next((d for d in range(5) if abs(round(step, d) - step) < 1e-9), 4)
    return [f"{t:,.{decimals}f}" for t in ticks]


def rgb(color: Color | RichColor | None, fallback: Color) -> RGB:
    """An opaque (r, g, b) for plotext; None (no colour set) is the fallback."""
    if isinstance(color, RichColor):
        return color.get_truecolor().red, color.get_truecolor().green, color.get_truecolor().blue
    c = fallback if color is None else color
    return c.r, c.g, c.b


@dataclass(frozen=True)
class Palette:
    """A chart's colours as plotext takes them."""

    back: RGB  # the plot area and the axes: the widget's own background
    text: RGB  # ticks, labels, title, frame
    line: RGB  # the data


class ThemedPlot(PlotextPlot):
    """A plotext chart that takes its colours from the theme and draws only on new data.

    A subclass gives `draw(plt, palette)`: set the title, the labels, the limits and the
    ticks, and plot its data (kept by `show_data`) in `palette.line`.
    """

    COMPONENT_CLASSES = {"plot--line"}
    DEFAULT_CSS = """
    ThemedPlot { color: $text; }
    ThemedPlot > .plot--line { color: $accent; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._shown: Hashable = None

    def show_data(self, key: Hashable) -> bool:
        """Keep `key` (what draw() plots) and repaint, unless it is what is shown already."""
        if key == self._shown:
            return False
        self._shown = key
        self.refresh()
        return True

    def forget_shown(self) -> None:
        """The theme changed: the colours are resolved again at the next render."""
        self.refresh()

    def palette(self) -> Palette:
        _, _, back, text = self.colors
        line = self.get_component_rich_style("plot--line", partial=True).color
        return Palette(rgb(back, back), rgb(text, text), rgb(line, text))

    def render(self) -> RenderResult:
        width, height = self.size
        plt = self.plt
        plt.clear_data()
        # plotext limits a figure to the terminal it was started in unless both are set
        # (textual-plotext's own render does the same)
        plt.plotsize(width, height)
        plt._set_size(width, height)
        palette = self.palette()
        plt.canvas_color(palette.back)
        plt.axes_color(palette.back)
        plt.ticks_color(palette.text)
        try:
            self.draw(plt, palette)
            return Text.from_ansi(plt.build(), no_wrap=True)
        except (ArithmeticError, ValueError, IndexError) as exc:
            # a figure plotext cannot draw must not take the monitor down: say why, in place
            return Text(f"chart not drawn ({type(exc).__name__}: {exc})", style="italic")

    def draw(self, plt: Plot, palette: Palette) -> None:
        raise NotImplementedError


__all__ = ["Palette", "ThemedPlot", "nice_ticks", "tick_labels"]
