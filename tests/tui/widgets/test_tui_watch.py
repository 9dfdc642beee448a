"""The watch monitor (Pilot) over a WatchRun fed hand-written /metrics pages
(tests/support/watch_fixtures.py, hand-computed figures in its docstring): the headline and the
histogram show the server's figures, the per-request panels say why they are empty, the
health panel shows, and no reconciliation with requests it never sent."""

from __future__ import annotations

import asyncio

from support.watch_fixtures import EXPECTED_HIST, fed_watch, watch_app

from specmon.run.watch.runner import NO_REQUESTS, watch_series
from specmon.tui.widgets.headline import HeadlineView
from specmon.tui.widgets.health import HealthView
from specmon.tui.widgets.histogram import HistogramView
from specmon.tui.widgets.stats_table import StatsTable
from specmon.tui.widgets.tuning import CountersView


def _text(widget) -> str:
    return str(widget.render())  # Static: the Text it shows


def test_watch_screen_shows_server_figures_and_says_why_panels_are_empty(tmp_path):
    async def run() -> None:
        app = watch_app(tmp_path)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            app.main.cache.tune_at = 0.0  # the 1 Hz views now, not after a second
            app.refresh_data()
            await pilot.pause()
            head = app.main.query_one(HeadlineView)._shown  # the Headline it painted
            assert head is not None
            # the counters pool every step, 1 + ΣA/ΣD: the token-weighted AL and the overall
            # rate; the per-request means (AL, draft acc) need requests
            assert head.al_token_weighted == 2.5 and head.overall_rate_pct == 50.0
            assert head.al is None and head.draft_rate_pct is None and head.ttft_p50_ms is None
            # no per-request rate: the bare N/A, never "N/A%" (issue 20 item 5)
            line = str(app.main.query_one(HeadlineView).render_line(0).text)
            assert "draft acc N/A " in line and "overall 50.00%" in line and "N/A%" not in line
            assert app.main.query_one(HistogramView)._hist == EXPECTED_HIST
            for table in ("#spec-table", "#latency-table"):
                assert NO_REQUESTS in _text(app.query_one(table, StatsTable))
            assert NO_REQUESTS in str(app.query_one("#panel-log").border_title)
            health = _text(app.main.query_one(HealthView))
            # last interval: running 3, waiting 0, KV 20.0%, (2000 - 1300) tokens / 1 s
            assert health.splitlines()[2].split() == ["3", "0", "20.0", "700"]
            counters = _text(app.main.query_one(CountersView))
            assert "AL 2.50" in counters and "reconciliation" not in counters
            await pilot.press("q")

    asyncio.run(run())


def test_watch_series_bins_rows_by_scrape(tmp_path):
    rows = list(fed_watch(tmp_path).tracks["sim"].rows)
    series = watch_series(rows, None, 3.0, 60, interval_s=1.0)
    # 3 s at >= 1 s a bin: three bins; rows at 0 (baseline), 1, 2 and 3 s (the last bin
    # holds 2 and 3). AL per bin: -, 1 + 140/100, 1 + (160 + 150)/(100 + 100)
    assert series["al"] == [None, 2.4, 2.55]
    # generation tokens/s: 600/1 s; the mean of 700/1 s and 700/1 s
    assert series["tok_s"] == [None, 600.0, 700.0]
    assert series["ttft_p50"] == [None] * 3 and series["err_pct"] == [None] * 3
    # a 1 s window [2 s, 3 s] keeps the rows at 2 and 3 s, in one bin
    assert watch_series(rows, 1.0, 3.0, 60, interval_s=1.0)["al"] == [2.55]
