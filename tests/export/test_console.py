"""Console tables and the one-line pooled histogram (docs/metrics.md §8.4)."""

import io

from support.metrics_helpers import SECOND, WORKED, nonstream_capture, vllm_payload

from specmon.accumulator import RunAccumulator
from specmon.export.console import histogram_line, print_console, render_console, row_label
from specmon.pipeline import process_capture

PREFIX = "  Accepted drafts per step (% of steps):  "


def test_histogram_line_examples_from_the_reference():
    assert (
        histogram_line({0: 6100, 1: 300, 2: 1800, 3: 1800})
        == PREFIX + "0: 61%   1: 3%   2: 18%   3: 18%"
    )
    # 2/16 = 12.5 -> "12" and 6/16 = 37.5 -> "38": round half to even
    assert (
        histogram_line({0: 2, 1: 2, 2: 4, 3: 6, 4: 2})
        == PREFIX + "0: 12%   1: 12%   2: 25%   3: 38%   4: 12%"
    )


def test_histogram_line_folds_buckets_from_eight():
    # buckets 0..11 one step each: 1/12 = 8.3 % eight times, then 4/12 = 33.3 %
    line = histogram_line({j: 1 for j in range(12)})
    assert line == PREFIX + "   ".join([f"{j}: 8%" for j in range(8)] + [">=8: 33%"])
    assert line.count(":") == 1 + 9  # the label's colon + nine entries


def test_histogram_line_shows_gaps_and_exactly_eight():
    assert histogram_line({0: 1, 3: 1}) == PREFIX + "0: 50%   1: 0%   2: 0%   3: 50%"
    # a key of exactly 8 folds alone: 0..7 then >=8
    assert histogram_line({0: 1, 8: 1}).endswith("7: 0%   >=8: 50%")


def test_histogram_line_peer_run():
    # aiperf-peer.md: {"0":1060,"1":512,"2":292,"3":460} printed as 46/22/13/20
    # 1060/2324 = 45.6, 512/2324 = 22.03, 292/2324 = 12.56, 460/2324 = 19.79
    assert (
        histogram_line({0: 1060, 1: 512, 2: 292, 3: 460})
        == PREFIX + "0: 46%   1: 22%   2: 13%   3: 20%"
    )


def test_histogram_line_empty_or_all_zero():
    assert histogram_line({}) is None
    assert histogram_line(None) is None
    assert histogram_line({0: 0, 1: 0}) is None


def test_row_labels_wrap_after_thirty_characters():
    assert row_label("spec_decode_acceptance_length") == "Acceptance Length (ratio)"
    # "Token-Weighted Acceptance Length" is 32 characters
    assert (
        row_label("spec_decode_token_weighted_acceptance_length")
        == "Token-Weighted Acceptance Length\n(ratio)"
    )
    # "Overall Draft Acceptance Rate" is 29: no wrap
    assert (
        row_label("spec_decode_overall_draft_acceptance_rate")
        == "Overall Draft Acceptance Rate (%)"
    )


def _summary(*captures):
    acc = RunAccumulator(live=False)
    for cap in captures:
        acc.add(process_capture(cap))
    return acc.summary(), acc.pooled_histogram_sorted()


def test_spec_table_rows_values_and_na():
    blocks, hist = _summary(
        nonstream_capture(vllm_payload(WORKED, k=4)),
        nonstream_capture(vllm_payload(SECOND, k=4), start_ns=10**9),
    )
    text = render_console(blocks, hist)
    lines = text.splitlines()
    assert any("LLM Metrics: Spec Decode" in ln for ln in lines)
    assert any("LLM Metrics" in ln and "Spec" not in ln for ln in lines)
    row = next(ln for ln in lines if "Spec Decode Steps (count)" in ln)
    # steps 8 and 3: avg 5.50 min 3.00 max 8.00 p99 7.95 p90 7.50 p50 5.50 std 2.50
    assert [c.strip() for c in row.split("│")[2:-1]] == [
        "5.50",
        "3.00",
        "8.00",
        "7.95",
        "7.50",
        "5.50",
        "2.50",
    ]
    twal = next(ln for ln in lines if "Token-Weighted Acceptance Length" in ln)
    assert [c.strip() for c in twal.split("│")[2:-1]] == ["2.82"] + ["N/A"] * 6
    wrapped = lines[lines.index(twal) + 1]  # the unit wraps onto its own line
    cells = [c.strip() for c in wrapped.split("│")[1:-1]]
    assert cells == ["(ratio)"] + [""] * 7
    overall = next(ln for ln in lines if "Overall Draft Acceptance Rate (%)" in ln)
    assert "45.45" in overall
    # hidden rows stay out of the console
    assert "Accepted Draft Tokens" not in text and "Total Draft Tokens" not in text
    # the histogram line sits directly under the table: {0:2,1:3,2:2,3:3,4:1} of 11 steps
    hist_idx = next(i for i, ln in enumerate(lines) if ln.startswith(PREFIX))
    assert lines[hist_idx] == PREFIX + "0: 18%   1: 27%   2: 18%   3: 27%   4: 9%"
    assert lines[hist_idx - 1].startswith("└")
    assert "\x1b[" not in text  # plain text, no colour codes


def test_no_spec_table_or_line_without_a_record():
    blocks, hist = _summary(nonstream_capture(None), nonstream_capture(vllm_payload([], k=4)))
    text = render_console(blocks, hist)
    assert "Spec Decode" not in text and "Accepted drafts" not in text
    assert "Request Latency (ms)" in text and "Request Count (requests)" in text


def test_thousands_separator_and_error_line():
    blocks = {
        "request_latency": {
            "unit": "ms",
            "avg": 12345.678,
            "min": 1.0,
            "max": 99999.0,
            "p99": 1.0,
            "p90": 1.0,
            "p50": 1.0,
            "std": 0.0,
        }
    }
    text = render_console(blocks, None, error_summary={"timeout": 2, "http_error": 1})
    assert "12,345.68" in text and "99,999.00" in text
    assert "Errors: 3 (timeout: 2, http_error: 1)" in text


def test_print_console_to_a_pipe_is_plain():
    blocks, hist = _summary(nonstream_capture(vllm_payload(WORKED, k=4)))
    buf = io.StringIO()
    print_console(blocks, hist, file=buf)
    out = buf.getvalue()
    assert "\x1b[" not in out and PREFIX + "0: 12%   1: 12%   2: 25%   3: 38%   4: 12%" in out
