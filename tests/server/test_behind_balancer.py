"""Issue 34 item 3: a run behind a load balancer. Two `specmon sim` replicas behind nginx
(round robin), a real Prometheus scraping each replica by its own address
(tests/support/balancer_fixtures.py).

A direct scrape of the balancer's /metrics is answered by both replicas in turn: the run
names that case (and not a restart). With `--server-metrics-from prometheus:URL --selector`
the run's server counters come from the store, and they equal both the run's own
per-request totals (read here from the per-request records) and the replicas' own counters
(read here with a regex, not specmon's parser)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.balancer_fixtures import JOB, Balancer, balancer  # noqa: F401 (fixture)
from support.fleet_fixtures import truth

pytestmark = pytest.mark.e2e  # nginx, Prometheus and simulators

SELECTOR = f'{{job="{JOB}"}}'


def run(balancer: Balancer, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-m", "specmon", "run", "--headless", "--url", balancer.url,
        "--request-count", "24", "--concurrency", "2", "--output-tokens-mean", "32",
        "--artifact-dir", str(out), *extra,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def summary(out: Path) -> dict:
    return json.loads((out / "profile_export_aiperf.json").read_text())


def per_request_totals(out: Path) -> dict[str, int]:
    """Steps, accepted and drafted tokens summed over the run's per-request records."""
    totals = {"drafts": 0, "accepted_tokens": 0, "draft_tokens": 0}
    for line in (out / "profile_export.jsonl").read_text().splitlines():
        record = json.loads(line)["spec_decode_acceptance"]
        totals["drafts"] += record["num_spec_steps"]
        totals["accepted_tokens"] += record["num_accepted_draft_tokens"]
        totals["draft_tokens"] += record["num_draft_tokens"]
    return totals


def replica_truths(balancer: Balancer) -> list[dict[str, float]]:
    return [truth(sim.url) for sim in balancer.replicas]


def test_a_direct_scrape_through_the_balancer_names_several_replicas(
    balancer: Balancer, tmp_path: Path
) -> None:
    done = run(balancer, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "/metrics is answered by several replicas" in done.stdout
    assert "--server-metrics-from prometheus:" in done.stdout
    assert "restarted" not in done.stdout  # not a restart
    metrics = summary(tmp_path)["server_metrics"]
    assert metrics["replicas_answering"] >= 2
    rec = metrics["reconciliation"]
    assert rec["equal"] is False
    assert rec["reasons"][0].startswith("/metrics is answered by several replicas")


def test_counters_from_the_store_reconcile_with_the_per_request_totals(
    balancer: Balancer, tmp_path: Path
) -> None:
    before = replica_truths(balancer)
    store = f"prometheus:{balancer.prometheus.url}"
    done = run(balancer, tmp_path, "--server-metrics-from", store, "--selector", SELECTOR)
    after = replica_truths(balancer)
    assert done.returncode == 0, done.stderr
    moved = [{k: a[k] - b[k] for k in a} for a, b in zip(after, before)]
    assert all(m["drafts"] > 0 for m in moved), moved  # the balancer used both replicas
    fleet = {k: int(sum(m[k] for m in moved)) for k in moved[0]}
    # the replicas' own counters moved by exactly the run's per-request totals
    assert fleet == per_request_totals(tmp_path)
    metrics = summary(tmp_path)["server_metrics"]
    assert metrics["url"] == f"prometheus:{balancer.prometheus.url}/api/v1/query {SELECTOR}"
    got = {"drafts": metrics["drafts"], "accepted_tokens": metrics["accepted"]}
    got["draft_tokens"] = metrics["draft_tokens"]
    assert got == fleet  # the store's window: every replica's series, exact
    assert metrics["label_sets"] == 2  # one drafts series per replica
    assert metrics["replicas_answering"] == 1
    assert metrics["reconciliation"]["equal"] is True, metrics["reconciliation"]
    assert "server counters match the per-request totals" in done.stdout
    assert "several replicas" not in done.stdout


def test_a_selector_matching_nothing_says_so(balancer: Balancer, tmp_path: Path) -> None:
    store = f"prometheus:{balancer.prometheus.url}"
    done = run(balancer, tmp_path, "--server-metrics-from", store, "--selector", '{job="nope"}')
    assert done.returncode == 0, done.stderr  # the run itself is measured
    metrics = summary(tmp_path)["server_metrics"]
    assert metrics["available"] is False
    assert metrics["reason"].startswith('no series match {job="nope"}')


def test_a_store_that_is_not_a_url_is_one_line_and_status_2(tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "specmon", "run", "--headless", "--url", "http://127.0.0.1:9",
        "--server-metrics-from", "http://127.0.0.1:9090", "--artifact-dir", str(tmp_path),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "give prometheus:URL" in lines[0], lines
