"""The per-context-length table (docs/metrics.md §15): requests, acceptance length and
draft acceptance with their 95 % intervals, conditional acceptance per position, TPOT
(mean, with its interval) and output tokens/s per context bucket (<1k, 1-4k, 4-16k,
16-64k, >64k), shortest first; `x` sorts by the next column, `X` reverses. The same widget
as the per-category table (widgets/categories.py GroupView), on the model's context rows."""

from __future__ import annotations

from typing import Any

from specmon.analysis.contexts import ROW_FIELDS
from specmon.tui.widgets.categories import Columns, GroupView, band_text

HEADERS = {
    "bucket": "context",
    "requests": "requests",
    "acceptance_length": "accept len",
    "draft_acceptance_rate": "draft acc %",
    "per_position": "a_i by position",
    "tpot_ms": "TPOT ms",
    "output_token_throughput": "output tok/s",
}
SHORT_HEADERS = {
    "bucket": "ctx",
    "requests": "n",
    "acceptance_length": "AL",
    "draft_acceptance_rate": "acc %",
    "per_position": "a_i",
    "tpot_ms": "TPOT",
    "output_token_throughput": "tok/s",
}
EMPTY = "no context lengths yet (the server's usage gives each request's prompt tokens)"


def _context_cell(row: Any, column: str, band: bool = True) -> str:
    if column == "bucket":
        return str(row.bucket)
    if column == "per_position":
        return " ".join("-" if a is None else f"{a:.2f}" for a in row.per_position) or "-"
    value: Any = row.value(column)
    if value is None:
        return "-"
    if column == "requests":
        return f"{value:,}"
    if column == "acceptance_length":
        return band_text(value, row.acceptance_length_ci95, band, 2)
    if column == "draft_acceptance_rate":
        return band_text(value, row.draft_acceptance_rate_ci95, band, 1)
    if column == "tpot_ms":
        return band_text(value, row.tpot_ms_ci95, band, 2)
    return f"{value:,.0f}"


CONTEXT_COLUMNS = Columns(ROW_FIELDS, HEADERS, SHORT_HEADERS, _context_cell, EMPTY)


class ContextView(GroupView):
    """Live per-context-length figures of the selected server's results."""

    spec = CONTEXT_COLUMNS
