"""/metrics can never take a run down (issue 19 item 2): the page parser's per-series
rejections checked by hand, then `specmon run --headless` as a real process against a real
loopback server (tests/support/hostile_server.py) whose /metrics is slow, trickles, is endless, turns
NaN late, or carries absurd labels: every request is in the exports, no traceback, exit 0,
and the console names what happened to the server metrics."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.hostile_server import (
    GOOD,
    HostileServer,
    counters_page,
    hostile_metrics,
    metrics_page,
)

from specmon.errors import UserError
from specmon.server.scrape import MAX_LINE_BYTES, SCRAPE_TIMEOUT_S, parse_counters

SPECMON = [sys.executable, "-m", "specmon"]
COUNT = 60


def _drafts(page: bytes) -> float:
    return parse_counters(page).totals()["drafts"]


def test_each_absurd_series_is_rejected_with_its_reason_and_the_rest_counts():
    good = counters_page(10, 5)
    assert parse_counters(good).rejected == {}
    assert parse_counters(good).totals() == {
        "drafts": 10,
        "draft_tokens": 10,
        "accepted": 5,
        "per_pos": {0: 5},
    }
    bad_lines = [
        'vllm:spec_decode_num_drafts_total{engine="1"} NaN',
        'vllm:spec_decode_num_drafts_total{engine="2"} +Inf',
        'vllm:spec_decode_num_drafts_total{engine="3"} -4',
        f'vllm:spec_decode_num_drafts_total{{engine="4"}} {2.0**64}',
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="5",position="1000000000"} 3',
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="6",position="-1"} 3',
        'vllm:spec_decode_num_drafts_total{engine="7" oops',
        "vllm:spec_decode_num_drafts_total{" + ",".join(f'l{i}="v"' for i in range(10_000)) + "} 1",
    ]
    sample = parse_counters(good + ("\n".join(bad_lines) + "\n").encode())
    assert sample.rejected == {
        "NaN values": 1,
        "infinite values": 1,
        "negative values": 1,
        "values past 2^63": 1,
        "position labels not in 0..1023": 2,
        "malformed lines": 1,
        f"lines over {MAX_LINE_BYTES} bytes": 1,
    }
    assert sample.totals()["drafts"] == 10  # engine 0 alone: every bad one left out
    assert sample.totals()["per_pos"] == {0: 5}


def test_a_page_with_only_rejected_lines_is_an_error_and_other_series_are_ignored():
    with pytest.raises(UserError, match="every line rejected"):
        parse_counters(b"vllm:spec_decode_num_drafts_total NaN\n")
    # a huge line of a series specmon does not read is not even looked at
    other = b"other_metric{" + b"x" * 100_000 + b"} 1\n"
    assert _drafts(counters_page(3, 1) + other) == 3


def _run(url: str, out) -> subprocess.CompletedProcess:
    command = [
        *SPECMON, "run", "--url", url, "--headless", "--request-count", str(COUNT),
        "--concurrency", "2", "--artifact-dir", str(out), "--export-level", "records",
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=240)


def _nan_late(n: int) -> bytes:
    """Good at the baseline, then NaN steps: the end-of-run scrapes see it."""
    return counters_page(10 * n, 5 * n) if n == 1 else counters_page("NaN", 5 * n)


HOSTILE = hostile_metrics(SCRAPE_TIMEOUT_S)
CASES = {
    # (mode, what the console says about server metrics)
    "slow": (HOSTILE["slow"], "server metrics unavailable: ReadTimeout"),
    "trickle": (
        HOSTILE["trickle"],
        f"server metrics unavailable: no complete page within {SCRAPE_TIMEOUT_S:g} s",
    ),
    "endless": (HOSTILE["endless"], "server metrics unavailable: page larger than 16 MiB"),
    "nan_late": (metrics_page(_nan_late), "NaN values"),
    "huge_position": (HOSTILE["huge_position"], "rejected series on /metrics:"),
    "ten_thousand_labels": (HOSTILE["ten_thousand_labels"], f"lines over {MAX_LINE_BYTES} bytes"),
}  # fmt: skip


@pytest.mark.e2e
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_metrics_page_never_takes_the_run_down(tmp_path, case):
    mode, said = CASES[case]
    out = tmp_path / "run"
    with HostileServer({"good": GOOD}, metrics=mode) as server:
        proc = _run(server.url, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert said in proc.stdout, proc.stdout[-2000:]
    summary = json.loads((out / "profile_export_aiperf.json").read_text())
    assert summary["request_count"]["avg"] == COUNT
    lines = (out / "profile_export.jsonl").read_text().splitlines()
    assert len(lines) == COUNT and all(json.loads(line) for line in lines)
    assert (out / "profile_export_aiperf.csv").read_text().strip()
    metrics = summary["server_metrics"]
    if "unavailable" in said:
        assert metrics["available"] is False
        assert f"server metrics unavailable: {metrics['reason']}" in proc.stdout
    else:
        assert metrics["rejected_series"]
