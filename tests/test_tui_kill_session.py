"""`tmux kill-session` at any moment of the monitor's start (issue 35 item 5): the pane's
terminal is gone (SIGHUP, then EIO on every write). Before the fix a print to the dead
terminal raised in the start-up (rc 1, no JSON or CSV), or the load ran on and the process
never exited. Now the run writes its exports and exits 129; a hangup that lands before the
interpreter reaches specmon's first line may end the process with nothing written (nothing
was sent then), never with half a run.

The pane runs bash with a HUP trap (so bash outlives the pane and records specmon's exit
status; a trapped signal is reset to the default in specmon by exec), specmon's stderr to a
file in one variant (a traceback would show there)."""

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

from specmon.sim.process import start_sim

pytestmark = pytest.mark.e2e

REQUESTS = 400  # ~1 s each at concurrency 4: minutes of load, were the stop lost
TIMEOUT_S = 120


def running_requests(metrics_url: str) -> float:
    with urllib.request.urlopen(metrics_url, timeout=5) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:num_requests_running")
    )


def child_of(pid: str, deadline: float) -> int:
    while True:
        found = subprocess.run(["pgrep", "-P", pid], capture_output=True, text=True)
        if found.stdout.split():
            return int(found.stdout.split()[0])
        assert time.monotonic() < deadline, "specmon never started"
        time.sleep(0.002)


def poll(condition, what: str, deadline: float) -> None:
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status


@pytest.mark.parametrize("moment", ["spawn", "first_request", "after_0.3s"])
@pytest.mark.parametrize("stderr_to_file", [False, True], ids=["tty", "stderr_file"])
def test_kill_session_during_the_start_writes_the_exports_and_exits_129(
    tmp_path: Path, moment: str, stderr_to_file: bool
):
    art, status, err = tmp_path / "art", tmp_path / "status", tmp_path / "err"
    redirect = f" 2>{shlex.quote(str(err))}" if stderr_to_file else ""
    with start_sim(["--seed", "11", "--ttft-ms", "50", "--step-ms", "15"]) as sim:
        run = (
            f"{shlex.quote(sys.executable)} -m specmon run --url {sim.url} --concurrency 4 "
            f"--request-count {REQUESTS} --output-tokens-mean 64 "
            f"--artifact-dir {shlex.quote(str(art))}{redirect}"
        )
        script = f"trap : HUP; {run}; echo $? > {shlex.quote(str(status))}"
        pane = Pane(f"bash -c {shlex.quote(script)}")
        pid = None
        try:
            deadline = time.monotonic() + TIMEOUT_S
            shell = pane._tmux("display-message", "-p", "-t", "e2e", "#{pane_pid}").strip()
            pid = child_of(shell, deadline)
            if moment == "first_request":
                poll(lambda: running_requests(f"{sim.url}/metrics") > 0, "a request", deadline)
            elif moment == "after_0.3s":
                time.sleep(0.3)
            pane._tmux("kill-session", "-t", "e2e")
            poll(lambda: gone(pid), "specmon exited", deadline)
            poll(status.is_file, "the exit status written", deadline)
        finally:
            pane.close()
            if pid is not None and not gone(pid):  # never leave a run behind a failed check
                os.kill(pid, signal.SIGKILL)
    assert status.read_text().split() == [str(128 + signal.SIGHUP)]
    if stderr_to_file:
        assert "Traceback" not in err.read_text(), err.read_text()
    if not art.exists():  # the hangup came before specmon's first line: nothing sent
        assert moment == "spawn"
        return
    doc = json.loads((art / "profile_export_aiperf.json").read_text())
    assert (art / "profile_export_aiperf.csv").is_file()
    assert doc.get("request_count", {}).get("avg", 0) < REQUESTS  # the stop ended the load
