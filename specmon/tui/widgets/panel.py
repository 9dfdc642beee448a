"""Bordered, maximizable panel containers (keys 1-8 maximize them) and the
slots other modules mount their panels into."""

from textual.containers import Horizontal, Vertical
from textual.widget import Widget


class Panel(Vertical):
    ALLOW_MAXIMIZE = True


class HPanel(Horizontal):
    ALLOW_MAXIMIZE = True


class Slot(Vertical):
    """A named place in the layout for a panel another module adds (docs/architecture.md,
    "Layout slots"): hidden until `fill` mounts a widget into it."""

    DEFAULT_CSS = (
        "Slot { display: none; height: auto; width: 1fr; } Slot.-filled { display: block; }"
    )
    ALLOW_MAXIMIZE = True

    def fill(self, widget: Widget) -> None:
        self.remove_children()
        self.mount(widget)
        self.add_class("-filled")

    def clear(self) -> None:
        self.remove_children()
        self.remove_class("-filled")
