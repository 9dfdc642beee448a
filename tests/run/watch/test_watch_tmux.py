"""`specmon watch` in its TUI, in tmux, against a `specmon sim` loaded by a separate headless
specmon process: the headline's server-wide acceptance length equals 1 + Δaccepted / Δdrafts
of the simulator's own counters (scraped here; docs/metrics.md §11), and q leaves
watch_timeseries.csv."""

from __future__ import annotations

import csv
import os
import re
import shlex
import signal
import sys
from pathlib import Path

import pytest
from support.tmux_pane import Pane
from support.waiting import poll

from run.watch.test_watch import SIM_ARGS, TIMEOUT_S, _load
from specmon.run.watch.runner import CSV_NAME
from specmon.server.scrape import fetch_counters

pytestmark = pytest.mark.e2e
HEADLINE_AL = re.compile(r"^ AL N/A  tok-wtd AL (\d+\.\d\d) ", re.M)  # pooled: 1 + ΣA/ΣD


def test_watch_tui_shows_the_counter_deltas_and_quits_with_q(tmp_path: Path, sims):
    out = tmp_path / "watch"
    sim = sims(SIM_ARGS)
    before = fetch_counters(sim.url).totals()  # a fresh simulator: all zero
    command = shlex.join(
        [sys.executable, "-m", "specmon", "watch", "--url", sim.url, "--interval", "0.3"]
        + ["--artifact-dir", str(out)]
    )
    pane = Pane(f"{command}; echo WATCH-EXIT $?; sleep 60", 160, 48)
    try:
        pane.wait_for(lambda t: "watch mode: no requests of its own" in t, "the watch TUI")
        _load(sim.url, tmp_path / "load", 120)  # a separate specmon process, to the end
        after = fetch_counters(sim.url).totals()
        drafts = after["drafts"] - before["drafts"]
        expected = 1 + (after["accepted"] - before["accepted"]) / drafts
        want = f"{expected:.2f}"
        steps = f"{drafts:,} steps server-wide"

        def final_scrape_shown(t: str) -> bool:
            # both at once: a scrape taken while the load was ending can round to the
            # same AL with fewer steps (seen under a busy core)
            m = HEADLINE_AL.search(t)
            return m is not None and m.group(1) == want and steps in t

        pane.wait_for(final_scrape_shown, f"tok-wtd AL {want} and {steps} on the screen")
        pane.keys("q")
        done = pane.wait_for(lambda t: "WATCH-EXIT" in t, "the watch to exit", timeout=30)
        assert "WATCH-EXIT 0" in done and "written to" in done
        rows = poll(lambda: _csv_rows(out / CSV_NAME), timeout=5)
    finally:
        pane.close()
    assert float(rows[-1]["total_acceptance_length"]) == pytest.approx(expected, abs=1e-6)
    assert int(rows[-1]["total_drafts"]) == drafts


def _csv_rows(path: Path) -> list[dict] | None:
    """The CSV's rows once the watch has exited (the closing line is printed after it)."""
    if not path.exists():
        return None
    rows = list(csv.DictReader(path.open()))
    return rows if rows and rows[-1]["total_drafts"] not in ("", "0") else None


def test_sigterm_ends_the_watch_tui_with_its_files(tmp_path: Path, sims):
    """A SIGTERM (or the terminal's SIGHUP) ends the watch TUI, not just its scrape loop."""
    out, pidfile = tmp_path / "watch", tmp_path / "watch.pid"
    sim = sims(SIM_ARGS)
    command = shlex.join(
        [sys.executable, "-m", "specmon", "watch", "--url", sim.url, "--interval", "0.3"]
        + ["--artifact-dir", str(out)]
    )
    inner = shlex.quote(f"echo $$ > {shlex.quote(str(pidfile))}; exec {command}")
    pane = Pane(f"sh -c {inner}; echo WATCH-EXIT $?; sleep 60", 120, 36)
    try:
        pane.wait_for(lambda t: "watch mode: no requests of its own" in t, "the watch TUI")
        poll(lambda: _data_rows(out / CSV_NAME) >= 2, TIMEOUT_S)
        os.kill(int(pidfile.read_text()), signal.SIGTERM)
        done = pane.wait_for(lambda t: "WATCH-EXIT" in t, "the watch to exit", timeout=30)
    finally:
        pane.close()
    assert "WATCH-EXIT 143" in done and "written to" in done  # 128 + SIGTERM (docs/monitoring.md)
    assert _data_rows(out / CSV_NAME) >= 2


def _data_rows(path: Path) -> int:
    return len(list(csv.DictReader(path.open()))) if path.exists() else 0
