"""What the headless progress line needs from the results: the running mean acceptance
length, folded in O(1) per result instead of a whole snapshot (every statistic of every
metric) each time the line is printed."""

from __future__ import annotations

from specmon.capture import RawCapture
from specmon.pipeline import RequestResult
from specmon.sinks.base import BaseSink

TAG = "spec_decode_acceptance_length"


class AcceptanceTally(BaseSink):
    """The mean of the per-request acceptance length over valid profiling requests with a
    record: the accumulator's `avg` for that metric (the same values summed in the same
    order, then divided once), so the line shows the number the summary will."""

    def __init__(self) -> None:
        # (sum, count) replaced as one tuple: the printing thread never sees a sum
        # without its count
        self._state: tuple[float, int] = (0.0, 0)

    def on_result(self, result: RequestResult, capture: RawCapture | None) -> None:
        if result.phase == "warmup" or result.error is not None:
            return
        value = result.values.get(TAG)
        if value is not None:
            total, count = self._state
            self._state = (total + value, count + 1)

    def mean(self) -> float | None:
        total, count = self._state
        return total / count if count else None
