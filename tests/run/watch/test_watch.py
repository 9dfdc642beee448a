"""`specmon watch` (specmon/run/watch/runner.py) as a real process against `specmon sim`, loaded
by a SEPARATE specmon process; its figures checked against the simulator's counter deltas
scraped here (before and after), by the formulas of docs/metrics.md §11; a counter reset
(the simulator killed by PID and restarted on the same port) survived."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.waiting import poll

from specmon.run.sweep.servers import free_port
from specmon.run.watch.runner import JSONL_NAME, SpecFigures, headless_line
from specmon.server.scrape import CounterSample, fetch_counters
from specmon.sim.process import start_sim

TIMEOUT_S = 60.0


def _poll(what):
    return poll(what, TIMEOUT_S)


SIM_ARGS = ["--num-spec-tokens", "3", "--seed", "7"]


def _watch(url: str, out_dir: Path, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "specmon", "watch", "--url", url, "--headless"]
    cmd += ["--interval", "0.3", "--artifact-dir", str(out_dir), *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _load(url: str, out_dir: Path, n: int) -> None:
    cmd = [sys.executable, "-m", "specmon", "--url", url, "--headless"]
    cmd += ["--request-count", str(n), "--artifact-dir", str(out_dir), "--concurrency", "4"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def _rows(out_dir: Path) -> list[dict]:
    path = out_dir / JSONL_NAME
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines if line.endswith("}")]


def _diff(before: CounterSample, after: CounterSample) -> dict:
    a, b = after.totals(), before.totals()
    return {
        "drafts": a["drafts"] - b["drafts"],
        "draft_tokens": a["draft_tokens"] - b["draft_tokens"],
        "accepted": a["accepted"] - b["accepted"],
        "per_pos": [a["per_pos"][i] - b["per_pos"].get(i, 0) for i in sorted(a["per_pos"])],
    }


def _expected(d: dict) -> dict:
    """docs/metrics.md §11: AL = 1 + A/D, rate = A/T, P(>=i) = pos_i / D, h_j from P."""
    drafts, pos = d["drafts"], d["per_pos"]
    survival = [1.0] + [p / drafts for p in pos] + [0.0]  # P(>=0) = 1, P(>=k+1) = 0
    hist = [round(drafts * (survival[j] - survival[j + 1])) for j in range(len(pos) + 1)]
    return {
        "drafts": drafts,
        "draft_tokens": d["draft_tokens"],
        "accepted": d["accepted"],
        "acceptance_length": 1 + d["accepted"] / drafts,
        "acceptance_rate": d["accepted"] / d["draft_tokens"],
        "per_position": [p / drafts for p in pos],
        "histogram": hist,
    }


def _check_total(total: dict, expected: dict) -> None:
    for name in ("drafts", "draft_tokens", "accepted", "histogram"):
        assert total[name] == expected[name], name
    for name in ("acceptance_length", "acceptance_rate"):
        assert total[name] == pytest.approx(expected[name], rel=1e-12), name
    assert total["per_position"] == pytest.approx(expected["per_position"], rel=1e-12)


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> tuple[str, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 128 + sig, err  # docs/monitoring.md: a stop by signal N exits 128 + N
    return out, err


@pytest.mark.e2e
def test_watch_figures_equal_the_simulator_counter_deltas(tmp_path):
    sim = start_sim(SIM_ARGS)
    watch = None
    try:
        watch = _watch(sim.url, tmp_path / "w")
        _poll(lambda: _rows(tmp_path / "w"))  # the watch's baseline is taken
        before = fetch_counters(sim.url)
        _load(sim.url, tmp_path / "run", 24)
        after = fetch_counters(sim.url)
        expected = _expected(_diff(before, after))
        assert expected["drafts"] > 0
        _poll(
            lambda: (_rows(tmp_path / "w")[-1]["total"] or {}).get("drafts") == expected["drafts"]
        )
        out, _ = _stop(watch)  # SIGTERM: the files are complete
    finally:
        if watch is not None and watch.poll() is None:
            watch.kill()
        sim.stop()
    rows = _rows(tmp_path / "w")
    assert rows[0]["interval"] is None and rows[0]["error"] is None  # the baseline row
    _check_total(rows[-1]["total"], expected)
    # the intervals add up to the totals, and no reset was seen
    assert sum(r["interval"]["drafts"] for r in rows[1:]) == expected["drafts"]
    assert sum(r["interval"]["accepted"] for r in rows[1:]) == expected["accepted"]
    assert not any(r["reset"] for r in rows)
    # health: no requests left running at the end, generation tokens counted while loaded
    assert rows[-1]["health"]["running"] == 0
    assert any((r["health"]["generation_tokens_per_s"] or 0) > 0 for r in rows)
    # one headless line per row, then the closing line; the CSV has one line per row
    lines = out.strip().splitlines()
    assert lines[0].startswith("specmon watch:") and "time series" in lines[-1]
    assert len(lines) == len(rows) + 2
    assert f"watch AL {expected['acceptance_length']:.2f}" in lines[-2]
    csv_lines = (tmp_path / "w" / "watch_timeseries.csv").read_text().splitlines()
    assert len(csv_lines) == len(rows) + 1
    # /metrics only: every figure is server-wide, from vLLM's counters (docs/metrics.md §10.2)
    assert {r["fidelity"] for r in rows} == {"server-wide"}
    assert rows[-1]["counters_engine"] == "vllm" and rows[-1]["gauges_last_value"] == {}
    assert csv_lines[0].endswith(",fidelity,counters_engine,imbalance")  # fleet rows only
    assert csv_lines[-1].endswith(",server-wide,vllm,")  # no imbalance: not a fleet row


@pytest.mark.e2e
def test_watch_survives_a_simulator_restart(tmp_path):
    port = free_port()
    args = [*SIM_ARGS, "--port", str(port)]
    sim = start_sim(args)
    watch = None
    try:
        watch = _watch(sim.url, tmp_path / "w")
        _poll(lambda: _rows(tmp_path / "w"))
        before = fetch_counters(sim.url)
        _load(sim.url, tmp_path / "r1", 12)
        first = _diff(before, fetch_counters(sim.url))
        _poll(lambda: (_rows(tmp_path / "w")[-1]["total"] or {}).get("drafts") == first["drafts"])
        os.kill(sim.pid, signal.SIGKILL)  # a crash: counters gone with the process
        sim.proc.wait(TIMEOUT_S)
        _poll(lambda: _rows(tmp_path / "w")[-1]["error"])  # the watch sees it down
        sim = start_sim(args)  # the same port: counters start from zero
        zero = fetch_counters(sim.url).totals()
        assert zero["drafts"] == 0
        _load(sim.url, tmp_path / "r2", 8)
        second = _diff(CounterSample({}, 0.0), fetch_counters(sim.url))
        want = first["drafts"] + second["drafts"]
        _poll(lambda: (_rows(tmp_path / "w")[-1]["total"] or {}).get("drafts") == want)
        out, _ = _stop(watch, signal.SIGHUP)
    finally:
        if watch is not None and watch.poll() is None:
            watch.kill()
        sim.stop()
    rows = _rows(tmp_path / "w")
    resets = [r for r in rows if r["reset"]]
    assert len(resets) == 1 and rows[-1]["resets"] == 1
    assert any(r["error"] for r in rows)
    combined = {name: first[name] + second[name] for name in ("drafts", "draft_tokens", "accepted")}
    combined["per_pos"] = [a + b for a, b in zip(first["per_pos"], second["per_pos"])]
    _check_total(rows[-1]["total"], _expected(combined))
    assert "RESET" in out


@pytest.mark.e2e
def test_watch_duration_stops_by_itself_and_bad_interval_is_one_line(tmp_path):
    sim = start_sim(SIM_ARGS)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "specmon", "watch", "--url", sim.url, "--headless",
             "--interval", "0.2", "--duration", "1", "--artifact-dir", str(tmp_path)],
            capture_output=True, text=True, timeout=TIMEOUT_S,
        )  # fmt: skip
    finally:
        sim.stop()
    assert done.returncode == 0, done.stderr
    assert len(_rows(tmp_path)) >= 2
    bad = subprocess.run(
        [sys.executable, "-m", "specmon", "watch", "--url", "http://127.0.0.1:1", "--interval",
         "0", "--headless"], capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert bad.returncode != 0
    assert bad.stderr.strip().splitlines() == [
        "specmon: error: argument --interval: '0': give seconds > 0 and <= 1e+07 (see --help)"
    ]


def test_headless_line_formats_interval_total_health_and_reset():
    from specmon.run.watch.runner import HealthFiguresRow, WatchRow

    interval = SpecFigures(10, 30, 15, 0.5, 2.5, [0.8, 0.5, 0.2], [2, 3, 3, 2])
    total = SpecFigures(40, 120, 48, 0.4, 2.2, [0.7, 0.4, 0.1], [12, 12, 12, 4])
    row = WatchRow(
        "a", "http://x", 3, 4.0, 0.0, None, reset=True, resets=1, interval_s=2.0,
        interval=interval, total=total,
        health=HealthFiguresRow(running=3, waiting=1, kv_cache_usage=0.25),
    )  # fmt: skip
    line = headless_line(row)
    assert "AL 2.50 acc 50.0% pos [0.80 0.50 0.20] steps 10" in line
    assert "watch AL 2.20 steps 40" in line
    assert "run 3  wait 1  kv 25.0%" in line and "gen tok/s" not in line  # absent: not shown
    assert "RESET" in line
