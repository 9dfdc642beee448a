"""build_model (specmon/tui/model/): every figure the main screen shows, computed without a
terminal. The histograms are the tuning fixtures' (hand sums below); the numbers are
checked against those sums, not against the code's output."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import pytest
from support.tui_fixtures import accumulate
from support.tui_tuning_fixtures import (
    H2,
    H4,
    H6,
    StubMulti,
    StubPoller,
    capture_k,
    delta_of,
    run_config,
    session_of,
)

from specmon.capture import RawCapture
from specmon.pipeline import process_capture
from specmon.tui.model import Choices, ModelCache, ScreenInputs, acceptance_of, build_model, tuning
from specmon.tui.modes import LIVE, REPLAY, WATCH, Mode, mode_of
from specmon.tui.tuning_view import counter_status

# H4 = [2, 2, 4, 6, 2] at k = 4: 16 verify steps, 0*2 + 1*2 + 2*4 + 3*6 + 4*2 = 36 accepted
# drafts of 4 * 16 = 64 drafted: AL 1 + 36/16 = 3.25, acceptance 36/64 = 56.25 %
H4_PAIRS = ((0, 2), (1, 2), (2, 4), (3, 6), (4, 2))


class Screen:
    """What MainScreen keeps between ticks: the inputs, the user's choices (replaced by a
    key, never changed), the builder's cache and the last model."""

    def __init__(self, run, session, config, mode: Mode = LIVE) -> None:
        self.inputs = ScreenInputs.of(run, run, session, config, mode)
        self.choices = Choices.of(config)
        self.cache = ModelCache()
        self.last = None

    def build(self, now: float, mode: Mode | None = None):
        if mode is not None:
            self.inputs = replace(self.inputs, mode=mode)
        self.last = build_model(self.inputs, self.choices, self.cache, now, self.last)
        return self.last


def one_server(hist: list[int] | None = H4, pollers: dict | None = None):
    session = session_of([capture_k(1, hist, 4)])
    run = StubMulti({"run": session}, pollers)
    return run, Screen(run, session, run_config())


def test_one_server_figures_follow_the_histogram():
    _, screen = one_server()
    model = screen.build(now=100.0)
    f = model.figures
    assert f.acceptance.histogram == H4_PAIRS and f.acceptance.k == 4
    assert not f.acceptance.server_wide and f.acceptance.steps == 16
    assert f.headline.al_token_weighted == pytest.approx(3.25)
    assert f.headline.al == pytest.approx(3.25)  # one request: its own AL
    assert f.headline.overall_rate_pct == pytest.approx(56.25)
    assert f.headline.basis.startswith("16 steps")
    assert model.header.k == 4 and model.header.completed == 1
    assert model.header.load == "concurrency 4" and model.header.mode.badge is None
    assert f.whatif_subtitle == "c=0.10 (assumed; +/- 0.01)"
    assert model.title_suffixes() == {"panel-hist": "", "panel-plot": " · window 10 s (w)"}


def test_the_1hz_views_come_once_a_second():
    _, screen = one_server()
    first = screen.build(now=100.0)
    assert first.tuning is not None
    assert first.tuning.counter_lines == (
        "server /metrics: not polled (no counters or polling off)",
    )
    assert first.tuning.segments is not None and len(first.tuning.segments.cells) == 1
    assert screen.build(now=100.5).tuning is None
    assert screen.build(now=101.0).tuning is not None


def test_figures_are_kept_until_something_they_show_moves():
    _, screen = one_server()
    first = screen.build(now=100.0)
    again = screen.build(now=100.2)
    assert again.figures is first.figures and not again.changed
    given = screen.choices
    # + : the user's cost, 0.10 -> 0.11; a new Choices, the old one as it was
    screen.choices = replace(given, draft_cost=given.draft_cost.step(1))
    moved = screen.build(now=100.4)
    assert moved.changed and moved.figures.whatif_subtitle == "c=0.11 (given; +/- 0.01)"
    assert given.draft_cost.value == 0.10 and first.figures.whatif_subtitle.startswith("c=0.10")
    screen.choices = replace(screen.choices, window_index=1)
    assert screen.build(now=100.6).figures.plot.window_s == 60.0


