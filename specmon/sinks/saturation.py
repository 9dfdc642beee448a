"""The client's own saturation as a sink: the summary JSON's `client_saturation` (a specmon
key beside AIPerf's, which stay as AIPerf writes them): the share of the run the load loop
was saturated, the worst loop lag and busy share, the saturated spells (docs/architecture.md
"A saturated client"). `log()` gives the runner's SaturationLog; None: not known (a
multi-process load, a replay), written as `{"available": false}`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specmon.sinks.base import BaseSink
from specmon.sources.load.loop_health import SaturationLog

KEY = "client_saturation"


class SaturationSink(BaseSink):
    def __init__(self, log: Callable[[], SaturationLog | None]) -> None:
        self.log = log

    def export_extras(self) -> dict[str, Any]:
        log = self.log()
        if log is None:
            return {KEY: {"available": False}}
        return {KEY: {"available": True, **log.to_dict()}}
