"""specmon's own client-side metrics as a Prometheus endpoint (prometheus_client).

`PrometheusExporter(port, host)` serves `/metrics` from its own registry on its own thread
while a run, sweep or watch goes on; `observe(result)` adds one finished request. Names have
the `specmon_` prefix and base units (`_seconds`, `_ratio`, `_total`); every series carries
`server` and `category` labels ("" when the request had none).

What is counted follows the exports (docs/architecture.md, "Accumulator and session"):
warmup requests and requests cancelled by stopping the run are left out; a valid request
adds to `specmon_requests_total` and the histograms, a failed one to
`specmon_request_errors_total{kind}`. Spec-decode figures come from the request's record
(zero-step and record-less requests add no steps). Fleet-wide PromQL: docs/monitoring.md,
"Prometheus and Grafana".
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import start_http_server

from specmon.capture import RawCapture
from specmon.constants import S_PER_NS
from specmon.errors import UserError
from specmon.pipeline import RequestResult
from specmon.sinks.base import BaseSink

LABELS = ("server", "category")
# Bucket upper bounds (+Inf is added by prometheus_client).
ACCEPTANCE_LENGTH_BUCKETS = (1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0, 3.5, 4.0, 4.5, 5.0,
                             6.0, 7.0, 8.0, 10.0, 12.0, 16.0)  # fmt: skip
RATIO_BUCKETS = tuple(round(0.05 * i, 2) for i in range(21))  # 0.0, 0.05, ..., 1.0
TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0,
                5.0, 10.0, 30.0, 60.0)  # fmt: skip
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2,
               0.5, 1.0)  # fmt: skip
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0,
                   120.0, 300.0)  # fmt: skip


@dataclass(frozen=True)
class _RequestFigures:
    """What the exporter needs from one RequestResult, in base units."""

    server: str
    category: str
    counted: bool  # False: warmup or cancelled, left out as the exports leave it out
    error_kind: str | None
    acceptance_length: float | None = None
    acceptance_ratio: float | None = None  # 0..1
    ttft_s: float | None = None
    itl_s: float | None = None
    latency_s: float | None = None
    steps: int = 0
    accepted: int = 0
    drafted: int = 0
    histogram: dict[int, int] = field(default_factory=dict)  # accepted drafts j -> steps


def _figures(result: Any) -> _RequestFigures:
    """The only place that reads RequestResult fields (specmon/pipeline.py)."""
    kind = result.error_kind
    counted = result.phase != "warmup" and kind != "cancelled"
    server, category = result.server or "", result.category or ""
    if kind is not None:
        return _RequestFigures(server, category, counted=counted, error_kind=kind)
    spec = result.spec
    return _RequestFigures(
        server,
        category,
        counted=counted,
        error_kind=None,
        acceptance_length=result.metrics.get("spec_decode_acceptance_length"),
        acceptance_ratio=spec.draft_acceptance_rate if spec is not None else None,
        ttft_s=_seconds(result, "time_to_first_token"),
        itl_s=_seconds(result, "inter_token_latency"),
        latency_s=_seconds(result, "request_latency"),
        steps=(spec.num_spec_steps or 0) if spec is not None else 0,  # None: counts only
        accepted=spec.num_accepted_draft_tokens if spec is not None else 0,
        drafted=spec.num_draft_tokens if spec is not None else 0,
        histogram=dict(spec.acceptance_histogram or {}) if spec is not None else {},
    )


def _seconds(result: Any, tag: str) -> float | None:
    """A time metric in seconds: `values` holds times in ns (specmon/pipeline.py)."""
    value = result.values.get(tag)
    return None if value is None else float(value) * S_PER_NS


class _Series:
    """Every metric family, made once on the exporter's own registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def hist(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, LABELS, registry=registry, buckets=buckets)

        def count(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, (*LABELS, *extra), registry=registry)

        self.acceptance_length = hist(
            "specmon_acceptance_length",
            "Per-request mean acceptance length (tokens per verify step)",
            ACCEPTANCE_LENGTH_BUCKETS,
        )
        self.acceptance_ratio = hist(
            "specmon_draft_acceptance_ratio",
            "Per-request draft acceptance rate (accepted / drafted tokens, 0..1)",
            RATIO_BUCKETS,
        )
        self.ttft = hist("specmon_time_to_first_token_seconds", "Time to first token", TTFT_BUCKETS)
        self.itl = hist("specmon_inter_token_latency_seconds", "Inter-token latency", ITL_BUCKETS)
        self.latency = hist("specmon_request_latency_seconds", "Request latency", LATENCY_BUCKETS)
        self.requests = count("specmon_requests", "Valid (error-free) requests")
        self.errors = count("specmon_request_errors", "Failed requests by error kind", ("kind",))
        self.steps = count("specmon_spec_decode_steps", "Speculative-decoding verify steps")
        self.accepted = count("specmon_spec_decode_accepted_tokens", "Accepted draft tokens")
        self.drafted = count("specmon_spec_decode_draft_tokens", "Drafted tokens")
        self.by_accepted = count(
            "specmon_spec_decode_steps_by_accepted",
            "Verify steps that accepted exactly `accepted` drafts (the accepted-drafts histogram)",
            ("accepted",),
        )
        # what a watch computes, per server / replica and the fleet (specmon watch)
        self.watch_al = Gauge(
            "specmon_watch_acceptance_length",
            "Acceptance length over the watch's last interval (1 + accepted / drafts)",
            ("server",),
            registry=registry,
        )
        self.watch_acc = Gauge(
            "specmon_watch_draft_acceptance_ratio",
            "Draft acceptance over the watch's last interval (accepted / draft tokens, 0..1)",
            ("server",),
            registry=registry,
        )
        self.watch_pos = Gauge(
            "specmon_watch_acceptance_per_position_ratio",
            "Per-position acceptance over the watch's last interval (P_i / drafts)",
            ("server", "position"),
            registry=registry,
        )
        # 1 while the acceptance alarm is active (specmon/analysis/alarms.py), else 0
        self.alarm = Gauge(
            "specmon_alarm",
            "Acceptance alarm active (1) or not (0)",
            ("server", "alarm"),
            registry=registry,
        )


