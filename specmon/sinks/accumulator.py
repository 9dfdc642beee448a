"""The accumulator as a sink: every result into RunAccumulator, and specmon's own
`cancelled_request_count` for the summary."""

from __future__ import annotations

from typing import Any

from specmon.accumulator import RunAccumulator
from specmon.capture import RawCapture
from specmon.pipeline import RequestResult
from specmon.sinks.base import BaseSink
from specmon.specdecode.fidelity import FIDELITY_KEY, run_fidelity


class AccumulatorSink(BaseSink):
    def __init__(self, accumulator: RunAccumulator) -> None:
        self.accumulator = accumulator

    def on_result(self, result: RequestResult, capture: RawCapture | None) -> None:
        self.accumulator.add(result)

    def on_finish(self, was_cancelled: bool) -> None:
        self.accumulator.mark_finished()

    def export_extras(self) -> dict[str, Any]:
        acc = self.accumulator
        extras: dict[str, Any] = {}
        # specmon's own keys, each absent when empty: requests cut short by the stop; which
        # of the record's fields the engine reported (docs/metrics.md §10.1); why
        # requests had no record (counted per reason, e.g. other_engine:vllm)
        if acc.cancelled_count:
            extras["cancelled_request_count"] = acc.cancelled_count
        fidelity = run_fidelity(acc.fidelity_counts, tuple(acc.verification_notes))
        if fidelity is not None:
            extras[FIDELITY_KEY] = {"engine": acc.engine, **fidelity}
        if acc.spec_reasons:
            extras["no_record_reasons"] = dict(sorted(acc.spec_reasons.items()))
        return extras
