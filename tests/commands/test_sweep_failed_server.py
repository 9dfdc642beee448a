"""A sweep arm whose command fails names its log's last line in the cell's one-line error
(issue 36: the line ended at "last lines of server-arm-big.log:" with nothing after it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_failed_arm_quotes_its_log(tmp_path: Path) -> None:
    art = tmp_path / "sweep"
    proc = subprocess.run(
        [sys.executable, "-m", "specmon", "sweep", "--headless", "--artifact-dir", str(art)]
        + ["--serve", "{python} -m specmon sim --preset zero --port {port} --num-spec-tokens {k}"]
        + ["--num-spec-tokens", "2", "--concurrency", "1", "--repeats", "1"]
        + ["--segment-requests", "4", "--variant", "big=specmon-no-such-command {port}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = art / "server-arm-big.log"
    line = next(x for x in proc.stdout.splitlines() if x.startswith("cell arm big"))
    assert line.startswith("cell arm big concurrency=1: error: server for arm big exited with")
    assert line.endswith(f"{log} ends: " + log.read_text().strip().splitlines()[-1])
    assert "command not found" in line
    (arm,) = json.loads((art / "sweep.json").read_text())["arms"]
    assert "command not found" in json.dumps(arm)
