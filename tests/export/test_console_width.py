"""Whole tables at 80, 100 and 160 columns (issue 20 item 3): the console tables after a
run, the servers side by side and the segments table fit the width (short labels, fewer
columns or stacked rows) and every number they show is printed whole; TPOT is named; the
--metric-percentiles choice decides the percentile columns."""

from __future__ import annotations

import re

import pytest

from specmon.analysis.compare import render_server_comparison
from specmon.analysis.segments import render_segment_table
from specmon.config import RunConfig, parse_percentiles
from specmon.export.console import render_console
from specmon.formatting import fmt_number

WIDTHS = (80, 100, 160)


def block(avg: float, spread: bool = True) -> dict:
    """A record metric with large values (the issue's '12,981…' was cut at 80 columns)."""
    if not spread:
        return {"unit": "x", "avg": avg}
    return {
        "unit": "x",
        "avg": avg,
        "min": avg / 2,
        "max": avg * 3,
        "p99": avg * 2.9,
        "p90": avg * 2.1,
        "p75": avg * 1.5,
        "p50": avg * 1.01,
        "p25": avg * 0.75,
        "p1": avg * 0.6,
        "std": avg / 7,
    }


BLOCKS = {
    "time_to_first_token": block(12_981.456),
    "time_to_second_token": block(15.5),
    "request_latency": block(98_765.432),
    "inter_token_latency": block(1_088.25),
    "output_token_throughput_per_user": block(201.17),
    "output_sequence_length": block(1_024.0),
    "input_sequence_length": block(4_096.0),
    "output_token_throughput": block(12_345.678, spread=False),
    "request_throughput": block(3.65, spread=False),
    "request_count": block(5_400.0, spread=False),
    "spec_decode_acceptance_length": block(2.65),
    "spec_decode_token_weighted_acceptance_length": block(2.66, spread=False),
    "spec_decode_draft_acceptance_rate": block(55.04),
    "spec_decode_steps": block(7_681.0),
    "total_spec_decode_steps": block(41_234.0, spread=False),
    "total_draft_tokens": block(123_702.0, spread=False),  # the spec table needs a record
}
HIDDEN = ("total_spec_decode_steps", "total_draft_tokens")  # summary-only rows


def numbers(text: str) -> set[str]:
    return set(re.findall(r"\d[\d,]*\.\d+", text))


def assert_whole(text: str, width: int) -> None:
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width, "\n".join(lines)
    assert "…" not in text


@pytest.mark.parametrize("width", WIDTHS)
def test_console_tables_fit_and_keep_every_avg_whole(width):
    text = render_console(BLOCKS, {0: 3, 1: 5, 2: 9}, width=width)
    assert_whole(text, width)
    for tag, values in BLOCKS.items():
        if tag not in HIDDEN:
            assert fmt_number(values["avg"]) in text, (tag, text)
    assert "TPOT" in text  # vLLM's name for AIPerf's Inter Token Latency


def test_wide_keeps_aiperf_labels_with_tpot_beside_itl():
    text = render_console(BLOCKS, None, width=160)
    assert "TPOT · Inter Token Latency (ms)" in text
    assert "Time to First Token (ms)" in text and "std" in text


def test_at_80_columns_short_labels_then_std_and_min_give_way():
    """Cells up to 10 characters (Latency max 98,765.432 x 3 = 296,296.30): with short
    labels seven columns need 1 + (10 + 3) + 7 x 13 = 105; without std and min 79 fits."""
    text = render_console(BLOCKS, None, width=80)
    header = next(line for line in text.splitlines() if "avg" in line)
    assert [c for c in re.split(r"[┃│ ]+", header) if c] == [
        "Metric",
        "avg",
        "max",
        "p99",
        "p90",
        "p50",
    ]
    assert "TTFT ms" in text and "TPOT ms" in text
    # 12,981.456 x 2.9 = 37,646.22 (p99) and x 3 = 38,944.37 (max), whole
    assert "37,646.22" in text and "38,944.37" in text
    wide = render_console(BLOCKS, None, width=120)
    assert "std" in wide and "min" in wide


def test_narrower_still_drops_columns_then_stacks():
    text = render_console(BLOCKS, None, width=60)
    assert_whole(text, 60)
    assert "std" not in text  # std goes first
    assert "p50" in text and "p99" in text  # the last percentiles to give way
    stacked = render_console(BLOCKS, None, width=34)
    assert_whole(stacked, 34)
    # under "Latency ms": avg 98,765.43, then min 49,382.72 .. std 14,109.35 (98,765.432 / 7)
    at = stacked.splitlines().index("Latency ms")
    assert stacked.splitlines()[at + 1].split("  ")[1:] == ["avg 98,765.43", "min 49,382.72"]
    assert "std 14,109.35" in stacked


def test_metric_percentiles_choose_the_columns():
    assert parse_percentiles("50, p90,99") == (50, 90, 99)
    with pytest.raises(ValueError, match="'42' is not one of 1,5,10,25,50,75,90,95,99"):
        parse_percentiles("42")
    assert RunConfig(metric_percentiles="25,75").metric_percentiles == "25,75"
    text = render_console(BLOCKS, None, width=160, percentiles=(25, 50, 1))
    header = next(line for line in text.splitlines() if "avg" in line)
    assert [c for c in re.split(r"[┃│ ]+", header) if c][1:] == [
        "avg",
        "min",
        "max",
        "p50",
        "p25",
        "p1",
        "std",
    ]
    # TTFT p25 = 12,981.456 x 0.75 = 9,736.09; p1 x 0.6 = 7,788.87
    assert "9,736.09" in text and "7,788.87" in text and "p99" not in text


def _summary(scale: float) -> dict:
    return {
        tag: {k: v * scale if isinstance(v, float) else v for k, v in b.items()}
        for tag, b in BLOCKS.items()
    }


LABELS = ("http://127.0.0.1:18801", "http://127.0.0.1:18802", "http://127.0.0.1:18803")


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("servers", (1, 3))
def test_servers_side_by_side_fit(width, servers):
    summaries = {label: _summary(1 + i / 10) for i, label in enumerate(LABELS[:servers])}
    text = render_server_comparison(summaries, dict.fromkeys(summaries, 3), width=width)
    assert_whole(text, width)
    # TTFT p50 of each server: 12,981.456 x 1.01 x 1.0 / 1.1 / 1.2
    for p50 in ("13,111.27", "14,422.40", "15,733.52")[:servers]:
        assert p50 in text, text
    assert "TPOT" in text


def _segment_rows(servers: int) -> list[dict]:
    rows = []
    for seg in range(3):
        for s in range(servers):
            rows.append(
                {
                    "segment": seg,
                    "server": LABELS[s] if servers > 1 else None,
                    "settings": {"concurrency": 4 * (seg + 1), "request_rate": 12.5},
                    "num_spec_tokens": 3,
                    "request_count": 1_234,
                    "acceptance_length": 2.654,
                    "tpot_ms": 12.25,
                    "output_token_throughput": 12_345.67 * (seg + 1),
                    "request_throughput": 17.5,
                    "recommended_k": 4,
                    "draft_cost": 0.125,
                }
            )
    return rows


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("servers", (1, 3))
def test_segments_table_fits(width, servers):
    text = render_segment_table(_segment_rows(servers), width=width)
    assert_whole(text, width)
    # out tok/s 12,345.67 x 1, 2, 3 with one decimal (the segments table has no separators)
    for value in ("12345.7", "24691.3", "37037.0"):
        assert value in text
    assert text.count("2.65") == 3 * servers  # every row's acceptance length, whole
