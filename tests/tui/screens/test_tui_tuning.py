"""Pilot tests for tuning k live (issue 5 in the TUI): the what-if panel and its +/- keys,
servers side by side with [ ] switching, the segment keys and table, the server-wide view.

Expected numbers are computed by hand in the comments from the formulas of docs/tuning.md §2-§5:
S_i = Σ_{j>=i} h_j / N, a_i = Σ_{j>=i} h_j / Σ_{j>=i-1} h_j, E(k') = 1 + S_1 + ... + S_k',
beyond k each position accepted with a_k, speedup = E(k') / (1 + c k').
"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from support.paths import ROOT
from support.tui_screen import screen_text, until
from support.tui_tuning_fixtures import (
    H4,
    StubMulti,
    StubPoller,
    capture_k,
    delta_of,
    one_server_app,
    run_config,
    session_of,
    three_server_app,
)

from specmon.capture import RawCapture
from specmon.session import RunSession
from specmon.tui.app import SpecmonApp
from specmon.tui.screens.detail import RequestDetail
from specmon.tui.screens.explain import ExplainScreen
from specmon.tui.screens.help import HelpScreen
from specmon.tui.tuning_view import DraftCost, next_setting

WIDE = (160, 48)
config = run_config
one_server = one_server_app
three_servers = three_server_app


def whatif_text(app: SpecmonApp) -> str:
    """The what-if panel's text only (the screen's other panels cut away), its lines
    joined by one space (the panel wraps its prose at word boundaries)."""
    panel = app.query_one("#panel-whatif").region
    lines = screen_text(app).splitlines()[panel.y : panel.bottom]
    return " ".join(line[panel.x : panel.right].strip("│ ") for line in lines)


def segment_best_k(app: SpecmonApp) -> str:
    """The 'best k' cell of the segments table's one row, as the screen shows it."""
    panel = app.query_one("#panel-segments").region
    lines = screen_text(app).splitlines()[panel.y : panel.bottom]
    row = next(line[panel.x : panel.right] for line in lines if "conc=4" in line)
    return row.strip(" │").split()[-1]


async def test_whatif_panel_by_hand():
    # h = [2,2,4,6,2], N = 16: tails 14, 12, 8, 2 -> S = .875 .750 .500 .125;
    # a = 14/16 .875, 12/14 .857, 8/12 .667, 2/8 .250. Wilson 95%, z^2 = 3.8415: 14/16 ->
    # centre (.875 + .12005)/1.24009 = .80239, half 1.58050*sqrt(.0068359 + .0037514) = .16263
    # -> .63977-.96502, shown .64-.97;
    # 2/8 -> centre (.25 + .2401)/1.4802 = .3311, half 1.3242*sqrt(.02344 + .01501) = .2596 -> .07-.59
    # E(1..4) = 1.875 2.625 3.125 3.25; c = 0.1: 1.875/1.1 = 1.70, 2.625/1.2 = 2.19,
    # 3.125/1.3 = 2.40, 3.25/1.4 = 2.32; E(5) = 3.25 + .125*.25 = 3.28, speedup 3.28125/1.5 =
    # 2.19 -> best k = 3 (2.40x). Band (tuning.predictions): E(4) +- 1.96 se, se^2 = var/N =
    # (23/16)/16 -> +-.58748; S_4 = 2/16 Wilson [.03498, .36023]; a_5 upper = max(a_4's .5907,
    # trend .22844 + 1.96*.17117 = .56393), lower = 0 (trend below 0):
    # 3.25 - .58748 + 0 = 2.66 ; 3.25 + .58748 + .36023*.5907 = 4.05
    app = one_server()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = screen_text(app)
        whatif = whatif_text(app)
    assert "6 What if k were different" in text
    assert "c=0.10 (assumed; +/- 0.01)" in text
    for row in (
        "1  0.875  0.875  [0.64-0.97]",
        "2  0.750  0.857",
        "3  0.500  0.667",
        "4  0.125  0.250  [0.07-0.59]",
    ):
        assert row in text, row
    for row in (
        "1   1.88                1.70",
        "3   3.12                2.40",
        "4   3.25                2.32",
        "5*   3.28  2.66-4.05        -",  # extrapolated: no plain speedup, never the pick
    ):
        assert row in text, row
    # the answer is the measured k=4 (out tok/s 260 = 52 tokens / 0.2 s); the model's pick,
    # k=3 at 2.40x over 2.32x at k=4 (+3.6%, shown +4%), is only its proposal
    assert (
        "measured k=4: 260 tok/s (the only k measured here) · k=4 measured over 16 steps" in whatif
    )
    assert "next: measure k=3, predicted +4% [" in text
    assert "histogram only, draft cost assumed 0.10" in text  # kchoice names its basis
    # the headline names the same answer and proposal (panel 2's title no longer repeats it)
    assert "k: measured k=4: 260 tok/s (the only k measured here)  16 steps" in text
    assert "16 steps · next: k=3 +4% [" in text  # short; the what-if has the whole line
    assert "batch size moves the best k" in text