class PrometheusExporter:
    """Serves specmon_* metrics on http://host:port/metrics until `close()`.

    port 0 picks a free port (see `.port`). A port that cannot be bound is a UserError.
    `observe` may be called from any thread (prometheus_client's metrics are thread-safe).
    """

    def __init__(self, port: int = 0, host: str = "127.0.0.1", *, serve: bool = True) -> None:
        self.host = host
        self.registry = CollectorRegistry(auto_describe=True)
        self._series = _Series(self.registry)
        self._positions: dict[str, int] = {}  # server -> per-position samples it has now
        self._server: Any = None
        self._thread: Any = None
        if serve:
            try:
                self._server, self._thread = start_http_server(
                    port, addr=host, registry=self.registry
                )
            except OSError as exc:
                raise UserError(
                    f"Prometheus endpoint: cannot listen on {host}:{port} ({exc.strerror or exc})"
                ) from None

    @property
    def port(self) -> int | None:
        return None if self._server is None else int(self._server.server_address[1])

    @property
    def url(self) -> str | None:
        return None if self._server is None else f"http://{self.host}:{self.port}/metrics"

    def observe(self, result: Any) -> None:
        """Add one finished request (a specmon.pipeline.RequestResult)."""
        fig = _figures(result)
        if not fig.counted:
            return
        s, labels = self._series, (fig.server, fig.category)
        if fig.error_kind is not None:
            s.errors.labels(*labels, fig.error_kind).inc()
            return
        s.requests.labels(*labels).inc()
        for metric, value in (
            (s.acceptance_length, fig.acceptance_length),
            (s.acceptance_ratio, fig.acceptance_ratio),
            (s.ttft, fig.ttft_s),
            (s.itl, fig.itl_s),
            (s.latency, fig.latency_s),
        ):
            if value is not None:
                metric.labels(*labels).observe(value)
        if fig.steps:
            s.steps.labels(*labels).inc(fig.steps)
            s.accepted.labels(*labels).inc(fig.accepted)
            s.drafted.labels(*labels).inc(fig.drafted)
            for j, n in fig.histogram.items():
                s.by_accepted.labels(*labels, str(j)).inc(n)

    def set_alarm(self, name: str, server: str, active: bool) -> None:
        """Set the `specmon_alarm{server, alarm}` series (sinks/alarms.py calls it)."""
        self._series.alarm.labels(server, name).set(1 if active else 0)

    def set_watch(
        self,
        server: str,
        acceptance_length: float | None,
        acceptance: float | None,
        per_position: list[float] | None,
    ) -> None:
        """One watch row's figures; a figure the row lacks has no sample (missing, not 0)."""
        s = self._series
        for gauge, value in ((s.watch_al, acceptance_length), (s.watch_acc, acceptance)):
            _set_or_drop(gauge, (server,), value)
        shown = per_position or []
        for pos in range(max(len(shown), self._positions.get(server, 0))):
            value = shown[pos] if pos < len(shown) else None
            _set_or_drop(s.watch_pos, (server, str(pos)), value)
        self._positions[server] = len(shown)

    def render(self) -> str:
        """The page a scrape would get (also without the HTTP server)."""
        return generate_latest(self.registry).decode("utf-8")

    def close(self) -> None:
        """Stop serving (idempotent); the port is free when this returns."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            self._thread.join(timeout=5)

    def __enter__(self) -> PrometheusExporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _set_or_drop(gauge: Gauge, labels: tuple[str, ...], value: float | None) -> None:
    if value is not None:
        gauge.labels(*labels).set(value)
        return
    try:
        gauge.remove(*labels)
    except KeyError:  # never set: nothing to drop
        pass


class PrometheusSink(BaseSink):
    """Feeds one session's results to a (shared) exporter: registered with each session of
    a run, demo, sweep repeat or watch (run/assemble.py make_session)."""

    def __init__(self, exporter: PrometheusExporter) -> None:
        self.exporter = exporter

    def on_result(self, result: RequestResult, capture: RawCapture | None) -> None:
        self.exporter.observe(result)


# One exporter per (host, port) for the whole process: a sweep's repeats (one session each)
# add to the same counters, as a Prometheus scrape across the sweep expects.
_EXPORTERS: dict[tuple[str, int], PrometheusExporter] = {}
_EXPORTERS_LOCK = threading.Lock()


def exporter_for(port: int | None, host: str = "127.0.0.1") -> PrometheusExporter | None:
    """The process's exporter for `--prometheus-port` (started on first use); None when the
    option is not set."""
    if port is None:
        return None
    with _EXPORTERS_LOCK:
        exporter = _EXPORTERS.get((host, port))
        if exporter is None:
            exporter = _EXPORTERS[(host, port)] = PrometheusExporter(port, host)
        return exporter


def attach(session: Any, port: int | None, host: str = "127.0.0.1") -> PrometheusExporter | None:
    """Register a PrometheusSink on `session` when `--prometheus-port` is set."""
    exporter = exporter_for(port, host)
    if exporter is not None:
        session.add_sink(PrometheusSink(exporter))
    return exporter


def close_exporters() -> None:
    """Stop every exporter this process started (at the end of a command)."""
    with _EXPORTERS_LOCK:
        exporters = list(_EXPORTERS.values())
        _EXPORTERS.clear()
    for exporter in exporters:
        exporter.close()
