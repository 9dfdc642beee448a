"""A stop signal in the monitor's start-up window (issue 19): the load has started but the
TUI has not mounted yet, so no stop callback is registered. The run must still end, drain
and write its exports, and exit 128 + signal (before the fix: the whole load ran, no JSON
or CSV, and the process waited for q forever)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from support.tmux_pane import Pane

pytestmark = pytest.mark.e2e

REQUESTS = 400  # ~1 s each at concurrency 4: minutes of load, were the stop lost


def running_requests(metrics_url: str) -> float:
    with urllib.request.urlopen(metrics_url, timeout=5) as response:
        text = response.read().decode()
    values = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:num_requests_running")
    ]
    return sum(values)


def specmon_pid(pane: Pane, deadline: float) -> int:
    """The specmon process the pane's shell started."""
    shell = pane._tmux("display-message", "-p", "-t", "e2e", "#{pane_pid}").strip()
    while True:
        pids = subprocess.run(["pgrep", "-P", shell], capture_output=True, text=True)
        if pids.stdout.split():
            return int(pids.stdout.split()[0])
        assert time.monotonic() < deadline, pane.text()
        time.sleep(0.005)


@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name
)
def test_a_stop_before_the_monitor_mounts_ends_the_run(tmp_path: Path, signum: int, sims):
    art = tmp_path / "art"
    sim = sims(["--seed", "11", "--ttft-ms", "50", "--step-ms", "15"])
    cmd = (
        f"{shlex.quote(sys.executable)} -m specmon run --url {sim.url} --concurrency 4 "
        f"--request-count {REQUESTS} --output-tokens-mean 64 "
        f"--artifact-dir {shlex.quote(str(art))}; echo SPECMON-EXITED $?; sleep 60"
    )
    pane = Pane(cmd)
    try:
        deadline = time.monotonic() + 120
        pid = specmon_pid(pane, deadline)
        # the first request reaching the server: the load has started; the screen takes
        # far longer than these few milliseconds to mount
        while running_requests(f"{sim.url}/metrics") == 0:
            assert time.monotonic() < deadline, pane.text()
            time.sleep(0.002)
        os.kill(pid, signum)
        after = pane.wait_for(lambda t: "SPECMON-EXITED" in t, "the exit", 120)
    finally:
        pane.close()
    assert f"SPECMON-EXITED {128 + signum}" in after, after
    doc = json.loads((art / "profile_export_aiperf.json").read_text())
    assert (art / "profile_export_aiperf.csv").is_file()
    # the stop ended the load: it did not run to its end
    assert doc.get("request_count", {}).get("avg", 0) < REQUESTS
