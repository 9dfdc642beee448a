"""q mid-run in the live monitor (tmux): the load drains (or, with --drain-timeout 0, is
cancelled), and the end-of-run reconciliation never says the counters differ because of
specmon's own cancellations (issue 10 item 2)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.tmux_pane import Pane

from specmon.server.process import ServerProcess
from specmon.sim.process import start_sim

pytestmark = pytest.mark.e2e


def wait_for_records(art: Path, pane: Pane, count: int = 6) -> None:
    """Until the run has written `count` request records (at most 120 s)."""
    jsonl = art / "profile_export.jsonl"
    deadline = time.monotonic() + 120
    while not jsonl.exists() or len(jsonl.read_bytes().splitlines()) < count:
        assert time.monotonic() < deadline, pane.text()
        time.sleep(0.1)


@pytest.fixture(scope="module")
def slow_sim() -> Iterator[ServerProcess]:
    """10 ms steps: a 64-token request lasts ~0.3 s, so q lands with requests mid-stream.
    Both drains share it: each run reconciles the deltas from its own first scrape."""
    with start_sim(["--seed", "9", "--ttft-ms", "20", "--step-ms", "10"]) as sim:
        yield sim


@pytest.mark.parametrize("drain", ["0", "5"])
def test_q_mid_run_reconciles_without_blaming_other_clients(
    tmp_path: Path, drain: str, slow_sim: ServerProcess
):
    art = tmp_path / "art"
    cmd = (
        f"{shlex.quote(sys.executable)} -m specmon run --url {slow_sim.url} --streaming "
        f"--concurrency 4 --output-tokens-mean 64 --drain-timeout {drain} "
        f"--artifact-dir {shlex.quote(str(art))}; echo SPECMON-EXITED $?; sleep 60"
    )
    pane = Pane(cmd)
    try:
        wait_for_records(art, pane)
        pane.keys("q")
        after = pane.wait_for(lambda t: "SPECMON-EXITED" in t, "the exit after q", 120)
    finally:
        pane.close()
    assert "SPECMON-EXITED 0" in after, after
    doc = json.loads((art / "profile_export_aiperf.json").read_text())
    rec = doc["server_metrics"]["reconciliation"]
    assert rec["equal"] is True, rec
    assert "differ" not in rec["text"] and "other clients" not in rec["text"]
    cancelled = doc.get("cancelled_request_count", 0)
    cancelled = cancelled.get("avg", 0) if isinstance(cancelled, dict) else cancelled
    if drain == "5":  # 4 requests of ~0.3 s finish well within the drain
        assert cancelled == 0 and rec["diffs"] == {}
    elif rec["diffs"]:  # the server counted steps of the requests cancelled mid-stream
        assert f"apart from {int(cancelled)} cancelled" in rec["text"]


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_closes_the_monitor_drains_and_exports(tmp_path: Path, signum, shared_sim):
    """SIGHUP (the terminal went away) and SIGINT (kill -INT; Ctrl-C itself is a key in the
    TUI) quit the monitor like q, drain, write the exports and exit 128 + signal."""
    art = tmp_path / "art"
    cmd = (
        f"{shlex.quote(sys.executable)} -m specmon run --url {shared_sim.url} --concurrency 2 "
        f"--output-tokens-mean 16 --artifact-dir {shlex.quote(str(art))}; "
        f"echo SPECMON-EXITED $?; sleep 60"
    )
    pane = Pane(cmd)
    try:
        wait_for_records(art, pane)
        shell = pane._tmux("display-message", "-p", "-t", "e2e", "#{pane_pid}").strip()
        pids = subprocess.run(["pgrep", "-P", shell], capture_output=True, text=True)
        (pid,) = pids.stdout.split()  # the specmon process the pane's shell started
        os.kill(int(pid), signum)
        after = pane.wait_for(lambda t: "SPECMON-EXITED" in t, "the exit", 120)
    finally:
        pane.close()
    assert f"SPECMON-EXITED {128 + signum}" in after, after
    doc = json.loads((art / "profile_export_aiperf.json").read_text())
    records = (art / "profile_export.jsonl").read_text().splitlines()
    assert doc["was_cancelled"] is True and len(records) >= 6
    assert doc["request_count"]["avg"] == len(records)  # drained: none cancelled or failed
