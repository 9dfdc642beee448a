"""Widgets that skip the work a refresh tick does not need.

`ShapedStatic`: a Static that asks for a relayout only when its content's shape changes.
Every Static.update() re-runs the screen layout by default; at 4 Hz with auto-sized panels
that layout was the monitor's largest CPU cost. A table whose row count is unchanged keeps
its size, so a plain repaint is enough.

`ShowsChanges`: a widget that paints its slice of the screen model only when it differs
from the one it painted last (the model's frozen dataclasses compare by value).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Generic, TypeVar

from textual.widgets import Static

T = TypeVar("T")


class ShowsChanges(Generic[T]):
    """Mixin (before the widget class): `show(value)` calls `paint(value)` only when the
    value changed. What it painted is kept, so a theme change (themes.Restyles) must
    forget it: the colours are part of the paint."""

    _shown: T | None = None

    def forget_shown(self) -> None:
        """The theme changed: the next show() paints with the new colours."""
        self._shown = None

    def show(self, value: T) -> None:
        if value == self._shown:
            return
        self._shown = value
        self.paint(value)

    def paint(self, value: T) -> None:
        raise NotImplementedError


class ShapedStatic(Static):
    _shape: Hashable = None

    def show_content(self, content: Any, shape: Hashable, lines: int | None = None) -> None:
        """`lines`, when known, fixes the height so a layout never has to measure content."""
        changed = shape != self._shape
        self._shape = shape
        if changed and lines is not None:
            self.styles.height = max(lines, 1)
        self.update(content, layout=changed)
