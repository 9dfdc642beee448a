"""The live sweep view (issue 11 item 8): cells fed through SweepRunner's on_cell hook fill
the grid with their medians ± MAD (checked against hand arithmetic), the decision row forms
from them, the current cell and repeat are marked, and the current repeat's session fills
the acceptance panels. A snapshot pins the layout; q stops the runner (RunControl.stop)."""

from __future__ import annotations

import io
import signal

from support.exact_bootstrap import ratio_ranges, score
from support.tui_screen import screen_text
from support.tui_tuning_fixtures import H2, capture_k, session_of

from specmon.config import RunConfig
from specmon.decision.sweep_types import Cell, RepeatMeasurement
from specmon.run.assemble import make_repeat
from specmon.run.sweep.control import SweepControl
from specmon.run.sweep.measure import SweepNow
from specmon.run.sweep.runner import SweepRunner
from specmon.run.sweep.settings import SweepSettings
from specmon.tui.sweep_app import SweepApp
from specmon.tui.sweep_view import grid_view, log_tail, status_line

SERVE = "{python} -m specmon sim --port {port} --num-spec-tokens {k}"


def repeats(*tputs: float) -> list[RepeatMeasurement]:
    return [RepeatMeasurement(t, 1.0, 8, acceptance_length=2.0) for t in tputs]


def fake_control(tmp_path) -> tuple[SweepControl, SweepRunner]:
    settings = SweepSettings(
        ks=[2],
        concurrencies=[1, 4],
        serve=SERVE,
        baseline_serve="{python} -m specmon sim --port {port} --num-spec-tokens 0",
        repeats=3,
        segment_requests=8,
    )
    runner = SweepRunner(
        settings, RunConfig(), tmp_path / "sweep", make_repeat=make_repeat, out=io.StringIO()
    )
    return SweepControl(runner), runner


def feed(runner: SweepRunner) -> None:
    """Three finished cells through the hook; k=2 at concurrency 4 is being measured."""
    # k=0 c=1: [100, 110, 90] -> median 100, MAD median(0, 10, 10) = 10
    # k=2 c=1: [150, 152, 148] -> median 150, MAD 2
    # k=0 c=4: [300, 300, 300] -> median 300, MAD 0
    assert runner.on_cell is not None
    runner.on_cell(Cell(0, 1, repeats(100, 110, 90)))
    runner.on_cell(Cell(2, 1, repeats(150, 152, 148)))
    runner.on_cell(Cell(0, 4, repeats(300, 300, 300)))
    runner.now = SweepNow("measuring", 2, 4, 2, 3, session=session_of([capture_k(1, H2, 2)]))


def test_grid_view_by_hand(tmp_path):
    control, runner = fake_control(tmp_path)
    feed(runner)
    view = grid_view([0, 2], [1, 4], control.cells(), runner.now)
    assert view.headers == ("k", "c=1", "c=4")
    assert view.rows == (
        ("k=0", "100.0 ± 10.0", "300.0 ± 0.0"),
        ("k=2", "150.0 ± 2.0", "▶ repeat 2/3"),
    )
    # scores: k0 c1 100 - 1.4826*10 = 85.174; k2 c1 150 - 2.9652 = 147.0348 -> k=2,
    # vs k=0 147.0348/85.174 = 1.72628 -> +72.6%; c4 has only k=0 so far: k=0, +0.0%
    assert view.decision == ("selected k", "k=2", "k=0")
    # with its 90% interval over bootstrap draws of the repeats (c=4: k=0 alone, no margin)
    label, c1, c4 = view.speedup
    assert (label, c4) == ("vs k=0", "+0.0%") and c1.startswith("+72.6% [")
    low, high = (float(x) for x in c1.split("[")[1].rstrip("]").split(".."))
    (lo_a, lo_b), (hi_a, hi_b) = ratio_ranges((148, 150, 152), (90, 100, 110), score)
    # the column prints whole percents
    assert round(100 * lo_a) <= low <= round(100 * lo_b)
    assert round(100 * hi_a) <= high <= round(100 * hi_b)
    # over the runner-up (k=0, by medians): 150 / 100 - 1 = +50.0%
    assert view.margin[0] == "over runner-up" and view.margin[1].startswith("+50.0% [")
    assert view.margin[2] == "-"
    assert view.current == (1, 1) and view.selected == (1, 0)
    assert status_line(runner.now, 3, 4) == "measuring k=2 concurrency=4 repeat 2/3 · 3/4 cells"


def test_unstable_error_and_starting_cells(tmp_path):
    # [100, 130, 80]: median 100, MAD median(0, 30, 20) = 20 -> relative 0.2 > 0.1: unstable
    cells = [Cell(0, 1, repeats(100, 130, 80)), Cell(2, 1, error="server died")]
    log = tmp_path / "server-k2.log"
    log.write_text("".join(f"line {i}\n" for i in range(20)))
    now = SweepNow("starting", 2, repeats=3, log_path=log)
    view = grid_view([0, 2, 4], [1], cells, now)
    assert view.rows == (("k=0", "100.0 ± 20.0 !"), ("k=2", "error"), ("k=4", "·"))
    # the only measured cell is unstable: nothing selectable
    assert view.decision == ("selected k", "-") and view.selected == (-1,)
    now4 = SweepNow("starting", 4, repeats=3, log_path=log)
    assert grid_view([0, 2, 4], [1], cells, now4).rows[2] == ("k=4", "starting")
    assert log_tail(log, 3) == "line 17\nline 18\nline 19"
    assert status_line(now, 2, 3).startswith("k=2: starting the server")


