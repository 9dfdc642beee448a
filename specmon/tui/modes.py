"""What the monitor is showing: a live run, a replay, a watch or a sweep, as objects that
say what they can do, so the screen asks `mode.drives_load` instead of comparing names.

No Textual here (the screen model reads these too).
"""

from __future__ import annotations

from dataclasses import dataclass

from specmon.run.watch.runner import NO_REQUESTS

SEGMENTS_HINT = "segments: < > concurrency, r R rate, o O output length; each change starts one"


@dataclass(frozen=True)
class Mode:
    """One kind of run the monitor shows, by its capabilities."""

    name: str  # the header's badge ("live" shows none)
    drives_load: bool  # sends its own requests: "(until q)", "q writes the exports"
    has_requests: bool  # per-request panels can fill; False: server counters only
    # the /metrics verdict compares the server's counts with this run's own requests
    reconciles: bool
    ends_with_run: bool  # the screen closes by itself when the run ends (--duration)
    no_requests: str | None  # what the per-request panels say when they stay empty
    no_segments: str  # the segments panel's text when the run keeps no segments table

    @property
    def badge(self) -> str | None:
        """The header's mark of a run that is not a live one."""
        return None if self.drives_load else self.name


LIVE = Mode("live", True, True, True, False, None, SEGMENTS_HINT)
REPLAY = Mode("replay", False, True, True, False, None, SEGMENTS_HINT)
WATCH = Mode(
    "watch",
    drives_load=False,
    has_requests=False,
    reconciles=False,
    ends_with_run=True,
    no_requests=NO_REQUESTS,
    no_segments="segments: none in watch mode (no load of its own to change)",
)
# a sweep's cells each drive their own load; the sweep screen (tui/sweep_app.py) steers none
SWEEP = Mode("sweep", False, True, True, False, None, SEGMENTS_HINT)
MODES = {m.name: m for m in (LIVE, REPLAY, WATCH, SWEEP)}


def mode_of(mode: Mode | str) -> Mode:
    """A mode, or its name as the commands pass it ("live", "replay", "watch")."""
    if isinstance(mode, Mode):
        return mode
    try:
        return MODES[mode]
    except KeyError:
        raise ValueError(f"unknown monitor mode {mode!r}; one of {', '.join(MODES)}") from None
