"""What the runners that drive several parts share (WorkerPool: processes, MultiRun: servers):
merging the parts' progress and sharing a load knob's value among them. The one place a
runner's run-time knobs become load segments is `SegmentKnobs` (LoadRunner, WorkerPool).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specmon.interfaces import PHASES, LoadProgress
from specmon.segment_plan import SegmentLog

KNOBS = ("concurrency", "request_rate", "output_tokens")


def split_int(total: int, parts: int) -> list[int]:
    """10 over 3 -> [4, 3, 3]: shares differ by at most one and sum to the total."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def merge_progress(parts: Sequence[LoadProgress], total: int | None = None) -> LoadProgress:
    """One progress over parts that run side by side: counts add up, the worst lag and the
    longest elapsed time stand for all, and the phase is the least advanced one any part is
    in (one part still in warmup means the run is). `total`: the run's own request count when
    it is not the sum of the parts' (None: the parts' sum, or None if any part is unbounded)."""
    if not parts:
        return LoadProgress(0, 0, total, 0, 0, 0.0, "starting")
    phases = {p.phase for p in parts}
    totals = [p.total for p in parts]
    return LoadProgress(
        sent=sum(p.sent for p in parts),
        completed=sum(p.completed for p in parts),
        total=total if total is not None else _sum_known(totals),
        in_flight=sum(p.in_flight for p in parts),
        errors=sum(p.errors for p in parts),
        loop_lag_ms=max(p.loop_lag_ms for p in parts),
        phase=next((name for name in PHASES if name in phases), "done"),
        warmup_completed=sum(p.warmup_completed for p in parts),
        lag_warning=any(p.lag_warning for p in parts),
        elapsed_s=max(p.elapsed_s for p in parts),
        retries=sum(p.retries for p in parts),
        down_since=min((p.down_since for p in parts if p.down_since is not None), default=None),
        loop_busy=max(p.loop_busy for p in parts),
    )


def knob_shares(knob: str, value: Any, parts: int) -> list[Any]:
    """A run-wide knob value as each of `parts` gets it: concurrency split as evenly as
    integers allow (at least 1 each), the request rate divided, the output length as is."""
    if parts < 1:
        return []
    if knob == "concurrency" and value:
        return [max(1, share) for share in split_int(value, parts)]
    if knob == "request_rate" and value:
        return [value / parts] * parts
    return [value] * parts


class SegmentKnobs:
    """set_concurrency / set_request_rate / set_output_tokens over a SegmentLog: each real
    change starts a segment; `_apply(knob, args, segment)` delivers the new setting (and the
    new segment number, None when the value did not change) to whatever sends the requests."""

    segment_log: SegmentLog

    def _apply(self, knob: str, args: tuple[Any, ...], segment: int | None) -> None:
        raise NotImplementedError

    @property
    def segment(self) -> int:
        """The segment requests sent now belong to."""
        return self.segment_log.current

    def set_concurrency(self, value: int | None) -> None:
        self._apply("concurrency", (value,), self.segment_log.change(concurrency=value))

    def set_request_rate(self, value: float | None, mode: str | None = None) -> None:
        self._apply("request_rate", (value, mode), self.segment_log.change(request_rate=value))

    def set_output_tokens(self, mean: int | None, stddev: float = 0.0) -> None:
        self._apply("output_tokens", (mean, stddev), self.segment_log.change(output_tokens=mean))


def _sum_known(totals: list[int | None]) -> int | None:
    """The parts' summed totals, or None when any part is unbounded."""
    known = [t for t in totals if t is not None]
    return sum(known) if len(known) == len(totals) else None
