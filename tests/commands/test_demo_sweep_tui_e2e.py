"""End to end: `specmon demo --sweep` in an 80x24 tmux pane (issue 20 item 6): the live view
shows the schedule arm's row (the demo runs --verify-schedule) filling in with its median ±
MAD once the grid is done, and the "vs best k" row under it; q closes the view and the
command prints the arms table. The demo's grid is cut to k=2 against the k=0 baseline at
concurrency 1 and 4 with half-second segments (the wiring is under test, not the figures)."""

from __future__ import annotations

import json
import re
import shlex
import statistics
from pathlib import Path

import pytest
from support.sweep_fakes import NO_FIDELITY_GATE, sweep_argv
from support.tmux_pane import Pane

pytestmark = pytest.mark.e2e

PRELUDE = NO_FIDELITY_GATE + (
    "import specmon.commands.demo as s; "
    "s.DEMO_KS = [2]; s.DEMO_CONCURRENCY = [1, 4]; s.DEMO_SEGMENT_DURATION_S = 0.5"
)


def fig(value: float) -> str:
    """A figure as the narrow view prints it (tui/sweep_view.py cell_text, compact)."""
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.1f}"


def test_demo_sweep_shows_the_schedule_arm_row_at_80x24(tmp_path: Path) -> None:
    art = tmp_path / "sweep"
    argv = sweep_argv(["--sweep", "--artifact-dir", str(art)], "demo", PRELUDE)
    command = " ".join(shlex.quote(a) for a in argv) + "; echo SPECMON-EXITED $?; sleep 60"
    pane = Pane(command, width=80, height=24)
    try:
        screen = pane.wait_for(lambda t: "sweep finished" in t, "the finish", 500)
        pane.keys("q")
        done = pane.wait_for(lambda t: "SPECMON-EXITED" in t, "the exit", 120)
        history = pane.text(history=True)
    finally:
        pane.close()
    assert "SPECMON-EXITED 0" in done
    doc = json.loads((art / "sweep.json").read_text())
    (arm,) = doc["arms"]
    assert arm["name"] == "schedule"
    arm_cells = {c["concurrency"]: c for c in doc["arm_cells"]}
    row = next(line for line in screen.splitlines() if "arm schedule" in line)
    # the row shows each arm cell's median ± MAD (80 columns: no decimals from 100 up)
    for c in (1, 4):
        tput = [r["output_token_throughput"] for r in arm_cells[c]["repeats"]]
        med = statistics.median(tput)
        mad = statistics.median(abs(v - med) for v in tput)
        assert f"{fig(med)} ± {fig(mad)}" in row, (c, row)
    vs = next(line for line in screen.splitlines() if "vs best k" in line)
    shown = re.findall(r"[+-]\d+\.\d% \(k=\d\)", vs)
    written = [
        f"{p['vs_best_k_percent']:+.1f}% (k={p['best_k']})"
        for p in arm["points"]
        if p["vs_best_k_percent"] is not None
    ]
    assert shown == written, (vs, written)
    # no figure cut at 80 columns (a panel title may give way; a number never)
    assert not re.search(r"\d…", "\n".join(screen.splitlines()[1:])), screen
    assert "arms (median output tok/s" in history  # the table printed after the view