def test_the_same_inputs_and_choices_give_the_same_figures_from_a_fresh_cache():
    """build_model is a function of the run and the choices: a second builder with its own
    cache computes equal figures (the cache only skips work)."""
    run, screen = one_server()
    screen.choices = replace(screen.choices, window_index=2)
    kept = screen.build(now=100.0)
    fresh = build_model(screen.inputs, screen.choices, ModelCache(), now=100.0)
    assert fresh.figures == kept.figures and fresh.header == kept.header


def test_the_series_come_at_most_once_a_second_unless_the_window_moves(monkeypatch):
    # the segments table refreshes at every build: its spacing follows the wall time of its
    # last call (SEGMENTS_DUTY), so on a busy machine its rows caught up with the second
    # result only at 102.2, and the figures moved there (CI, 2026-12-06)
    monkeypatch.setattr(tuning, "SEGMENTS_DUTY", math.inf)
    run, screen = one_server()
    first = screen.build(now=100.0)
    assert first.series is not None  # the first tick draws panel 3
    # 10 s window, whole 0.25 s bins: one request, so one column holds its AL 1 + 36/16
    assert [v for v in first.series(40, 0.0)["al"] if v is not None] == pytest.approx([3.25])
    session = screen.inputs.servers[0][1]
    session.accumulator.add(process_capture(RawCapture.from_dict(capture_k(2, H4, 4))))
    assert screen.build(now=100.5).series is None  # a new result, under a second since
    assert screen.build(now=101.0).series is not None  # a second on: due
    assert screen.build(now=101.1).series is None  # nothing moved since
    # nothing lands, but the run goes on: a second on the series come again, so a stall
    # shows as it happens (its columns marked, the last window's tok/s falling)
    stalled = screen.build(now=102.2)
    assert stalled.series is not None and not stalled.changed
    screen.choices = replace(screen.choices, window_index=1)
    assert screen.build(now=102.3).series is not None  # w: at once


def test_a_finished_runs_series_come_once_and_again_when_not_shown():
    """A finished run hands panel 3's series out once (nothing can move them); a hand-out
    the screen could not paint (a tick before its panels were mounted, seen in CI as a
    snapshot's panel 3 at "no data") is handed out again at the next build."""
    run, screen = one_server()
    run.finished = True
    assert screen.build(now=100.0).series is not None
    assert screen.build(now=105.0).series is None  # finished, nothing moved: not again
    screen.cache.series_unshown()  # what MainScreen does when a paint found no widgets
    again = screen.build(now=105.1).series
    assert again is not None
    assert [v for v in again(40, 0.0)["al"] if v is not None] == pytest.approx([3.25])


def test_no_per_request_records_fall_back_to_the_server_counters():
    _, screen = one_server(None, {"run": StubPoller(delta_of(H4))})
    model = screen.build(now=100.0)
    f = model.figures
    assert f.acceptance.server_wide and f.acceptance.histogram == H4_PAIRS
    assert f.acceptance.k == 4 and f.acceptance.acceptance_length == pytest.approx(3.25)
    # the headline's pooled figures from the counters; the per-request mean needs requests
    assert f.headline.al_token_weighted == pytest.approx(3.25)
    assert f.headline.overall_rate_pct == pytest.approx(56.25) and f.headline.al is None
    assert f.headline.basis.startswith("16 steps server-wide (/metrics)")
    assert model.title_suffixes()["panel-hist"] == " · server-wide (/metrics)"


def test_only_a_mode_that_sends_requests_reconciles_with_the_counters():
    for mode, reconciles in ((LIVE, True), (WATCH, False)):
        _, screen = one_server(None, {"run": StubPoller(delta_of(H4))})
        tuning = screen.build(now=100.0, mode=mode).tuning
        assert tuning is not None
        said = any(line.startswith("reconciliation") for line in tuning.counter_lines)
        assert said is reconciles, (mode.name, tuning.counter_lines)
    header = screen.build(now=200.0, mode=WATCH).header
    assert header.mode.badge == "watch"


