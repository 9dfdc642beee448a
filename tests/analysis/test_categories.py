"""CategoryTable, its sink, the CSV section, compare's per-category rows and the request-log
filter, on hand-built requests whose figures are worked out here by hand."""

from __future__ import annotations

import asyncio
import csv
import json
import math

import pytest
from support.metrics_helpers import nonstream_capture, vllm_payload

from specmon.analysis.categories import (
    UNCATEGORIZED,
    CategoryRow,
    CategoryTable,
    sort_rows,
)
from specmon.analysis.compare import build_rows, category_rows
from specmon.decision.acceptance import Z95
from specmon.export.csv_export import build_csv
from specmon.pipeline import process_capture
from specmon.session import RunSession
from specmon.tui.app import SpecmonApp
from specmon.tui.widgets.request_log import RequestLog

K = 3


def capture(per_step: list[int], category: str | None, start_ms: int = 0, **extra):
    return nonstream_capture(
        vllm_payload(per_step, K),
        start_ns=start_ms * 1_000_000,
        completion_tokens=1 + len(per_step) + sum(per_step),
        category=category,
        **extra,
    )


def three_captures():
    # a: (steps 3, accepted 6) and (2, 2); b: (1, 2)
    return [
        capture([3, 3, 0], "a", 0),
        capture([1, 1], "b_is_a_long_name", 10),
        capture([2], "b_is_a_long_name", 20),
        capture([1, 1], "a", 30),
    ]


def table_of_captures(captures) -> CategoryTable:
    table = CategoryTable()
    for c in captures:
        table.add(process_capture(c))
    return table


def test_figures_and_interval_by_hand():
    table = table_of_captures(
        [capture([3, 3, 0], "a"), capture([1, 1], "a"), capture([2], "b"), capture([1], "b")]
    )
    rows = {r.category: r for r in table.rows()}
    assert list(rows) == ["a", "b"]
    a, b = rows["a"], rows["b"]
    assert a.requests == 2 and b.requests == 2
    assert a.acceptance_length == pytest.approx(1 + 8 / 5)
    assert a.draft_acceptance_rate == pytest.approx(100 * 8 / 15)
    assert b.acceptance_length == pytest.approx(1 + 3 / 2)
    # R = 8/5; residuals a - R s: 6 - 4.8 = 1.2, 2 - 3.2 = -1.2; var = 2/1 * 2.88 / 25
    se = math.sqrt(2 * 2.88) / 5
    assert a.acceptance_length_ci95 == pytest.approx((2.6 - Z95 * se, 2.6 + Z95 * se))
    block = table.export_block()["a"]
    assert block["pooled_spec_decode_acceptance_histogram"] == {"0": 1, "1": 2, "3": 2}
    assert block["total_spec_decode_steps"]["avg"] == 5.0
    assert block["spec_decode_acceptance_length_ci95"]["low"] == pytest.approx(2.6 - Z95 * se)
    # per-request AL 3.0 and 2.0: the record metric's avg is their mean
    assert block["spec_decode_acceptance_length"]["avg"] == pytest.approx(2.5)


def test_one_request_has_no_interval_and_warmup_is_left_out():
    table = table_of_captures([capture([1], "a"), capture([3], "a", benchmark_phase="warmup")])
    (row,) = table.rows()
    assert row.requests == 1 and row.acceptance_length_ci95 is None
    assert row.acceptance_length == pytest.approx(2.0)


def test_uncategorised_requests_only_count_beside_categorised_ones():
    none_only = table_of_captures([capture([1], None), capture([2], None)])
    assert none_only.categories() == [] and none_only.export_block() == {}
    mixed = table_of_captures([capture([1], None), capture([2], "a")])
    assert mixed.categories() == [UNCATEGORIZED, "a"]
    assert mixed.export_block()[UNCATEGORIZED]["request_count"]["avg"] == 1.0


def test_catch_up_reads_only_new_results():
    results = [process_capture(c) for c in three_captures()]
    table = CategoryTable()
    assert table.catch_up(results[:2]) == 2
    assert table.catch_up(results) == 2
    assert table.catch_up(results) == 0
    assert {r.category: r.requests for r in table.rows()} == {"a": 2, "b_is_a_long_name": 2}


