"""A live statistics table (Spec Decode, latency & throughput) rendered as one Rich table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich import box
from rich.table import Table
from rich.text import Text
from textual import events

from specmon.stats import MetricRow
from specmon.tui.view import NA, stat_rows
from specmon.tui.widgets.shaped import ShapedStatic

# Labels short enough for an 80-column terminal.
SHORT_LABELS = {
    "spec_decode_acceptance_length": "Accept Len",
    "spec_decode_token_weighted_acceptance_length": "Tok-Wtd AL",
    "spec_decode_draft_acceptance_rate": "Draft Acc %",
    "spec_decode_overall_draft_acceptance_rate": "Overall Acc %",
    "spec_decode_accepted_per_verified": "Acc/Verified",
    "spec_decode_steps": "Steps",
    "spec_decode_zero_step_requests": "Zero-Step Req",
    "time_to_first_token": "TTFT ms",
    "inter_token_latency": "TPOT ms",
    "request_latency": "Latency ms",
    "output_token_throughput_per_user": "tok/s/user",
    "output_token_throughput": "Output tok/s",
    "request_throughput": "Req/s",
}
WIDE_AT = 100  # below this width the table uses short labels
# Narrower than its columns need, the table sheds them in this order (the console's:
# export/console.py), never cutting a figure ("Accept Len 2.…" in the 80x24 sweep view).
SHED_ORDER = ("std", "min", "max", "p90", "p99")
MIN_SHOWN = 2  # avg and p50 stay


def fitted_columns(
    columns: Sequence[str], body: Sequence[tuple[str, list[str]]], width: int
) -> list[int]:
    """Indices of the columns kept so the label, the columns and one space between each
    fit `width`; columns go in SHED_ORDER, at most down to MIN_SHOWN."""
    keep = list(range(len(columns)))

    def needed() -> int:
        label = max(len(label) for label, _ in body)
        cells = [max(len(columns[i]), *(len(row[i]) for _, row in body)) for i in keep]
        return label + sum(cells) + 2 * len(cells)

    for name in SHED_ORDER:
        if not width or needed() <= width or len(keep) <= MIN_SHOWN:
            break
        if name in columns:
            keep.remove(columns.index(name))
    return keep


class StatsTable(ShapedStatic):
    """Rows of metric stats; re-rendered only when the stats dict changes."""

    def __init__(
        self,
        rows: Sequence[tuple[str, str, str, bool]],
        columns: Sequence[str],
        empty: str,
        *,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self._rows = rows
        self._columns = columns
        self._empty = empty
        self._stats: Mapping[str, MetricRow] = {}

    def set_empty(self, text: str) -> None:
        """What the table says while it has no rows (watch mode says why)."""
        self._empty = text
        self._repaint()

    def show(self, stats: Mapping[str, MetricRow]) -> None:
        if stats == self._stats:
            return
        self._stats = stats
        self._repaint()

    def on_resize(self, event: events.Resize) -> None:
        self._repaint()

    def _repaint(self) -> None:
        rows = sum(1 for tag, *_ in self._rows if tag in self._stats)
        short = bool(self.size.width) and self.size.width < WIDE_AT
        # header row, plus a rule under it when wide; one italic line when empty
        # the empty text's wrapped height; a widget not laid out yet (or hidden) reads as 80
        width = self.size.width if self.size.width >= 20 else 80
        lines = rows + (1 if short else 2) if rows else -(-len(self._empty) // width)
        self.show_content(self._render_table(), (rows, short), lines)

    def _render_table(self) -> Table | Text:
        short = self.size.width and self.size.width < WIDE_AT
        rows = self._rows
        if short:
            rows = [
                (tag, SHORT_LABELS.get(tag, header), unit, derived)
                for tag, header, unit, derived in rows
            ]
        body = stat_rows(self._stats, rows, self._columns)
        if not body:
            return Text(self._empty, style="italic")
        # Compact: no rule under the header (one more row for the log at 80x24).
        table = Table(
            box=None if short else box.SIMPLE_HEAD,
            expand=True,
            pad_edge=False,
            padding=(0, 1),
            header_style="bold",
            show_edge=False,
        )
        if short:
            body = [(label.rsplit(" (", 1)[0], cells) for label, cells in body]
        keep = fitted_columns(self._columns, body, self.size.width)
        table.add_column("metric", no_wrap=True, ratio=3 if not short else None)
        for i in keep:
            table.add_column(self._columns[i], justify="right", no_wrap=True)
        for label, cells in body:
            shown = [cells[i] for i in keep]
            table.add_row(label, *[Text(c, style="dim") if c == NA else c for c in shown])
        return table
