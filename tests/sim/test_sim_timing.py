"""The simulator's step timing equals its formula (absolute deadlines), measured from its own
--log write timestamps, and those timestamps share the client's clock (CLOCK_MONOTONIC)."""

from __future__ import annotations

import asyncio
import time

import httpx
import orjson
import pytest

from specmon.server.health import HealthDelta
from specmon.server.scrape import fetch_counters
from specmon.sim.server import _ON_TIME_S  # how early the sim's sleeps may end

EARLY_NS = _ON_TIME_S * 1e9 + 10_000  # + 10 us: deadlines are float seconds

# Steps run against absolute deadlines, so a late wake-up delays one write and never adds up:
# first-to-last decode time is off by the last write's lateness only. Long requests (255
# decode steps at k=0) keep that under 2% even when a busy machine wakes the sim ~20 ms late.
MAX_TOKENS = 256


def read_log(path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


async def _stream_one(client: httpx.AsyncClient, i: int) -> None:
    body = {
        "model": "specmon-sim",
        "messages": [{"role": "user", "content": f"timing {i}"}],
        "max_tokens": MAX_TOKENS,
        "ignore_eos": True,
        "stream": True,
    }
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        async for _ in response.aiter_bytes():
            pass


async def _load(url: str, concurrency: int, requests: int) -> None:
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        queue = list(range(requests))

        async def worker() -> None:
            while queue:
                await _stream_one(client, queue.pop())

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def _decode_ms(entry: dict) -> float:
    """First-token write to last-token write (the tail write after it is not a step)."""
    chunks = entry["chunk_ns"]
    rounds = len(entry["step_ms"]) + 1
    assert len(chunks) == rounds + 1  # one write per round + the usage/[DONE] tail
    return (chunks[rounds - 1] - chunks[0]) / 1e6


def _check_schedule(entry: dict, ttft_ms: float) -> float:
    """Every write is at its absolute deadline (admission + ttft + the steps before it) or
    later, never early, whatever the load; returns the request's relative decode-time error.
    A busy CPU delays single writes, so only the best request of a batch is held to 2%:
    relative or whole-ms sleeps add up on every step, so they put every request over it."""
    rounds = len(entry["step_ms"]) + 1
    due_ns = entry["admitted_ns"] + ttft_ms * 1e6
    for r, written in enumerate(entry["chunk_ns"][:rounds]):
        assert written >= due_ns - EARLY_NS, (r, written - due_ns)
        if r < len(entry["step_ms"]):
            due_ns += entry["step_ms"][r] * 1e6
    expected = sum(entry["step_ms"])
    return (_decode_ms(entry) - expected) / expected


def lag_share(url: str, before) -> float:
    """The sim's own step lag (Δlag / Δformula on /metrics) since the `before` sample."""
    share = HealthDelta.between(before, fetch_counters(url).health).sim_lag_share
    assert share is not None  # the sim always publishes it once a step ran
    return share


# Margin: the best request of a batch is held to 2% of the formula, unless the simulator
# itself reports (specmon_sim_step_lag_seconds) that it ran more than 2% behind its step
# model over that batch: then the machine, not the formula, is what the numbers show, and
# the assertion says so with both figures.
# acceptance tier: seconds of real-time load per k, timed to 2%
@pytest.mark.acceptance
@pytest.mark.e2e
@pytest.mark.parametrize("k", [0, 2, 4])
def test_linear_step_time_within_2_percent(tmp_path, k, sims):
    # linear, batch_slope 0: step = 4.6 + 0.7 k ms (fractional, so whole-ms sleeps would show)
    step = 4.6 + 0.7 * k
    log = tmp_path / "sim.jsonl"
    args = ["--num-spec-tokens", str(k), "--step-ms", "4.6", "--draft-ms-per-token", "0.7"]
    args += ["--ttft-ms", "10", "--log", str(log), "--acceptance", "0.6"]
    sim = sims(args)
    for concurrency, requests in ((1, 6), (8, 16), (32, 64)):
        before = len(read_log(log)) if log.exists() else 0
        counters = fetch_counters(sim.url).health
        asyncio.run(_load(sim.url, concurrency, requests))
        share = lag_share(sim.url, counters)
        entries = read_log(log)[before:]
        assert len(entries) == requests
        steps = [s for e in entries for s in e["step_ms"]]
        assert all(s == pytest.approx(step) for s in steps)
        errors = [_check_schedule(e, ttft_ms=10) for e in entries]
        assert min(errors) <= 0.02 or share > 0.02, (k, concurrency, sorted(errors)[:3], share)


@pytest.mark.e2e
def test_roofline_step_time_within_2_percent(tmp_path, sims):
    # step = max(4, 0.25 * B * (k + 1)) + 0.5 k with k = 3: B <= 4 -> 5.5 ms, B = 8 -> 9.5 ms
    formula = {b: max(4.0, 0.25 * b * 4) + 1.5 for b in range(1, 9)}
    log = tmp_path / "sim.jsonl"
    args = ["--latency-model", "roofline", "--step-floor-ms", "4", "--compute-ms-per-token"]
    args += ["0.25", "--draft-ms-per-token", "0.5", "--num-spec-tokens", "3", "--log", str(log)]
    sim = sims(args)
    counters = fetch_counters(sim.url).health
    asyncio.run(_load(sim.url, 8, 32))
    share = lag_share(sim.url, counters)
    entries = read_log(log)
    steps = [s for e in entries for s in e["step_ms"]]
    assert all(any(s == pytest.approx(v) for v in formula.values()) for s in steps)
    assert sum(1 for s in steps if s == pytest.approx(formula[8])) > len(steps) / 2
    errors = [_check_schedule(e, ttft_ms=0) for e in entries]  # ttft: >= 0 is enough here
    assert min(errors) <= 0.02 or share > 0.02, (sorted(errors)[:3], share)


@pytest.mark.e2e
def test_write_timestamps_share_the_client_clock(tmp_path, sims):
    # perf_counter and monotonic are both CLOCK_MONOTONIC on Linux, shared across processes
    assert time.get_clock_info("perf_counter").implementation == "clock_gettime(CLOCK_MONOTONIC)"
    assert time.get_clock_info("monotonic").implementation == "clock_gettime(CLOCK_MONOTONIC)"
    log = tmp_path / "sim.jsonl"
    sim = sims(["--step-ms", "3", "--ttft-ms", "5", "--log", str(log)])
    body = {"model": "specmon-sim", "prompt": "clock", "max_tokens": 12, "stream": True}
    received: list[int] = []
    sent = time.perf_counter_ns()
    with httpx.Client(base_url=sim.url, timeout=30) as client:
        with client.stream("POST", "/v1/completions", json=body) as response:
            for _ in response.iter_raw():
                received.append(time.perf_counter_ns())
    done = time.perf_counter_ns()
    plain = dict(body, stream=False)
    with httpx.Client(base_url=sim.url, timeout=30) as client:
        before_json = time.perf_counter_ns()
        client.post("/v1/completions", json=plain)
        after_json = time.perf_counter_ns()
    streamed, whole = read_log(log)
    chunks = streamed["chunk_ns"]
    assert sent <= streamed["start_ns"] <= streamed["admitted_ns"] <= chunks[0]
    assert chunks == sorted(chunks) and chunks[-1] <= done
    assert chunks[0] <= received[0]  # written before the client read it
    assert chunks[0] - streamed["admitted_ns"] >= 5_000_000  # ttft 5 ms
    assert len(whole["chunk_ns"]) == 1
    assert before_json <= whole["start_ns"] <= whole["chunk_ns"][0] <= after_json
