"""The simulator's engine loop (specmon/sim/engine.py): one step for the whole running batch,
its own lag on /metrics, bounded work (max_model_len, clients that leave) and --spec-schedule.
Real HTTP against `specmon sim` as a process; expected numbers worked out by hand."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import statistics
import subprocess
import sys
import time

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

FIDELITY = (
    "specmon_sim_steps_total",
    "specmon_sim_steps_late_total",
    "specmon_sim_step_formula_seconds_total",
    "specmon_sim_step_lag_seconds_total",
)


def read_log(path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def scrape(url: str) -> dict[str, float]:
    """Sample name -> value summed over label sets (`_created` left out)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(httpx.get(url + "/metrics", timeout=10).text):
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


def chat(content: str, max_tokens: int, stream: bool = True, **extra) -> dict:
    body = {
        "model": "specmon-sim",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": stream,
    }
    return {**body, **extra}


def post_all(url: str, bodies: list[dict]) -> list[httpx.Response]:
    def send(body: dict) -> httpx.Response:
        return httpx.post(url + "/v1/chat/completions", json=body, timeout=120)

    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(send, bodies))


def post_staggered(url: str, bodies: list[dict], gap_s: float) -> list[httpx.Response]:
    """Send body i after i * gap_s seconds, each on its own thread."""

    def send(i: int) -> httpx.Response:
        time.sleep(i * gap_s)
        return httpx.post(url + "/v1/chat/completions", json=bodies[i], timeout=120)

    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(send, range(len(bodies))))


@pytest.mark.e2e
def test_one_step_serves_the_whole_batch(tmp_path, sims):
    # k = 0, 60 ms steps, 3 requests of 11 tokens sent 20 ms apart. Paced each on its own
    # timer, a request's writes would sit on its own phase (its arrival time); stepped by
    # one engine loop, the writes of one step leave in one event-loop pass: whenever two
    # requests run at once, each write of one has a write of the other within a few ms
    # (under 1 ms on a quiet machine; a late step delays both alike). Paced on their own
    # timers they would sit 20 or 40 ms apart (the arrival offsets), so the median nearest
    # partner must be under 5 ms; single writes may be later when the OS preempts the
    # process between two writes of one pass (a loaded machine), so no write is held to
    # it alone. One event per request per write (one token each at k = 0).
    log = tmp_path / "sim.jsonl"
    args = ["--num-spec-tokens", "0", "--step-ms", "60", "--log", str(log)]
    sim = sims(args)
    responses = post_staggered(sim.url, [chat(f"b{i}", 11) for i in range(3)], 0.02)
    after = scrape(sim.url)
    assert all(r.status_code == 200 for r in responses)
    for response in responses:
        events = [line for line in response.text.splitlines() if line.startswith("data: {")]
        contents = [orjson.loads(e[6:])["choices"] for e in events]
        token_events = [c for c in contents if c and c[0]["delta"].get("content")]
        assert len(token_events) == 11  # one event per round: the first token + 10 steps
    entries = read_log(log)
    assert all(e["step_ms"] == [60.0] * 10 for e in entries)
    nearest_ms = []
    for entry in entries:
        for written in entry["chunk_ns"][:11]:
            for other in entries:
                writes = other["chunk_ns"][:11]
                if other is entry or not writes[0] < written < writes[-1]:
                    continue  # the other was not running then
                nearest_ms.append(min(abs(written - t) for t in writes) / 1e6)
    assert len(nearest_ms) >= 10  # the three overlapped for most of their steps
    assert statistics.median(nearest_ms) < 5, sorted(nearest_ms)
    # the loop ran 10 steps plus the one or two the later joiners waited for, not 30
    assert 10 <= after["specmon_sim_steps_total"] <= 13
    assert after["specmon_sim_step_formula_seconds_total"] == pytest.approx(
        0.060 * after["specmon_sim_steps_total"]
    )


@pytest.mark.sim("--num-spec-tokens", "0", "--step-ms", "7.5")
@pytest.mark.e2e
def test_fidelity_counters_count_each_step_at_its_formula(tmp_path, sim):
    # one request alone (B = 1), k = 0: 21 tokens = 20 decode steps of 7.5 ms -> 0.15 s
    before = scrape(sim.url)
    assert {name: before[name] for name in FIDELITY} == dict.fromkeys(FIDELITY, 0.0)
    response = httpx.post(sim.url + "/v1/chat/completions", json=chat("f", 21), timeout=60)
    assert response.status_code == 200
    after = scrape(sim.url)
    assert after["specmon_sim_steps_total"] == 20
    assert after["specmon_sim_step_formula_seconds_total"] == pytest.approx(20 * 0.0075)
    assert after["specmon_sim_step_lag_seconds_total"] >= 0
    assert after["specmon_sim_steps_late_total"] <= 20


