"""Acceptance length over time (textual-plotext), window 10 s / 60 s / whole run."""

from __future__ import annotations

from textual_plotext import PlotextPlot

WINDOWS: tuple[tuple[str, float | None], ...] = (("10 s", 10.0), ("60 s", 60.0), ("run", None))


class AcceptancePlot(PlotextPlot):
    """Token-weighted acceptance length per time bin; redrawn only when the data changes."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._key: tuple | None = None

    def show(self, xs: list[float], ys: list[float], window_label: str, k: int | None) -> None:
        key = (tuple(xs), tuple(ys), window_label, k)
        if key == self._key:
            return
        self._key = key
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(f"acceptance length, window {window_label}")
        plt.xlabel("s")
        if xs:
            plt.plot(xs, ys, marker="braille")
        top = (k + 1) if k else max(ys, default=2.0)
        plt.ylim(1.0, max(top, 1.5))
        self.refresh()
