"""`specmon watch --alert` end to end: a real `specmon sim` under load from a real
`specmon` run, watched from its /metrics; the alert fires (its line, exit status 3) on a
simulator whose acceptance meets it and stays quiet (exit 0 at --duration) on one whose
acceptance does not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specmon.sim.process import start_sim

pytestmark = pytest.mark.e2e

# 10 ms a step: a run of 40 requests at concurrency 4 keeps the server busy for seconds
SIM_ARGS = ["--num-spec-tokens", "3", "--seed", "7", "--step-ms", "10"]


def watch(url: str, out_dir: Path, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "specmon", "watch", "--url", url, "--interval", "0.3"]
    cmd += ["--artifact-dir", str(out_dir), *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def load(url: str, out_dir: Path, n: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "specmon", "--url", url, "--headless", "--concurrency", "4"]
    cmd += ["--request-count", str(n), "--artifact-dir", str(out_dir)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def watch_under_load(acceptance: str, tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    with start_sim([*SIM_ARGS, "--acceptance", acceptance]) as sim:
        watcher = watch(sim.url, tmp_path / "w", *extra)
        loader = load(sim.url, tmp_path / "run", 40)
        try:
            out, err = watcher.communicate(timeout=120)
            assert loader.wait(timeout=120) == 0, loader.stderr.read() if loader.stderr else ""
        finally:
            for proc in (watcher, loader):
                if proc.poll() is None:
                    proc.kill()
    return watcher.returncode, out, err


def test_alert_fires_and_exits_3_when_acceptance_stays_low(tmp_path):
    # acceptance 0: every busy interval's acceptance length is 1.0 < 1.5
    status, out, err = watch_under_load("0", tmp_path, "--alert", "al<1.5 for 1s")
    assert status == 3, err
    (line,) = [x for x in err.splitlines() if "ALERT" in x]
    assert line.startswith("specmon watch: ALERT 'al<1.5 for 1s' on ")
    assert "acceptance length 1 < 1.5" in line
    assert line in out.splitlines()  # on stdout too, after the scrape lines
    assert "time series" in out.splitlines()[-1]  # the files are complete


def test_alert_stays_quiet_while_acceptance_is_high(tmp_path):
    # acceptance 0.7 at k = 3: acceptance length about 2.5, never below 1.5
    status, out, err = watch_under_load(
        "0.7", tmp_path, "--alert", "al<1.5 for 1s", "--duration", "6"
    )
    assert status == 0, err
    assert "ALERT" not in out + err
    assert any(" AL 2." in x for x in out.splitlines())  # it did see the load


def test_a_bad_alert_is_one_line_and_status_2(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "specmon", "watch", "--url", "http://127.0.0.1:9", "--alert", "al<"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--alert 'al<'" in done.stderr