@pytest.mark.e2e
def test_itl_counters_hold_what_a_client_should_measure(tmp_path, sims):
    # k = 0, linear: T(1) = 10 ms, T(2) = 10 * (1 + 0.5) = 15 ms. Two streams of 21 tokens
    # sent together (20 decode steps each, at B = 2 while both run, B = 1 while one runs
    # alone), then one alone (B = 1: ITL exactly 10 ms); a non-streamed one and a 1-token
    # stream have no ITL: not counted.
    log = tmp_path / "sim.jsonl"
    args = ["--num-spec-tokens", "0", "--step-ms", "10", "--batch-slope", "0.5"]
    sim = sims([*args, "--ttft-ms", "0", "--log", str(log)])
    assert all(r.status_code == 200 for r in post_all(sim.url, [chat("a", 21), chat("b", 21)]))
    for body in (chat("c", 21), chat("d", 21, stream=False), chat("e", 1)):
        response = httpx.post(sim.url + "/v1/chat/completions", json=body, timeout=60)
        assert response.status_code == 200
    after = scrape(sim.url)
    pair, alone = read_log(log)[:2], read_log(log)[2]
    assert alone["step_ms"] == [10.0] * 20
    for entry in pair:  # a step at B = 1 only where one ran without the other
        assert len(entry["step_ms"]) == 20 and set(entry["step_ms"]) <= {10.0, 15.0}
    assert after["specmon_sim_requests_timed_total"] == 3
    formula = sum(sum(e["step_ms"]) / 20 for e in pair) / 1000 + 0.010
    assert after["specmon_sim_request_itl_formula_seconds_total"] == pytest.approx(formula)
    # as written: the first token's write to the last's, over 20 tokens (the log's chunk_ns)
    written = sum((e["chunk_ns"][20] - e["chunk_ns"][0]) / 1e9 / 20 for e in [*pair, alone])
    assert after["specmon_sim_request_itl_written_seconds_total"] == pytest.approx(written)
    # every step counts the requests running in it: each request once per step it ran (its
    # step_ms entries: 20 + 20 + 20 + 20 + 0), plus at most one step each that it spent
    # admitted but waiting for the next boundary (a loop that woke late)
    ran = sum(len(e["step_ms"]) for e in read_log(log))
    assert ran == 80
    assert ran <= after["specmon_sim_step_batch_total"] <= ran + 5


@pytest.mark.sim("--num-spec-tokens", "0", "--step-ms", "10")
@pytest.mark.e2e
def test_a_stall_the_simulator_recovers_from_is_not_lag(sim):
    # SIGSTOP the simulator for 0.4 s in the middle of a 200-step stream of 10 ms steps: on
    # its absolute deadlines it then catches up (the 40 missed steps at once), so the
    # stream still ends on the formula's time and the lag counter stays near zero.
    with concurrent.futures.ThreadPoolExecutor(1) as bg:
        t0 = time.monotonic()
        pending = bg.submit(
            httpx.post, sim.url + "/v1/chat/completions", json=chat("s", 201), timeout=60
        )
        time.sleep(0.5)
        os.kill(sim.pid, signal.SIGSTOP)
        time.sleep(0.4)
        os.kill(sim.pid, signal.SIGCONT)
        assert pending.result().status_code == 200
        took = time.monotonic() - t0
    after = scrape(sim.url)
    assert after["specmon_sim_steps_total"] == 200
    assert after["specmon_sim_step_formula_seconds_total"] == pytest.approx(2.0)
    assert took < 2.0 + 0.3  # the formula's 2 s, not 2.4 s: the stall was caught up
    assert after["specmon_sim_step_lag_seconds_total"] < 0.05


@pytest.mark.sim("--num-spec-tokens", "0", "--step-ms", "0.02")
@pytest.mark.e2e
def test_a_simulator_that_cannot_keep_up_reports_its_lag(sim):
    # 0.02 ms steps for 8 running requests: a step's work (8 chunks, each several us of
    # Python and a socket write) takes far longer than 20 us, so the loop falls further
    # behind at every step. 10,000 steps: the formula says 0.2 s; the loop needs several
    # times that, and all but the first 0.1 s window of it is counted as lag.
    responses = post_all(sim.url, [chat(f"c{i}", 10_001) for i in range(8)])
    after = scrape(sim.url)
    assert all(r.status_code == 200 for r in responses)
    steps, formula = (
        after["specmon_sim_steps_total"],
        after["specmon_sim_step_formula_seconds_total"],
    )
    assert steps >= 10_000
    assert formula == pytest.approx(0.00002 * steps)
    assert after["specmon_sim_step_lag_seconds_total"] > formula  # more than 100% behind
    # a step is late when the persistent lateness rose more than 2% of 20 us during it;
    # jitter makes the rise come in jumps, so only some steps carry it
    assert after["specmon_sim_steps_late_total"] > 0