def test_a_category_keeps_its_statistics_but_no_results():
    """Memory (issue 19 item 6): the run's accumulator keeps the request log; each category
    only its statistics."""
    results = [process_capture(c) for c in three_captures()] * 50
    table = CategoryTable()
    table.catch_up(results)
    acc = table.accumulator("a")
    assert acc is not None and acc.request_count == 100
    assert acc.results.first_kept == len(acc.results) == 100  # none held
    assert acc.summary()["request_count"]["avg"] == 100


def test_sort_rows_any_column_missing_values_last():
    def row(name, al):
        return CategoryRow(name, 1, al, None, None, None, None)

    rows = [row("x", 2.0), row("y", None), row("z", 3.0)]
    assert [r.category for r in sort_rows(rows, "acceptance_length", True)] == ["z", "x", "y"]
    assert [r.category for r in sort_rows(rows, "acceptance_length")] == ["x", "z", "y"]
    assert [r.category for r in sort_rows(rows, "category", True)] == ["z", "y", "x"]
    with pytest.raises(ValueError, match="unknown column"):
        sort_rows(rows, "nope")


def test_session_writes_per_category_json_and_csv(tmp_path):
    session = RunSession(tmp_path)
    for c in three_captures():
        session.add(c)
    session.finish()
    doc = json.loads((tmp_path / "profile_export_aiperf.json").read_text())
    per = doc["per_category"]
    assert list(per) == ["a", "b_is_a_long_name"]
    assert per["a"]["spec_decode_token_weighted_acceptance_length"]["avg"] == pytest.approx(2.6)
    assert per["b_is_a_long_name"]["total_accepted_draft_tokens"]["avg"] == 4.0  # 2 + 2
    rows = list(csv.reader((tmp_path / "profile_export_aiperf.csv").read_text().splitlines()))
    scalars = rows.index(["Category", "Metric", "Value"])
    values = {(r[0], r[1]): r[2] for r in rows[scalars + 1 :] if r}
    assert values[("a", "Token-Weighted Acceptance Length (ratio)")] == "2.60"
    assert values[("b_is_a_long_name", "Total Spec Decode Steps")] == "3.00"
    records = rows.index(["Category", "Metric", *rows[0][1:]])  # same stat columns as AIPerf's
    assert records < scalars and rows[records + 1][0] == "a"


def test_csv_without_categories_is_aiperfs_two_sections():
    blocks = {"request_count": {"unit": "requests", "avg": 2.0}}
    assert build_csv(blocks) == build_csv(blocks, {}) == "Metric,Value\r\nRequest Count,2.00\r\n"


def test_compare_per_category_deltas():
    def summary(al_a, n_b=None):
        per = {
            "a": {"spec_decode_token_weighted_acceptance_length": {"unit": "ratio", "avg": al_a}}
        }
        if n_b is not None:
            per["b"] = {"request_count": {"unit": "requests", "avg": n_b}}
        return {"per_category": per}

    rows = category_rows([summary(2.0, 10.0), summary(2.5)])
    by = {(r.section, r.tag): r for r in rows}
    al = by[("category a", "spec_decode_token_weighted_acceptance_length")]
    assert al.values == [2.0, 2.5] and al.deltas == [0.0, 0.5] and al.delta_pct[1] == 25.0
    missing = by[("category b", "request_count")]
    assert missing.values == [10.0, None] and missing.deltas[1] is None
    assert [r.section for r in build_rows([summary(2.0), summary(2.5)], [3, 3])][-1] == (
        "category a"
    )


def test_log_filter_matches_a_full_category_name():
    session = RunSession.from_results([process_capture(c) for c in three_captures()])

    async def check() -> None:
        app = SpecmonApp(session, source="replay", freeze_elapsed=1.0)
        async with app.run_test(size=(120, 36)) as pilot:
            log = app.query_one(RequestLog)
            log.set_filter("b_is_a_long_name")  # the log line shows only "b_is_a_l"
            await pilot.pause()
            assert len(log._rows) == 2
            log.set_filter("a")  # a substring still matches as before: every line has an "a"
            assert len(log._rows) == 4

    asyncio.run(check())
