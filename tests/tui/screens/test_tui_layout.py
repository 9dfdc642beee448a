"""Issue 12 items 1-4 in the monitor: the headline at every size, time series that read at
1..3 rows (value -> row mapping by hand), what is shown is current (header follows `>`,
one req/s, replays show their total), maximized panels keep the header, the footer fits,
`s` on every screen, layout slots, and the log as a log viewer while records land."""

from __future__ import annotations

import argparse
import re
import time

import pytest
from support.tui_fixtures import accumulate, run_captures, session_view, small_captures, write_jsonl
from support.tui_screen import screen_text, until
from support.tui_tuning_fixtures import one_server_app
from textual.widgets import Static

from specmon.commands.replay import build
from specmon.stats import MetricRow
from specmon.tui.app import PANELS, SpecmonApp
from specmon.tui.model.series import SeriesBins
from specmon.tui.screens.detail import RequestDetail
from specmon.tui.widgets.headline import headline_of, headline_text
from specmon.tui.widgets.panel import Slot
from specmon.tui.widgets.request_log import RequestLog
from specmon.tui.widgets.series import series_lines, spark_rows


def recorded(n: int = 60) -> SpecmonApp:
    return SpecmonApp(
        session_view(accumulate(run_captures(n))), None, None, source="replay", freeze_elapsed=15.0
    )


# -- time series: value -> row mapping --------------------------------------------------
def test_spark_one_row_by_hand():
    # 1 row = 8 eighths: lo -> level 1, hi -> 8, 2 of 1..3 -> 1 + round(0.5 * 7) = 5
    assert spark_rows([1.0, 2.0, 3.0], 1, 1.0, 3.0) == ["▁▅█"]


def test_spark_two_rows_by_hand():
    # 16 eighths: 1, 1 + round(0.5 * 15) = 9, 16; the top row holds what is above 8
    assert spark_rows([1.0, 2.0, 3.0], 2, 1.0, 3.0) == [" ▁█", "▁██"]


def test_spark_three_rows_gaps_and_flat():
    assert spark_rows([0.0, None, 10.0], 3, 0.0, 10.0) == ["  █", "  █", "▁ █"]
    assert spark_rows([5.0, 5.0], 1, 5.0, 5.0) == ["▄▄"]  # flat: mid height (4 of 8)
    assert spark_rows([0.0, 0.0], 2, 0.0, 0.0) == ["  ", "▁▁"]  # flat zero: the baseline


def test_series_labels_are_current_min_max_of_the_data():
    """The issue's chart drew 2.45 on the 4.00 label: labels must be the data's own."""
    data = {"al": [2.0, 3.0, 2.5], "tok_s": [], "ttft_p50": [], "err_pct": []}
    text = series_lines(data, 40, 3, {}).plain.splitlines()
    al = text[:3]
    assert al[0].startswith("AL") and "2.50" in al[0] and "max 3.00" in al[0]
    assert al[2].rstrip().endswith("min 2.00")
    # 3 rows = 24 eighths: 2.5 is level 1 + round(0.5 * 23) = 13 (half to even), so the
    # middle row (eighths 9..16) holds 13 - 8 = 5 of them
    assert spark_rows([2.0, 3.0, 2.5], 3, 2.0, 3.0)[1] == " █▅"
    assert "no data" in text[3]  # out tok/s had none


def test_series_bins_by_hand():
    """small_captures: starts 0/100/200 ms, 200 ms each -> ends 0.2, 0.3, 0.4 s; two 0.25 s
    columns over 0..0.5 s. Column 0: r1 AL 1 + 8/4 = 3.0, 12 tokens / 0.25 s = 48 tok/s;
    column 1: r2 + r3, AL 1 + (1 + 10)/8 = 2.375; its tokens/s is not drawn, as the newest
    end's bin may still gain tokens (test_series.py)."""
    acc = accumulate(small_captures())
    bins = SeriesBins()
    bins.add(acc.results)
    s = bins.series(None, 0.5, 2)
    assert s["al"] == [3.0, 2.375]
    assert s["tok_s"] == [48.0, None]
    assert s["err_pct"] == [0.0, 0.0]
    assert bins.series(0.25, 0.5, 1)["al"] == [2.375]  # a 0.25 s window: the last bin only


