"""The per-category table: requests, acceptance length (with its 95 % interval), draft
acceptance rate, output tokens/s and TTFT p50 per prompt category (docs/metrics.md
§12), sortable by any column (`c` next column, `C` reverses).

The rows are the screen model's (tui/model/tuning.py, at 1 Hz: a live session's own table,
fed as results land, so the monitor holds no second copy of every group's statistics; or one
the model catches up with a results list); the widget sorts and draws them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text
from textual import events

from specmon.analysis.categories import ROW_FIELDS, sort_rows
from specmon.tui.widgets.shaped import ShapedStatic

HEADERS = {
    "category": "category",
    "requests": "requests",
    "acceptance_length": "accept len",
    "draft_acceptance_rate": "draft acc %",
    "output_token_throughput": "output tok/s",
    "ttft_p50_ms": "TTFT p50 ms",
}
# the same columns in a narrow panel (a third of 160 columns), so no header is cut
SHORT_HEADERS = {
    "category": "category",
    "requests": "n",
    "acceptance_length": "AL",
    "draft_acceptance_rate": "acc %",
    "output_token_throughput": "tok/s",
    "ttft_p50_ms": "TTFT ms",
}
GAP = 3  # between two columns of a SIMPLE_HEAD table: padding 1 + the divider 1 + padding 1
EMPTY = "no categories yet (prompts from --dataset carry one)"


def band_text(value: float, ci: tuple[float, float] | None, band: bool, digits: int) -> str:
    """'3.33 [3.10-3.50]' (the interval only when shown and known)."""
    shown = "" if ci is None or not band else f" [{ci[0]:.{digits}f}-{ci[1]:.{digits}f}]"
    return f"{value:.{digits}f}{shown}"


def _category_cell(row: Any, column: str, band: bool = True) -> str:
    value: Any = row.value(column)
    if value is None:
        return "-"
    if column == "category":
        return str(value)
    if column == "requests":
        return f"{value:,}"
    if column == "acceptance_length":
        return band_text(value, row.acceptance_length_ci95, band, 2)
    if column == "output_token_throughput":
        return f"{value:,.0f}"
    return f"{value:.1f}"


@dataclass(frozen=True)
class Columns:
    """What a per-group table shows: its columns (the first names the group), their full
    and short headers, how a cell reads (with or without its interval) and the empty text."""

    fields: tuple[str, ...]
    headers: dict[str, str]
    short_headers: dict[str, str]
    cell: Callable[[Any, str, bool], str]
    empty: str

    @property
    def name(self) -> str:
        return self.fields[0]


CATEGORY_COLUMNS = Columns(ROW_FIELDS, HEADERS, SHORT_HEADERS, _category_cell, EMPTY)


def render_rows(
    rows: Sequence[Any],
    column: str,
    descending: bool,
    width: int | None = None,
    spec: Columns = CATEGORY_COLUMNS,
) -> Table | Text:
    """The table as Rich renders it; the sorted column's header carries the arrow. Within
    `width` columns: the full headers and the intervals when they fit, else short
    headers, then no interval, and then the group names are cut, never a header."""
    if not rows:
        return Text(spec.empty, style="italic")
    headers, band, name_width = _fitting_form(rows, column, descending, width, spec)
    table = Table(box=box.SIMPLE_HEAD, expand=True, pad_edge=False, show_edge=False)
    for name in spec.fields:
        justify: JustifyMethod = "left" if name == spec.name else "right"
        table.add_column(
            _header(headers, name, column, descending),
            justify=justify,
            no_wrap=True,
            max_width=name_width if name == spec.name else None,
            min_width=None
            if name == spec.name
            else _width(rows, headers, band, name, column, descending, spec),
        )
    for row in rows:
        table.add_row(*(spec.cell(row, name, band) for name in spec.fields))
    return table


def _header(headers: dict[str, str], name: str, column: str, descending: bool) -> str:
    arrow = (" ▼" if descending else " ▲") if name == column else ""
    return headers[name] + arrow


def _width(
    rows: Sequence[Any],
    headers: dict[str, str],
    band: bool,
    name: str,
    column: str,
    descending: bool,
    spec: Columns = CATEGORY_COLUMNS,
) -> int:
    """The column's natural width: its widest cell or its header."""
    return max(
        len(_header(headers, name, column, descending)),
        *(len(spec.cell(row, name, band)) for row in rows),
    )


def _fitting_form(
    rows: Sequence[Any],
    column: str,
    descending: bool,
    width: int | None,
    spec: Columns = CATEGORY_COLUMNS,
) -> tuple[dict[str, str], bool, int | None]:
    """(headers, show the intervals, the name column's cap): the widest form whose
    columns fit in `width`; where none does, the narrowest with the names cut to fit."""
    forms = ((spec.headers, True), (spec.short_headers, True), (spec.short_headers, False))
    if width is None:
        return (*forms[0], None)
    gaps = GAP * (len(spec.fields) - 1)
    for headers, band in forms:
        widths = [
            _width(rows, headers, band, name, column, descending, spec) for name in spec.fields
        ]
        if sum(widths) + gaps <= width:
            return headers, band, None
    rest = sum(widths[1:]) + gaps
    header = len(_header(spec.short_headers, spec.name, column, descending))
    return (*forms[-1], max(width - rest, header))


class GroupView(ShapedStatic):
    """Live per-group figures of the selected server's results (`table_type`'s groups,
    shown by `spec`)."""

    spec: Columns = CATEGORY_COLUMNS

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.sort_column = self.spec.name
        self.descending = False
        self._shown: tuple | None = None
        self._given: Sequence[Any] = ()  # the model's rows, first-seen order
        self.rows: list[Any] = []  # as shown, sorted

    def show(self, rows: Sequence[Any]) -> None:
        """The model's rows (tui/model/tuning.py), sorted by the chosen column; repainted
        if anything moved."""
        self._given = rows
        self.rows = sort_rows(list(rows), self.sort_column, self.descending)
        self._repaint()

    def on_resize(self, event: events.Resize) -> None:
        # a maximized (or un-maximized) panel picks its headers for its new width now, not
        # at the next refresh tick (a snapshot taken between the two showed the narrow form)
        self._repaint()

    def _repaint(self) -> None:
        width = self.content_region.width or None  # None before the first layout
        key = (tuple(self.rows), self.sort_column, self.descending, width)
        if key == self._shown:
            return
        self._shown = key
        lines = len(self.rows) + 2 if self.rows else 1  # header + rule
        content = render_rows(self.rows, self.sort_column, self.descending, width, self.spec)
        self.show_content(content, len(self.rows), lines)

    @property
    def has_rows(self) -> bool:
        """Whether any request so far had a group (the panel has something to say)."""
        return bool(self.rows)

    def cycle_sort(self, reverse: bool = False) -> str:
        """`reverse`: flip the order of the current column; else sort by the next column
        (figures biggest first). Returns the column now sorted by."""
        fields = self.spec.fields
        if reverse:
            self.descending = not self.descending
        else:
            i = fields.index(self.sort_column)
            self.sort_column = fields[(i + 1) % len(fields)]
            self.descending = self.sort_column != self.spec.name
        self.show(self._given)
        return self.sort_column


class CategoriesView(GroupView):
    """Live per-category figures of the selected server's results."""
