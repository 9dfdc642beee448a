"""Widgets for tuning k live: what-if, servers side by side, segments, server counters.

Each widget repaints only when its input changed (ShapedStatic relayouts only when its row
count changes), like the other panels.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from specmon.formatting import k_label
from specmon.tui.tuning_view import (
    SEGMENT_HEADERS,
    ServerCard,
    WhatIf,
    position_cells,
    prediction_cells,
    recommendation_text,
    short_caveat,
)
from specmon.tui.view import bar, fold_histogram
from specmon.tui.widgets.shaped import ShapedStatic

BATCH_NOTE = "batch size moves the best k: compare TPOT per segment (7)"
SHORT_BATCH_NOTE = "batch size moves the best k (see 7)"


class WhatIfView(ShapedStatic):
    """Per-position S_i, a_i [95% CI] beside E(k'), band and predicted gain vs k'=0 per k';
    below them the recommended k with its basis (tuning_view.WhatIf)."""

    COMPONENT_CLASSES = {"whatif--best"}
    DEFAULT_CSS = "WhatIfView > .whatif--best { color: $success; text-style: bold; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._key: Any = object()

    def forget_shown(self) -> None:
        """The theme changed: the next show() paints with the new colours."""
        self._key = object()

    def show(self, w: WhatIf | None, source: str) -> None:
        key = (w, source)
        if key == self._key:
            return
        self._key = key
        if w is None:
            self.show_content(Text(recommendation_text(None), style="italic"), 0)
            return
        # Height left to Textual: the text lines wrap on a narrow panel instead of being
        # cut; a relayout happens only when the table or those lines change.
        est = w.estimate
        self.show_content(
            self._render_estimate(w, source),
            (len(est.predictions), w.text, w.caveat, w.proposal, est.steps),
        )

    def _render_estimate(self, w: WhatIf, source: str) -> Group:
        est = w.estimate
        grid = Table.grid(padding=(0, 3))
        grid.add_column(vertical="top")
        grid.add_column(vertical="top")
        grid.add_row(self._positions(est), self._predictions(w))
        best = Text()
        # a refused fit or a gated run recommends nothing: never painted as a green "best"
        style = (
            self.get_component_rich_style("whatif--best", partial=True)
            if w.k is not None
            else "italic"
        )
        best.append(w.head, style=style)
        best.append(f" · k={est.num_spec_tokens} measured over {est.steps:,} steps{source}")
        basis = w.text[len(w.head) :].removeprefix(" · ")
        lines: list[RenderableType] = [grid, best]
        if basis:
            lines.append(Text(basis))
        # with a proposal the batch clause is short, so a 160x48 screen keeps panel 4 whole
        note = SHORT_BATCH_NOTE if w.proposal else BATCH_NOTE
        caveat = Text(f"{short_caveat(w)}; {note}", style="italic")
        if w.proposal:
            lines.append(Text(w.proposal))  # the model's, after the measured answer
        return Group(*lines, caveat)

    @staticmethod
    def _positions(est: Any) -> Table:
        table = Table(box=None, padding=(0, 1), pad_edge=False, header_style="bold")
        for name in ("i", "S_i", "a_i", "95% CI"):
            table.add_column(name, justify="right", no_wrap=True)
        for cells in position_cells(est):
            table.add_row(*cells)
        return table

    def _predictions(self, w: WhatIf) -> Table:
        table = Table(box=None, padding=(0, 1), pad_edge=False, header_style="bold")
        for name in ("k'", "E(k')", "band", "speedup"):
            table.add_column(name, justify="right", no_wrap=True)
        style = self.get_component_rich_style("whatif--best", partial=True)
        for label, length, band, speed, best in prediction_cells(w):
            table.add_row(label, length, band, Text(speed, style=style) if best else speed)
        return table


class ServersView(ShapedStatic):
    """One column per server (a one-line tab strip when the screen is small)."""

    COMPONENT_CLASSES = {"servers--selected", "servers--bar"}
    DEFAULT_CSS = """
    ServersView > .servers--selected { background: $accent; color: $background; text-style: bold; }
    ServersView > .servers--bar { color: $accent; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._key: Any = None
        self._shown: tuple[tuple[ServerCard, ...], int, bool] | None = None
        self.compact = False

    def forget_shown(self) -> None:
        """The theme changed: repaint now with the new colours."""
        self.on_resize()

    def show(self, cards: Sequence[ServerCard], selected: int, compact: bool) -> None:
        key = (tuple(cards), selected, compact, self.size.width)
        if key == self._key:
            return
        self._key = key
        self._shown = (tuple(cards), selected, compact)
        self.compact = compact
        if compact:
            self.show_content(self._strip(cards, selected), ("strip", len(cards)), 1)
            return
        columns = self._columns(cards, selected)
        height = len(columns.plain.splitlines())
        self.show_content(columns, ("columns", height), height)

    def on_resize(self) -> None:
        # Bar widths follow the column width: repaint now, not at the next 1 Hz show(), so
        # the screen never shows bars sized for the width before a layout.
        self._key = None
        if self._shown is not None:
            self.show(*self._shown)

    def _strip(self, cards: Sequence[ServerCard], selected: int) -> Text:
        """Every server in one line; where it does not fit, the key hint goes first (the
        header has it too), then the speedups (never a cut AL or k at 80 columns for three
        servers)."""
        width = self.size.width or 80
        for level in range(3):
            out = self._strip_at(cards, selected, level)
            if out.cell_len <= width:
                return out
        out.truncate(width, overflow="ellipsis")
        return out

    def _strip_at(self, cards: Sequence[ServerCard], selected: int, level: int) -> Text:
        out = Text(no_wrap=True, overflow="ellipsis")
        sel = self.get_component_rich_style("servers--selected", partial=True)
        for i, c in enumerate(cards):
            al = "-" if c.acceptance_length is None else f"{c.acceptance_length:.2f}"
            marker = "▶" if i == selected else " "
            best = c.recommendation.replace(", extrapolated", "*")  # room for every server
            if level >= 2:  # the figure after the k, and any parenthesis: 6 opens the what-if
                best = best.split(" (")[0].split(":")[0].removeprefix("measured ")
            out.append(
                f"{marker}{c.label} {k_label(c.k, short=True)} AL {al} {best} ",
                style=sel if i == selected else "",
            )
            out.append("│")
        if level < 1:
            out.append(" [ ] switch")
        return out

    def _columns(self, cards: Sequence[ServerCard], selected: int) -> Text:
        """The cards side by side, each line cut or padded to its column: rows of one card
        never run into its neighbour's, whatever the lengths."""
        sel = self.get_component_rich_style("servers--selected", partial=True)
        gap = 2
        col_w = max(20, ((self.size.width or 120) - gap * (len(cards) - 1)) // max(len(cards), 1))
        heads = []
        for i, c in enumerate(cards):
            marker = "▶ " if i == selected else ""
            head = Text(f"{marker}{c.label} · {k_label(c.k)}{c.source}", style="bold")
            if i == selected:
                head.stylize(sel)
            heads.append(head)
        columns = [[heads[i], *_wrapped(self._card(c, col_w), col_w)] for i, c in enumerate(cards)]
        out = Text(no_wrap=True)
        for row in range(max(len(col) for col in columns)):
            if row:
                out.append("\n")
            for i, col in enumerate(columns):
                cell = col[row].copy() if row < len(col) else Text()
                cell.truncate(col_w, overflow="ellipsis", pad=True)
                out.append_text(cell)
                if i < len(columns) - 1:
                    out.append(" " * gap)
        out.rstrip()
        return out

    def _card(self, c: ServerCard, width: int) -> list[Text]:
        al = "-" if c.acceptance_length is None else f"{c.acceptance_length:.2f}"
        rate = "-" if c.acceptance_rate is None else f"{c.acceptance_rate:.1f}%"
        lines = [Text(f"AL {al} · acc {rate} · {c.requests:,} req")]
        lines.append(Text("S_i " + (" ".join(f"{v:.2f}" for v in c.survival) or "-")))
        buckets = fold_histogram(dict(c.histogram))
        peak = max((b.pct for b in buckets), default=0.0) or 1.0
        bar_w = max(0, width - 12)
        style = self.get_component_rich_style("servers--bar", partial=True)
        for b in buckets:
            line = Text(f"{b.label:>3} ")
            line.append(bar(b.pct / peak, bar_w), style=style)
            line.append(f" {b.pct:5.1f}%")
            lines.append(line)
        # the measured answer, short enough for a card's width ("answer: best k=4: 260 tok/s")
        lines.append(Text(f"answer: {c.recommendation.removeprefix('measured ')}"))
        return lines


def _wrapped(lines: list[Text], width: int) -> list[Text]:
    """A card's plain lines longer than its column, wrapped at words (a cut request count
    or what-if answer said nothing); styled lines (the bars) are sized to fit already."""
    out: list[Text] = []
    for line in lines:
        if line.cell_len <= width or line.spans:
            out.append(line)
        else:
            out += [Text(part, style=line.style) for part in textwrap.wrap(line.plain, width)]
    return out


class SegmentsView(ShapedStatic):
    """The live segments table (SegmentTable.rows())."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._rows: Any = None

    def show(self, rows: list[tuple[str, ...]], hint: str) -> None:
        if (rows, hint) == self._rows:
            return
        self._rows = (rows, hint)
        if not rows:
            self.show_content(Text(hint, style="italic"), 0, 1)
            return
        table = Table(box=None, padding=(0, 1), pad_edge=False, header_style="bold")
        for name in SEGMENT_HEADERS:
            # the settings wrap at words where the panel is narrow; the figures and their
            # headers never shrink (160x48 cut "out tok…" and "best…" for long settings)
            table.add_column(
                name,
                justify="left" if name in ("server", "settings") else "right",
                no_wrap=name != "settings",
                min_width=None if name == "settings" else len(name),
            )
        for cells in rows:
            table.add_row(*cells)
        # wrapped settings add lines: the height follows the content (laid out again when
        # a row or a settings text changes)
        self.styles.height = "auto"
        self.show_content(table, (len(rows), tuple(cells[2] for cells in rows)), None)


class CountersView(ShapedStatic):
    """The server's own /metrics view over the run's window, and its reconciliation."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._lines: list[str] | None = None

    def show(self, lines: list[str]) -> None:
        if lines == self._lines:
            return
        self._lines = list(lines)
        # Long reasons wrap (height auto); relayout only when a line's length changes.
        self.show_content(Text("\n".join(lines)), tuple(len(line) for line in lines))