# -- the headline ---------------------------------------------------------------------
def test_headline_text_by_hand():
    spec = {
        "spec_decode_acceptance_length": MetricRow("ratio", 2.5833),
        "spec_decode_token_weighted_acceptance_length": MetricRow("ratio", 2.5833, derived=True),
        "spec_decode_draft_acceptance_rate": MetricRow("%", 52.777),
        "spec_decode_overall_draft_acceptance_rate": MetricRow("%", 52.777, derived=True),
    }
    std = {
        "output_token_throughput": MetricRow("tokens/sec", 1234.56, derived=True),
        "time_to_first_token": MetricRow("ms", None, p50=45.0, p99=61.25),
        "inter_token_latency": MetricRow("ms", None, p50=5.125),
    }
    h = headline_of(spec, std, 3, "best k=5 (2.11x)", "407 steps, c=0.10 (+/-)")
    lines = headline_text(h, {}).plain.splitlines()
    assert lines[0].split() == (
        [
            "AL",
            "2.58",
            "tok-wtd",
            "AL",
            "2.58",
            "draft",
            "acc",
            "52.78%",
            "overall",
            "52.78%",
            "errors",
            "3",
        ]
    )
    assert "out tok/s 1,234.6" in lines[1] and "TTFT p50 45.0  p99 61.2 ms" in lines[1]
    assert "TPOT p50 5.12 ms" in lines[1]
    assert lines[2].startswith("k: best k=5 (2.11x)  407 steps")


async def test_80x24_and_100x30_show_every_headline_item():
    for size in ((80, 24), (100, 30)):
        app = recorded()
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            text = screen_text(app)
        # 60-run figures as the tables show them (test_tui_app checks the sources by hand)
        for item in (
            "AL 2.65",
            "tok-wtd AL 2.66",
            "draft acc 55.04%",
            "out tok/s 73.3",
            "TTFT p50 50.0  p99 60.0 ms",
            "TPOT p50 5.00 ms",
            "errors 6",
            "3.65 req/s",
            # the answer: k=3, the one k measured, with its figure (the headline's 73.3);
            # k=5 is only the model's proposal, with its band, the whole of it on screen
            # (wrapped at 80 and 100, never cut)
            "k: measured k=3: 73 tok/s (the only k measured here)",
            "next: k=5",
            "+3% [-5..+12]",  # the end of the k line: the model's proposal
            "P(acc>=i)",  # per-position acceptance beside the histogram
            "req-0060",  # the log
            "TTFT p50 ms",  # the time series
        ):
            assert item in text, (size, item)
        assert text.count("req/s") == 1  # one request-throughput figure on screen


# -- true and current -----------------------------------------------------------------
async def test_header_follows_the_concurrency_key_at_once():
    app = one_server_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert "concurrency 4" in screen_text(app)
        await pilot.press("greater_than_sign")
        await pilot.pause()
        text = screen_text(app)
    assert "concurrency 8" in text and "concurrency 4" not in text  # 4 doubled
    assert app.runner.calls[-1] == ("concurrency", 8)


async def test_maximized_panels_fill_the_screen_under_the_header():
    app = recorded()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        for n in range(1, len(PANELS) + 1):
            if PANELS[n - 1] == "panel-servers":  # 8 (side by side) needs several servers
                continue
            await pilot.press(str(n))
            await pilot.pause()
            panel = app.query_one(f"#{PANELS[n - 1]}")
            text = screen_text(app)
            assert text.startswith(" specmon [replay]"), n  # the header stays
            # 24 rows - 2 header - 1 footer, the full width
            assert (panel.region.y, panel.region.height, panel.region.width) == (2, 21, 80), n
            await pilot.press("escape")


async def test_footer_fits_80_columns_with_the_priority_keys():
    app = recorded()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        footer = screen_text(app).splitlines()[-1]
    for key in ("q Quit", "? Help", "p Pause", "e Explain", "s Save", "1-8 Max", "</> Load"):
        assert key in footer, footer
    assert footer.rstrip() == footer.rstrip()[:80] and "…" not in footer


async def test_screenshot_on_every_screen(tmp_path):
    app = SpecmonApp(
        session_view(accumulate(small_captures())),
        None,
        None,
        source="replay",
        freeze_elapsed=1.0,
        artifact_dir=tmp_path,
    )
    async with app.run_test(size=(100, 30)) as pilot:
        for opener in (["question_mark"], ["e"], ["home", "enter"]):
            before = len(list(tmp_path.glob("*.svg")))
            await pilot.press(*opener)
            await pilot.pause()
            await pilot.press("s")
            await pilot.pause()
            assert len(list(tmp_path.glob("*.svg"))) == before + 1, opener
            await pilot.press("escape")


async def test_explain_defines_every_symbol_it_uses():
    from specmon.tui.screens.explain import EXPLANATIONS

    symbols = EXPLANATIONS[0][1]
    for defined in ("a = accepted", "d = proposed", "s = verify", "k = draft", "h_j", "c = "):
        assert defined in symbols


async def test_slots_are_hidden_until_filled():
    app = recorded()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        for slot_id in ("#slot-health", "#slot-categories", "#slot-sweep"):
            assert not app.query_one(slot_id, Slot).display
        app.query_one("#slot-health", Slot).fill(Static("HEALTH-PANEL", id="health"))
        await pilot.pause()
        assert app.query_one("#slot-health", Slot).display
        assert "HEALTH-PANEL" in screen_text(app)


