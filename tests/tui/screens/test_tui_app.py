"""Pilot tests: every binding and widget of the monitor, fed deterministic replay data."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import FIXTURES as FIXTURES_DIR
from support.tui_fixtures import (
    accumulate,
    make_capture,
    run_captures,
    session_view,
    small_captures,
    write_jsonl,
)
from support.tui_screen import screen_text, until

from specmon import stops
from specmon.capture import RawCapture
from specmon.commands.replay import build
from specmon.interfaces import LoadProgress
from specmon.pipeline import process_capture
from specmon.results_window import Tally
from specmon.session import RunSession
from specmon.sources.replay import ReplayFeeder, load_source
from specmon.tui.app import SpecmonApp
from specmon.tui.screens.detail import RequestDetail
from specmon.tui.screens.explain import ExplainScreen
from specmon.tui.screens.help import HelpScreen
from specmon.tui.widgets.request_log import RequestLog

WIDE = (160, 48)


class StubRun:
    """interfaces.MonitoredRun with nothing behind it: one server, no requests in flight."""

    finished = False
    stopped_early = False
    error: BaseException | None = None

    def __init__(self, session=None):
        self.session = session

    def start(self): ...

    def stop(self): ...

    def join(self, timeout=None):
        return self.finished

    def progress(self):
        return LoadProgress(0, 0, None, 0, 0, 0.0, "done" if self.finished else "profiling")

    def set_concurrency(self, value): ...

    def set_request_rate(self, value, mode=None): ...

    def set_output_tokens(self, mean, stddev=0.0): ...

    @property
    def servers(self):
        return {"run": (self, self.session)}

    def poller(self, label):
        return None

    def segment_rows(self, draft_cost="run"):
        return None


def small_app(**kw) -> SpecmonApp:
    return SpecmonApp(
        session_view(accumulate(small_captures())),
        None,
        None,
        source="replay",
        freeze_elapsed=1.0,
        **kw,
    )


def big_app(n: int = 60, **kw) -> SpecmonApp:
    return SpecmonApp(
        session_view(accumulate(run_captures(n))),
        None,
        None,
        source="replay",
        freeze_elapsed=15.0,
        **kw,
    )


async def test_main_screen_shows_the_small_run():
    app = small_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = screen_text(app)
    # request-mean AL = (3.0 + 1.25 + 3.5) / 3 = 2.5833 -> "2.58"; token-weighted
    # 1 + 19/12 = 2.5833 too (all requests have 4 steps); draft rate mean
    # (8/12 + 1/12 + 10/12)/3 * 100 = 52.78 %
    assert "Accept Len" in text and "2.58" in text
    assert "52.78" in text
    # histogram {0:4, 1:1, 2:3, 3:4} of 12 steps: 33.3 %, 8.3 %, 25.0 %, 33.3 %
    for cell in ("4  33.3%", "1   8.3%", "3  25.0%"):
        assert cell in text
    # per position: S = .667 .583 .333; conditional a = .667 .875 .571
    for cell in ("0.667", "0.583", "0.333", "0.875", "0.571"):
        assert cell in text
    for rid in ("req-0001", "req-0002", "req-0003"):
        assert rid in text
    assert "3 shown · following" in text


async def test_latency_panel_and_header():
    app = big_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = screen_text(app)
    assert "4 Latency & throughput" in text and "TTFT ms" in text and "Req/s" in text
    # 60 requests: every 9th (6) is an HTTP error -> 54 valid; warmups not counted;
    # "done" counts every finished request; req/s is AIPerf's request_throughput, 54 valid /
    # benchmark duration: first start 250 ms (request 1) to the last content response,
    # request 60 (streaming, 2 steps: 15000 + TTFT 40 + 1 * 15 ms) = 15055 ms -> 14.805 s;
    # 54 / 14.805 = 3.647 -> "3.65", the same figure in the header and the Req/s row
    assert "errors 6" in text
    assert "60 done" in text and "3.65 req/s" in text and "errors 6 (http_error 6)" in text
    assert "3.60" not in text


async def test_pause_freezes_display_but_counts_arrivals():
    acc = accumulate(small_captures(), live=True)
    app = SpecmonApp(session_view(acc), None, None, freeze_elapsed=1.0)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("p")
        for i in range(4, 6):  # two requests land while paused
            acc.add(
                process_capture(
                    RawCapture.from_dict(make_capture(i, [1, 1, 1, 1], start_ms=100.0 * i))
                )
            )
        app.refresh_data()
        await pilot.pause()
        text = screen_text(app)
        assert "PAUSED +2" in text
        assert app.query_one(RequestLog).shown_count == 3  # display frozen
        assert "req-0004" not in text
        await pilot.press("p")
        await pilot.pause()
        text = screen_text(app)
        assert "PAUSED" not in text and "req-0004" in text and "req-0005" in text


async def test_help_and_explain_screens():
    app = small_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        assert "Pause" in text and "save a screenshot (SVG)" in text and "Explain" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("e")
        assert isinstance(app.screen, ExplainScreen)
        text = screen_text(app)
        assert "AL = 1 + a / s" in text and "a_i = S_i / S_{i-1}" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, ExplainScreen)


async def test_maximize_each_panel_and_restore():
    app = small_app()
    async with app.run_test(size=WIDE) as pilot:
        for key, panel_id in zip(
            "12345", ("panel-spec", "panel-hist", "panel-plot", "panel-latency", "panel-log")
        ):
            await pilot.press(key)
            assert app.screen.maximized is not None and app.screen.maximized.id == panel_id
            await pilot.press("escape")
            assert app.screen.maximized is None


async def test_maximize_shows_a_panel_the_compact_layout_hides():
    app = big_app()
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.screen.has_class("compact")
        assert "TPOT ms" not in screen_text(app)  # the latency row is hidden at 80x24
        await pilot.press("4")
        await pilot.pause()
        assert "TPOT ms" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert "TPOT ms" not in screen_text(app)
        assert isinstance(app.focused, RequestLog)  # focus is back on the log
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, RequestDetail)


async def test_filter_log():
    app = big_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("slash")
        await pilot.press(*"math", "enter")
        await pilot.pause()
        log = app.query_one(RequestLog)
        # category = CATEGORIES[i % 3]: math for i = 2, 5, ..., 59 -> 20 of 60
        assert log.shown_count == 20
        assert "filter 'math' of 60" in screen_text(app)
        await pilot.press("slash")
        for _ in range(4):
            await pilot.press("backspace")
        await pilot.press(*"http_error", "enter")
        # errors at i = 9, 18, ..., 54 -> 6
        assert log.shown_count == 6
        await pilot.press("slash", "escape")  # esc closes the box, keeps the filter
        assert not app.query_one("#log-filter").has_class("visible")


async def test_window_cycles():
    app = big_app()
    async with app.run_test(size=WIDE) as pilot:
        plot_panel = app.query_one("#panel-plot")
        assert plot_panel.border_title == "3 Time series · window 10 s (w)"
        await pilot.press("w")
        assert plot_panel.border_title == "3 Time series · window 60 s (w)"
        await pilot.press("w")
        assert plot_panel.border_title == "3 Time series · window run (w)"
        await pilot.press("w")
        assert plot_panel.border_title == "3 Time series · window 10 s (w)"


async def test_theme_cycles_and_option(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    app = small_app(theme_name="light")
    async with app.run_test(size=WIDE) as pilot:
        assert app.theme == "specmon-light"
        seen = {app.theme}
        for _ in range(len(app.theme_names)):
            await pilot.press("t")
            seen.add(app.theme)
        assert {"specmon-dark", "specmon-light", "specmon-monochrome"} <= seen
        assert app.theme == "specmon-light"  # a full cycle comes back


async def test_no_color_means_monochrome(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = small_app(theme_name="light")
    async with app.run_test(size=WIDE):
        assert app.theme == "specmon-monochrome"


async def test_screenshot_into_artifact_dir(tmp_path):
    app = small_app(artifact_dir=tmp_path / "art")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("s")
        await pilot.pause()
    svgs = list((tmp_path / "art").glob("*.svg"))
    assert len(svgs) == 1 and "req-0003" in svgs[0].read_text()


async def test_enter_opens_request_detail_and_esc_returns():
    app = small_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("home")  # cursor on the first row (req-0001, detailed level)
        await pilot.press("enter")
        assert isinstance(app.screen, RequestDetail)
        text = screen_text(app)
        assert "request req-0001" in text
        # r1 histogram [1,0,1,2] of 4 steps: 25 % / 0 % / 25 % / 50 %
        assert "50.0%" in text and "25.0%" in text
        assert "steps 4 · accepted 8 / drafted 12" in text
        assert '"acceptance_histogram"' in text
        assert len(app.screen.query("Sparkline")) == 2  # per-step accepted / drafted
        await pilot.press("escape")
        assert not isinstance(app.screen, RequestDetail)


async def test_mouse_click_selects_then_opens():
    app = small_app()
    async with app.run_test(size=WIDE) as pilot:
        log = app.query_one(RequestLog)
        await pilot.pause()  # the first frame is laid out (a user clicks what they see)
        await pilot.click(RequestLog, offset=(3, 1))  # second row: req-0002
        assert log.selected_index() == 1
        await pilot.click(RequestLog, offset=(3, 1))
        assert isinstance(app.screen, RequestDetail)
        assert "request req-0002" in screen_text(app)


async def test_log_follows_tail_then_counts_pending():
    acc = accumulate(run_captures(60), live=True)
    app = SpecmonApp(session_view(acc), None, None, freeze_elapsed=1.0)
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.query_one(RequestLog)
        await pilot.pause()
        assert log.scroll_y == log.max_scroll_y > 0  # following the tail
        await pilot.press("home")  # the user looks at the oldest rows
        for i in range(61, 64):
            acc.add(
                process_capture(
                    RawCapture.from_dict(make_capture(i, [1, 1, 1, 1], start_ms=250.0 * i))
                )
            )
        app.refresh_data()
        await pilot.pause()
        assert log.pending == 3 and log.scroll_y == 0
        assert "3 new (end follows)" in screen_text(app)  # visible in the compact layout too
        await pilot.press("end")
        await pilot.pause()
        assert log.pending == 0 and log.scroll_y == log.max_scroll_y


async def test_log_renders_only_visible_rows_for_50k_requests():
    result = accumulate(small_captures()).results[0]
    rows = [result] * 50_000
    session = argparse.Namespace(
        accumulator=argparse.Namespace(
            results=rows,
            tally=Tally(rows=len(rows)),  # what a ResultWindow counts as it appends
            snapshot=accumulate(small_captures()).snapshot,
        ),
        artifact_dir=None,
        spec_method=None,
    )
    app = SpecmonApp(session, None, None, freeze_elapsed=1.0)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        log = app.query_one(RequestLog)
        assert log.shown_count == 50_000
        assert "50000" in screen_text(app)  # the last row number is on screen
        # only the visible rows were ever formatted
        assert len(log._text_cache) <= log.size.height + 1


async def test_layout_responds_to_size():
    app = big_app()
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.screen.has_class("compact")
        text = screen_text(app)
        assert "tok-wtd AL 2.66" in text and "req-00" in text  # headline and log readable
        await pilot.resize_terminal(120, 48)  # medium: top panels stacked, series kept
        await pilot.pause()
        assert app.screen.has_class("medium") and not app.screen.has_class("compact")
        text = screen_text(app)
        assert "Acceptance Length (ratio)" in text and "TPOT ms" in text
        assert "…" not in text  # no cell is cut short
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert not app.screen.has_class("compact") and not app.screen.has_class("medium")
        assert "Time series · window 10 s" in screen_text(app)


async def test_q_stops_the_replay_feeder(tmp_path):
    path = write_jsonl(tmp_path / "raw.jsonl", run_captures(20))
    args = argparse.Namespace(file=str(path), speed=0.001, theme=None, refresh_hz=4.0)
    config, feeder, session = build(args)
    app = SpecmonApp(session, feeder, config, source="replay")
    async with app.run_test(size=WIDE) as pilot:
        feeder.start()
        await pilot.pause(0.3)
        await pilot.press("q")
    assert app.return_code == 0
    assert feeder.join(5) and feeder.stopped_early
    assert feeder.fed < len(feeder.source.items)  # paced at 1/1000 speed, it was still feeding


async def test_ctrl_c_quits_like_sigint():
    """Ctrl-C is a key in the TUI (raw mode): it quits, and the run ends as a SIGINT does
    headless, so the process exits 130 (issue 19)."""
    stops.reset()
    app = small_app()
    try:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.press("ctrl+c")
        assert app.return_value == 130
        assert stops.requested() == signal.SIGINT and stops.exit_status(0) == 130
    finally:
        stops.reset()


async def test_q_quits_without_a_stop_signal():
    stops.reset()
    app = small_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("q")
    assert app.return_value == 0 and stops.requested() is None


async def test_full_speed_replay_shows_every_record(tmp_path):
    path = write_jsonl(tmp_path / "raw.jsonl", run_captures(60))
    args = argparse.Namespace(file=str(path), speed=0.0, theme=None, refresh_hz=8.0)
    config, feeder, session = build(args)
    app = SpecmonApp(session, feeder, config, source="replay")
    async with app.run_test(size=WIDE) as pilot:
        feeder.start()
        assert feeder.join(10)
        app.refresh_data()
        await pilot.pause()
        text = screen_text(app)
    # 62 lines: 2 warmup (not shown) + 54 valid + 6 errors
    assert feeder.fed == 62
    # the replay knows its 62 records (2 warmup): a finished bar over the 60 requests the
    # log shows (warmups are not log rows), never "(until q)"
    assert "100% 60/60 done" in text and "errors 6" in text and "until q" not in text
    assert "replay of raw capture, 62 records, full speed" in text


@pytest.mark.e2e
def test_replay_cli_errors_are_one_line(tmp_path):
    exe = [sys.executable, "-m", "specmon", "replay"]
    proc = subprocess.run(
        exe + [str(tmp_path / "nope.jsonl")], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("specmon: error: replay file not found")
    assert len(proc.stderr.strip().splitlines()) == 1
    good = write_jsonl(tmp_path / "raw.jsonl", small_captures())
    proc = subprocess.run(
        exe + [str(good), "--theme", "neon"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "unknown theme 'neon'" in proc.stderr
    proc = subprocess.run(
        exe + [str(good), "--speed", "-1"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "argument --speed: '-1': give a number >= 0" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "kind, says",
    [
        ("fifo", "is a FIFO (named pipe), not a file"),
        ("loop", "is a symlink loop"),
        ("dangling", "is a symlink to a missing file"),
    ],
)
def test_replay_names_a_fifo_or_a_symlink_loop_as_such(tmp_path, kind, says):
    """Issue 35: a FIFO or a symlink loop was "replay file not found"; a FIFO must not be
    opened either (the read would wait for a writer for ever)."""
    from specmon.errors import UserError

    path = tmp_path / "x.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "loop":
        path.symlink_to(tmp_path / "y.jsonl")
        (tmp_path / "y.jsonl").symlink_to(path)
    else:
        path.symlink_to(tmp_path / "gone.jsonl")
    with pytest.raises(UserError) as raised:
        load_source(path)
    assert str(raised.value).startswith(f"replay: {path} {says}")


def test_profile_export_replay_matches_the_run(tmp_path):
    """A replay of specmon's own profile_export.jsonl rebuilds the same pooled histogram."""
    session = RunSession(tmp_path / "run", "records", {})
    for c in run_captures(30):
        session.add(RawCapture.from_dict(c))
    session.finish()
    original = session.accumulator.snapshot()
    src = load_source(tmp_path / "run" / "profile_export.jsonl")
    replay = RunSession(None, "summary", live=False)
    feeder = ReplayFeeder(src, replay, 0.0)
    feeder.start()
    assert feeder.join(10)
    again = replay.accumulator.snapshot()
    assert again.pooled_histogram == original.pooled_histogram
    assert again.request_count == original.request_count
    assert again.error_count == original.error_count
    assert Path(tmp_path / "run" / "profile_export_aiperf.json").is_file()


