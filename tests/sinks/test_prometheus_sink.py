"""The Prometheus endpoint (specmon/sinks/prometheus.py): hand-made RequestResults observed,
the page scraped over real HTTP on a free port, parsed with prometheus_client's parser, and
every total checked against sums done by hand."""

from __future__ import annotations

import socket

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.metrics_helpers import spec_record

from specmon.errors import UserError
from specmon.pipeline import BASE_SCALE, RequestResult, SpecOutcome
from specmon.sinks.prometheus import PrometheusExporter

A = {"server": "a", "category": "coding"}
B = {"server": "b", "category": ""}


def _ok(server, category, spec=None, base=None, metrics=None, zero_step=False, **kw):
    m = dict(metrics or {})
    if spec is not None:
        m["spec_decode_acceptance_length"] = spec.mean_acceptance_length
    # stored units: times in ns (a result read back from JSONL gives ms, converted once)
    values = {t: round(v * 1e6) if t in BASE_SCALE else v for t, v in m.items()}
    values.update(base or {})
    return RequestResult(
        capture=None,
        outcome=SpecOutcome(record=spec, zero_step=zero_step),
        values=values,
        server=server,
        category=category,
        **kw,
    )


def _err(server, category, kind, **kw) -> RequestResult:
    return RequestResult(
        capture=None, error={"type": kind, "message": "x"}, server=server, category=category, **kw
    )


RESULTS = [
    # a/coding: 4 steps accepting 0,1,2,3 (6 of 12 drafted; length 2.5, rate 0.5), live ns
    _ok("a", "coding", spec_record({0: 1, 1: 1, 2: 1, 3: 1}, 3),
        base={"time_to_first_token": 120_000_000, "inter_token_latency": 8_000_000,
              "request_latency": 900_000_000}),
    # a/coding: 2 steps accepting 3 each (6 of 6; length 4.0, rate 1.0), read back in ms
    _ok("a", "coding", spec_record({3: 2}, 3),
        metrics={"time_to_first_token": 300.0, "request_latency": 2000.0}),
    # b/no category: 5 steps accepting nothing (0 of 15; length 1.0, rate 0.0)
    _ok("b", None, spec_record({0: 5}, 3), base={"time_to_first_token": 50_000_000}),
    # b: a zero-step request: counted and timed, no spec-decode figures
    _ok("b", None, None, base={"time_to_first_token": 200_000_000}, zero_step=True),
    _err("a", "coding", "http_error"),
    _err("a", "coding", "timeout"),
    _err("b", None, "http_error"),
    # left out, as the exports leave them out
    _ok("a", "coding", spec_record({3: 9}, 3), phase="warmup"),
    _err("a", "coding", "cancelled"),
]  # fmt: skip


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _v(samples, name, **labels) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def exporter():
    exp = PrometheusExporter(port=0)
    yield exp
    exp.close()


def test_scraped_totals_equal_hand_sums(exporter):
    for result in RESULTS:
        exporter.observe(result)
    assert exporter.url == f"http://127.0.0.1:{exporter.port}/metrics"
    resp = httpx.get(exporter.url, timeout=30)
    assert resp.status_code == 200
    s = _samples(resp.text)
    assert _v(s, "specmon_requests_total", **A) == 2
    assert _v(s, "specmon_requests_total", **B) == 2
    assert _v(s, "specmon_request_errors_total", **A, kind="http_error") == 1
    assert _v(s, "specmon_request_errors_total", **A, kind="timeout") == 1
    assert _v(s, "specmon_request_errors_total", **B, kind="http_error") == 1
    assert _v(s, "specmon_request_errors_total", **A, kind="cancelled") is None
    # spec-decode counters: a = 4 + 2 steps, 6 + 6 accepted, 12 + 6 drafted; b = 5, 0, 15
    assert _v(s, "specmon_spec_decode_steps_total", **A) == 6
    assert _v(s, "specmon_spec_decode_accepted_tokens_total", **A) == 12
    assert _v(s, "specmon_spec_decode_draft_tokens_total", **A) == 18
    assert _v(s, "specmon_spec_decode_steps_total", **B) == 5
    assert _v(s, "specmon_spec_decode_accepted_tokens_total", **B) == 0
    assert _v(s, "specmon_spec_decode_draft_tokens_total", **B) == 15
    by_acc = {j: _v(s, "specmon_spec_decode_steps_by_accepted_total", **A, accepted=str(j))
              for j in range(4)}  # fmt: skip
    assert by_acc == {0: 1, 1: 1, 2: 1, 3: 3}
    assert _v(s, "specmon_spec_decode_steps_by_accepted_total", **B, accepted="0") == 5
    # docs/monitoring.md's fleet formula, (accepted + steps) / steps, on a: (12 + 6) / 6
    steps, acc = 6, 12
    assert (acc + steps) / steps == 3.0 == 1 + 12 / 6


def test_histograms_in_base_units(exporter):
    for result in RESULTS:
        exporter.observe(result)
    s = _samples(httpx.get(exporter.url, timeout=30).text)
    h = "specmon_acceptance_length"
    assert _v(s, f"{h}_count", **A) == 2 and _v(s, f"{h}_sum", **A) == 6.5  # 2.5 + 4.0
    assert _v(s, f"{h}_bucket", **A, le="2.5") == 1 and _v(s, f"{h}_bucket", **A, le="4.0") == 2
    assert _v(s, f"{h}_count", **B) == 1 and _v(s, f"{h}_sum", **B) == 1.0  # zero-step: none
    r = "specmon_draft_acceptance_ratio"
    assert _v(s, f"{r}_sum", **A) == 1.5 and _v(s, f"{r}_bucket", **A, le="0.5") == 1
    assert _v(s, f"{r}_bucket", **B, le="0.0") == 1
    t = "specmon_time_to_first_token_seconds"
    assert _v(s, f"{t}_count", **A) == 2 and _v(s, f"{t}_sum", **A) == pytest.approx(0.42)
    assert _v(s, f"{t}_count", **B) == 2 and _v(s, f"{t}_sum", **B) == pytest.approx(0.25)
    assert _v(s, f"{t}_bucket", **A, le="0.15") == 1  # 0.12 s in, 0.3 s not
    i = "specmon_inter_token_latency_seconds"
    assert _v(s, f"{i}_count", **A) == 1 and _v(s, f"{i}_sum", **A) == pytest.approx(0.008)
    lat = "specmon_request_latency_seconds"
    assert _v(s, f"{lat}_count", **A) == 2 and _v(s, f"{lat}_sum", **A) == pytest.approx(2.9)
    assert _v(s, f"{lat}_count", **B) is None  # no latency on b's requests


def test_render_without_http_and_own_registry():
    # Two exporters in one process: each has its own registry (the default one would
    # refuse the second set of names).
    one, two = PrometheusExporter(serve=False), PrometheusExporter(serve=False)
    one.observe(RESULTS[0])
    assert one.port is None and one.url is None
    assert _v(_samples(one.render()), "specmon_requests_total", **A) == 1
    assert _v(_samples(two.render()), "specmon_requests_total", **A) is None


def test_busy_port_is_user_error_and_close_frees_it():
    port = _free_port()
    exp = PrometheusExporter(port=port)
    try:
        with pytest.raises(UserError, match=f"cannot listen on 127.0.0.1:{port}"):
            PrometheusExporter(port=port)
    finally:
        exp.close()
    exp.close()  # idempotent
    again = PrometheusExporter(port=port)
    assert again.port == port
    again.close()
