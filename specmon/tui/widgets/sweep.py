"""The live sweep grid: k x concurrency cells (median ± MAD of output tok/s), the cell being
measured highlighted, the selected k per column marked, the decision rows below, and the
arm rows under them (tui/sweep_view.py builds every string)."""

from __future__ import annotations

from rich.style import Style
from rich.table import Table
from rich.text import Text

from specmon.tui.sweep_view import GridView
from specmon.tui.widgets.shaped import ShapedStatic, ShowsChanges


class SweepGrid(ShowsChanges[GridView], ShapedStatic):
    COMPONENT_CLASSES = {"sweep--current", "sweep--selected"}
    DEFAULT_CSS = """
    SweepGrid > .sweep--current { background: $accent; color: $background; text-style: bold; }
    SweepGrid > .sweep--selected { color: $success; text-style: bold; }
    """

    def paint(self, view: GridView) -> None:
        # header, one line per k, the decision, speedup and margin rows, the arm rows
        shape = (len(view.rows), len(view.arm_rows))
        self.show_content(self._table(view), shape, len(view.rows) + 4 + len(view.arm_rows))

    def _table(self, view: GridView) -> Table:
        current = self.get_component_rich_style("sweep--current", partial=True)
        chosen = self.get_component_rich_style("sweep--selected", partial=True)
        table = Table(box=None, padding=(0, 2), pad_edge=False, header_style="bold")
        for i, name in enumerate(view.headers):
            table.add_column(name, justify="left" if i == 0 else "right", no_wrap=True)
        for r, row in enumerate(view.rows):
            cells: list[Text] = [Text(row[0])]
            for c, text in enumerate(row[1:]):
                style: Style | str = ""
                if view.current == (r, c):
                    style = current
                elif view.selected[c] == r:
                    style = chosen
                cells.append(Text(text + (" *" if view.selected[c] == r else ""), style=style))
            table.add_row(*cells, end_section=r == len(view.rows) - 1)
        table.add_row(*(Text(t, style="bold") for t in view.decision))
        table.add_row(*(Text(t) for t in view.speedup))
        table.add_row(*(Text(t) for t in view.margin), end_section=bool(view.arm_rows))
        for r, row in enumerate(view.arm_rows):
            arm = [Text(row[0], style="bold" if r % 2 == 0 else "")]
            for c, text in enumerate(row[1:]):
                arm.append(Text(text, style=current if view.current_arm == (r, c) else ""))
            table.add_row(*arm)
        return table
