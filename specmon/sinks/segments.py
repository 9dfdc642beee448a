"""The segment table as a sink: each profiling result goes into a SegmentTable (shared by
the sessions of a multi-server run, one label each) as it lands; the export gets this
server's rows under `segments`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from specmon.analysis.segments import SegmentTable
from specmon.capture import RawCapture
from specmon.pipeline import RequestResult
from specmon.sinks.base import BaseSink


class SegmentSink(BaseSink):
    """`label` is the table's key (None with one server); `server` the name this session's
    rows carry in the export; `settings()` gives what SegmentTable.rows takes."""

    def __init__(
        self,
        table: SegmentTable,
        label: str | None,
        server: str,
        settings: Callable[[], Mapping[Any, Any]],
    ) -> None:
        self.table = table
        self.label = label
        self.server = server
        self.settings = settings

    def on_result(self, result: RequestResult, capture: RawCapture | None) -> None:
        self.table.add(self.label, result)

    def export_extras(self) -> dict[str, Any]:
        rows = self.table.rows(self.settings(), latency=True)  # the SLO's figures kept
        mine = [r for r in rows if r["server"] in (self.label, None)]
        return {
            "segments": [
                {k: v for k, v in row.items() if k != "server"} | {"server": self.server}
                for row in mine
            ]
        }