VLLM_TOO_MANY = (
    "max_tokens=1000000000000 cannot be greater than max_model_len=131072. Please request "
    "fewer output tokens. (parameter=max_tokens, value=1000000000000)"
)


@pytest.mark.e2e
def test_max_tokens_above_the_model_length_is_vllms_400(sims):
    sim = sims([])
    with httpx.Client(base_url=sim.url, timeout=30) as client:
        huge = client.post("/v1/chat/completions", json=chat("h", 10**12))
        card = client.get("/v1/models").json()["data"][0]
    assert huge.status_code == 400
    assert huge.json() == {
        "error": {
            "message": VLLM_TOO_MANY,
            "type": "BadRequestError",
            "param": "max_tokens",
            "code": 400,
        }
    }
    assert card["max_model_len"] == 131072


@pytest.mark.sim("--max-model-len", "100")
@pytest.mark.e2e
def test_the_context_caps_the_output_and_refuses_a_long_prompt(sim):
    # --max-model-len 100; a completions prompt of 90 token ids asking 50 tokens gets
    # 100 - 90 = 10 (vLLM's get_max_tokens); a 120-id prompt is refused
    with httpx.Client(base_url=sim.url, timeout=30) as client:
        body = {"model": "specmon-sim", "prompt": list(range(90)), "max_tokens": 50}
        capped = client.post("/v1/completions", json={**body, "ignore_eos": True})
        long = client.post("/v1/completions", json={**body, "prompt": list(range(120))})
    assert capped.status_code == 200
    assert capped.json()["usage"]["completion_tokens"] == 10
    assert long.status_code == 400
    error = long.json()["error"]
    assert error["param"] == "input_tokens" and error["code"] == 400
    assert error["message"].startswith("This model's maximum context length is 100 tokens.")


@pytest.mark.e2e
def test_a_huge_request_starts_at_once_and_stops_when_its_client_leaves(sims):
    # --max-model-len 10^13 lets max_tokens 10^12 through: nothing is planned ahead, so
    # the first events come at once and /v1/models answers while it runs; when the client
    # hangs up, the request stops at the engine's next 20 ms step (running drops to 0).
    args = ["--max-model-len", str(10**13), "--step-ms", "20"]
    sim = sims(args)
    with httpx.Client(base_url=sim.url, timeout=10) as client:
        t0 = time.monotonic()
        with client.stream("POST", "/v1/chat/completions", json=chat("z", 10**12)) as response:
            lines = response.iter_lines()
            assert next(lines).startswith("data: ")
            first_s = time.monotonic() - t0
            assert client.get("/v1/models").status_code == 200
            running = scrape(sim.url)["vllm:num_requests_running"]
        deadline = time.monotonic() + 10
        while scrape(sim.url)["vllm:num_requests_running"] != 0:
            assert time.monotonic() < deadline, "the abandoned request kept running"
            time.sleep(0.02)
        steps_then = scrape(sim.url)["specmon_sim_steps_total"]
        time.sleep(0.2)  # ten steps' time: an idle engine runs none
        steps_later = scrape(sim.url)["specmon_sim_steps_total"]
    assert first_s < 5  # generous for a busy machine; the old planner needed minutes
    assert running == 1
    assert steps_later == steps_then


SCHEDULE = "[[1, 1, 4], [2, 3, 2], [6, 8, 1]]"  # batch 4..5: the gap carries K=2 forward


