"""The event loop every background thread of specmon runs (the load, the /metrics scrape,
the watch): uvloop when installed, asyncio's own otherwise. Its own module, below the
sources and the server views, so a replay that polls no load does not import the load
client (aiohttp) to get a loop."""

from __future__ import annotations

import asyncio


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (about twice the request rate of the default loop here)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
