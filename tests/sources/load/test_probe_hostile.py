"""Issue 35 item 2: an answer to a start-up GET that is not usable HTTP (a bad status line,
a body cut short of its Content-Length, bytes that are not HTTP at all) is read as no answer.
On the engine probes (/get_server_info, /server_info) the run goes on with its documented
fallback (the engine detected from the payloads); on /v1/models it stops with one line and
exit status 2. Real processes: `specmon run --headless` against tests/hostile_server.py."""

from __future__ import annotations

import json

import pytest
from support.cli import specmon
from support.hostile_server import GOOD, PROBE_ANSWERS, HostileServer

from specmon.run.load.runner import detect_engine, verification_note

PROBES = ("/get_server_info", "/server_info")


@pytest.mark.parametrize("answer", PROBE_ANSWERS)
def test_each_probe_reads_a_broken_answer_as_none(answer):
    with HostileServer({"good": GOOD}, raw=dict.fromkeys(PROBES, PROBE_ANSWERS[answer])) as srv:
        assert detect_engine(srv.url, None, timeout=5) is None
        assert verification_note(srv.url, None, timeout=5) is None


@pytest.mark.e2e
@pytest.mark.parametrize("answer", PROBE_ANSWERS)
def test_a_run_goes_on_past_a_broken_engine_probe(tmp_path, answer):
    out = tmp_path / "run"
    raw = dict.fromkeys(PROBES, PROBE_ANSWERS[answer])
    with HostileServer({"good": GOOD}, raw=raw) as server:
        proc = specmon(
            "run", "--headless", "--url", server.url, "--request-count", "3",
            "--concurrency", "1", "--artifact-dir", str(out), timeout=120,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    summary = json.loads((out / "profile_export_aiperf.json").read_text())
    assert summary["request_count"]["avg"] == 3


@pytest.mark.e2e
@pytest.mark.parametrize("answer", PROBE_ANSWERS)
def test_a_broken_models_answer_is_one_line_and_status_2(tmp_path, answer):
    out = tmp_path / "run"
    with HostileServer({"good": GOOD}, raw={"/v1/models": PROBE_ANSWERS[answer]}) as server:
        proc = specmon(
            "run", "--headless", "--url", server.url, "--request-count", "3",
            "--artifact-dir", str(out), timeout=120,
        )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert lines[0].startswith(f"specmon: error: cannot reach server {server.url}: ")
    assert "IncompleteRead" in lines[0] or "BadStatusLine" in lines[0]
    assert not (out / "profile_export_aiperf.json").exists()