@pytest.mark.e2e
def test_spec_schedule_picks_k_per_running_batch(tmp_path, sims):
    # acceptance 1.0: every drafted token is accepted, so a step at k emits k + 1 tokens
    # until the last ones (a step drafts min(k, remaining - 1)). Alone (B = 1): k = 4;
    # four together (B = 4, in the gap): k = 2. The payload's num_spec_tokens is the
    # maximum, --num-spec-tokens 5 (vLLM's per-request metrics use num_speculative_tokens).
    log = tmp_path / "sim.jsonl"
    args = ["--num-spec-tokens", "5", "--acceptance", "1.0", "--spec-schedule", SCHEDULE]
    args += ["--step-ms", "40", "--log", str(log), "--enable-force-include-usage"]
    sim = sims(args)
    alone = httpx.post(sim.url + "/v1/chat/completions", json=chat("a", 21), timeout=60)
    assert alone.status_code == 200
    # 61 tokens: at least 20 steps of 40 ms, so the four overlap even if a busy machine
    # starts their threads a few hundred ms apart
    together = post_all(sim.url, [chat(f"t{i}", 61) for i in range(4)])
    assert all(r.status_code == 200 for r in together)
    first, *rest = read_log(log)
    # 21 tokens: 1 from prefill, then 20 = 4 steps of 5 (k = 4) -> drafted [4, 4, 4, 4]
    assert first["per_step_drafted"] == [4, 4, 4, 4]
    assert first["payload"]["num_spec_tokens"] == 5
    assert first["payload"]["acceptance_histogram"] == [0, 0, 0, 0, 4, 0]
    # together: each step drafts min(k(B), remaining - 1) with k(B) = 4 at B = 1 (a request
    # running alone at the start or the end) and 2 at B = 2..5; most steps ran with others
    at_two = 0
    for entry in rest:
        drafted = entry["per_step_drafted"]
        remaining = 60
        for d in drafted:
            assert d in (min(4, remaining - 1), min(2, remaining - 1)), (drafted, remaining)
            remaining -= d + 1
        assert remaining == entry["stats"][0]["nonspec_steps"]  # the last token, if left
        at_two += drafted.count(2)
    assert at_two >= 20, [e["per_step_drafted"] for e in rest]


@pytest.mark.e2e
def test_spec_schedule_is_checked_as_vllm_does(tmp_path, sims):
    def sim_error(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "specmon", "sim", "--port", "0", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        return lines[0]

    assert "first batch-size range must start at 1" in sim_error("--spec-schedule", "[[2, 4, 1]]")
    assert "non-overlapping" in sim_error("--spec-schedule", "[[1, 4, 1], [3, 8, 2]]")
    assert "needs speculation" in sim_error(
        "--num-spec-tokens", "0", "--spec-schedule", "[[1, 4, 1]]"
    )
    missing = tmp_path / "nope.json"
    assert "neither JSON" in sim_error("--spec-schedule", str(missing))
    good = tmp_path / "schedule.json"
    good.write_text('{"num_speculative_tokens_per_batch_size": [[1, 8, 2], [9, 64, 0]]}')
    sim = sims(["--spec-schedule", str(good)])
    assert httpx.get(sim.url + "/health", timeout=10).status_code == 200


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_pre_encoded_chunks_are_the_json_encoding(endpoint):
    # the per-request template + text must be byte for byte what encoding the chunk gives
    import random

    from specmon.sim.config import SimConfig
    from specmon.sim.requests import parse_request
    from specmon.sim.server import SimRequest, _sse, build_app

    state = build_app(SimConfig(port=0)).state.sim
    if endpoint == "chat":
        body = chat("t", 5)
    else:
        body = {"model": "specmon-sim", "prompt": "t", "max_tokens": 5, "stream": True}
    parsed = parse_request(endpoint, body, "specmon-sim", 64)
    request = SimRequest(state, parsed, body, None, random.Random(1), None)
    before, after = request._template(0)
    assert before + b" the of" + after == _sse(request._chunk(0, " the of", None))


def lag_total(samples: list[tuple[float, float]]) -> float:
    from specmon.sim.engine import LagMeter

    meter = LagMeter(samples[0][0])
    return sum(meter.step(now, lateness) for now, lateness in samples)


def test_lag_meter_ignores_jitter_and_a_stall_it_recovers_from():
    # 2 ms steps for 1 s, waking 0 or 0.9 ms late at random: the next deadline absorbs it
    jitter = [(0.002 * i, 0.0009 * (i % 3 == 1)) for i in range(500)]
    assert lag_total(jitter) == 0.0
    # a 300 ms stall at t = 0.5 s, then catch-up steps 0.1 ms apart, each 1.9 ms less late
    stall = [(0.002 * i, 0.0) for i in range(251)]
    stall += [(0.8 + 0.0001 * j, max(0.0, 0.3 - 0.0019 * j)) for j in range(200)]
    stall += [(0.82 + 0.002 * i, 0.0) for i in range(200)]
    assert lag_total(stall) == 0.0


def test_lag_meter_counts_a_loop_that_falls_behind_a_window_late():
    # each 2 ms step ends 0.1 ms later than the one before (a 5% deficit) for 1 s: by the
    # end the loop is 50 ms behind; the lag counted is the lateness that has persisted a
    # whole 0.1 s window, that of the wake-up at 0.9 s: 450 x 0.1 ms = 45 ms
    falling = [(0.002 * i, 0.0001 * i) for i in range(501)]
    assert lag_total(falling) == pytest.approx(0.045)