def test_replay_accepts_an_artifact_dir(tmp_path):
    """`specmon replay DIR` (issue 20 item 5: "replay file not found" for a dir that tune and
    compare accept): the records of the dir, else its raw capture; an empty dir says why."""
    from specmon.errors import UserError

    captures = run_captures(30)
    session = RunSession(tmp_path / "run", "raw", {})
    for c in captures:
        session.add(RawCapture.from_dict(c))
    session.finish()
    profiling = [c for c in captures if c.get("benchmark_phase") != "warmup"]
    src = load_source(tmp_path / "run")
    assert src.path.name == "profile_export.jsonl" and len(src.items) == len(profiling)
    (tmp_path / "run" / "profile_export.jsonl").unlink()
    src = load_source(tmp_path / "run")  # the raw capture keeps the warmup requests too
    assert src.path.name == "profile_export_raw.jsonl" and len(src.items) == len(captures)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="is a folder without profile_export.jsonl"):
        load_source(tmp_path / "empty")


async def test_replay_of_a_real_aiperf_export(tmp_path):
    """AIPerf 0.13's own profile_export.jsonl: the monitor shows AIPerf's own aggregates."""
    fixture = FIXTURES_DIR / "aiperf013_peer"
    truth = json.loads((fixture / "profile_export_aiperf.json").read_text())
    args = argparse.Namespace(
        file=str(fixture / "profile_export.jsonl"), speed=0.0, theme=None, refresh_hz=4.0
    )
    config, feeder, session = build(args)
    app = SpecmonApp(session, feeder, config, source="replay")
    async with app.run_test(size=WIDE) as pilot:
        feeder.start()
        assert feeder.join(10)
        app.refresh_data()
        await pilot.pause()
        text = screen_text(app)
    # AIPerf wrote: 30 requests, pooled histogram {0:176, 1:131, 2:93, 3:171} (571 steps),
    # AL avg 2.4997 -> "2.50"; 176/571 = 30.8 %, 171/571 = 29.9 %
    assert truth["request_count"]["avg"] == 30
    assert "100% 30/30 done" in text
    assert "176  30.8%" in text and "171  29.9%" in text
    assert f"{truth['spec_decode_acceptance_length']['avg']:,.2f}" == "2.50" and "2.50" in text


