"""Acceptance alarms as a sink: each valid profiling result goes to an AlarmMonitor
(specmon/analysis/alarms.py); an alarm that starts is printed as one line (headless:
stderr), set on the Prometheus exporter's `specmon_alarm` series and handed to any
listener; the monitor's request log shows a line for it after the request it started
with (`log_index`); the summary gets every alarm under `alarms`."""

from __future__ import annotations

from collections.abc import Callable, Sized
from typing import Any, TextIO

from specmon.analysis.alarms import ALARM_NAMES, Alarm, AlarmMonitor, Observation
from specmon.capture import RawCapture
from specmon.pipeline import RequestResult
from specmon.sinks.base import BaseSink


def observation(result: RequestResult) -> Observation | None:
    """The alarm figures of one result; None for warmup, failed or record-less requests."""
    if result.phase == "warmup" or not result.ok:
        return None
    spec = result.spec
    al = result.metrics.get("spec_decode_acceptance_length")
    if spec is None or al is None:
        return None
    if spec.num_spec_steps:  # this request's own k (a batch-size schedule varies it)
        k: float | None = spec.num_draft_tokens / spec.num_spec_steps
    else:
        k = spec.num_spec_tokens
    tps = result.values.get("e2e_output_token_throughput")
    tps_f = None if tps is None else float(tps)
    return Observation(float(al), k, result.end_ns, tps_f, start_ns=result.start_ns)


def alarm_line(alarm: Alarm, server: str | None) -> str:
    where = f" [{server}]" if server else ""
    return (
        f"specmon: ALARM {alarm.name}{where} since request {alarm.since_request}: {alarm.message}"
    )


class AlarmSink(BaseSink):
    """`out`: where a starting alarm's line goes (None: nowhere); `exporter`: a
    PrometheusExporter (or None); `listeners` get each starting Alarm (called under the
    session's lock: keep them short)."""

    def __init__(
        self,
        server: str | None = None,
        out: TextIO | None = None,
        exporter: Any = None,
        log: Sized | None = None,
    ) -> None:
        self.monitor = AlarmMonitor()
        # the session's results (the request log): a starting alarm notes the index of the
        # request it started with; the accumulator's sink, registered before, appended it
        self.log = log
        self.server = server
        self.out = out
        self.exporter = exporter
        self.listeners: list[Callable[[Alarm], None]] = []
        if exporter is not None:
            for name in ALARM_NAMES:  # every series present at 0 from the start
                exporter.set_alarm(name, server or "", False)

    def on_result(self, result: RequestResult, capture: RawCapture | None) -> None:
        obs = observation(result)
        if obs is None:
            return
        was_active = {a.name for a in self.monitor.active}
        for alarm in self.monitor.observe(obs):
            if self.log is not None:
                alarm.log_index = len(self.log) - 1
            if self.out is not None:
                print(alarm_line(alarm, self.server), file=self.out, flush=True)
            for listener in self.listeners:
                listener(alarm)
        if self.exporter is not None:
            now = {a.name for a in self.monitor.active}
            for name in was_active ^ now:
                self.exporter.set_alarm(name, self.server or "", name in now)

    def export_extras(self) -> dict[str, Any]:
        return {"alarms": [a.to_dict() for a in self.monitor.alarms]}


def session_alarms(session: object) -> list[Alarm]:
    """Every alarm raised so far on `session` (a RunSession: its AlarmSink's), in start
    order; [] for a session without one (a replay, a watch)."""
    for sink in getattr(session, "sinks", ()):
        if isinstance(sink, AlarmSink):
            return list(sink.monitor.alarms)
    return []


def active_alarms(session: object) -> tuple[str, ...]:
    """The names of the alarms active now on `session`, for the monitor's header."""
    return tuple(a.name for a in session_alarms(session) if a.active)
