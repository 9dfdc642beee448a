"""Pooled acceptance histogram (horizontal bars) and per-position acceptance."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import events

from specmon.decision.acceptance import per_position
from specmon.tui.view import bar, fold_histogram
from specmon.tui.widgets.shaped import ShapedStatic


class HistogramView(ShapedStatic):
    """Accepted drafts per verify step: one bar per bucket with count and % of steps."""

    COMPONENT_CLASSES = {"histogram--bar"}
    DEFAULT_CSS = "HistogramView > .histogram--bar { color: $accent; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._hist: dict[int, int] = {}

    def forget_shown(self) -> None:
        """The theme changed: the bars take the new colours now."""
        self._repaint()

    def show(self, hist: dict[int, int]) -> None:
        if hist == self._hist:
            return
        self._hist = dict(hist)
        self._repaint()

    def on_resize(self, event: events.Resize) -> None:
        self._repaint()

    def _repaint(self) -> None:
        buckets = len(fold_histogram(self._hist))
        self.show_content(self._render_bars(), buckets, buckets or 1)

    def _render_bars(self) -> Text:
        buckets = fold_histogram(self._hist)
        if not buckets:
            return Text("waiting for spec-decode records...", style="italic")
        count_w = max(len(f"{b.count:,}") for b in buckets)
        # "  j " + bar + " " + count + " xx.x%": the bar gets what is left (none if too narrow)
        bar_w = max(0, (self.size.width or 40) - 12 - count_w)
        peak = max(b.pct for b in buckets) or 1.0
        bar_style = self.get_component_rich_style("histogram--bar", partial=True)
        out = Text(no_wrap=True)
        for b in buckets:
            out.append(f"{b.label:>3} ", style="bold")
            if bar_w:
                out.append(bar(b.pct / peak, bar_w), style=bar_style)
            out.append(f" {b.count:>{count_w},} {b.pct:5.1f}%\n")
        out.rstrip()
        return out


class PositionsView(ShapedStatic):
    """P(accepted >= i) and P(accept i | accepted i-1) with the Wilson 95 % interval."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._key: tuple | None = None

    def forget_shown(self) -> None:
        """The theme changed: the next show() paints with the new colours."""
        self._key = None

    def show(self, hist: dict[int, int], k: int | None) -> None:
        key = (tuple(sorted(hist.items())), k)
        if key == self._key:
            return
        self._key = key
        rows = len(per_position(hist, k))
        self.show_content(self._render_rows(hist, k), rows, rows + 1 if rows else 1)

    def _render_rows(self, hist: dict[int, int], k: int | None) -> Table | Text:
        rows = per_position(hist, k)
        if not rows:
            return Text("per-position acceptance appears with the first steps", style="italic")
        table = Table(box=None, padding=(0, 1), pad_edge=False, header_style="bold")
        table.add_column("pos", justify="right")
        table.add_column("P(acc>=i)", justify="right")
        table.add_column("P(i|i-1)", justify="right")
        table.add_column("95% CI", justify="right", no_wrap=True)
        for p in rows:
            cond = "-" if p.conditional is None else f"{p.conditional:.3f}"
            ci = "-" if p.ci95 is None else f"{p.ci95[0]:.2f}-{p.ci95[1]:.2f}"
            surv = "-" if p.unconditional is None else f"{p.unconditional:.3f}"
            table.add_row(str(p.position), surv, cond, ci)
        return table
