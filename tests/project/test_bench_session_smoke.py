"""Smoke runs of the session benchmarks (issue 19 items 1 and 6) with tiny counts: each
measures something real and prints it. No wall-clock thresholds.

bench_memory.py runs `specmon sim` and `specmon run --headless` as real processes and
ends by checking the summary against the JSONL; bench_startup.py spawns the console script
and reads its handlers from /proc.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"
pytestmark = pytest.mark.e2e


def run_script(name: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCH / name), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_bench_memory_samples_rss_and_finds_the_summary_exact():
    out = run_script(
        "bench_memory.py", "--requests", "1500", "--every", "500", "--output-tokens", "2"
    )
    rows = [line.split() for line in out.splitlines() if re.match(r"\s+[\d,]+\s+[\d.]+\s", line)]
    assert rows, out  # at least one sample (a fast run may pass several marks in one poll)
    for count, rss, *_ in rows:
        assert 500 <= int(count.replace(",", "")) <= 1500 and float(rss) > 10  # MB: a process
    assert "finished: 1,500 requests" in out
    assert "summary exact against the JSONL" in out


def test_bench_startup_times_the_first_handler_after_the_interpreter():
    script = shutil.which("specmon", path=str(Path(sys.executable).parent))
    assert script, "the venv has no specmon console script"
    out = run_script("bench_startup.py", "--repeats", "2", "--script", script)
    medians = dict(re.findall(r"^(interpreter|specmon)\s+median\s+([\d.]+) ms", out, re.M))
    assert set(medians) == {"interpreter", "specmon"}, out
    # the interpreter's own SIGINT handler comes first, specmon's handlers after it
    assert 0 < float(medians["interpreter"]) <= float(medians["specmon"])