async def test_drill_down_of_a_real_vllm_detailed_capture(tmp_path):
    """A real vLLM 0.32 `detailed` capture: the detail screen shows its per-step arrays."""
    fixture = FIXTURES_DIR / "vllm032" / "detailed_chat_stream.jsonl"
    src = load_source(fixture)
    session = RunSession(None, "summary", live=False, keep_responses=True)
    for item in src.items:
        item.feed(session)
    result = session.accumulator.results[0]
    assert result.spec is not None and result.spec.per_step_accepted  # detailed level
    app = SpecmonApp(session, None, None, source="replay", freeze_elapsed=1.0)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("home", "enter")
        assert isinstance(app.screen, RequestDetail)
        text = screen_text(app)
        spec = result.spec
        assert (
            f"steps {spec.num_spec_steps} · accepted {spec.num_accepted_draft_tokens} / "
            f"drafted {spec.num_draft_tokens}"
        ) in text
        assert len(app.screen.query("Sparkline")) == 2
        raw = str(app.screen.query_one("#detail-raw-text").content)  # scrolls; read it whole
        assert '"last_response"' in raw and '"per_step_accepted": [' in raw


async def test_load_failure_is_announced():
    """A runner that ended with an error: the screen says so instead of just 'done'."""

    class FailedRunner(StubRun):  # a load that ended with an error
        finished = True
        error = RuntimeError("connection refused by 127.0.0.1:9")

    app = SpecmonApp(
        session_view(accumulate(small_captures())), FailedRunner(), None, freeze_elapsed=1.0
    )
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "load failed: RuntimeError: connection refused" in text
        assert "q writes the exports" not in text


