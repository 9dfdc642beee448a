"""Panel 2 maximized: the pooled acceptance histogram as a bar chart with axes.

x: accepted drafts per verify step (the same buckets as the bars of widgets/histogram.py,
`fold_histogram`), y: % of verify steps from 0, each bar labelled with its share. Shown in
place of the text bars while panel 2 is maximized (specmon.tcss), where the height makes a
vertical chart read better than one row per bucket.
"""

from __future__ import annotations

from textual_plotext.plot import Plot

from specmon.tui.view import HistBucket, fold_histogram
from specmon.tui.widgets.plot import Palette, ThemedPlot, nice_ticks, tick_labels

BAR_WIDTH = 0.6  # of each bucket's slot
LABEL_ROOM = 0.12  # room above the tallest bar for its label, as a share of its height


class HistogramChart(ThemedPlot):
    """Accepted drafts per step as vertical bars (% of steps), with axes."""

    DEFAULT_CSS = "HistogramChart { height: 1fr; width: 1fr; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.buckets: tuple[HistBucket, ...] = ()

    def show(self, hist: dict[int, int]) -> None:
        self.buckets = tuple(fold_histogram(hist))
        self.show_data(tuple((b.label, b.count) for b in self.buckets))

    def draw(self, plt: Plot, palette: Palette) -> None:
        buckets = self.buckets
        plt.xlabel("accepted drafts per verify step")
        if not buckets:
            plt.title("waiting for spec-decode records")
            return
        plt.title(f"% of {sum(b.count for b in buckets):,} verify steps")
        labels, shares = [b.label for b in buckets], [b.pct for b in buckets]
        plt.bar(labels, shares, width=BAR_WIDTH, color=palette.line)
        rows = max(1, self.size.height - 4)  # the plot area, about
        top = max(shares) * (1 + LABEL_ROOM)
        yt = nice_ticks(0.0, top, max(3, rows // 3))
        plt.ylim(0.0, yt[-1])
        plt.yticks(yt, tick_labels(yt))
        # one text row in % of steps; a bar's top is rounded to a whole row, so its label
        # goes 1.5 rows above its value, clear of the bar
        row = yt[-1] / rows
        for x, b in enumerate(buckets, start=1):  # plotext puts string buckets at 1..n
            y = b.pct + 1.5 * row
            plt.text(f"{b.pct:.1f}%", x, y, color=palette.text, alignment="center")
