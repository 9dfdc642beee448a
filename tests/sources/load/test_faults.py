"""A dead or wrong server (issue 10 item 4): connection failures back off per slot and never
use up --request-count, the progress line says "server down since ...", the run recovers when
the server returns on the same port, and a wrong --model stops the run with the server's own
404 message and exit status 2. Real processes: `specmon sim` and `specmon run --headless`."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import time
from collections import Counter
from dataclasses import replace
from urllib.parse import urlparse

import pytest
from support.cli import start_specmon

from specmon.capture import RawCapture
from specmon.interfaces import LoadProgress
from specmon.run.headless import format_progress
from specmon.run.load.control import merge_progress
from specmon.sim.process import start_sim
from specmon.sources.load.generator import (
    BACKOFF_BASE_S,
    BACKOFF_CAP_S,
    FirstStatusCheck,
    backoff_delay,
    unreachable,
)

SIM_ARGS = ["--seed", "5", "--ttft-ms", "20", "--step-ms", "2"]


def _capture(status: int, kind: str | None, message: str = "") -> RawCapture:
    error = None if kind is None else {"type": kind, "message": message}
    return RawCapture("chat", True, {}, status, error=error)


def test_backoff_doubles_from_base_and_is_capped_with_jitter():
    rng = random.Random(3)
    for attempt in range(12):
        nominal = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt)
        for _ in range(50):
            delay = backoff_delay(attempt, rng)
            assert nominal * 0.5 <= delay < nominal  # jitter in [0.5, 1) of the nominal step
    assert backoff_delay(10_000, rng) < BACKOFF_CAP_S  # no overflow far into an outage


def test_unreachable_means_no_status_came_back():
    assert unreachable(_capture(0, "connection_error"))
    assert not unreachable(_capture(200, "connection_error"))  # cut after the status line
    assert not unreachable(_capture(0, "timeout"))
    assert not unreachable(_capture(200, None))


def test_first_status_check_needs_every_one_of_the_first_n():
    check = FirstStatusCheck(3)
    assert (
        check.note(_capture(404, "http_error", "HTTP 404: The model `x`\n does not exist.")) is None
    )
    assert check.note(_capture(404, "http_error", "HTTP 404: other")) is None
    error = check.note(_capture(404, "http_error", "HTTP 404: other"))
    assert error is not None and error.exit_code == 2
    assert "HTTP 404" in str(error) and "The model `x` does not exist." in str(error)
    assert "\n" not in str(error)
    mixed = FirstStatusCheck(3)
    for capture in (_capture(404, "http_error"), _capture(200, None), _capture(404, "http_error")):
        assert mixed.note(capture) is None  # one success: not a user error
    assert mixed.note(_capture(404, "http_error")) is None  # past the window: never again
    server = FirstStatusCheck(2)
    server.note(_capture(500, "http_error"))
    assert server.note(_capture(500, "http_error")) is None  # 5xx: the server's fault
    two = FirstStatusCheck(2)
    two.note(_capture(401, "http_error"))
    assert two.note(_capture(404, "http_error")) is None  # two statuses


def test_progress_line_shows_the_outage():
    down = time.mktime((2025, 1, 2, 13, 4, 5, 0, 0, -1))  # local 13:04:05
    progress = LoadProgress(
        sent=40, completed=30, total=100, in_flight=8, errors=25, loop_lag_ms=0.5,
        elapsed_s=10.0, retries=20, down_since=down,
    )  # fmt: skip
    # req/s is AIPerf's request_throughput from the session (valid requests only, so retried
    # attempts never count: test_server_killed_and_restarted checks it on a real run)
    line = format_progress(progress, None, 2.5)
    # 30 of 100 in 10 s: 30%, 70 left at 3/s -> 23.3 s
    assert "done 30/100 (30%, ETA 00:23)  errors 25  2.50 req/s" in line
    assert line.endswith("  server down since 13:04:05, retrying")
    assert "server down" not in format_progress(replace(progress, down_since=None), None, None)


def test_merged_progress_sums_retries_and_keeps_the_earliest_outage():
    parts = [
        LoadProgress(1, 1, None, 0, 3, 0.0, retries=3, down_since=200.0),
        LoadProgress(1, 1, None, 0, 1, 0.0, retries=1, down_since=100.0),
        LoadProgress(1, 1, None, 0, 0, 0.0),
    ]
    merged = merge_progress(parts)
    assert merged.retries == 4 and merged.down_since == 100.0
    assert merge_progress(parts[2:]).down_since is None


def _run(url: str, out, *extra: str) -> subprocess.Popen:
    return start_specmon(
        "run", "--url", url, "--headless", "--export-level", "raw", "--output-tokens-mean", "8",
        "--artifact-dir", str(out), *extra,
    )  # fmt: skip


def _lines(path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.endswith(b"}")]


def _wait_for(predicate, timeout: float = 90.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.e2e
def test_server_killed_and_restarted_on_the_same_port_mid_run(tmp_path):
    out, count = tmp_path / "run", 300
    raw = out / "profile_export_raw.jsonl"
    sim = start_sim(SIM_ARGS)
    port = urlparse(sim.url).port
    proc = _run(sim.url, out, "--concurrency", "8", "--request-count", str(count))
    try:
        assert _wait_for(lambda: len(_lines(raw)) >= 40), "the run never got going"
        os.kill(sim.pid, signal.SIGKILL)
        sim.proc.wait(30)
        sim.stop()
        killed = time.monotonic()
        # down for at least ~4 s: the outage must also show on a progress line (every 2 s)
        assert _wait_for(lambda: time.monotonic() - killed >= 4.0)
        sim = start_sim([*SIM_ARGS, "--port", str(port)])
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        sim.stop()
    assert proc.returncode == 0, stderr
    assert re.search(r"server down since \d\d:\d\d:\d\d, retrying", stdout), stdout
    captures = _lines(raw)
    kinds = Counter(c["error"]["type"] if c["error"] else "ok" for c in captures)
    valid = kinds.pop("ok")
    # the request count is made of valid requests plus those cut by the kill itself
    cut = sum(n for kind, n in kinds.items() if kind != "connection_error")
    assert cut <= 8  # at most the requests in flight when the server died
    assert valid + cut == count
    # 8 slots backing off from 50 ms (doubling, capped at 2 s) over ~4 s: a few dozen
    # attempts, nothing like the thousands a full-speed retry loop makes
    assert 8 <= kinds["connection_error"] <= 300, kinds
    # each of them is marked as an attempt sent again (the log's "retried" rows), no other
    retried = [c["error"]["type"] for c in captures if c["error"] and c["error"].get("retried")]
    assert retried == ["connection_error"] * kinds["connection_error"]
    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    assert doc["request_count"]["avg"] == valid
    assert doc["error_request_count"]["avg"] == sum(kinds.values())
    # request throughput counts valid requests only (docs/metrics.md): valid / duration
    assert doc["benchmark_duration"]["unit"] == "sec"
    duration_s = doc["benchmark_duration"]["avg"]
    assert abs(doc["request_throughput"]["avg"] - valid / duration_s) < 1e-6 * valid


@pytest.mark.e2e
def test_wrong_model_is_refused_before_any_request_with_exit_2(tmp_path, sims):
    """The server's /v1/models is asked first (run/assemble.py check_inputs): a mistyped
    --model is one line naming what the server serves, before the artifact dir exists.
    (A server that lists the model and still answers 4xx is FirstStatusCheck's case, above.)"""
    out = tmp_path / "run"
    sim = sims(SIM_ARGS)
    proc = _run(sim.url, out, "--model", "no-such-model", "--concurrency", "2")
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2, (stdout, stderr)
    errors = [line for line in stderr.splitlines() if "no-such-model" in line]
    assert len(errors) == 1 and "it lists specmon-sim" in errors[0], stderr
    assert not out.exists()  # nothing was sent, nothing written


@pytest.mark.e2e
def test_a_run_whose_requests_all_failed_exits_1(tmp_path, sims):
    out = tmp_path / "run"
    sim = sims([*SIM_ARGS, "--error-rate", "1"])
    proc = _run(sim.url, out, "--request-count", "6", "--concurrency", "2")
    stdout, stderr = proc.communicate(timeout=120)
    # HTTP 500s are the server's fault, not a user error: exit 1, not 2
    assert proc.returncode == 1, (stdout, stderr)
    assert "every request failed (6 errors)" in stdout
    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    assert doc["error_request_count"]["avg"] == 6  # the exports are still written