async def test_draft_cost_keys_move_the_recommendation():
    # The answer is the measured k=4 whatever the cost; the cost moves the model's proposal.
    # c = 0.10 (assumed): 3.125/1.3 = 2.40 at k=3 over 3.25/1.4 = 2.32 -> propose k=3 (+4%).
    # c = 0.02 (eight presses of -): 3.125/1.06 = 2.948, 3.25/1.08 = 3.009, 3.28125/1.10 = 2.983
    # -> the model's best is the measured k=4: nothing to propose; one + back to 0.03:
    # 3.125/1.09 = 2.867, 3.25/1.12 = 2.902 -> still k=4.
    app = one_server()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        assert segment_best_k(app) == "4"
        assert "next: measure k=3, predicted +4% [" in whatif_text(app)
        await pilot.press(*["minus"] * 8)
        await pilot.pause()
        assert app.main.choices.draft_cost == DraftCost(0.02, False)
        text = screen_text(app)
        assert "c=0.02 (given; +/- 0.01)" in text and "measured k=4: 260 tok/s" in text
        assert "model: histogram only, draft cost given 0.02" in text
        assert "next: measure" not in whatif_text(app)  # +/- moved the proposal away
        assert segment_best_k(app) == "4"  # the measurement does not move
        await pilot.press("plus")
        await pilot.pause()
        assert "model: histogram only, draft cost given 0.03" in screen_text(app)
        shown = [n.message for n in app._notifications]
        assert (
            "draft cost c=0.03: what-if (6), server cards (8) and segments (7) re-advised" in shown
        )
        await pilot.press(*["minus"] * 4)  # 0.03 -> 0.00, then one press at the bound
        await pilot.pause()
        shown = [n.message for n in app._notifications]
        assert "draft cost c is already 0.00 (its range is 0-2)" in shown


async def test_draft_cost_seeded_from_config():
    # c = 0.25 (--draft-cost): 1.875/1.25 = 1.50, 2.625/1.5 = 1.75, 3.125/1.75 = 1.786,
    # 3.25/2.0 = 1.625 -> the model proposes k = 3 (1.786/1.625 = +9.9%) over the measured
    # k=4, and the cost is the user's, not assumed
    app = one_server(draft_cost=0.25)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = screen_text(app)
    assert "c=0.25 (given; +/- 0.01)" in text and "next: measure k=3, predicted +10% [" in text
    assert DraftCost(0.0, False).step(-1).value == 0.0  # never below zero