# -- the log as a log viewer, with records landing -----------------------------------
async def test_log_selection_holds_while_records_land_and_enter_opens_it(tmp_path):
    # 250 ms apart in the recording; at 20x speed a record lands every 12.5 ms. 2,000 records
    # (25 s) so that on a busy machine, where the first 20 rows can take seconds to show, there
    # are always 20 more to land after the selection (200 could all land before it: a flake).
    path = write_jsonl(tmp_path / "raw.jsonl", run_captures(2000))
    args = argparse.Namespace(file=str(path), speed=20.0, theme=None, refresh_hz=8.0)
    config, feeder, session = build(args)
    app = SpecmonApp(session, feeder, config, source="replay")
    async with app.run_test(size=(80, 24)) as pilot:
        log = app.query_one(RequestLog)
        feeder.start()
        try:
            await until(pilot, lambda: log.shown_count >= 20, "20 rows")
            await pilot.press("up", "up")
            assert not log.following  # stopped at once
            chosen = log.selected_index()
            rid = session.accumulator.results[chosen].x_request_id
            top, row_on_screen = log.scroll_y, log.cursor - int(log.scroll_y)
            landed = log.shown_count
            await until(pilot, lambda: log.shown_count >= landed + 20, "20 more rows")
            assert log.selected_index() == chosen and log.scroll_y == top
            assert log.cursor - int(log.scroll_y) == row_on_screen  # the row stays in place
            assert rid in screen_text(app)
            assert "new (end follows)" in app.query_one("#panel-log").border_title
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, RequestDetail)
            assert f"request {rid}" in screen_text(app)
            await pilot.press("escape")
            await pilot.press("end")
            assert log.following and log.cursor == -1
            shown = log.shown_count
            await until(pilot, lambda: log.shown_count > shown or feeder.finished, "more")
            await pilot.pause()
            assert log.scroll_y == log.max_scroll_y  # following the tail again
        finally:
            feeder.stop()
            feeder.join(10)


async def test_every_servers_latency_and_throughput_is_reachable():
    """Three servers, one 200 ms request each; output tokens = Σ (j+1) h_j: H2 [1,1,2] -> 9,
    H4 [2,2,4,6,2] -> 52, H6 [1,0,0,0,0,0,3] -> 22; over 0.2 s: 45, 260, 110 tokens/s and
    1 / 0.2 s = 5 requests/s each. Wide: on screen; 80x24: key 4 shows them."""
    from support.tui_tuning_fixtures import H2, H4, H6, three_server_app

    for hist, tokens in ((H2, 9), (H4, 52), (H6, 22)):
        assert sum((j + 1) * n for j, n in enumerate(hist)) == tokens
    for size, keys in (((160, 48), ()), ((80, 24), ("4",))):
        app, _ = three_server_app()
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await pilot.press(*keys)
            await pilot.pause()
            text = screen_text(app)
        pattern = r"(k[246])\s+-\s+-\s+-\s+200\.00\s+([\d.,]+)\s+([\d.]+)"
        assert re.findall(pattern, text) == [
            ("k2", "45.00", "5.00"),
            ("k4", "260.00", "5.00"),
            ("k6", "110.00", "5.00"),
        ], (size, text)


async def test_every_selection_key_and_a_click_stop_following_in_place():
    """Up, Down, PgUp, PgDn, Home and a click each stop following at once; five more
    requests landing keep the same request under the cursor at the same screen row;
    F resumes following."""
    from support.tui_fixtures import make_capture

    from specmon.capture import RawCapture
    from specmon.pipeline import process_capture

    for keys in (["up"], ["up", "down"], ["pageup"], ["pageup", "pagedown"], ["home"], None):
        acc = accumulate(run_captures(60), live=True)
        app = SpecmonApp(session_view(acc), None, None, freeze_elapsed=1.0)
        async with app.run_test(size=(80, 24)) as pilot:
            log = app.query_one(RequestLog)
            await pilot.pause()
            if keys is None:
                await pilot.click(RequestLog, offset=(3, 1))
            else:
                await pilot.press(*keys)
            assert not log.following, keys
            chosen, row = log.selected_index(), log.cursor - int(log.scroll_y)
            n = len(acc.results)
            for i in range(n + 1, n + 6):
                capture = make_capture(i, [1, 1, 1, 1], start_ms=250.0 * i)
                acc.add(process_capture(RawCapture.from_dict(capture)))
            app.refresh_data()
            await pilot.pause()
            assert log.selected_index() == chosen and log.cursor - int(log.scroll_y) == row
            assert log.pending == 5, keys
            await pilot.press("F")
            await pilot.pause()
            assert log.following and log.scroll_y == log.max_scroll_y


