"""The main screen's layout classes from the terminal size, and the height fitter's glue:
measure the laid-out rows, ask tui/fit.py how many FIT_STEPS they need, apply them.

specmon.tcss sizes each class: `.small` (< 80 columns or < 24 rows, within compact),
`.compact` (< 100 columns or < 36 rows), `.medium`
(100..149 columns), wide (>= 150); `.short` (one server, wide, under 44 rows: no tuning row)
and `.tall` (>= 44 rows).
"""

from __future__ import annotations

from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widget import Widget

from specmon.tui.fit import FIT_STEPS, FIXED_ROWS, FLEX_FLOORS, Flex, Measured, fit_level
from specmon.tui.widgets.panel import HPanel, Panel, Slot

COMPACT_BELOW = (100, 36)  # width, height under which the compact layout is used
SMALL_BELOW = (80, 24)  # under this too: a one-line headline, no histogram (key 2 shows it)
WIDE_FROM = 150  # side-by-side top row from this width; between the two: "medium"
TUNE_ROW_FROM = 44  # rows a one-server wide layout needs before the what-if row fits too


def size_classes(width: int, height: int, multi: bool) -> dict[str, bool]:
    """The screen's layout classes for a terminal of `width` x `height`."""
    compact = width < COMPACT_BELOW[0] or height < COMPACT_BELOW[1]
    medium = not compact and width < WIDE_FROM
    return {
        "compact": compact,
        "medium": medium,
        "short": not compact and not medium and not multi and height < TUNE_ROW_FROM,
        "tall": height >= TUNE_ROW_FROM,
        "small": width < SMALL_BELOW[0] or height < SMALL_BELOW[1],
    }


class Fitter:
    """Sheds optional rows (FIT_STEPS) while the screen's rows need more than its height:
    checked after each layout and on every refresh tick, as panels grow or slots fill.
    Nothing is decided again until a layout has taken the last step into account."""

    def __init__(self, screen: Screen) -> None:
        self.screen = screen
        self.level = 0  # how many FIT_STEPS the screen has now
        self._seen = -1  # the screen's virtual height when the last step was taken

    def resize(self, width: int, height: int, multi: bool) -> None:
        """A new size: its classes, and fitting from scratch once it is laid out."""
        for name, on in size_classes(width, height, multi).items():
            self.screen.set_class(on, name)
        self.screen.remove_class(*FIT_STEPS)
        for selector in FLEX_FLOORS:
            self.screen.query_one(selector).styles.min_height = None  # the CSS's own
        self.level, self._seen = 0, -1
        self.screen.call_after_refresh(self.fit, multi)

    def fit(self, multi: bool) -> None:
        main = self.screen
        if self.level >= len(FIT_STEPS) or main.maximized is not None or main.max_scroll_y <= 0:
            return
        if main.virtual_size.height == self._seen:
            return  # the last step is not laid out yet
        level = fit_level(measure(main, multi), self.level)
        if self.level == 0 < level:
            for selector, rows in FLEX_FLOORS.items():
                widget = main.query_one(selector)
                widget.styles.min_height = min(rows, _min_rows(widget))
        main.add_class(*FIT_STEPS[self.level : level])
        self.level, self._seen = level, main.virtual_size.height


def measure(main: Screen, multi: bool) -> Measured:
    """The rows of the shown panels as the last layout left them."""
    fixed = sum(w.outer_size.height for w in main.query(",".join(FIXED_ROWS)) if w.display)
    flex = tuple(
        Flex(_min_rows(w), FLEX_FLOORS[f"#{w.id}"])
        for w in main.query(",".join(FLEX_FLOORS))
        if w.display
    )
    tune, top = main.query_one("#row-tune"), main.query_one("#row-top")
    return Measured(
        height=main.size.height,
        fixed=fixed,
        flex=flex,
        tune=tune.outer_size.height if tune.display else 0,
        top=top.outer_size.height if top.display else 0,
        top_without_slots=_rows_without_slots(top),
        multi=multi,
    )


def _min_rows(widget: Widget) -> int:
    """A widget's min-height in rows (0 when it has none)."""
    scalar = widget.styles.min_height
    return int(scalar.value) if scalar is not None else 0


def _rows_without_slots(widget: Widget) -> int:
    """A layout container's height with its slots empty: its shown children stacked (a
    vertical layout) or side by side (the tallest); a panel counts as laid out."""
    if isinstance(widget, Slot) or not widget.display:
        return 0
    if isinstance(widget, (Panel, HPanel)) or not isinstance(widget, (Horizontal, Vertical)):
        return widget.outer_size.height
    rows = [_rows_without_slots(child) for child in widget.children]
    layout = widget.styles.layout
    return sum(rows) if layout is not None and layout.name == "vertical" else max(rows, default=0)