async def test_side_by_side_three_servers_and_switching():
    # k=2, h=[1,1,2], N=4: S = .75 .5, E = 1.75 2.25, a_2 = 2/3; E(3) = 2.25 + .5*2/3 = 2.583,
    #   E(4) = 2.583 + .5*4/9 = 2.806; c=.1: 1.591 1.875 1.987 2.004, E(5)/1.5 = 2.954/1.5 = 1.969
    #   -> best k=4 (2.00x, extrapolated)
    # k=6, h=[1,0,0,0,0,0,3]: S_i = .75 for i = 1..6, a_6 = 3/3 = 1, so E(k') = 1 + .75 k' and
    #   E/(1 + .1k') grows to k' = 10: 8.5/2.0 = 4.25 (extrapolated)
    # The servers share one load: the answer is the best measured arm, by output tok/s (one
    # 200 ms request each: tokens = sum (j+1) h_j = k2 9, k4 52, k6 22 -> 45, 260, 110 tok/s):
    # k=4, 260/110 - 1 = +136.4% over the runner-up k=6, on every card. The model (from the
    # widest-k histogram, k6's) proposes k=10 (E/(1 + .1k') grows to k'=10) as the next line.
    app, runner = three_servers()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "8 Servers side by side" in text
        assert "▶ k2 · k=2" in text and "k4 · k=4" in text and "k6 · k=6" in text
        assert text.count("answer: best k=4: 260 tok/s") == 3
        assert "k=2,4,6 · showing k2" in text
        # per-position S_i per server: k2 .75 .50; k4 .88 .75 .50 .12 (14/16 .875 -> .88)
        assert "S_i 0.75 0.50 " in text and "S_i 0.88 0.75 0.50 0.12 " in text
        assert "S_i 0.75 0.75 0.75 0.75 0.75 0.75" in text  # k6: 3 of 4 steps accept all 6
        whatif = whatif_text(app)
        assert "measured best k=4: 260 tok/s, +136.4% [" in whatif and "over k=6" in whatif
        assert "next: measure k=10, predicted" in whatif
        # the k2 server's caveat: k=10 is the model's, to be measured
        assert "k=10 is a prediction, not a measurement" in whatif
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert (
            app.main.choices.selected == 1
            and app.main.accumulator is runner.sessions["k4"].accumulator
        )
        text = screen_text(app)
        assert "▶ k4 · k=4" in text and "showing k4" in text
        assert "k=4 measured over 16 steps" in whatif_text(app)
        await pilot.press("left_square_bracket", "left_square_bracket")  # wraps to the last
        await pilot.pause()
        assert app.main.choices.selected == 2 and "k=6 measured over 4 steps" in whatif_text(app)


async def test_side_by_side_is_a_strip_on_a_small_terminal():
    app, _ = three_servers()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert app.screen.has_class("compact")
        line = next(l for l in text.splitlines() if "k4 k=4" in l)
        # every server on one line, each with its AL and the measured answer (1 + 36/16 =
        # 3.25); the answer's figure gives way so that the third server is whole
        assert "▶k2 k=2 AL 2.25 best k=4 │" in line  # one answer for all
        assert "k4 k=4 AL 3.25 best k=4 │" in line
        assert "k6 k=6 AL 5.50 best k=4 │" in line
        await pilot.press("6")  # the what-if panel, hidden in this layout, maximizes
        await pilot.pause()
        assert "6 What if k were different" in screen_text(app)


async def test_segment_keys_call_the_runner_and_the_table_grows():
    session = session_of([capture_k(1, H4, 4, segment=0)])
    runner = StubMulti({"run": session}, concurrency=4)
    app = SpecmonApp(session, runner, config(), freeze_elapsed=1.0)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "seg" in text and "conc=4 osl=128" in text
        await pilot.press("greater_than_sign")
        await pilot.pause()
        assert runner.calls == [("concurrency", 8)]
        # a request of the new segment lands: the table shows segment 1 with its settings;
        # AL = 1 + 36/16 = 3.25
        session.accumulator.add(_result(capture_k(2, H4, 4, segment=1)))
        app.main.cache.tune_now()  # the next tick, without waiting a second
        app.refresh_data()
        await pilot.pause()
        seg1 = next(l for l in screen_text(app).splitlines() if "conc=8" in l)
        assert seg1.split("│")[-2].split()[:1] == ["1"] and "3.25" in seg1
        await pilot.press("less_than_sign", "O", "o", "r")
        await pilot.pause()
    # r on a concurrency-driven run only explains itself: no call
    assert runner.calls == [
        ("concurrency", 8),
        ("concurrency", 4),
        ("output_tokens", 256),
        ("output_tokens", 128),
    ]


async def test_request_rate_keys_on_a_rate_run():
    session = session_of([capture_k(1, H4, 4)])
    runner = StubMulti({"run": session})
    app = SpecmonApp(session, runner, config(request_rate=2.0), freeze_elapsed=1.0)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("R", "r", "r")
        await pilot.pause()
    assert runner.calls == [("request_rate", 4.0), ("request_rate", 2.0), ("request_rate", 1.0)]
    assert next_setting(1, -1, integer=True) == 1  # concurrency never below 1


