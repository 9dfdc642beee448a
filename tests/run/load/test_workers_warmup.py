"""--workers N with warmup: every worker warms up, the parent's before_profiling hook runs once
(e.g. restarting the /metrics window), and only then does any worker send a profiling request,
all starting at one instant so constant-rate phase shifts still interleave. Real `specmon sim`
processes (uvicorn) over loopback, real worker processes; ground truth is the simulator's
--log (one JSON line per request it served, written when the answer is sent)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from specmon.config import RunConfig
from specmon.run.assemble import make_session
from specmon.run.load.workers import WorkerPool
from specmon.server.process import ServerProcess

pytestmark = pytest.mark.e2e
SPECMON = [sys.executable, "-m", "specmon"]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def served(sim: ServerProcess) -> list[dict]:
    """The requests the simulator answered with 200, in the order it sent the answers."""
    return [e for e in read_jsonl(sim.log_path) if e.get("status") == 200]


def pool_for(sim: ServerProcess, tmp_path: Path, workers: int, **settings: int) -> WorkerPool:
    """A pool of `workers` worker processes, one request in flight each (concurrency =
    workers), 8 output tokens a request, on its own session (`pool.session`)."""
    config = RunConfig(
        url=[sim.url], artifact_dir=str(tmp_path / "run"), workers=workers,
        concurrency=workers, output_tokens_mean=8, **settings,
    )  # fmt: skip
    pool = WorkerPool(config, make_session(config))
    return pool


def run_pool(pool: WorkerPool, hook: Callable[[], None], kill: int | None = None) -> None:
    """Start the pool with `hook` as its before_profiling, optionally SIGKILL one worker at
    once, wait for every worker, and close the session."""
    pool.before_profiling = hook
    pool.start()
    if kill is not None:
        pool._processes[kill].kill()
    assert pool.join(120)
    pool.session.finish()


def headless(sim: ServerProcess, tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    """`specmon --headless` with two workers against `sim`, its exports in tmp_path/run."""
    run = [
        "--url",
        sim.url,
        "--headless",
        "--workers",
        "2",
        "--artifact-dir",
        str(tmp_path / "run"),
    ]
    return subprocess.run([*SPECMON, *run, *flags], capture_output=True, text=True, timeout=240)


@pytest.mark.sim("--num-spec-tokens", "3", "--seed", "2", "--step-ms", "1", log=True)
def test_headless_workers_with_warmup_reconcile_exactly(tmp_path, sim):
    proc = headless(
        sim, tmp_path, "--warmup-request-count", "4", "--request-count", "40",
        "--concurrency", "4", "--output-tokens-mean", "16",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((tmp_path / "run" / "profile_export_aiperf.json").read_text())
    records = read_jsonl(tmp_path / "run" / "profile_export.jsonl")
    entries = served(sim)
    assert len(entries) == 44  # 4 warmup + 40 profiling requests served
    profiled = {r["metadata"]["x_request_id"] for r in records}
    assert len(profiled) == 40
    # every warmup answer was sent before any profiling answer: the simulator logged the 4
    # requests that are not in the export first
    assert [e["x_request_id"] in profiled for e in entries] == [False] * 4 + [True] * 40
    # both workers sent profiling requests (2 workers share concurrency 4 as 2 + 2)
    assert {r["metadata"]["worker_id"] for r in records} == {"worker-0", "worker-1"}
    truth_steps = sum(e["stats"][0]["steps"] for e in entries[4:])
    sm = doc["server_metrics"]
    # the window restarted after the warmup, so it holds exactly the 40 profiling requests
    assert sm["reconciliation"] == {
        "equal": True,
        "diffs": {},
        "reasons": [],
        "text": "server counters match the per-request totals",
    }
    assert sm["drafts"] == doc["total_spec_decode_steps"]["avg"] == truth_steps
    assert "server counters match the per-request totals" in proc.stdout


@pytest.mark.sim("--num-spec-tokens", "3", "--seed", "4", "--step-ms", "1", log=True)
def test_hook_runs_once_between_warmup_and_profiling(tmp_path, sim):
    # warmup 3 over 3 workers -> shares 1 + 1 + 1; 12 requests -> 4 + 4 + 4
    pool = pool_for(sim, tmp_path, 3, warmup_request_count=3, request_count=12, random_seed=1)
    session = pool.session
    calls: list[tuple[int, int, int]] = []

    def hook() -> None:  # what the parent has received when the hook runs
        acc = session.accumulator
        calls.append((acc.warmup_count, len(acc.results), pool.unlanded()))

    run_pool(pool, hook)
    assert pool.error is None
    # once, with all 3 warmup results in and not one profiling result; the live probe's
    # count of requests not received is 3: nothing outstanding, but each of the 3 running
    # workers counts at least 1 (its latest sends may not be reported yet)
    assert calls == [(3, 0, 3)]
    assert pool.unlanded() == 0  # all done: every request sent was received
    assert len(session.accumulator.results) == 12
    assert len(served(sim)) == 15  # 3 warmup + 12 profiling


@pytest.mark.sim("--num-spec-tokens", "2", "--seed", "6", "--step-ms", "1", log=True)
def test_a_worker_without_warmup_share_waits_too(tmp_path, sim):
    # warmup 1 over 2 workers -> shares 1 + 0: worker-1 has no warmup of its own
    pool = pool_for(sim, tmp_path, 2, warmup_request_count=1, request_count=8, random_seed=2)
    acc = pool.session.accumulator
    calls: list[tuple[int, int]] = []
    run_pool(pool, lambda: calls.append((acc.warmup_count, len(acc.results))))
    assert pool.error is None and calls == [(1, 0)]
    records = acc.results
    assert len(records) == 8
    entries = served(sim)
    profiled = {r.x_request_id for r in records}
    # worker-1 sent nothing before worker-0's one warmup answer: that answer is logged first
    assert [e["x_request_id"] in profiled for e in entries] == [False] + [True] * 8


@pytest.mark.sim("--num-spec-tokens", "2", "--seed", "8", "--step-ms", "1")
def test_constant_rate_workers_still_interleave_after_warmup(tmp_path, sim):
    # 4 req/s over 2 workers: 2/s each, worker-1 shifted by 1/4 s = 250 ms. Warmup 2 -> one
    # request each (worker-1's also 250 ms late). Each worker starting profiling on its
    # own after its warmup would put worker-1 a further 250 ms late, so the two streams
    # would coincide; one common start keeps them 250 ms apart.
    proc = headless(
        sim, tmp_path, "--request-rate", "4", "--request-rate-mode", "constant",
        "--warmup-request-count", "2", "--request-count", "10", "--output-tokens-mean", "4",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = sorted(
        read_jsonl(tmp_path / "run" / "profile_export.jsonl"),
        key=lambda r: r["metadata"]["request_start_ns"],
    )
    assert [r["metadata"]["worker_id"] for r in records] == ["worker-0", "worker-1"] * 5
    starts = [r["metadata"]["request_start_ns"] for r in records]
    gaps_ms = [(b - a) / 1e6 for a, b in zip(starts, starts[1:])]
    # 250 ms planned between sends; coinciding streams would give gaps near 0 ms
    assert min(gaps_ms) > 100, gaps_ms


@pytest.mark.sim("--num-spec-tokens", "2", "--seed", "9", "--step-ms", "1", log=True)
def test_stop_while_workers_wait_for_go_sends_no_profiling_request(tmp_path, sim):
    pool = pool_for(sim, tmp_path, 2, warmup_request_count=2, request_count=20, random_seed=3)
    acc = pool.session.accumulator
    calls: list[int] = []

    def hook() -> None:
        # both workers wait for go now; the user stops before it comes
        calls.append(acc.warmup_count)
        stopper = threading.Thread(target=pool.stop)
        stopper.start()
        stopper.join()  # "stop" is queued to every worker, and no "go" follows it

    run_pool(pool, hook)
    assert pool.error is None and pool.stopped_early
    assert calls == [2]
    assert len(acc.results) == 0  # not one profiling request recorded
    assert acc.cancelled_count == 0  # nor one started and cut short
    assert len(served(sim)) == 2  # the simulator served the 2 warmup requests and nothing else


# 100 ms per step, 8 tokens at k=2 -> several steps per request: the warmup takes long
# enough to kill worker-1 before it reports "warm"
@pytest.mark.sim("--num-spec-tokens", "2", "--seed", "7", "--step-ms", "100")
def test_a_worker_killed_in_warmup_does_not_hold_the_others(tmp_path, sim):
    pool = pool_for(sim, tmp_path, 2, warmup_request_count=2, request_count=4, random_seed=4)
    session = pool.session
    calls: list[int] = []
    # the share of worker-1 (1 warmup + 2 requests) is never sent: it is killed at once
    run_pool(pool, lambda: calls.append(len(session.accumulator.results)), kill=1)
    # worker-0 did not wait forever for it: the hook ran once, then its 2 requests (4 split
    # as 2 + 2) were sent and recorded
    assert calls == [0]
    assert len(session.accumulator.results) == 2
    assert "worker 1: exited (code -9) before finishing its share" in str(pool.error)
