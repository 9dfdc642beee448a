"""`specmon run --headless` / `specmon demo` as real subprocesses against `specmon sim`."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from support.cli import specmon, start_specmon

pytestmark = pytest.mark.e2e
SPECMON = [sys.executable, "-m", "specmon"]


def spec_counters(url: str) -> dict[str, float]:
    """Sum each vllm:spec_decode_* counter of /metrics over its label sets."""
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    totals: dict[str, float] = {}
    for line in text.splitlines():
        match = re.match(r"^(vllm:spec_decode_num_\w+_total)(\{[^}]*\})? ([0-9.e+]+)$", line)
        if match:
            totals[match.group(1)] = totals.get(match.group(1), 0.0) + float(match.group(3))
    return totals


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_server_is_one_line_exit_2(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    proc = specmon("--url", url, "--headless", "--artifact-dir", str(tmp_path / "a"), timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"specmon: error: cannot reach server {url}")
    assert "nothing listens there: check the port" in lines[0]  # the wrong-port hint
    assert not (tmp_path / "a").exists()


def test_url_with_v1_gets_the_hint_to_drop_it(shared_sim, tmp_path):
    """The OpenAI client's base_url habit: --url http://host:8000/v1 asks /v1/v1/models (a 404);
    the error says to drop the /v1 and names the root to use."""
    proc = specmon(
        "--url", shared_sim.url + "/v1", "--headless", "--artifact-dir", str(tmp_path), timeout=60
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"specmon: error: server {shared_sim.url}/v1 answered HTTP 404 on /v1/models: "
        f"drop the /v1, --url is the server's root ({shared_sim.url})"
    )


def test_done_when_exports_equal_report_and_sim_metrics_deltas(tmp_path, sims):
    out = tmp_path / "run"
    sim = sims(["--seed", "21", "--num-spec-tokens", "4", "--acceptance", "0.8,0.7,0.6,0.5"])
    before = spec_counters(sim.url)
    proc = specmon(
        "--url", sim.url, "--headless", "--request-count", "500", "--concurrency", "16",
        "--streaming", "--export-level", "raw", "--output-tokens-mean", "32",
        "--artifact-dir", str(out), timeout=300,
    )  # fmt: skip
    after = spec_counters(sim.url)
    assert proc.returncode == 0, proc.stderr
    assert "done 500/500" in proc.stdout and "LLM Metrics: Spec Decode" in proc.stdout
    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    assert doc["request_count"]["avg"] == 500
    # The server's own counters moved by exactly what the run measured.
    delta = {name: after[name] - before.get(name, 0.0) for name in after}
    assert delta["vllm:spec_decode_num_drafts_total"] == doc["total_spec_decode_steps"]["avg"]
    assert delta["vllm:spec_decode_num_draft_tokens_total"] == doc["total_draft_tokens"]["avg"]
    assert (
        delta["vllm:spec_decode_num_accepted_tokens_total"]
        == doc["total_accepted_draft_tokens"]["avg"]
    )
    # `specmon report` on the raw capture recomputes every number exactly.
    report = tmp_path / "report"
    proc = specmon(
        "report", "--input", str(out / "profile_export_raw.jsonl"), "--artifact-dir", str(report),
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    again = json.loads((report / "profile_export_aiperf.json").read_text())
    metric_keys = [k for k, v in doc.items() if isinstance(v, dict) and "unit" in v]
    assert len(metric_keys) > 20
    for key in metric_keys:
        assert again[key] == doc[key], key
    assert (
        again["pooled_spec_decode_acceptance_histogram"]
        == doc["pooled_spec_decode_acceptance_histogram"]
    )


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_load_and_writes_complete_exports(tmp_path, signum, sims):
    out = tmp_path / "run"
    sim = sims(["--seed", "5", "--ttft-ms", "20", "--step-ms", "2"])
    proc = start_specmon(
        "run", "--url", sim.url, "--headless", "--concurrency", "4", "--export-level", "raw",
        "--output-tokens-mean", "8", "--artifact-dir", str(out),
    )  # fmt: skip
    raw = out / "profile_export_raw.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
        not raw.exists() or len(raw.read_bytes().splitlines()) < 20
    ):
        time.sleep(0.1)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=120)
    # 128 + signal (docs/stopping.md). The old hang under load: a KeyboardInterrupt
    # raised inside Event.wait could leave its lock held and the load thread blocked on
    # it; specmon.stops' handler now only sets a flag during the load.
    assert proc.returncode == 128 + signum, stderr
    assert "exports written to" in stdout
    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    assert doc["was_cancelled"] is True
    raw_lines = [json.loads(line) for line in raw.read_text().splitlines()]
    ok = [c for c in raw_lines if c["error"] is None]
    cancelled = [c for c in raw_lines if c["error"] and c["error"]["type"] == "cancelled"]
    assert len(ok) >= 20 and len(ok) + len(cancelled) == len(raw_lines)
    assert len(cancelled) <= 4  # only what was in flight at the signal (drained: none)
    assert doc["request_count"]["avg"] == len(ok)
    assert len((out / "profile_export.jsonl").read_text().splitlines()) == len(raw_lines)
    assert (out / "profile_export_aiperf.csv").read_text().startswith("Metric,")


def test_demo_headless_runs_sim_and_stops_it(tmp_path):
    out = tmp_path / "demo"
    log = tmp_path / "sim.log"
    proc = specmon(
        "demo", "--headless", "--request-count", "24", "--artifact-dir", str(out),
        "--num-spec-tokens", "2", "--acceptance", "0.9", "--sim-log", str(log), timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    assert doc["request_count"]["avg"] == 24
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(entries) == 24 and {e["k"] for e in entries} == {
        2
    }  # --num-spec-tokens reached the sim
    url = re.search(r"specmon: (http://127\.0\.0\.1:\d+) ", proc.stdout).group(1)
    with pytest.raises(OSError):  # the simulator is gone
        urllib.request.urlopen(url + "/health", timeout=2)


def test_demo_without_tty_falls_back_to_headless_and_save_config(tmp_path):
    saved = tmp_path / "eff.toml"
    proc = specmon(
        "demo", "--request-count", "5", "--artifact-dir", str(tmp_path / "d"),
        "--save-config", str(saved), timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = saved.read_text()
    assert "request-count = 5" in text and "headless = true" in text and "concurrency = 16" in text


def test_workers_merge_into_one_run(tmp_path, sims):
    out = tmp_path / "run"
    log = tmp_path / "sim.log"
    sim = sims(["--seed", "6", "--log", str(log)])
    proc = specmon(
        "--url", sim.url, "--headless", "--workers", "2", "--concurrency", "4",
        "--request-count", "40", "--warmup-request-count", "4", "--output-tokens-mean", "8",
        "--export-level", "raw", "--artifact-dir", str(out), timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    raw = [json.loads(line) for line in (out / "profile_export_raw.jsonl").read_text().splitlines()]
    profiling = [c for c in raw if c["benchmark_phase"] == "profiling"]
    assert len(profiling) == 40 and len(raw) == 44  # 20 + 2 warmup per worker
    assert {c["worker_id"] for c in raw} == {"worker-0", "worker-1"}
    truth = {json.loads(line)["x_request_id"] for line in log.read_text().splitlines()}
    assert {c["x_request_id"] for c in raw} == truth  # every request the sim saw is in the run
    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    assert doc["request_count"]["avg"] == 40


@pytest.mark.sim("--seed", "1", "--api-key", "sk-test")
def test_api_key_from_openai_env(tmp_path, sim):
    base = [
        *SPECMON,
        "--url",
        sim.url,
        "--headless",
        "--request-count",
        "3",
        "--output-tokens-mean",
        "4",
        "--artifact-dir",
        str(tmp_path / "a"),
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "SPECMON_API_KEY")}
    denied = subprocess.run(base, capture_output=True, text=True, timeout=60, env=env)
    allowed = subprocess.run(
        base,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(env, OPENAI_API_KEY="sk-test"),
    )
    assert denied.returncode == 2
    assert denied.stderr.strip() == (
        f"specmon: error: server {sim.url} answered HTTP 401 on /v1/models "
        f"(check --api-key or OPENAI_API_KEY)"
    )
    assert allowed.returncode == 0, allowed.stderr
    assert "done 3/3  errors 0" in allowed.stdout
