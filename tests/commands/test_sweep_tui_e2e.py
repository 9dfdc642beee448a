"""End to end: `specmon sweep` against real `specmon sim` servers (k=0 baseline and k=2,
concurrency 1 and 4) in a tmux pane opens the live sweep view; the grid fills in, q closes
it, and the command then writes sweep.json with the decisions and prints the tables. A q
while a cell is measured stops the sweep and keeps the finished cells."""

from __future__ import annotations

import json
import re
import shlex
import statistics
import sys
from pathlib import Path

import pytest
from support.tmux_pane import Pane

pytestmark = pytest.mark.e2e

SIM = "{python} -m specmon sim --port {port} --step-ms 2"


def sweep_command(art: Path, repeats: int, requests: int) -> str:
    argv = [
        sys.executable, "-m", "specmon", "sweep",
        "--serve", SIM + " --num-spec-tokens {k}",
        "--baseline-serve", SIM + " --num-spec-tokens 0",
        "--num-spec-tokens", "2", "--concurrency", "1,4", "--repeats", str(repeats),
        "--segment-requests", str(requests), "--warmup-request-count", "0",
        "--output-tokens-mean", "16", "--artifact-dir", str(art),
    ]  # fmt: skip
    return " ".join(shlex.quote(a) for a in argv) + "; echo SPECMON-EXITED $?; sleep 60"


def test_sweep_view_fills_in_and_q_writes_the_decisions(tmp_path: Path):
    art = tmp_path / "sweep"
    pane = Pane(sweep_command(art, repeats=2, requests=6), width=120, height=36)
    try:
        screen = pane.wait_for(lambda t: "sweep finished · 4/4 cells" in t, "the finish", 240)
        assert "Sweep · output tok/s, median ± MAD" in screen
        assert "Spec decode · k=2 concurrency=4 repeat 2" in screen  # the last repeat's session
        pane.keys("q")
        done = pane.wait_for(lambda t: "SPECMON-EXITED" in t, "the exit", 120)
    finally:
        pane.close()
    assert "SPECMON-EXITED 0" in done
    assert "schedule (num_speculative_tokens_per_batch_size" in done  # tables after the screen
    doc = json.loads((art / "sweep.json").read_text())
    assert doc["complete"] is True
    cells = {(c["k"], c["concurrency"]): c for c in doc["cells"]}
    assert set(cells) == {(0, 1), (0, 4), (2, 1), (2, 4)}
    # the screen's grid showed each cell's median ± MAD of its two repeats
    for cell in cells.values():
        tput = [r["output_token_throughput"] for r in cell["repeats"]]
        med = statistics.median(tput)
        mad = statistics.median(abs(v - med) for v in tput)
        assert f"{med:.1f} ± {mad:.1f}" in screen, (cell["k"], cell["concurrency"])
    # the decision row on screen is the one written
    picks = {d["concurrency"]: d["selected_k"] for d in doc["decisions"]}
    row = next(line for line in screen.splitlines() if line.startswith("│ selected k"))
    shown = re.findall(r"k=(\d+)", row)
    # a load whose cells the health gates refused (a busy machine: 2 repeats of 6 requests can
    # spread past the stability limit) has no selected k and shows none
    assert [int(k) for k in shown] == [k for k in (picks[1], picks[4]) if k is not None]


def test_q_mid_sweep_keeps_the_finished_cells(tmp_path: Path):
    art = tmp_path / "sweep"
    pane = Pane(sweep_command(art, repeats=3, requests=40), width=120, height=36)
    try:
        pane.wait_for(lambda t: "measuring k=2 concurrency=1" in t, "the k=2 row", 240)
        pane.keys("q")
        done = pane.wait_for(lambda t: "SPECMON-EXITED" in t, "the exit", 120)
    finally:
        pane.close()
    assert "SPECMON-EXITED 130" in done  # stopped, as after Ctrl-C
    doc = json.loads((art / "sweep.json").read_text())
    assert doc["complete"] is False
    kept = {(c["k"], c["concurrency"]) for c in doc["cells"]}
    assert {(0, 1), (0, 4)} <= kept and (2, 4) not in kept
    assert all(len(c["repeats"]) == 3 for c in doc["cells"])