async def test_cursor_keys_move_through_the_log():
    app = big_app()
    async with app.run_test(size=WIDE) as pilot:
        log = app.query_one(RequestLog)
        await pilot.press("up")  # no cursor yet: up selects the newest row (row 60, index 59)
        assert log.cursor == 59
        await pilot.press("up", "up")
        assert log.cursor == 57
        await pilot.press("pagedown")  # +10, clamped to the last row
        assert log.cursor == 59
        await pilot.press("pageup")
        assert log.cursor == 49
        await pilot.press("down")
        assert log.selected_index() == 50
        await pilot.press("enter")
        assert "request req-0051" in screen_text(app)


async def test_header_lists_every_k_of_a_mixed_run():
    """Two servers at k=3 and k=5: the header says k=3,5, not whichever landed last."""
    captures = small_captures()
    k5 = make_capture(7, [1, 1, 1, 1], start_ms=700.0)
    k5["responses"][0]["metrics"]["speculative_decoding"].update(
        num_spec_tokens=5,
        acceptance_histogram=[1, 1, 1, 1, 0, 0],
        num_draft_tokens=20,
        draft_acceptance_rate=6 / 20,
    )  # 4 steps x 5 drafts; accepted 0+1+2+3 = 6
    app = SpecmonApp(session_view(accumulate(captures + [k5])), None, None, freeze_elapsed=1.0)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        assert "vllm k=3,5" in screen_text(app)


