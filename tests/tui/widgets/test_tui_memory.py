"""What the monitor keeps per request (issue 19 item 6: the TUI's memory flat at a million
requests): the categories panel reads the session's own per-category table instead of
building a second one from the results, and the request log holds no list of every row
index while unfiltered."""

from __future__ import annotations

import asyncio

from support.metrics_helpers import nonstream_capture, vllm_payload

from specmon.pipeline import process_capture
from specmon.session import RunSession
from specmon.tui.app import SpecmonApp
from specmon.tui.widgets.categories import CategoriesView
from specmon.tui.widgets.request_log import RequestLog


def _capture(per_step: list[int], category: str, start_ms: int):
    return nonstream_capture(
        vllm_payload(per_step, 3),
        start_ns=start_ms * 1_000_000,
        completion_tokens=1 + len(per_step) + sum(per_step),
        category=category,
    )


def _session() -> RunSession:
    # a: steps (3, 2), accepted (6, 2): AL 1 + 8/5; b: one request, steps 1, accepted 2: AL 3
    captures = [_capture([3, 3, 0], "a", 0), _capture([2], "b", 10), _capture([1, 1], "a", 20)]
    return RunSession.from_results([process_capture(c) for c in captures])


def test_the_categories_panel_shows_the_sessions_table_and_keeps_none_of_its_own():
    session = _session()

    async def check() -> None:
        app = SpecmonApp(session, source="replay", freeze_elapsed=1.0)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("9")
            await pilot.pause()
            view = app.query_one(CategoriesView)
            rows = {r.category: r for r in view.rows}
            assert rows["a"].requests == 2 and rows["b"].requests == 1
            assert rows["a"].acceptance_length == 1 + 8 / 5
            assert rows["b"].acceptance_length == 3.0
            # the model read the session's own table: no second one built from the results
            assert app.main.cache.group_tables == {}

    asyncio.run(check())


def test_the_unfiltered_log_keeps_no_list_of_row_indices():
    session = _session()

    async def check() -> None:
        app = SpecmonApp(session, source="replay", freeze_elapsed=1.0)
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.pause()
            log = app.query_one(RequestLog)
            assert log._rows == range(3)  # every row, as a range: no memory per request
            log.set_filter("b")
            await pilot.pause()
            assert list(log._rows) == [1]
            log.set_filter("")
            assert log._rows == range(3)

    asyncio.run(check())
