"""The time windows of panel 3 (`w` cycles them): 10 s, 60 s, the whole run."""

from __future__ import annotations

WINDOWS: tuple[tuple[str, float | None], ...] = (("10 s", 10.0), ("60 s", 60.0), ("run", None))
