"""--prometheus-port wired (specmon/sinks/prometheus.py PrometheusSink via make_session): the
endpoint scraped during a real `specmon` run against the simulator, parsed with
prometheus_client's parser, and its totals equal to the run's exports at the end; the
summary's server_metrics.health checked against /metrics deltas scraped here."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from specmon.config import build_config
from specmon.run.sweep.servers import free_port
from specmon.server.health import parse_health
from specmon.sim.process import start_sim

SIM_ARGS = ["--num-spec-tokens", "3", "--seed", "3"]


def _totals(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_total"):
                out[s.name] = out.get(s.name, 0.0) + s.value
    return out


@pytest.mark.e2e
def test_endpoint_scraped_during_a_run_process(tmp_path):
    sim = start_sim(SIM_ARGS)
    port = free_port()
    cmd = [sys.executable, "-m", "specmon", "--url", sim.url, "--headless", "--request-count",
           "400", "--concurrency", "2", "--prometheus-port", str(port),
           "--artifact-dir", str(tmp_path)]  # fmt: skip
    run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and run.poll() is None and seen is None:
            try:
                totals = _totals(httpx.get(f"http://127.0.0.1:{port}/metrics").text)
            except httpx.HTTPError:
                time.sleep(0.1)
                continue
            if totals.get("specmon_requests_total", 0) > 0:
                seen = totals
            time.sleep(0.1)
        run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
        sim.stop()
    assert run.returncode == 0
    assert seen is not None, "no scrape saw a request while the run went on"
    assert 0 < seen["specmon_requests_total"] <= 400
    assert seen["specmon_spec_decode_steps_total"] > 0


@pytest.mark.e2e
def test_endpoint_totals_equal_the_exports(tmp_path):
    from specmon.run.assemble import make_runner, make_session
    from specmon.run.multi import MultiRun
    from specmon.sinks.prometheus import close_exporters

    sim = start_sim(SIM_ARGS)
    port = free_port()
    try:
        config = build_config(
            overrides={
                "url": [sim.url], "model": "specmon-sim", "request_count": 30, "concurrency": 3,
                "artifact_dir": str(tmp_path), "prometheus_port": port, "headless": True,
            }
        )  # fmt: skip
        before = parse_health(httpx.get(sim.url + "/metrics").text)
        multi = MultiRun(config, make_session, make_runner)
        multi.start()
        assert multi.join(120)
        multi.finish()
        after = parse_health(httpx.get(sim.url + "/metrics").text)
        page = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    finally:
        close_exporters()
        sim.stop()
    totals = _totals(page)
    summary = json.loads((tmp_path / "profile_export_aiperf.json").read_text())
    assert totals["specmon_requests_total"] == summary["request_count"]["avg"] == 30
    assert totals["specmon_spec_decode_steps_total"] == summary["total_spec_decode_steps"]["avg"]
    assert (
        totals["specmon_spec_decode_accepted_tokens_total"]
        == (summary["total_accepted_draft_tokens"]["avg"])
    )
    assert totals["specmon_spec_decode_draft_tokens_total"] == summary["total_draft_tokens"]["avg"]
    by_accepted: dict[str, float] = {}  # summed over the server and category labels
    for family in text_string_to_metric_families(page):
        for s in family.samples:
            if s.name == "specmon_spec_decode_steps_by_accepted_total":
                j = s.labels["accepted"]
                by_accepted[j] = by_accepted.get(j, 0.0) + s.value
    pooled = summary["pooled_spec_decode_acceptance_histogram"]
    assert {j: n for j, n in by_accepted.items() if n} == {
        str(j): float(n) for j, n in pooled.items() if n
    }
    # server_metrics.health: the window's generation tokens = the /metrics delta seen here
    # (no other client), and nothing is running once the run is over
    health = summary["server_metrics"]["health"]
    gen = after.total.generation_tokens - before.total.generation_tokens
    assert gen > 0 and health["window"]["generation_tokens"] == gen
    assert health["last"]["running"] == 0
    assert health["window"]["reset"] is False
