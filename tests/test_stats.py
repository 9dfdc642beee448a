"""specmon.stats: AIPerf's percentile method and population std, checked by hand."""

import math

import pytest
from support.metrics_helpers import AIPERF_CSV_STATS, AIPERF_JSON_STATS

from specmon.stats import (
    CSV_STAT_KEYS,
    JSON_STAT_KEYS,
    METRICS,
    MetricRow,
    compute_stats,
    metric_block,
    metric_row,
    pairwise_sum,
    percentile,
    row_value,
    summary_rows,
)


def test_percentiles_by_hand_on_five_values():
    xs = [50.0, 10.0, 40.0, 20.0, 30.0]  # unsorted on purpose
    st = compute_stats(xs)
    # sorted [10,20,30,40,50], n-1 = 4, v = q/100*4
    assert st["p25"] == 20.0  # v = 1.0 -> x[1]
    assert st["p50"] == 30.0  # v = 2.0
    assert st["p75"] == 40.0  # v = 3.0
    assert st["p1"] == pytest.approx(10.4, rel=1e-12)  # v = 0.04 -> 10 + 0.04*10
    assert st["p5"] == pytest.approx(12.0, rel=1e-12)  # v = 0.2 -> 10 + 0.2*10
    assert st["p10"] == pytest.approx(14.0, rel=1e-12)  # v = 0.4
    assert st["p90"] == pytest.approx(46.0, rel=1e-12)  # v = 3.6 -> 40 + 0.6*10
    assert st["p95"] == pytest.approx(48.0, rel=1e-12)  # v = 3.8
    assert st["p99"] == pytest.approx(49.6, rel=1e-12)  # v = 3.96
    assert (st["min"], st["max"], st["count"], st["sum"], st["avg"]) == (10.0, 50.0, 5, 150.0, 30.0)
    # population std: deviations 20,10,0,10,20 -> squares sum 1000 / 5 = 200
    assert st["std"] == math.sqrt(200.0)


def test_worked_example_steps_statistics():
    st = compute_stats([2, 3, 1, 4, 2, 0, 3, 3])
    # sorted [0,1,2,2,3,3,3,4]; n-1 = 7
    assert st["p50"] == 2.5  # v = 3.5 -> 2 + 0.5*(3-2)
    assert st["p25"] == 1.75  # v = 1.75 -> 1 + 0.75*(2-1)
    assert st["p90"] == pytest.approx(3.3, rel=1e-12)  # v = 6.3 -> 3 + 0.3*(4-3)
    assert st["avg"] == 2.25  # 18 / 8
    # squared deviations from 2.25 sum to 11.5; 11.5 / 8 = 1.4375
    assert st["std"] == math.sqrt(1.4375)


def test_single_value_and_empty():
    st = compute_stats([7])
    assert all(st[k] == 7.0 for k in ("avg", "min", "max", "p1", "p50", "p99"))
    assert st["std"] == 0.0 and st["count"] == 1
    with pytest.raises(ValueError):
        compute_stats([])
    with pytest.raises(ValueError):
        percentile([], 50)


def test_running_total_is_used_for_avg_and_sum():
    st = compute_stats([1.0, 2.0, 3.0], total=6.0)
    assert st["avg"] == 2.0 and st["sum"] == 6.0


def test_fast_std_agrees_with_exact():
    xs = [i * 0.37 + (i % 7) * 1.1 for i in range(1000)]
    exact = compute_stats(xs, exact=True)["std"]
    fast = compute_stats(xs, exact=False)["std"]
    assert fast == pytest.approx(exact, rel=1e-12)


def test_pairwise_sum_matches_exact_sum_on_integers_and_large_n():
    xs = [float(i) for i in range(1, 1001)]
    assert pairwise_sum(xs) == 500500.0  # 1000*1001/2
    assert pairwise_sum([0.1] * 10) == pytest.approx(1.0, rel=1e-15)
    assert pairwise_sum([]) == 0.0


def test_key_orders_and_block_shapes():
    assert JSON_STAT_KEYS == AIPERF_JSON_STATS
    assert CSV_STAT_KEYS == AIPERF_CSV_STATS
    block = metric_block("spec_decode_steps", compute_stats([1, 2]))
    assert list(block) == ["unit", *JSON_STAT_KEYS] and block["unit"] == "count"
    assert metric_block("total_draft_tokens", value=44.0) == {"unit": "tokens", "avg": 44.0}


def test_units_match_aiperf():
    units = {t: d.unit for t, d in METRICS.items()}
    assert units["spec_decode_acceptance_length"] == "ratio"
    assert units["spec_decode_draft_acceptance_rate"] == "%"
    assert units["spec_decode_overall_draft_acceptance_rate"] == "%"
    assert units["spec_decode_steps"] == "count"
    assert units["spec_decode_draft_tokens"] == "tokens"
    assert units["spec_decode_zero_step_requests"] == "requests"
    assert units["time_to_first_token"] == "ms"
    assert units["output_token_throughput_per_user"] == "tokens/sec/user"
    assert units["request_throughput"] == "requests/sec"


def test_the_typed_row_is_what_the_export_block_is_written_from():
    row = metric_row("spec_decode_steps", compute_stats([1, 2, 6]))
    assert (row.avg, row.min, row.max, row.count, row.sum) == (3.0, 1.0, 6.0, 3, 9.0)
    assert row.get("p50") == row.p50 == 2.0 and not row.derived
    block = row.block()
    assert list(block) == ["unit", *JSON_STAT_KEYS] and block["unit"] == "count"
    assert block == metric_block("spec_decode_steps", compute_stats([1, 2, 6]))
    derived = metric_row("total_draft_tokens", value=44.0)
    assert derived.derived and derived.get("p50") is None
    assert derived.block() == {"unit": "tokens", "avg": 44.0}
    with pytest.raises(KeyError):
        row.get("median")


def test_a_block_reads_back_as_the_row_it_was_written_from():
    row = metric_row("spec_decode_steps", compute_stats([1, 2, 6]))
    assert MetricRow.of_block(row.block()) == row
    derived = MetricRow.of_block({"unit": "tokens", "avg": 44.0})
    assert derived == MetricRow("tokens", 44.0, derived=True)
    # a column that is not a number (a hand-edited or foreign file) reads as None
    assert MetricRow.of_block({"unit": "ms", "avg": "fast", "p50": True}).avg is None


def test_summary_rows_and_row_value():
    summary = {
        "total_draft_tokens": {"unit": "tokens", "avg": 120.0},
        "time_to_first_token": metric_row("time_to_first_token", compute_stats([10, 30])).block(),
        "cancelled_request_count": 2,  # an extra, not a metric block
        "pooled_spec_decode_acceptance_histogram": {"0": 3},
    }
    rows = summary_rows(summary)
    assert set(rows) == {"total_draft_tokens", "time_to_first_token"}
    assert row_value(rows, "total_draft_tokens") == 120.0
    assert row_value(rows, "time_to_first_token", "p50") == 20.0  # (10 + 30) / 2
    assert row_value(rows, "total_draft_tokens", "p50") is None  # derived: avg only
    assert row_value(rows, "request_latency") is None
