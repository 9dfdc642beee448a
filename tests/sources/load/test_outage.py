"""A server that does not come back (issue 19 item 3): `--max-outage S` ends a run whose
server stayed unreachable for S seconds (killed, or answering only resets) with complete
exports, one line and exit 1; a `--benchmark-duration` run stops sending at its duration and
drains for at most `--drain-timeout`; the verdict names an outage as an outage; a 429 waits
its Retry-After and says it is rate limiting. Real processes over loopback."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest
from support.cli import start_specmon
from support.hostile_server import GOOD, RATE_LIMITED, RESET, HostileServer

from specmon.capture import RawCapture
from specmon.run.sweep.servers import free_port
from specmon.sim.process import start_sim
from specmon.sources.load.generator import (
    RETRY_AFTER_CAP_S,
    FirstStatusCheck,
    Outages,
    describe_outages,
    merge_spells,
    retry_after_s,
)

SIM_ARGS = ["--seed", "5", "--ttft-ms", "5", "--step-ms", "2"]
HANG_GUARD_S = 240  # against a hang only


def _run(url: str, out, *extra: str) -> subprocess.Popen:
    return start_specmon(
        "run", "--headless", "--output-tokens-mean", "8", "--url", url,
        "--artifact-dir", str(out), "--export-level", "records", *extra,
    )  # fmt: skip


def _records(out) -> list[dict]:
    return [json.loads(line) for line in (out / "profile_export.jsonl").read_text().splitlines()]


def test_outages_are_named_with_their_times_and_overdue_after_max():
    log = Outages(max_s=60)
    assert log.down_since is None and log.overdue(1000.0) is None
    log.down(1000.0)
    log.down(1010.0)  # still the same spell
    assert log.down_since == 1000.0
    assert log.overdue(1059.9) is None
    stop = log.overdue(1060.0)
    clock = time.strftime("%H:%M:%S", time.localtime(1000.0))
    assert str(stop) == f"server unreachable since {clock}; stopped after 60 s"
    log.up(1065.0)
    assert log.down_since is None and log.spells == [(1000.0, 1065.0)]
    end = time.strftime("%H:%M:%S", time.localtime(1065.0))
    assert describe_outages(log.spells) == f"server unreachable {clock}-{end}"


def test_a_429_is_retried_after_its_capped_retry_after_and_is_no_user_error():
    def rate_limited(after: float | None) -> RawCapture:
        error = {"type": "http_error", "message": "x", "retry_after_s": after}
        return RawCapture("chat", True, {}, 429, error=error)

    assert retry_after_s(rate_limited(2.5)) == 2.5
    assert retry_after_s(rate_limited(3600.0)) == RETRY_AFTER_CAP_S
    assert retry_after_s(rate_limited(None)) == 1.0
    assert retry_after_s(RawCapture("chat", True, {}, 500, error={"type": "http_error"})) is None
    check = FirstStatusCheck(n=3)
    for _ in range(3):
        verdict = check.note(rate_limited(1.0))
    assert verdict is None  # every first request rate limited: not "check --model ..."


@pytest.mark.e2e
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_server_killed_for_good_ends_the_run_after_max_outage_with_exit_1(tmp_path, workers):
    """With --workers 2 each worker notices the outage; the first to reach --max-outage
    ends the whole run the same way (not as "the load loop failed")."""
    out = tmp_path / "run"
    sim = start_sim(SIM_ARGS)
    proc = _run(
        sim.url, out, "--concurrency", "4", "--max-outage", "3", "--drain-timeout", "1",
        "--workers", workers,
    )  # fmt: skip
    try:
        jsonl = out / "profile_export.jsonl"
        while not (jsonl.exists() and len(jsonl.read_bytes().splitlines()) >= 20):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        os.kill(sim.pid, signal.SIGKILL)  # never comes back
        stdout, stderr = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
        sim.stop()
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr
    assert re.search(r"server unreachable since \d\d:\d\d:\d\d; stopped after 3 s", stderr)
    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    records = _records(out)
    valid = [r for r in records if not r.get("error")]
    assert valid and doc["request_count"]["avg"] == len(valid)
    verdict = doc["server_metrics"]["reconciliation"]
    if not verdict["equal"]:  # requests cut by the kill: the outage is the named cause
        assert re.search(r"server unreachable \d\d:\d\d:\d\d-", verdict["text"]), verdict
        assert "counters from before and after it" in verdict["text"]
        assert "replicas" not in verdict["text"]


@pytest.mark.e2e
def test_a_server_that_only_resets_ends_a_count_bounded_run(tmp_path):
    out = tmp_path / "run"
    with HostileServer({"reset": RESET}) as server:
        proc = _run(server.url, out, "--request-count", "20", "--max-outage", "2")
        stdout, stderr = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 1, stderr
    assert "stopped after 2 s" in stderr and "Traceback" not in stderr
    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    records = _records(out)
    assert records and all(r["error"]["type"] == "connection_error" for r in records)
    assert doc["error_request_count"]["avg"] == len(records)


@pytest.mark.e2e
def test_a_duration_run_stops_sending_at_its_duration_and_drains_for_drain_timeout(tmp_path):
    """Requests take 2 s each; the run lasts 1 s and drains 0.5 s: the requests in flight at
    the end are cancelled after the drain, none is sent after the duration."""
    out = tmp_path / "run"
    with start_sim(["--seed", "5", "--ttft-ms", "2000"]) as sim:
        proc = _run(
            sim.url, out, "--benchmark-duration", "1", "--drain-timeout", "0.5",
            "--concurrency", "3",
        )  # fmt: skip
        stdout, stderr = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode in (0, 1), stderr  # 1: nothing finished (all cancelled)
    records = _records(out)
    assert len(records) == 3  # the first three, nothing sent after the duration
    assert all(r["error"]["type"] == "cancelled" for r in records)


@pytest.mark.e2e
def test_a_rate_limited_server_is_waited_for_and_named(tmp_path):
    out = tmp_path / "run"
    cases = {"limited": RATE_LIMITED + b"0.2", "good": GOOD}
    with HostileServer(cases) as server:
        proc = _run(server.url, out, "--request-count", "4", "--concurrency", "1")
        stdout, stderr = proc.communicate(timeout=HANG_GUARD_S)
        sent = list(server.sent)
    assert proc.returncode == 0, stderr
    records = _records(out)
    limited = [r for r in records if r.get("error")]
    assert len([r for r in records if not r.get("error")]) == 4
    assert len(limited) == sent.count("limited") >= 4
    assert all("rate-limited by the server (Retry-After 0.2 s)" in r["error"]["message"]
               for r in limited)  # fmt: skip
    assert "check --model" not in stdout + stderr


def test_spells_of_several_workers_merge_into_the_servers():
    # two workers saw one outage a second apart at each end; a third saw a later one
    spells = [(100.0, 160.0), (300.0, None), (101.0, 161.0), (161.0, 170.0)]
    assert merge_spells(spells) == [(100.0, 170.0), (300.0, None)]
    assert merge_spells([(5.0, None), (6.0, 9.0)]) == [(5.0, None)]  # still down: open
    assert merge_spells([]) == []


@pytest.mark.e2e
def test_with_workers_a_killed_and_restarted_server_is_named_as_an_outage(tmp_path):
    """--workers 2: each worker notices the outage on its own; the verdict names the
    server's one spell (both workers' joined), not a guess about replicas or resets."""
    out = tmp_path / "run"
    port = free_port()
    args = [*SIM_ARGS, "--port", str(port)]
    sim = start_sim(args)
    proc = _run(
        sim.url, out, "--workers", "2", "--concurrency", "4", "--request-count", "120",
        "--max-outage", "120",
    )  # fmt: skip
    try:
        _wait_records(out, proc, lambda rs: len(rs) >= 20)
        os.kill(sim.pid, signal.SIGKILL)
        sim.stop()
        # both workers retried at least once against the dead port: the outage is theirs
        _wait_records(
            out,
            proc,
            lambda rs: len({r["metadata"].get("worker_id") for r in rs if _refused(r)}) == 2,
        )
        sim = start_sim(args)  # the same port: its counters start from zero
        stdout, stderr = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
        sim.stop()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    assert doc["request_count"]["avg"] == 120  # refused attempts are retried, not counted
    text = doc["server_metrics"]["reconciliation"]["text"]
    spell = (
        r"server unreachable (\d\d:\d\d:\d\d)-(\d\d:\d\d:\d\d); counters from before and after it"
    )
    assert re.search(spell, text), text
    assert "," not in text.split("server unreachable ")[1].split(";")[0]  # one spell
    assert "replicas" not in text and "likely" not in text


def _refused(record: dict) -> bool:
    error = record.get("error") or {}
    return error.get("type") == "connection_error"


def _wait_records(out, proc: subprocess.Popen, condition) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    jsonl = out / "profile_export.jsonl"
    while not (jsonl.exists() and condition(_whole_records(jsonl))):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _whole_records(jsonl) -> list[dict]:
    lines = jsonl.read_bytes().split(b"\n")[:-1]  # the last piece may be a line being written
    return [json.loads(line) for line in lines]
