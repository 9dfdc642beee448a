"""ContextTable (docs/metrics.md §15): each request's prompt tokens and its context at the
end (prompt + output, from usage), the per-context-length buckets, their intervals and
per-position acceptance, the summary's `per_context_length` beside AIPerf's keys, the JSONL
record's `context_tokens` and the monitor's panel 0, on a synthetic capture whose figures
are worked out here by hand."""

from __future__ import annotations

import asyncio
import io
import json
import math

import pytest
from rich.console import Console
from support.metrics_helpers import stream_capture, vllm_payload
from support.tui_screen import screen_text

from specmon.analysis.contexts import UNKNOWN, ContextTable, bucket_of
from specmon.decision.acceptance import Z95
from specmon.pipeline import process_capture
from specmon.session import RunSession
from specmon.sinks.categories import PER_CONTEXT_KEY
from specmon.tui.app import SpecmonApp
from specmon.tui.widgets.categories import render_rows
from specmon.tui.widgets.contexts import CONTEXT_COLUMNS, ContextView

K = 3


def capture(per_step: list[int], prompt: int | None, last_ms: int, start_ms: int = 0):
    """A streamed request: content chunks at 10 ms and `last_ms`, so its ITL (TPOT) is
    (last_ms - 10) / (completion - 1); completion = 1 + steps + accepted."""
    completion = 1 + len(per_step) + sum(per_step)
    return stream_capture(
        vllm_payload(per_step, K),
        [10, last_ms],
        start_ns=start_ms * 1_000_000,
        completion_tokens=completion,
        prompt_tokens=prompt,  # type: ignore[arg-type]  # None: usage without a prompt count
    )


def synthetic():
    # context = prompt + completion
    return [
        capture([3, 3, 0], 500, 100),  # 10 tokens, 510: <1k, ITL 90/9 = 10 ms
        capture([1, 1], 600, 90, 5),  # 5 tokens, 605: <1k, ITL 80/4 = 20 ms
        capture([2], 5000, 40, 10),  # 4 tokens, 5004: 4-16k, ITL 30/3 = 10 ms
        capture([0, 0], 8000, 50, 15),  # 3 tokens, 8003: 4-16k, ITL 40/2 = 20 ms
        capture([1], 1021, 30, 20),  # 3 tokens, 1024: exactly 1k, the 1-4k bucket
        capture([1], None, 30, 25),  # no prompt count: (unknown)
    ]


def table_of(captures) -> ContextTable:
    table = ContextTable()
    for c in captures:
        table.add(process_capture(c))
    return table


def test_each_record_carries_its_prompt_and_context_at_the_end():
    results = [process_capture(c) for c in synthetic()]
    assert [r.prompt_tokens for r in results] == [500, 600, 5000, 8000, 1021, None]
    assert [r.context_tokens for r in results] == [510, 605, 5004, 8003, 1024, None]


def test_bucket_edges():
    assert [bucket_of(n) for n in (0, 1023, 1024, 4095, 4096, 16384, 65535, 65536)] == [
        "<1k",
        "<1k",
        "1-4k",
        "1-4k",
        "4-16k",
        "16-64k",
        "16-64k",
        ">64k",
    ]


def test_per_bucket_figures_and_intervals_by_hand():
    rows = {r.bucket: r for r in table_of(synthetic()).rows()}
    assert list(rows) == ["<1k", "1-4k", "4-16k", UNKNOWN]  # shortest first, unknown last
    short, long = rows["<1k"], rows["4-16k"]
    assert short.requests == 2 and long.requests == 2 and rows["1-4k"].requests == 1
    # <1k: accepted 6 + 2 over steps 3 + 2 and drafts 9 + 6
    assert short.acceptance_length == pytest.approx(1 + 8 / 5)
    assert short.draft_acceptance_rate == pytest.approx(100 * 8 / 15)
    # the rate's ratio interval: R = 8/15, residuals 6 - 9R = 1.2, 2 - 6R = -1.2,
    # var = 2/1 * 2.88 / 15^2, se = 0.16
    assert short.draft_acceptance_rate_ci95 == pytest.approx(
        (100 * (8 / 15 - Z95 * 0.16), 100 * (8 / 15 + Z95 * 0.16))
    )
    # AL: R = 8/5, residuals 6 - 3R = 1.2, 2 - 2R = -1.2, se = sqrt(2 * 2.88) / 5
    se = math.sqrt(2 * 2.88) / 5
    assert short.acceptance_length_ci95 == pytest.approx((2.6 - Z95 * se, 2.6 + Z95 * se))
    # TPOT: ITL 10 and 20 ms, mean 15, sd sqrt(50), se 5
    assert short.tpot_ms == pytest.approx(15.0)
    assert short.tpot_ms_ci95 == pytest.approx((15 - Z95 * 5, 15 + Z95 * 5))
    # per position from the pooled histogram {0: 1, 1: 2, 3: 2}: a_1 = 4/5, a_2 = 2/4,
    # a_3 = 2/2
    assert short.per_position == pytest.approx((0.8, 0.5, 1.0))
    # 4-16k: accepted 2 over steps 3, drafts 9; histogram {0: 2, 2: 1}: a = 1/3, 1/1, 0/1
    assert long.acceptance_length == pytest.approx(1 + 2 / 3)
    assert long.draft_acceptance_rate == pytest.approx(100 * 2 / 9)
    assert long.per_position == pytest.approx((1 / 3, 1.0, 0.0))
    assert long.tpot_ms == pytest.approx(15.0)
    # two requests, residuals +-4/3 for both ratios: AL se = sqrt(2 * 32/9) / 3, rate se =
    # sqrt(2 * 32/9) / 9; the normal interval reaches below 0 accepted drafts, so its low end
    # is the least there can be (AL 1, rate 0 %)
    se_long = math.sqrt(2 * 32 / 9)
    assert long.acceptance_length_ci95 == pytest.approx((1.0, 1 + 2 / 3 + Z95 * se_long / 3))
    assert long.draft_acceptance_rate_ci95 == pytest.approx(
        (0.0, 100 * (2 / 9 + Z95 * se_long / 9))
    )
    assert rows["1-4k"].acceptance_length_ci95 is None  # one request: no interval