async def test_header_keeps_req_s_and_errors_at_80_columns_with_a_progress_bar():
    """A bounded live run: bar, %, done/total and ETA, then req/s and errors (what the issue
    saw cut off); in flight and elapsed come last and may be cut."""
    app = one_server_app(request_count=600)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        second = screen_text(app).splitlines()[1]
    # one 200 ms request: request_throughput 1 / 0.2 s = 5.00
    assert "1/600" in second and "ETA" in second
    assert "5.00 req/s · errors 0" in second, second


async def test_one_req_s_per_server_even_between_the_1hz_ticks():
    """k2 gets a second request (start 700 ms, 200 ms): the run spans 100..900 ms, so
    request_throughput = 2 / 0.8 s = 2.50. The header and k2's row in panel 4 must both
    say so at once, not 5.00 from the last 1 Hz tick."""
    from support.tui_tuning_fixtures import H2, capture_k, three_server_app

    from specmon.capture import RawCapture
    from specmon.pipeline import process_capture

    app, runner = three_server_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        k2 = app.main.inputs.servers[0][1].accumulator
        app.main.cache.tune_at = time.monotonic() + 3600  # the next 1 Hz tick has not come yet
        k2.add(process_capture(RawCapture.from_dict(capture_k(2, H2, 2, start_ms=700.0))))
        app.refresh_data()
        await pilot.pause()
        text = screen_text(app)
    assert "2.50 req/s" in text.splitlines()[1]
    # output tokens/s: 9 + 9 tokens (H2 twice) / 0.8 s = 22.50
    row = re.search(r"> k2 .*", text).group(0).split()
    assert row[:8] == [">", "k2", "-", "-", "-", "200.00", "22.50", "2.50"], row


async def test_key_8_with_one_server_says_why_instead_of_an_empty_panel():
    app = recorded()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("8")
        await pilot.pause()
        assert app.screen.maximized is None
        messages = [n.message for n in app._notifications]
    assert any(m.startswith("one server: 8 compares several") for m in messages), messages


async def test_servers_maximized_get_their_columns_at_100x30():
    """The compact layout shows the servers as a one-line strip; key 8 gives them the
    screen and their columns (AL 1 + 36/16 = 3.25 for k4's H4)."""
    from support.tui_tuning_fixtures import three_server_app

    app, _ = three_server_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        strip = screen_text(app)
        await pilot.press("8")
        await pilot.pause()
        columns = screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        again = screen_text(app)
    assert "AL 3.25 · acc" not in strip and "AL 3.25 · acc" in columns
    assert "AL 3.25 · acc" not in again  # restored: the strip again


@pytest.mark.parametrize(
    "make, size, level, kept, shed",
    [
        # one server beside two engines' health at 160x48: the series and log give rows
        ("health", (160, 48), 1, {"#row-tune", "#row-top", "#slot-health"}, set()),
        # ... at 150x44 that is not enough: the what-if row goes too (keys 6, 7 show it)
        ("health", (150, 44), 2, {"#row-top", "#slot-health"}, {"#row-tune"}),
        # three servers at 120x36 (medium: no what-if row): their strip, the top row and the
        # log fit once the series and log are at their smallest
        ("three", (120, 36), 1, {"#panel-servers", "#row-top"}, set()),
    ],
)
async def test_no_size_scrolls_the_header_or_headline_away(make, size, level, kept, shed):
    """Before FIT_STEPS the screen scrolled (14, 10 and 12 rows) and the focused log pulled
    the header and headline out of view. Now rows are shed, fewest first, until nothing
    scrolls; a terminal tall enough sheds nothing."""
    from support.tui_tuning_fixtures import three_server_app

    from tui.screens.test_tui_snapshots_modes import health_app

    def make_app() -> SpecmonApp:
        return health_app() if make == "health" else three_server_app()[0]

    app = make_app()
    async with app.run_test(size=size) as pilot:
        main = app.screen
        await until(pilot, lambda: main.virtual_size.height > 0 and main.max_scroll_y == 0, "a fit")
        await pilot.pause()
        assert main.max_scroll_y == 0 and main.scroll_y == 0 and app.main.fitter.level == level
        assert app.query_one("#header").region.y == 0
        assert app.query_one("#panel-head").region.y == 2  # right under the two header rows
        for selector in kept | shed:
            assert app.query_one(selector).display == (selector in kept), selector
        # the log keeps a border, its header and at least two rows (FLEX_ROWS)
        assert app.query_one("#panel-log").region.height >= 5
    app = make_app()
    async with app.run_test(size=(size[0], 70)) as pilot:  # tall enough: nothing shed
        await pilot.pause()
        await pilot.pause()
        assert app.main.fitter.level == 0 and app.screen.max_scroll_y == 0
        for selector in kept | shed:
            assert app.query_one(selector).display, selector
        assert app.query_one("#panel-log").styles.min_height.value == 6  # the CSS's own
