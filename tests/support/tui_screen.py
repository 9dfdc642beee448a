"""Plain text of what a Textual app shows right now (for assertions on the screen)."""

from __future__ import annotations

import io
import time

from rich.console import Console


def screen_text(app) -> str:
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system=None,
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(
        app.screen._compositor.render_update(
            full=True, screen_stack=app._background_screens, simplify=True
        )
    )
    return console.export_text()


async def until(pilot, predicate, what: str, timeout: float = 60.0) -> None:
    """Let the app run until `predicate()` holds: a screen refresh is a timer tick, and on a
    busy machine a tick can come late, so a fixed pause is a race."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"never saw {what}"
        await pilot.pause(0.05)
