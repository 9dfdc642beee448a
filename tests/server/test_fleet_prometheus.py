"""`specmon watch --prometheus`: a real Prometheus scraping three simulated replicas (one
exporting Ray Serve's `ray_vllm_` names, one with lower acceptance) under load; the figures
are held against the token-weighted truth from the replicas' own counters."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.fleet_fixtures import Fleet, al_between, fleet, truth  # noqa: F401 (fixture)

SELECTOR = '{job="vllm"}'


def watch(
    fleet: Fleet, out: Path, *extra: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-m", "specmon", "watch", "--prometheus", fleet.prometheus.url,
        "--selector", SELECTOR, "--headless", "--artifact-dir", str(out), *extra,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def last_rows(out: Path) -> dict[str, dict]:
    rows: dict[str, dict] = {}
    for line in (out / "watch_timeseries.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows[row["server"]] = row
    return rows


def test_fleet_and_replicas_match_the_truth(fleet: Fleet, tmp_path: Path) -> None:
    before = {name: truth(sim.url) for name, sim in fleet.replicas.items()}
    done = watch(fleet, tmp_path, "--duration", "30", "--interval", "2")
    after = {name: truth(sim.url) for name, sim in fleet.replicas.items()}
    assert done.returncode == 0, done.stderr
    rows = last_rows(tmp_path)
    assert set(rows) == {*fleet.replicas, "fleet"}
    for name in fleet.replicas:
        expected = al_between(before[name], after[name])
        got = rows[name]["total"]["acceptance_length"]
        assert abs(got / expected - 1) < 0.02, (name, got, expected)
    summed = {k: sum(after[n][k] - before[n][k] for n in fleet.replicas) for k in after[fleet.low]}
    fleet_truth = 1 + summed["accepted_tokens"] / summed["drafts"]
    got = rows["fleet"]["total"]["acceptance_length"]
    assert abs(got / fleet_truth - 1) < 0.02, (got, fleet_truth)
    # the low-acceptance replica is the one the imbalance line names
    imbalance = [line for line in done.stdout.splitlines() if "imbalance:" in line]
    assert imbalance and fleet.low in imbalance[-1], imbalance[-1:]
    assert "acceptance length" in imbalance[-1]
    # the Ray Serve replica was read, and the run says which spellings it found
    assert rows[fleet.ray]["counters_engine"] == "ray_vllm_spec_decode_num_drafts_total"
    assert "ray_vllm_spec_decode_num_drafts_total" in done.stdout
    assert "vllm:spec_decode_num_drafts_total" in done.stdout
    # the fleet line is printed with the same figure the file holds
    fleet_lines = [line for line in done.stdout.splitlines() if "] fleet:" in line]
    assert f"watch AL {got:.2f}" in fleet_lines[-1]


def test_alert_each_fires_on_the_degraded_replica(fleet: Fleet, tmp_path: Path) -> None:
    # the healthy replicas run near AL 1 + 0.8 + 0.64 + 0.51 = 2.95, the low one near
    # 1 + 0.35 + 0.12 + 0.04 = 1.51: 'al<2' holds for the low one alone
    done = watch(
        fleet,
        tmp_path,
        "--interval",
        "1",
        "--duration",
        "40",
        "--alert",
        "al<2 for 5s",
        "--alert-each",
    )
    assert done.returncode == 3, (done.returncode, done.stderr)
    assert fleet.low in done.stderr and "al<2" in done.stderr
    # the fleet row alone does not hold it (its AL is the token-weighted mean, above 2)
    fleet_only = watch(
        fleet, tmp_path / "f", "--interval", "1", "--duration", "8", "--alert", "al<2 for 5s"
    )
    assert fleet_only.returncode == 0, fleet_only.stderr