async def test_server_wide_fills_the_panels_when_no_response_has_stats():
    # Responses without the payload; the counters saw h = [2,2,4,6,2]: D = 16, P = [14,12,8,2],
    # accepted 36, draft tokens 64 -> AL 1 + 36/16 = 3.25, rate 36/64 = 56.2 %,
    # per position 14/16 .88, 12/16 .75, 8/16 .50, 2/16 .12; histogram 6 of 16 = 37.5 %
    session = session_of([capture_k(1, None, 4)])
    runner = StubMulti({"run": session}, pollers={"run": StubPoller(delta_of(H4))})
    app = SpecmonApp(session, runner, config(), freeze_elapsed=1.0)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = screen_text(app)
        whatif = whatif_text(app)
    assert "2 Accepted drafts per step · server-wide (/metrics)" in text
    assert "6  37.5%" in text and "2  12.5%" in text
    assert "AL 3.25 · draft acceptance 56.2% · 16 steps" in text
    assert "per position: 0.88 0.75 0.50 0.12" in text
    assert "reconciliation: differs" in text
    assert "k=4 measured over 16 steps · server-wide (/metrics)" in whatif
    # the one arm measured answers (the capture's one output token in 200 ms: 5 tok/s); the
    # model, on the server-wide histogram, proposes k=3
    assert "measured k=4: 5 tok/s (the only k measured here)" in whatif, whatif
    assert "next: measure k=3, predicted +4% [" in whatif


async def test_reconciliation_equal_when_counters_match():
    session = session_of([capture_k(1, H4, 4)])
    runner = StubMulti({"run": session}, pollers={"run": StubPoller(delta_of(H4))})
    app = SpecmonApp(session, runner, config(), freeze_elapsed=1.0)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = screen_text(app)
    assert "reconciliation: equal" in text
    assert "2 Accepted drafts per step─" in text or "2 Accepted drafts per step ─" in text
    assert "server-wide" not in text.split("2 Accepted drafts per step")[1][:20]


async def test_maximize_the_new_panels_and_help_explain_name_them():
    app, _ = three_servers()
    async with app.run_test(size=WIDE) as pilot:
        for key, panel in (("6", "panel-whatif"), ("7", "panel-segments"), ("8", "panel-servers")):
            await pilot.press(key)
            await pilot.pause()
            assert app.screen.maximized is not None and app.screen.maximized.id == panel
            await pilot.press("escape")
            await pilot.pause()
            assert app.screen.maximized is None
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        for line in (
            "maximize the what-if panel",
            "raise the draft cost c",
            "next server",
            "double the concurrency",
            "raise request rate",
            "raise output length",
        ):
            assert line in text, line
        await pilot.press("escape", "e")
        await pilot.pause()
        assert isinstance(app.screen, ExplainScreen)
        explain = " ".join(str(w.render()) for w in app.screen.query(".explain-item"))
        assert "What-if E(k')" in explain and "E(k') / (1 + c k')" in explain
        assert "Server-wide (/metrics)" in explain


