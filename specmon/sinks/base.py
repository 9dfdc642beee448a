"""The sink interface: what consumes a run's results.

`RunSession` turns each capture into a `RequestResult` and hands both to every registered
sink, in registration order, under the session's lock (so a sink sees results one at a
time, in arrival order, and needs no lock of its own for that). At the end the session
calls `on_finish` on every sink, then composes the summary export once from the
accumulator and every sink's `export_extras()`, and writes it once, atomically.

A new consumer (a Prometheus exporter, a sweep table) is one class with these three
methods, registered with `RunSession.add_sink`; the session does not change.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from specmon.capture import RawCapture
from specmon.pipeline import RequestResult


@runtime_checkable
class ResultSink(Protocol):
    """One consumer of a run's results (see the module docstring for the call order)."""

    def on_result(self, result: RequestResult, capture: RawCapture | None) -> None:
        """One processed request (warmup ones too: `result.phase` says which). `capture`
        is None for a result that was not processed from a capture (replay, add_result).
        Called under the session's lock: keep it short, never block on I/O for long."""

    def on_finish(self, was_cancelled: bool) -> None:
        """The run is over: flush and close what the sink holds. Called once."""

    def export_extras(self) -> dict[str, Any]:
        """specmon's keys this sink adds to the summary JSON (after AIPerf's), in order;
        {} for none. Called once, after every sink's on_finish."""


class BaseSink:
    """No-op defaults, so a sink defines only the methods it needs."""

    def on_result(self, result: RequestResult, capture: RawCapture | None) -> None:
        return None

    def on_finish(self, was_cancelled: bool) -> None:
        return None

    def export_extras(self) -> dict[str, Any]:
        return {}
