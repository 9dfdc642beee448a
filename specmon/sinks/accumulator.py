"""The accumulator as a sink: every result into RunAccumulator, and specmon's own
`cancelled_request_count` for the summary."""

from __future__ import annotations

from typing import Any

from specmon.accumulator import RunAccumulator
from specmon.capture import RawCapture
from specmon.pipeline import RequestResult
from specmon.sinks.base import BaseSink


class AccumulatorSink(BaseSink):
    def __init__(self, accumulator: RunAccumulator) -> None:
        self.accumulator = accumulator

    def on_result(self, result: RequestResult, capture: RawCapture | None) -> None:
        self.accumulator.add(result)

    def on_finish(self, was_cancelled: bool) -> None:
        self.accumulator.mark_finished()

    def export_extras(self) -> dict[str, Any]:
        count = self.accumulator.cancelled_count
        # specmon's own key: requests cut short by the stop (absent when there were none)
        return {"cancelled_request_count": count} if count else {}
