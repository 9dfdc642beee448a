"""`?`: every key the monitor understands, taken from the live bindings; each panel's key
with the line its declaration gives (tui/panels.py)."""

from __future__ import annotations

from collections.abc import Mapping

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

# the lines of the keys that are not a panel's (tui/panels.py declares those)
KEY_HELP = {
    "c": "sort the per-category table by its next column",
    "C": "reverse the per-category table's order",
    "x": "sort the per-context-length table by its next column",
    "X": "reverse the per-context-length table's order",
    "plus,equals_sign": "raise the draft cost c of the what-if (+0.01)",
    "minus": "lower the draft cost c of the what-if (-0.01)",
    "right_square_bracket": "next server in panels 1-7 and the log",
    "left_square_bracket": "previous server",
    "greater_than_sign": "double the concurrency (starts a new segment)",
    "less_than_sign": "halve the concurrency (starts a new segment)",
    "escape": "restore (or close the filter box)",
    "s": "save a screenshot (SVG) into the artifact dir; works on every screen",
    "w": "cycle the time series window: 10 s, 60 s, whole run",
    "slash": "filter the request log",
    "t": "cycle the themes",
}
EXTRA_KEYS = (
    (
        "up/down, pgup/pgdn, home",
        "select a row in the request log: following stops and the row "
        "stays in place while requests land",
    ),
    ("enter / click twice", "open the selected request"),
    ("end / f", "follow the tail of the request log again"),
    ("mouse wheel", "scroll the log (stops following; new rows are counted)"),
)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark", "dismiss", "Close"),
        Binding("s", "app.screenshot", "Save"),
    ]

    def __init__(self, bindings: list[Binding], panel_lines: Mapping[str, str]) -> None:
        super().__init__()
        self._keys = bindings
        self._lines = {**KEY_HELP, **panel_lines}

    def compose(self) -> ComposeResult:
        table = Table(box=None, padding=(0, 2), show_header=False)
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        for b in self._keys:
            key = b.key if b.key.isdigit() else _key_name(b)
            table.add_row(key, self._lines.get(b.key, b.description))
        for key, text in EXTRA_KEYS:
            table.add_row(key, text)
        with VerticalScroll(id="help-body", classes="modal-body") as body:
            body.border_title = "Keys (esc closes)"
            yield Static(table)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)


def _key_name(binding: Binding) -> str:
    """The printable key: '+', '[', '<' rather than a shared footer label like '+/-'."""
    names = {
        "plus,equals_sign": "+",
        "minus": "-",
        "right_square_bracket": "]",
        "left_square_bracket": "[",
        "greater_than_sign": ">",
        "less_than_sign": "<",
    }
    return names.get(binding.key, binding.key_display or binding.key)
