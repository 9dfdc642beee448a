"""How --workers splits the load (pure arithmetic; the merged run is in test_run_headless)."""

from __future__ import annotations

from specmon.config import RunConfig
from specmon.run.load.workers import effective_workers, split_int, worker_configs


def test_split_int_is_even_and_sums_to_total():
    assert split_int(10, 3) == [4, 3, 3]
    assert split_int(64, 4) == [16, 16, 16, 16]
    assert split_int(1, 2) == [1, 0]


def test_closed_loop_shares():
    config = RunConfig(
        url=["http://h:1"],
        concurrency=10,
        request_count=101,
        warmup_request_count=5,
        workers=3,
        random_seed=7,
    )
    shares = worker_configs(config)
    assert [s["concurrency"] for s, _ in shares] == [4, 3, 3]
    assert [s["request_count"] for s, _ in shares] == [34, 34, 33]  # 101 = 34 + 34 + 33
    assert [s["warmup_request_count"] for s, _ in shares] == [2, 2, 1]
    assert len({s["random_seed"] for s, _ in shares}) == 3  # different prompts per worker
    assert all(s["workers"] == 1 for s, _ in shares)


def test_no_more_workers_than_slots_or_requests():
    assert effective_workers(RunConfig(concurrency=2, workers=8)) == 2
    assert effective_workers(RunConfig(concurrency=64, request_count=3, workers=8)) == 3
    assert effective_workers(RunConfig(workers=4)) == 1  # default closed loop of one


def test_constant_rate_split_with_phase_offsets():
    config = RunConfig(request_rate=8.0, request_rate_mode="constant", workers=4)
    shares = worker_configs(config)
    assert [s["request_rate"] for s, _ in shares] == [2.0] * 4  # 8/s over 4 workers
    # worker i starts i/8 s late, so the four 2/s streams interleave into one 8/s stream
    assert [offset for _, offset in shares] == [0.0, 0.125, 0.25, 0.375]
    poisson = worker_configs(RunConfig(request_rate=8.0, workers=2))
    assert [offset for _, offset in poisson] == [0.0, 0.0]  # poisson streams superpose as they are
