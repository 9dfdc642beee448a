"""SVG snapshots of the monitor (pytest-textual-snapshot), fed a deterministic recorded run.

The clock is frozen (freeze_elapsed) and the accumulator is not live, so every run renders
the same screen. Update baselines with `pytest tests/tui/screens/test_tui_snapshots.py --snapshot-update`
after checking the new SVGs by eye.
"""

from __future__ import annotations

import pytest
from support.tui_fixtures import accumulate, run_captures, session_view
from support.tui_tuning_fixtures import one_server_app, three_server_app

from specmon.tui.app import SpecmonApp


@pytest.fixture(autouse=True)
def _colour(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)


def recorded_app() -> SpecmonApp:
    return SpecmonApp(
        session_view(accumulate(run_captures(60))), None, None, source="replay", freeze_elapsed=15.0
    )


def test_main_80x24(snap_compare):
    assert snap_compare(recorded_app(), terminal_size=(80, 24))


def test_main_100x30(snap_compare):
    """Compact too (< 36 rows): headline, histogram + positions, series, log."""
    assert snap_compare(recorded_app(), terminal_size=(100, 30))


@pytest.mark.parametrize("panel", range(1, 8))  # 8 needs several servers: test_three_servers
def test_maximized_panel_80x24(snap_compare, panel):
    """Each panel maximized fills the screen under the header (the footer stays)."""
    assert snap_compare(recorded_app(), terminal_size=(80, 24), press=[str(panel)])


def test_monochrome_80x24(snap_compare, monkeypatch):
    """NO_COLOR selects the monochrome theme; meaning is carried by bold/reverse/dim."""
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(recorded_app(), terminal_size=(80, 24))


def test_three_servers_80x24(snap_compare):
    app, _ = three_server_app()
    assert snap_compare(app, terminal_size=(80, 24))


def test_main_120x36(snap_compare):
    """Medium under 44 rows: the percentile table waits for key 1; series and latency shown."""
    assert snap_compare(recorded_app(), terminal_size=(120, 36))


def test_main_160x48(snap_compare):
    assert snap_compare(recorded_app(), terminal_size=(160, 48))


def test_drill_down(snap_compare):
    async def open_first(pilot):
        await pilot.press("home", "enter")  # req-0001 has per-step arrays (detailed level)
        await pilot.pause()

    assert snap_compare(recorded_app(), terminal_size=(120, 36), run_before=open_first)


def test_help(snap_compare):
    assert snap_compare(recorded_app(), terminal_size=(100, 30), press=["question_mark"])


def test_explain(snap_compare):
    assert snap_compare(recorded_app(), terminal_size=(100, 30), press=["e"])


def test_paused(snap_compare):
    assert snap_compare(recorded_app(), terminal_size=(100, 30), press=["p"])


def test_whatif_maximized(snap_compare):
    """Key 6 on h=[2,2,4,6,2] at k=4 (numbers by hand in test_tui_tuning.py)."""
    assert snap_compare(one_server_app(), terminal_size=(100, 30), press=["6"])


def test_three_servers_160x48(snap_compare):
    """k=2, 4, 6 side by side, each with its what-if answer; panels show k2."""
    app, _ = three_server_app()
    assert snap_compare(app, terminal_size=(160, 48))


def test_three_servers_100x30(snap_compare):
    """The small layout: servers as a one-line strip."""
    app, _ = three_server_app()
    assert snap_compare(app, terminal_size=(100, 30))


def test_three_servers_maximized_8_100x30(snap_compare):
    app, _ = three_server_app()
    assert snap_compare(app, terminal_size=(100, 30), press=["8"])