async def test_mouse_wheel_up_stops_following():
    from textual import events

    acc = accumulate(run_captures(60), live=True)
    app = SpecmonApp(session_view(acc), None, None, freeze_elapsed=1.0)
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.query_one(RequestLog)
        await pilot.pause()
        bottom = log.scroll_y
        log.post_message(events.MouseScrollUp(log, 2, 2, 0, 0, 0, False, False, False))
        await until(pilot, lambda: log.scroll_y < bottom, "the log scrolled up", 10)
        acc.add(
            process_capture(
                RawCapture.from_dict(make_capture(61, [1, 1, 1, 1], start_ms=250.0 * 61))
            )
        )
        app.refresh_data()
        await pilot.pause()
        assert log.pending == 1 and "1 new (end follows)" in screen_text(app)


async def test_a_saturated_client_is_announced_in_the_header():
    """While the load loop is saturated (LoadProgress.lag_warning) the header says so, with
    the two signs, so nobody reads the client's own delay as the server's latency."""

    class SaturatedRunner(StubRun):
        busy = True

        def progress(self):
            return LoadProgress(
                0, 0, None, 0, 0, 3.4, "profiling", lag_warning=self.busy, loop_busy=0.968
            )

    runner = SaturatedRunner()
    app = SpecmonApp(session_view(accumulate(small_captures())), runner, None, freeze_elapsed=1.0)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        # 0.968 -> "97%", 3.4 ms -> "3 ms"
        assert "client saturated (event loop busy 97%, lag 3 ms)" in screen_text(app)
        runner.busy = False
        app.refresh_data()
        await until(pilot, lambda: "client saturated" not in screen_text(app), "it gone", 10)