async def test_live_drill_down_shows_the_payload_as_sent(tmp_path):
    live = RunSession(tmp_path, "records")  # a live run's session drops response bodies
    live.add(RawCapture.from_dict(capture_k(1, H4, 4)))
    app = SpecmonApp(live, None, None, freeze_elapsed=1.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("home", "enter")
        await pilot.pause()
        assert isinstance(app.screen, RequestDetail)
        title = app.screen.query_one("#detail-raw").border_title
        text = str(app.screen.query_one("#detail-raw-text").render())
    live.finish()
    # the bodies are gone, but the spec-decode object the server sent is kept and shown
    assert title.startswith("spec-decode payload as sent; live runs keep only this part")
    assert '"payload_as_sent"' in text and '"acceptance_histogram": [2, 2, 4, 6, 2]' in text


@pytest.mark.e2e
@pytest.mark.parametrize(
    "mode",
    [[], ["--headless"], ["watch", "--headless"], ["sweep", "--headless"]],
)
def test_bad_theme_fails_before_any_request_in_every_mode(mode):
    """An unknown theme is an error also where nothing is drawn (issue 20: --headless
    accepted it silently), naming the README's theme names (`--theme dark|light|monochrome`)."""
    with socket.socket() as sock:  # a port nobody listens on: preflight would fail differently
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command, flags = (mode[:1], mode[1:]) if mode[:1] in (["watch"], ["sweep"]) else ([], mode)
    label = "k2=" if command == ["sweep"] else ""  # a sweep over running servers: kN=URL
    out = subprocess.run(
        [sys.executable, "-m", "specmon", *command, "--url", f"{label}http://127.0.0.1:{port}"]
        + [*flags, "--theme", "nosuch"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        "specmon: error: unknown theme 'nosuch' (available: dark, light, monochrome)"
    ]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`--theme dark|light|monochrome`" in readme


def _result(capture: dict):
    from specmon.pipeline import process_capture

    return process_capture(RawCapture.from_dict(capture))


async def test_log_keeps_following_when_it_shrinks():
    """Another panel growing (segments, counters) shrinks the log: it must still follow."""
    session = session_of([capture_k(i, H4, 4) for i in range(1, 41)])
    app = SpecmonApp(session, StubMulti({"run": session}), config(), freeze_elapsed=1.0)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        await pilot.resize_terminal(160, 45)  # the log loses rows; scroll_y is now short of the end
        await pilot.pause()
        for i in range(41, 44):
            session.accumulator.add(_result(capture_k(i, H4, 4)))
        app.refresh_data()
        await pilot.pause()
        title = app.query_one("#panel-log").border_title
        assert title.endswith("43 shown · following"), title
        assert "req-0043" in screen_text(app)


async def test_header_counts_are_the_shown_servers_own(monkeypatch):
    """With several servers the header shows the selected server's done and in-flight
    counts; `]` moves both to the next server (not a sum over all servers)."""
    from types import SimpleNamespace

    from specmon.sources.load.generator import LoadProgress

    app, runner = three_servers()

    def stub_runner(in_flight: int):
        progress = LoadProgress(0, 1, None, in_flight, 0, 0.0, "profiling")
        return SimpleNamespace(  # a runner that sends requests: it has the load knobs
            progress=lambda: progress,
            finished=False,
            set_concurrency=lambda value: None,
            set_request_rate=lambda value, mode=None: None,
            set_output_tokens=lambda mean, stddev=0.0: None,
        )

    own = {"k2": stub_runner(3), "k4": stub_runner(5), "k6": stub_runner(7)}
    monkeypatch.setattr(
        type(runner),
        "servers",
        property(lambda self: {label: (own[label], s) for label, s in self.sessions.items()}),
    )
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        first = screen_text(app).splitlines()[1]
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: "in flight 5" in screen_text(app).splitlines()[1], "k4", 10)
        second = screen_text(app).splitlines()[1]
    assert "in flight 3" in first and "1 done" in first
    assert "in flight 5" in second


async def test_the_whatif_k_line_decides_under_the_slo():
    """--slo reaches the what-if panel through the segments table's rows: the k line says
    the SLO, and a run whose requests carry no TPOT percentiles (non-streaming here) meets
    none and says so instead of a best k."""
    from specmon.analysis.segments import SegmentTable
    from specmon.decision.slo import parse_slo

    class SloMulti(StubMulti):
        def segment_rows(self, draft_cost: float | str | None = "run") -> list[dict]:
            cost = None if draft_cost == "run" else draft_cost
            assert not isinstance(cost, str)
            table = SegmentTable(draft_cost=cost, slo=parse_slo("tpot=50"))
            ((label, session),) = self.sessions.items()
            table.update(None, list(session.accumulator.results))
            return table.rows(self.log.settings())

    session = session_of([capture_k(1, H4, 4)])
    app = SpecmonApp(session, SloMulti({"run": session}), run_config(), freeze_elapsed=1.0)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = " ".join(whatif_text(app).split())
    assert "no recommendation: no k meets the SLO (TPOT p90 <= 50 ms)" in text, text
    assert "best k=" not in text
