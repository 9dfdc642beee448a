"""`specmon watch --prometheus`: a real Prometheus scraping three simulated replicas (one
exporting Ray Serve's `ray_vllm_` names, one with lower acceptance) under load; the figures
are held against the token-weighted truth from the replicas' own counters."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.fleet_fixtures import Fleet, al_between, fleet, truth  # noqa: F401 (fixture)

# one worker starts the fleet (Prometheus, three replicas and their load) and runs every test
# here against it: a second fleet on another worker would only burn the CPU the others need
pytestmark = [pytest.mark.xdist_group("fleet"), pytest.mark.e2e]
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
    alert = ["--interval", "1", "--alert", "al<2 for 5s"]
    done = watch(fleet, tmp_path, *alert, "--duration", "40", "--alert-each")
    assert done.returncode == 3, (done.returncode, done.stderr)
    assert fleet.low in done.stderr and "al<2" in done.stderr
    # the fleet row alone does not hold it (its AL is the token-weighted mean, above 2)
    fleet_only = watch(fleet, tmp_path / "f", *alert, "--duration", "8")
    assert fleet_only.returncode == 0, fleet_only.stderr


def test_no_series_match_names_the_selector(fleet: Fleet, tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "specmon", "watch", "--prometheus", fleet.prometheus.url,
        "--selector", '{job="nope"}', "--headless", "--duration", "3", "--interval", "1",
        "--artifact-dir", str(tmp_path),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert 'no series match {job="nope"}' in done.stderr
    # the rows written so far are kept: one failed row per tick
    rows = (tmp_path / "watch_timeseries.jsonl").read_text().splitlines()
    assert rows and all(json.loads(r)["error"] for r in rows)


def test_unreachable_store_is_one_line_and_exit_2(tmp_path: Path) -> None:
    from specmon.run.sweep.servers import free_port

    url = f"http://127.0.0.1:{free_port()}"
    command = [
        sys.executable, "-m", "specmon", "watch", "--prometheus", url, "--headless",
        "--duration", "2", "--interval", "1", "--artifact-dir", str(tmp_path),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "ConnectError" in lines[0] and url in lines[0], lines


def test_bad_selector_is_a_user_error(tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "specmon", "watch", "--prometheus", "http://127.0.0.1:9",
        "--selector", "job=vllm", "--headless", "--duration", "1",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "give label matchers in braces" in done.stderr
