"""Panel 4 with several servers: every server's latency and throughput, one row each.

The latency table above it shows the selected server (`[` / `]`); this table keeps every
server's TTFT, ITL, output tokens/s and request throughput reachable at once (key 4
maximizes the panel where the layout hides it). Same statistics blocks as the exports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.table import Table
from rich.text import Text

from specmon.stats import MetricRow, row_value
from specmon.tui.view import fmt_number
from specmon.tui.widgets.shaped import ShapedStatic

# (header, stats tag, column)
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("TTFT p50", "time_to_first_token", "p50"),
    ("TTFT p99", "time_to_first_token", "p99"),
    ("TPOT p50", "inter_token_latency", "p50"),
    ("lat p50", "request_latency", "p50"),
    ("out tok/s", "output_token_throughput", "avg"),
    ("req/s", "request_throughput", "avg"),
)


ServerStats = Sequence[tuple[str, Mapping[str, MetricRow]]]  # (label, its std_rows)


def server_rows(servers: ServerStats) -> list[list[str]]:
    """[label, cell...] per server from its std_rows (ms, tokens/s, requests/s)."""
    return [
        [label, *(fmt_number(row_value(std, tag, col)) for _, tag, col in COLUMNS)]
        for label, std in servers
    ]


class ServerLatencyView(ShapedStatic):
    """Hidden with one server (the app only shows it when there are several)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._rows: list[list[str]] = []

    def show(self, servers: ServerStats, selected: int) -> None:
        rows = server_rows(servers)
        if rows == self._rows and self._shape == (len(rows), selected):
            return
        self._rows = rows
        table = Table(box=None, padding=(0, 1), pad_edge=False, header_style="bold", expand=True)
        table.add_column("server (ms)", no_wrap=True)
        for header, *_ in COLUMNS:
            table.add_column(header, justify="right", no_wrap=True)
        for i, row in enumerate(rows):
            marker = "> " if i == selected else "  "
            table.add_row(Text(marker + row[0], style="bold" if i == selected else ""), *row[1:])
        self.show_content(table, (len(rows), selected), len(rows) + 1)
