"""The server's /metrics view as a sink: at the finish, this server's counter window and
its reconciliation with the run's own totals become the export's `server_metrics`
(`{"available": false, "reason": ...}` when there is none), with the server's health
(queue, KV cache, preemptions, ...) under `server_metrics.health` when /metrics has it. The live side (the polling and
the client's view of each scrape) stays with CounterWatch and SessionProbe."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specmon.accumulator import RunAccumulator
from specmon.capture import RawCapture
from specmon.pipeline import RequestResult
from specmon.server.health import health_export
from specmon.server.scrape import ServerCounterView
from specmon.server.server_view import CounterWatch, server_metrics_report
from specmon.sinks.base import BaseSink

NOT_POLLED = "not polled"


def _health(view: ServerCounterView) -> dict[str, Any] | None:
    """The server's health over the window (server/health.py), from the same scrapes."""
    first, last = view.baseline, view.last
    if first is None or last is None or first.health is None or last.health is None:
        return None
    return health_export(first.health, last.health)


class ServerCounterSink(BaseSink):
    """`watch` must be stopped (CounterWatch.stop) before the session finishes: the final
    view is read in on_finish. `watch` None: the run did not poll /metrics."""

    def __init__(self, watch: CounterWatch | None, label: str, accumulator: RunAccumulator):
        self.watch = watch
        self.label = label
        self.accumulator = accumulator
        self.view: ServerCounterView | None = None  # the final view, after on_finish
        self.report: dict[str, Any] | None = None  # the server_metrics object, when available
        # the most steps the run's cancelled requests can have decoded (None: unknown)
        self.cancelled_steps_bound: int | None = 0
        # the run's unreachable spells as one line ("server unreachable 19:25:05-19:26:10"),
        # asked at the finish; set by whoever runs the load (MultiRun)
        self.outage: Callable[[], str | None] = lambda: None

    def on_result(self, result: RequestResult, capture: RawCapture | None) -> None:
        """Each step emits at least one token, so a cancelled request decoded at most its
        max_tokens steps: their sum bounds what the server counted for the cancellations."""
        if result.error_kind != "cancelled" or result.phase == "warmup":
            return
        source = capture or result.capture
        max_tokens = (source.request or {}).get("max_tokens") if source is not None else None
        if self.cancelled_steps_bound is None or not isinstance(max_tokens, int):
            self.cancelled_steps_bound = None
        else:
            self.cancelled_steps_bound += max_tokens

    def on_finish(self, was_cancelled: bool) -> None:
        watch = self.watch
        self.view = watch.views.get(self.label) if watch is not None else None
        if watch is None or self.view is None or self.view.delta is None:
            return
        acc = self.accumulator
        # a window restarted after warmup does not hold the warmup requests
        warmup_in_window = 0 if self.label in watch.rebaselined else acc.warmup_count
        self.report = server_metrics_report(
            self.view, acc.snapshot(), warmup_in_window, self.cancelled_steps_bound, self.outage()
        )
        health = _health(self.view)
        if health is not None:
            self.report["health"] = health

    def unavailable(self) -> str | None:
        """Why there is no server view (None when there is one)."""
        if self.report is not None:
            return None
        reason = self.watch.absent.get(self.label) if self.watch is not None else NOT_POLLED
        return reason or "no sample"

    def export_extras(self) -> dict[str, Any]:
        if self.report is not None:
            return {"server_metrics": self.report}
        return {"server_metrics": {"available": False, "reason": self.unavailable()}}
