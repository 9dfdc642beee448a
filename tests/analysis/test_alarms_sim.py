"""Each acceptance alarm end to end: a real `specmon sim` process configured to trigger it,
`specmon --headless` against it; the alarm is in the summary JSON's `alarms` and its one
line on stderr, and a steady simulator raises none."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

K = 3
SIM = ["--num-spec-tokens", str(K), "--seed", "7", "--ttft-ms", "0", "--step-ms", "0"]


def run(url: str, out: Path, count: int, extra: list[str]) -> tuple[list[dict], str]:
    """One headless run; its summary's alarms and its stderr."""
    proc = subprocess.run(
        [sys.executable, "-m", "specmon", "--url", url, "--headless", "--request-count",
         str(count), "--output-tokens-mean", "32", "--output-tokens-stddev", "0",
         "--random-seed", "5", "--artifact-dir", str(out), *extra],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    return doc["alarms"], proc.stderr


def two_phase_file(path: Path, first: str, second: str, n: int) -> list[str]:
    """An mt_bench file of n `first` questions then n `second` ones; replayed in order with
    --concurrency 1, so the run's first n requests are `first`'s."""
    with path.open("w") as f:
        for i in range(2 * n):
            row = {"question_id": i, "category": first if i < n else second, "turns": [f"q{i}"]}
            f.write(json.dumps(row) + "\n")
    return ["--dataset", "mt_bench", "--input-file", str(path), "--concurrency", "1"]


def alarm_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "specmon: ALARM" in line]


def test_a_steady_simulator_raises_no_alarm(sims, tmp_path):
    sim = sims([*SIM, "--acceptance", "0.7"])
    # 190 requests: every rule is looked at (drift at 130, 160 and 190)
    alarms, stderr = run(sim.url, tmp_path / "run", 190, ["--concurrency", "4"])
    assert alarms == [] and alarm_lines(stderr) == []


def test_a_steady_simulator_at_concurrency_64_raises_no_alarm(sims, tmp_path):
    """The demo sweep's simulator (roofline, one k) at concurrency 64: its requests end in
    waves ordered by their own acceptance, which made a false drift (the window rules now
    take them in send order: tests/analysis/test_alarms_startup.py)."""
    roofline = ["--latency-model", "roofline", "--step-floor-ms", "4", "--compute-ms-per-token",
                "0.05", "--draft-ms-per-token", "0.2", "--ttft-ms", "5"]  # fmt: skip
    sim = sims([*roofline, "--num-spec-tokens", "2", "--acceptance", "0.7", "--seed", "7"])
    alarms, stderr = run(sim.url, tmp_path / "run", 1_000, ["--concurrency", "64"])
    assert alarms == [] and alarm_lines(stderr) == []


def test_acceptance_zero_is_a_garbled_drafter(sims, tmp_path):
    sim = sims([*SIM, "--acceptance", "0"])  # every draft rejected: acceptance length 1.0
    alarms, stderr = run(sim.url, tmp_path / "run", 30, ["--concurrency", "1"])
    assert [(a["name"], a["since_request"], a["active"]) for a in alarms] == [
        ("garbled_drafter", 20, True)  # the 20th request completes the window
    ]
    assert "acceptance length 1.00 over the last 20 requests" in alarms[0]["message"]
    (line,) = alarm_lines(stderr)
    assert line.startswith(f"specmon: ALARM garbled_drafter [{sim.url}] since request 20: ")


def test_acceptance_one_is_degenerate_repetition(sims, tmp_path):
    sim = sims([*SIM, "--acceptance", "1"])  # every draft accepted: k + 1 per step
    alarms, stderr = run(sim.url, tmp_path / "run", 30, ["--concurrency", "1"])
    assert [(a["name"], a["since_request"]) for a in alarms] == [("degenerate_repetition", 20)]
    assert len(alarm_lines(stderr)) == 1


def test_a_drop_in_acceptance_is_drift(sims, tmp_path):
    # 100 requests at 0.9 (AL about 3.3), then 100 at 0.3 (about 1.4): the baseline is the
    # first 100; the windows of 30 are looked at from request 130 on, all 0.3 by then
    sim = sims([*SIM, "--category-acceptance", "easy=0.9,hard=0.3"])
    order = two_phase_file(tmp_path / "q.jsonl", "easy", "hard", 100)
    alarms, stderr = run(sim.url, tmp_path / "run", 160, order)
    assert [a["name"] for a in alarms] == ["acceptance_drift"]
    assert alarms[0]["since_request"] == 130 and alarms[0]["active"]
    assert "below the run's baseline" in alarms[0]["message"]
    assert len(alarm_lines(stderr)) == 1


def test_acceptance_up_with_flat_speed_is_speculation_not_paying(sims, tmp_path):
    # step time 0 and a 300 ms first token: a request's output tok/s is 32 / 0.3 s whatever
    # its acceptance, so acceptance rising (0.3 -> 0.9) buys no speed
    sim = sims([*SIM[:-4], "--ttft-ms", "300", "--step-ms", "0",
                "--category-acceptance", "low=0.3,high=0.9"])  # fmt: skip
    order = two_phase_file(tmp_path / "q.jsonl", "low", "high", 30)
    alarms, stderr = run(sim.url, tmp_path / "run", 60, order)
    assert [a["name"] for a in alarms] == ["speculation_not_paying"]
    assert alarms[0]["since_request"] == 60  # the first moment two full windows exist
    assert len(alarm_lines(stderr)) == 1
