"""The simulator's vLLM health series on /metrics, driven by its own state, and k = 0."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

HEALTH = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:num_preemptions_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:generation_tokens_total",
    "vllm:prompt_tokens_total",
)


def scrape(url: str) -> dict[str, float]:
    """Sample name -> value, for engine 0 of the default model (label sets checked too)."""
    text = httpx.get(url + "/metrics", timeout=10).text
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            if sample.name in HEALTH:
                assert sample.labels == {"engine": "0", "model_name": "specmon-sim"}
            out[sample.name] = sample.value
    return out


def read_log(path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def poll(url: str, condition, timeout: float = 30.0) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        values = scrape(url)
        if condition(values):
            return values
        time.sleep(0.02)
    raise AssertionError(f"condition never held; last scrape {values}")


def chat(content: str, max_tokens: int, stream: bool = True) -> dict:
    return {
        "model": "specmon-sim",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": stream,
    }


def post_all(url: str, bodies: list[dict]) -> list[httpx.Response]:
    def send(body: dict) -> httpx.Response:
        return httpx.post(url + "/v1/chat/completions", json=body, timeout=120)

    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(send, bodies))


@pytest.mark.sim()
@pytest.mark.e2e
def test_series_exist_at_zero_with_vllm_names(sim):
    values = scrape(sim.url)
    assert {name: values[name] for name in HEALTH} == dict.fromkeys(HEALTH, 0.0)


@pytest.mark.e2e
def test_max_num_seqs_makes_requests_wait(tmp_path, sims):
    log = tmp_path / "sim.jsonl"
    args = ["--max-num-seqs", "2", "--step-ms", "40", "--num-spec-tokens", "0", "--log", str(log)]
    sim = sims(args)
    with concurrent.futures.ThreadPoolExecutor(1) as bg:
        # k = 0: 40 tokens = 39 steps of 40 ms, about 1.6 s per request
        pending = bg.submit(post_all, sim.url, [chat(f"w{i}", 40) for i in range(4)])
        during = poll(
            sim.url,
            lambda v: v["vllm:num_requests_running"] == 2 and v["vllm:num_requests_waiting"] == 2,
        )
        responses = pending.result(timeout=120)
        after = scrape(sim.url)
    assert during["vllm:num_requests_running"] == 2 and during["vllm:num_requests_waiting"] == 2
    assert all(r.status_code == 200 for r in responses)
    assert after["vllm:num_requests_running"] == 0 and after["vllm:num_requests_waiting"] == 0
    assert after["vllm:kv_cache_usage_perc"] == 0
    entries = read_log(log)
    assert after["vllm:generation_tokens_total"] == 4 * 40
    assert after["vllm:prompt_tokens_total"] == sum(e["usage"]["prompt_tokens"] for e in entries)
    # never more than 2 running: at each admission at most one other request is still running
    spans = [(e["admitted_ns"], e["chunk_ns"][-1]) for e in entries]
    for start, _ in spans:
        assert sum(1 for s, end in spans if s <= start < end) <= 2
    waited = sorted(s for s, _ in spans)[2:]
    assert min(waited) >= min(end for _, end in spans)  # the last two started after one ended


@pytest.mark.e2e
def test_kv_cache_usage_follows_tokens_held(tmp_path, sims):
    # one completions request, prompt = 100 token ids, k = 0: one token per 30 ms step
    args = ["--kv-cache-tokens", "1000", "--step-ms", "30", "--num-spec-tokens", "0"]
    body = {"model": "specmon-sim", "prompt": list(range(100)), "max_tokens": 50, "stream": True}
    body["ignore_eos"] = True
    sim = sims(args)
    with concurrent.futures.ThreadPoolExecutor(1) as bg:
        pending = bg.submit(httpx.post, sim.url + "/v1/completions", json=body, timeout=60)
        seen = []
        while not pending.done():
            seen.append(scrape(sim.url)["vllm:kv_cache_usage_perc"])
        assert pending.result().status_code == 200
        after = scrape(sim.url)
    busy = [u for u in seen if u > 0]
    # held = 100 prompt + 1 prefill token + tokens claimed so far (at most 49 more)
    assert busy and all(0.101 <= u <= 0.150 for u in busy)
    assert max(busy) > min(busy)  # grows while it decodes
    assert after["vllm:kv_cache_usage_perc"] == 0
    assert after["vllm:prompt_tokens_total"] == 100 and after["vllm:generation_tokens_total"] == 50


@pytest.mark.e2e
def test_preemption_when_kv_cache_is_small(tmp_path, sims):
    # 4 requests of 2 prompt + 100 generated tokens against 150 tokens of KV cache: at most one
    # can finish alongside a short other, so some must be preempted and resumed. 20 ms steps
    # (about 0.7 s a request): the four overlap even when a busy machine starts their
    # threads a few hundred ms apart (at 2 ms steps they sometimes ran one after another).
    log = tmp_path / "sim.jsonl"
    args = ["--kv-cache-tokens", "150", "--step-ms", "20", "--num-spec-tokens", "2"]
    args += ["--log", str(log)]
    sim = sims(args)
    with concurrent.futures.ThreadPoolExecutor(1) as bg:
        pending = bg.submit(post_all, sim.url, [chat(f"p{i}", 100) for i in range(4)])
        usage = []
        while not pending.done():
            usage.append(scrape(sim.url)["vllm:kv_cache_usage_perc"])
        responses = pending.result()
        after = scrape(sim.url)
    assert all(r.status_code == 200 for r in responses)
    entries = read_log(log)
    assert [e["usage"]["completion_tokens"] for e in entries] == [100] * 4
    assert after["vllm:num_preemptions_total"] >= 1
    assert after["vllm:num_preemptions_total"] == sum(e["preemptions"] for e in entries)
    assert after["vllm:generation_tokens_total"] == 400
    assert all(0 <= u <= 1 for u in usage)


@pytest.mark.e2e
def test_prefix_cache_counts_shared_leading_blocks(sims):
    # blocks of 16 token ids; hits = 16 * leading blocks seen before, at most prompt - 1
    first = list(range(40))  # 2 full blocks (32 tokens) + 8
    other = first[:16] + [999] * 24  # shares only the first block
    sim = sims([])
    send = lambda prompt: httpx.post(
        sim.url + "/v1/completions",
        json={"model": "specmon-sim", "prompt": prompt, "max_tokens": 4},
        timeout=30,
    )
    send(first)
    one = scrape(sim.url)
    send(first)
    two = scrape(sim.url)
    send(other)
    three = scrape(sim.url)
    send(list(range(16)))  # one block, all seen: capped at prompt - 1 = 15
    four = scrape(sim.url)
    q, h = "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"
    assert (one[q], one[h]) == (40, 0)
    assert (two[q], two[h]) == (80, 32)
    assert (three[q], three[h]) == (120, 48)
    assert (four[q], four[h]) == (136, 63)


@pytest.mark.e2e
def test_no_speculation_k0(tmp_path, sims):
    log = tmp_path / "sim.jsonl"
    sim = sims(["--num-spec-tokens", "0", "--log", str(log)])
    with httpx.Client(base_url=sim.url, timeout=30) as client:
        plain = client.post("/v1/chat/completions", json=chat("k0", 20, stream=False))
        body = dict(chat("k0 stream", 20), stream_options={"include_usage": True})
        streamed = client.post("/v1/chat/completions", json=body)
        metrics = client.get("/metrics").text
    assert plain.status_code == 200 and plain.json()["metrics"] is None
    assert b"speculative" not in plain.content
    events = [
        orjson.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")
    ]
    contents = [
        e["choices"][0]["delta"]["content"]
        for e in events
        if e["choices"] and e["choices"][0]["delta"].get("content")
    ]
    assert len(contents) == 20 and all(len(c.split()) == 1 for c in contents)  # 1 token/step
    assert events[-1]["usage"]["completion_tokens"] == 20 and "metrics" not in events[-1]
    assert "vllm:spec_decode" not in metrics
    assert "vllm:generation_tokens_total" in metrics
    entries = read_log(log)
    assert all(e["per_step_accepted"] == [] and len(e["step_ms"]) == 19 for e in entries)


@pytest.mark.e2e
@pytest.mark.parametrize("shape", ["vllm-legacy", "trtllm", "sglang"])
def test_no_speculation_payload_in_any_shape(shape, sims):
    sim = sims(["--num-spec-tokens", "0", "--shape", shape])
    body = dict(chat("k0", 12, stream=False), return_spec_tokens_details=True)
    response = httpx.post(sim.url + "/v1/chat/completions", json=body, timeout=30)
    assert response.status_code == 200
    assert b"speculative" not in response.content and b"spec_" not in response.content


def test_scheduler_preempts_newest_and_readmits_when_room():
    from specmon.sim.counters import SpecCounters
    from specmon.sim.scheduler import Scheduler, Seq

    async def scenario() -> None:
        counters = SpecCounters("m", 1, 1)
        sched = Scheduler(counters, engines=1, max_num_seqs=2, kv_cache_tokens=10)
        a, b, c = Seq(0, 3), Seq(0, 3), Seq(0, 2)
        await sched.admit(a)
        await sched.admit(b)
        waiter = asyncio.ensure_future(sched.admit(c))  # max_num_seqs 2: c waits
        await asyncio.sleep(0)
        assert (sched.running_total, len(sched.engines[0].waiting)) == (2, 1)
        assert sched.grow(a, 5)  # 3+5 + 3 = 11 > 10: b (newest) preempted, a holds 8
        assert b.preempted and not b.running and sched.engines[0].held == 8
        assert list(sched.engines[0].waiting) == [b, c]  # preempted first in line
        assert sched.grow(a, 3)  # a alone: never preempted
        assert sched.engines[0].held == 11  # a lone request may exceed the capacity
        sched.release(a)  # room again: b (3) then c (2) are admitted, in that order
        await waiter
        assert b.running and c.running and sched.engines[0].held == 5
        sched.refresh_gauges()
        values = {s.name: s.value for f in counters.registry.collect() for s in f.samples}
        assert values["vllm:num_preemptions_total"] == 1
        assert values["vllm:num_requests_running"] == 2
        assert values["vllm:kv_cache_usage_perc"] == 0.5

    asyncio.run(scenario())