def test_session_exports_the_table_beside_aiperfs_keys(tmp_path):
    session = RunSession(tmp_path)
    for c in synthetic():
        session.add(c)
    session.finish()
    doc = json.loads((tmp_path / "profile_export_aiperf.json").read_text())
    per = doc[PER_CONTEXT_KEY]
    assert list(per) == ["<1k", "1-4k", "4-16k", UNKNOWN]
    short = per["<1k"]
    assert short["spec_decode_token_weighted_acceptance_length"]["avg"] == pytest.approx(2.6)
    assert short["inter_token_latency"]["avg"] == pytest.approx(15.0)
    assert short["context_tokens"] == {"low": 0, "high": 1024}
    assert per["4-16k"]["context_tokens"] == {"low": 4096, "high": 16384}
    ci = short["spec_decode_draft_acceptance_rate_ci95"]
    assert (ci["low"], ci["high"]) == pytest.approx((8 / 15 - Z95 * 0.16, 8 / 15 + Z95 * 0.16))
    tpot = short["inter_token_latency_ci95"]
    assert (tpot["unit"], tpot["low"]) == ("ms", pytest.approx(15 - Z95 * 5))
    positions = short["spec_decode_acceptance_by_position"]
    assert [p["conditional"] for p in positions] == pytest.approx([0.8, 0.5, 1.0])
    assert [p["trials"] for p in positions] == [5, 4, 2]
    # AIPerf's own keys come first and are the run's, untouched
    keys = list(doc)
    assert keys.index(PER_CONTEXT_KEY) > keys.index("request_count")
    assert doc["request_count"]["avg"] == 6
    lines = (tmp_path / "profile_export.jsonl").read_text().splitlines()
    contexts = [json.loads(line)["metadata"].get("context_tokens") for line in lines]
    assert contexts == [510, 605, 5004, 8003, 1024, None]


def test_no_prompt_counts_no_table():
    assert table_of([capture([1], None, 30)]).rows() == []


def test_the_panel_renders_intervals_and_positions():
    rows = table_of(synthetic()).rows()
    console = Console(width=140, file=io.StringIO(), color_system=None, legacy_windows=False)
    console.print(render_rows(rows, "bucket", False, 140, CONTEXT_COLUMNS))
    text = console.file.getvalue()
    assert "context ▲" in text and "a_i by position" in text
    assert "0.80 0.50 1.00" in text  # <1k's a_1..a_3
    assert f"2.60 [{2.6 - Z95 * se_al():.2f}-{2.6 + Z95 * se_al():.2f}]" in text
    assert "15.00 [5.20-24.80]" in text  # TPOT 15 +- 1.96 * 5


def se_al() -> float:
    return math.sqrt(2 * 2.88) / 5


def test_key_9_shows_the_context_table_and_x_sorts_it():
    session = RunSession.from_results([process_capture(c) for c in synthetic()])

    async def check() -> None:
        app = SpecmonApp(session, source="replay", freeze_elapsed=1.0)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("9")
            await pilot.pause(0.5)  # a refresh tick reads the session's table
            text = screen_text(app)
            assert "context ▲" in text and "4-16k" in text and "0.80 0.50 1.00" in text
            view = app.query_one(ContextView)
            assert [r.bucket for r in view.rows] == ["<1k", "1-4k", "4-16k", UNKNOWN]
            await pilot.press("x")  # next column: requests, biggest first
            assert view.sort_column == "requests" and view.descending
            assert [r.requests for r in view.rows] == [2, 2, 1, 1]
            await pilot.press("X")
            assert [r.requests for r in view.rows] == [1, 1, 2, 2]

    asyncio.run(check())
