"""A Static that asks for a relayout only when its content's shape changes.

Every Static.update() re-runs the screen layout by default; at 4 Hz with auto-sized panels
that layout was the monitor's largest CPU cost. A table whose row count is unchanged keeps
its size, so a plain repaint is enough.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from textual.widgets import Static


class ShapedStatic(Static):
    _shape: Hashable = None

    def show_content(self, content: Any, shape: Hashable, lines: int | None = None) -> None:
        """`lines`, when known, fixes the height so a layout never has to measure content."""
        changed = shape != self._shape
        self._shape = shape
        if changed and lines is not None:
            self.styles.height = max(lines, 1)
        self.update(content, layout=changed)