def test_paused_only_the_header_counts_arrivals():
    _, screen = one_server()
    before = screen.build(now=100.0)
    accumulator = screen.inputs.servers[0][1].accumulator
    screen.choices = replace(screen.choices, paused_at=len(accumulator.results))
    accumulator.add(process_capture(RawCapture.from_dict(capture_k(2, H4, 4))))
    paused = screen.build(now=102.0)
    assert paused.paused and paused.header.paused_arrivals == 1
    assert paused.header.completed == 1  # the snapshot from before the pause
    assert paused.figures is before.figures and paused.tuning is None and paused.series is None
    screen.choices = replace(screen.choices, paused_at=None)
    assert screen.build(now=102.1).header.completed == 2  # unpaused: caught up at once


def test_three_servers_cards_and_header():
    # H2 = [1, 1, 2] at k=2: 4 steps, 5 accepted, AL 1 + 5/4 = 2.25;
    # H6 = [1, 0, 0, 0, 0, 0, 3] at k=6: 4 steps, 18 accepted, AL 1 + 18/4 = 5.5
    sessions = {
        "k2": session_of([capture_k(1, H2, 2)]),
        "k4": session_of([capture_k(1, H4, 4)]),
        "k6": session_of([capture_k(1, H6, 6)]),
    }
    run = StubMulti(sessions)
    screen = Screen(run, sessions["k2"], run_config())
    model = screen.build(now=100.0)
    assert model.header.k == "2,4,6 · showing k2 ([ ] switch)"
    assert model.tuning is not None
    cards = model.tuning.cards
    assert [c.label for c in cards] == ["k2", "k4", "k6"] and [c.k for c in cards] == [2, 4, 6]
    assert [c.acceptance_length for c in cards] == pytest.approx([2.25, 3.25, 5.5])
    assert model.server_latency is not None
    assert [label for label, _ in model.server_latency] == ["k2", "k4", "k6"]
    screen.choices = replace(screen.choices, selected=2)
    shown = screen.build(now=100.1).figures
    assert shown.acceptance.k == 6 and shown.acceptance.steps == 4


def test_one_acceptance_source_for_panels_and_cards():
    snap = accumulate([capture_k(1, H2, 2)]).snapshot()
    counters = counter_status(StubPoller(delta_of(H4)).latest(), snap)
    # requests carry records: theirs, whatever the server says
    mine = acceptance_of(snap, counters)
    assert mine.histogram == ((0, 1), (1, 1), (2, 2)) and not mine.server_wide
    empty = accumulate([capture_k(1, None, 4)]).snapshot()
    theirs = acceptance_of(empty, counters)
    assert theirs.server_wide and theirs.histogram == H4_PAIRS
    assert acceptance_of(empty, None).histogram == ()


def test_modes_by_name():
    assert mode_of("watch") is WATCH and mode_of(REPLAY) is REPLAY
    assert LIVE.drives_load and not REPLAY.drives_load and not WATCH.has_requests
    with pytest.raises(ValueError, match="unknown monitor mode 'bogus'"):
        mode_of("bogus")


@pytest.mark.e2e  # a new process
def test_the_model_imports_no_textual():
    """The screen model, the modes and the fitter are plain Python (a new process, so no
    other test's imports count)."""
    import subprocess
    import sys

    code = (
        "import sys, specmon.tui.model, specmon.tui.modes, specmon.tui.fit; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_the_header_clock_stops_when_the_run_ends():
    # a live accumulator: its clock is the time since it was created
    session = SimpleNamespace(accumulator=accumulate([capture_k(1, H4, 4)], live=True))
    session.artifact_dir = session.spec_method = None
    run = StubMulti({"run": session})
    screen = Screen(run, session, run_config())
    first = screen.build(now=100.0).header.elapsed_s
    run.finished = True
    ended = screen.build(now=100.1).header.elapsed_s
    assert ended >= first and screen.cache.ended_at_s == ended
    later = screen.build(now=105.0).header
    assert later.elapsed_s == ended and later.finished  # stopped, and the header says done