async def test_a_stop_before_mount_closes_the_screen_only_during_a_load():
    """The start-up window in-process: a signal noted while the load runs (stage "load")
    and before the screen mounted closes it at mount and stops the run; the same signal
    left over from a finished run (stage "export") does not."""

    class CountingRun(StubRun):
        stopped = False

        def stop(self):
            self.stopped = True

    feeder = CountingRun()
    try:
        stops.reset()
        stops.stage("export")
        stops.note_stop(signal.SIGTERM)  # a finished in-process run's stop
        app = SpecmonApp(session_view(accumulate(small_captures())), feeder, None)
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            assert app.is_running and not feeder.stopped
            await pilot.press("q")
        assert feeder.stopped  # q stops it
        stops.reset()
        stops.stage("load")
        stops.note_stop(signal.SIGTERM)  # came before the screen registered its callback
        feeder = CountingRun()
        app = SpecmonApp(session_view(accumulate(small_captures())), feeder, None)
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
        assert feeder.stopped and app.return_value == 0
    finally:
        stops.reset()


async def test_the_monitor_keeps_sigcont_and_sigtstp_at_their_defaults():
    """A hangup brings SIGCONT with SIGHUP; Textual's Linux driver answers SIGCONT by starting
    application mode again (a second output thread, which dies on the vanished terminal, and
    the shutdown then blocks for ever in WriterThread.stop: a monitor seen alive an hour after
    its pane closed). Once mounted, the monitor has put both signals back to their defaults,
    whatever handler was there before."""

    def driver_like(signum, frame):  # stands in for the driver's resume handler
        raise AssertionError("never called")

    previous = {s: signal.signal(s, driver_like) for s in (signal.SIGCONT, signal.SIGTSTP)}
    try:
        app = small_app()
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            assert signal.getsignal(signal.SIGCONT) is signal.SIG_DFL
            assert signal.getsignal(signal.SIGTSTP) is signal.SIG_DFL
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def test_a_replay_counts_its_requests_as_the_log_does(tmp_path):
    """Two warmup records then 10 requests (tui_fixtures.run_captures): the header's done/total
    comes from the replay's progress, and it counts the 10 requests the log shows, not the
    12 records fed (warmups are never log rows)."""
    raw = write_jsonl(tmp_path / "raw.jsonl", run_captures(10))
    session = RunSession(tmp_path / "run", "records", {})
    for c in run_captures(10):
        session.add(RawCapture.from_dict(c))
    session.finish()
    # the raw capture holds the 2 warmups; profile_export.jsonl, as AIPerf's, only requests
    for path, warmups in ((raw, 2), (tmp_path / "run" / "profile_export.jsonl", 0)):
        src = load_source(path)
        assert len(src.items) == 10 + warmups and sum(i.warmup for i in src.items) == warmups
        replay = RunSession(None, "summary", live=False)
        feeder = ReplayFeeder(src, replay, 0.0)
        feeder.start()
        assert feeder.join(10)
        p = feeder.progress()
        assert (p.completed, p.total) == (10, 10)
        assert len(replay.accumulator.results) == 10  # the log's rows
        assert replay.accumulator.snapshot().warmup_count == warmups


async def test_a_max_outage_stop_is_named_in_the_header_at_80_columns():
    """--max-outage ended the load (the server stayed down): the header says so near its
    start, where 80 columns still show it, not only after q on the console."""
    from specmon.errors import ServerUnreachable

    class StoppedRunner(StubRun):
        finished = True
        error = ServerUnreachable("server unreachable since 05:35:51; stopped after 5 s")

    app = SpecmonApp(
        session_view(accumulate(small_captures())), StoppedRunner(), None, freeze_elapsed=1.0
    )
    said = "3 done (finished) · stopped: server unreachable since 05:35:51 · "
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: said in screen_text(app), "the outage stop in the header")
        assert "load failed" not in screen_text(app)
