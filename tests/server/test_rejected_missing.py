"""Issue 35 item 3: a rejected series is missing, never zero, wherever it feeds. A NaN or
negative accepted-tokens counter on /metrics leaves the acceptance length and rate of that
window unknown ("-" with the reason), never 1.00 and 0.0%: in the counter window, the watch's
lines and files, its --alert (which neither fires nor clears on it) and `specmon run`'s
server-metrics summary. Real processes against tests/hostile_server.py's /metrics."""

from __future__ import annotations

import json

import pytest
from support.cli import specmon
from support.hostile_server import GOOD, HostileServer, counters_page, metrics_page

from specmon.run.watch.runner import JSONL_NAME
from specmon.server.scrape import RunTotals, add_deltas, counter_delta, parse_counters, reconcile

HANG_GUARD_S = 120


@pytest.mark.parametrize(("value", "reason"), [("NaN", "NaN values"), (-5, "negative values")])
def test_a_rejected_accepted_counter_gives_no_acceptance_figure(value, reason):
    before = parse_counters(counters_page(10, 5), taken_s=0.0)
    after = parse_counters(counters_page(20, value), taken_s=1.0)
    # counters_page writes the same value on the per-position counter
    assert after.missing == {"accepted": reason, "per_pos": reason}
    delta = counter_delta(before, after)
    assert delta.count("drafts") == 10  # the good series still count
    assert delta.count("accepted") is None
    assert delta.acceptance_length is None and delta.acceptance_rate is None
    assert delta.missing_text("accepted") == f"accepted rejected: {reason}"
    # nothing compared against a missing total: only the steps differ (10 server vs 7 run)
    rec = reconcile(delta, RunTotals(steps=7, accepted=0, drafted=10))
    assert rec.diffs == {"steps": 3}


def test_a_series_held_across_a_rejected_page_loses_nothing_over_the_window():
    pages = [counters_page(10, 5), counters_page(20, "NaN"), counters_page(40, 25)]
    samples = [parse_counters(page, taken_s=float(i)) for i, page in enumerate(pages)]
    # the poller holds the previous value of a rejected series (_held): 5 on page 2
    held = samples[1].__class__(
        {**samples[0].series, **samples[1].series}, 1.0, missing=samples[1].missing
    )
    first, then = counter_delta(samples[0], held), counter_delta(held, samples[2])
    assert first.acceptance_length is None and then.acceptance_length is None  # both touch it
    window = add_deltas(first, then)
    assert window.missing == {}
    assert (window.drafts, window.accepted) == (30, 20)
    assert window.acceptance_length == pytest.approx(1 + 20 / 30)


def _nan_accepted(n: int) -> bytes:
    return counters_page(10 * n, "NaN")


@pytest.mark.e2e
def test_watch_shows_the_missing_figure_and_the_alert_does_not_fire(tmp_path):
    out = tmp_path / "watch"
    with HostileServer({"good": GOOD}, metrics=metrics_page(_nan_accepted)) as server:
        proc = specmon("watch", "--url", server.url, "--headless", "--interval", "0.2", "--duration", "2.5", "--artifact-dir", str(out), "--alert", "al<1.5 for 0.5s", timeout=HANG_GUARD_S)  # fmt: skip
    assert proc.returncode != 3, proc.stdout  # no alert on a missing figure
    assert "ALERT" not in proc.stdout and "Traceback" not in proc.stderr
    spec_lines = [line for line in proc.stdout.splitlines() if " AL " in line]
    assert spec_lines, proc.stdout
    for line in spec_lines:
        assert "AL - acc - (accepted rejected: NaN values, per_pos rejected" in line
        assert "AL 1.00" not in line and "0.0%" not in line
    rows = [json.loads(x) for x in (out / JSONL_NAME).read_text().splitlines()]
    intervals = [row["interval"] for row in rows if row.get("interval")]
    assert intervals
    for figs in intervals:
        assert figs["accepted"] is None and figs["acceptance_length"] is None
        assert figs["drafts"] == 10  # 10 more steps each scrape: the good series counts
        assert figs["missing"] == {"accepted": "NaN values", "per_pos": "NaN values"}


@pytest.mark.e2e
def test_run_summary_reads_no_acceptance_from_a_rejected_counter(tmp_path):
    out = tmp_path / "run"
    with HostileServer({"good": GOOD}, metrics=metrics_page(_nan_accepted)) as server:
        proc = specmon("run", "--headless", "--url", server.url, "--request-count", "4", "--concurrency", "1", "--artifact-dir", str(out), timeout=HANG_GUARD_S)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "acceptance length 1.00" not in proc.stdout
    assert "acceptance length -" in proc.stdout
    assert "accepted rejected: NaN values: missing, not zero" in proc.stdout
    summary = json.loads((out / "profile_export_aiperf.json").read_text())
    metrics = summary["server_metrics"]
    assert metrics["accepted"] is None and metrics["acceptance_length"] is None
    assert metrics["acceptance_rate"] is None
    assert metrics["missing_series"] == {"accepted": "NaN values", "per_pos": "NaN values"}
    assert "accepted" not in metrics["reconciliation"]["diffs"]
