"""`?`: every key the monitor understands, taken from the live bindings."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

PANEL_NAMES = {"1": "maximize the Spec Decode table", "2": "maximize the histogram",
               "3": "maximize acceptance length over time", "4": "maximize latency & throughput",
               "5": "maximize the request log", "escape": "restore (or close the filter box)"}
EXTRA_KEYS = (
    ("up/down, pgup/pgdn", "move the cursor in the request log"),
    ("enter / click twice", "open the request under the cursor"),
    ("end", "follow the tail of the request log again"),
    ("mouse wheel", "scroll the log (stops following; new rows are counted)"),
)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def __init__(self, bindings: list[Binding]) -> None:
        super().__init__()
        self._keys = bindings

    def compose(self) -> ComposeResult:
        table = Table(box=None, padding=(0, 2), show_header=False)
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        for b in self._keys:
            key = b.key if b.key.isdigit() else (b.key_display or b.key)
            table.add_row(key, PANEL_NAMES.get(b.key, b.description))
        for key, text in EXTRA_KEYS:
            table.add_row(key, text)
        with VerticalScroll(id="help-body", classes="modal-body") as body:
            body.border_title = "Keys (esc closes)"
            yield Static(table)

    def action_dismiss(self) -> None:
        self.dismiss(None)