async def test_sweep_view_pilot_and_q_stops(tmp_path):
    control, runner = fake_control(tmp_path)
    feed(runner)
    app = SweepApp(control)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "100.0 ± 10.0" in text and "150.0 ± 2.0 *" in text  # * = selected at c=1
        assert "▶ repeat 2/3" in text
        assert "selected k" in text and "+72.6%" in text
        assert "measuring k=2 concurrency=4 repeat 2/3 · 3/4 cells" in text
        # the current repeat's session: H2 = [1, 1, 2] -> AL 1 + 5/4 = 2.25
        assert "Spec decode · k=2 concurrency=4 repeat 2" in text
        assert "2.25" in text
        await pilot.press("q")
        await pilot.pause()
    assert runner.stopping.is_set()  # q went through RunControl.stop()


async def test_c_shows_the_grid_as_curves_and_back(tmp_path):
    """`c`: the cell's panels give way to the curves of the cells measured so far (k=0 at
    c=1 and 4, k=2 at c=1: the medians 100, 300 and 150 by hand); `c` again brings them
    back. Cells landing while the curves are up are drawn at the next refresh."""
    from specmon.tui.widgets.sweep_curves import SweepCurves

    control, runner = fake_control(tmp_path)
    feed(runner)
    app = SweepApp(control)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        curves = app.query_one(SweepCurves)
        assert not curves.display or not curves.parent.display  # type: ignore[union-attr]
        await pilot.press("c")
        await pilot.pause()
        assert curves.curves == ((0, ((1, 100.0), (2, 300.0))), (2, ((1, 150.0),)))
        text = screen_text(app)
        assert "Sweep curves" in text and "Spec decode ·" not in text
        assert "k=0" in text and "k=2" in text and "by concurrency" in text
        runner.on_cell(Cell(2, 4, repeats(400, 400, 400)))  # type: ignore[misc]
        app.refresh_data()
        await pilot.pause()
        assert curves.curves[1] == (2, ((1, 150.0), (2, 400.0)))
        await pilot.press("c")
        await pilot.pause()
        text = screen_text(app)
        assert "Sweep curves" not in text and "Spec decode · k=2 concurrency=4" in text


def test_sweep_view_snapshot(snap_compare, tmp_path, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    control, runner = fake_control(tmp_path)
    feed(runner)
    runner.dir = runner.dir.relative_to(tmp_path)  # the header shows it: keep it fixed
    assert snap_compare(SweepApp(control), terminal_size=(120, 36))


async def test_a_repeat_shorter_than_a_refresh_still_shows_its_session(tmp_path):
    # the view samples on a timer; a repeat that started and ended between two samples
    # (the runner is already "done") is still the one whose panels and title are shown
    control, runner = fake_control(tmp_path)
    feed(runner)
    app = SweepApp(control)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        last = SweepNow("measuring", 2, 4, 3, 3, session=session_of([capture_k(1, H2, 2)]))
        runner.now = last  # started and ...
        runner.now = SweepNow("done", repeats=3)  # ... ended before the next refresh
        app.refresh_data()
        await pilot.pause()
        text = screen_text(app)
        assert "Spec decode · k=2 concurrency=4 repeat 3" in text
    assert runner.last_measured is last


async def test_s_saves_a_screenshot_of_the_sweep_view(tmp_path):
    """Every screen saves with `s` (issue 20 item 5): an SVG in the sweep's folder, mode
    0666 & ~umask like every export."""
    import os
    import stat

    control, runner = fake_control(tmp_path)
    feed(runner)
    old = os.umask(0o022)
    try:
        app = SweepApp(control)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            await pilot.press("s")
            await pilot.pause()
            await pilot.press("q")
    finally:
        os.umask(old)
    (svg,) = (tmp_path / "sweep").glob("*.svg")
    assert "k=0" in svg.read_text(encoding="utf-8")
    assert stat.S_IMODE(svg.stat().st_mode) == 0o644


async def test_sweep_view_at_80x24_cuts_no_figure_and_keeps_the_bars(tmp_path):
    """Issue 20 item 3: at 80x24 the cell's table cut every figure ("Accept Len 2.…") and the
    histogram lost its bars to the positions table. Now std, min and max give way and the
    positions hide under 100 columns. The repeat's session: H2 = [1, 1, 2] over 4 steps,
    AL 1 + (0 + 1 + 4) / 4 = 2.25; bucket 2 holds 2 of 4 steps = 50.0%."""
    control, runner = fake_control(tmp_path)
    feed(runner)
    app = SweepApp(control)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.pause()
        text = screen_text(app)
        await pilot.press("q")
    lines = text.splitlines()
    assert lines[0].rstrip().endswith("…")  # only the header's folder path gives way (no figure)
    assert "…" not in "\n".join(lines[1:])
    accept = next(line for line in text.splitlines() if "Accept Len" in line)
    assert accept.split("│")[1].split()[2:] == ["2.25"] * 4  # avg p99 p90 p50, whole
    assert "█" in text and "50.0%" in text  # the histogram's bars


async def test_the_sweep_view_keeps_sigcont_and_sigtstp_at_their_defaults(tmp_path):
    """The sweep view closes on a hangup as the monitor does; Textual's SIGCONT handler would
    start a second output thread there too (see the monitor's test in test_tui_app.py)."""

    def driver_like(signum, frame):  # stands in for the driver's resume handler
        raise AssertionError("never called")

    previous = {s: signal.signal(s, driver_like) for s in (signal.SIGCONT, signal.SIGTSTP)}
    try:
        control, _ = fake_control(tmp_path)
        async with SweepApp(control).run_test(size=(120, 36)) as pilot:
            await pilot.pause()
            assert signal.getsignal(signal.SIGCONT) is signal.SIG_DFL
            assert signal.getsignal(signal.SIGTSTP) is signal.SIG_DFL
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
