"""`specmon sim` ground truth over real HTTP: --seed determinism, /metrics counters equal the
logged payloads (summed over engine label sets), category acceptance, fault injection, the
latency model's wiring, and one-line errors for bad flags."""

from __future__ import annotations

import concurrent.futures
import socket
import subprocess
import sys

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.cli import start_specmon

from specmon.errors import UserError
from specmon.sim.process import start_sim

pytestmark = pytest.mark.e2e
MODEL = "specmon-sim"


def read_log(path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def chat(content: str, **extra) -> dict:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 48,
        "ignore_eos": True,
        **extra,
    }


def spec_counters(text: str) -> dict[str, dict[str, float]]:
    """{sample name -> {engine[/position] -> value}} for the spec-decode _total samples."""
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("vllm:spec_decode") and sample.name.endswith("_total"):
                key = sample.labels["engine"]
                if "position" in sample.labels:
                    key += "/" + sample.labels["position"]
                out.setdefault(sample.name, {})[key] = sample.value
    return out


def payload_of(response: httpx.Response, stream: bool) -> dict | None:
    if not stream:
        return (response.json().get("metrics") or {}).get("speculative_decoding")
    for block in response.text.split("\n\n"):
        if block.startswith("data: {") and '"metrics"' in block:
            return orjson.loads(block[6:])["metrics"]["speculative_decoding"]
    return None


def test_same_seed_same_answers_in_any_order(tmp_path, sims):
    bodies = {"a": chat("alpha"), "b": chat("beta", max_tokens=20), "c": chat("gamma", n=1)}
    order1, order2 = ["a", "b", "a", "c"], ["c", "a", "b", "a"]

    def collect(url, order, parallel):
        with httpx.Client(base_url=url, timeout=30) as client:
            send = lambda name: client.post("/v1/chat/completions", json=bodies[name]).json()
            if parallel:
                with concurrent.futures.ThreadPoolExecutor(4) as pool:
                    results = list(pool.map(send, order))
            else:
                results = [send(name) for name in order]
        seen: dict[str, list] = {}
        for name, data in zip(order, results):
            seen.setdefault(name, []).append(
                orjson.dumps(
                    [
                        data["choices"][0]["message"]["content"],
                        data["metrics"]["speculative_decoding"],
                    ]
                )
            )
        # identical bodies in flight together may swap occurrence numbers: compare as multisets
        return {name: sorted(answers) for name, answers in seen.items()}

    one = sims(["--seed", "11"])
    two = sims(["--seed", "11"])
    other = sims(["--seed", "12"])
    first = collect(one.url, order1, parallel=False)
    second = collect(two.url, order2, parallel=True)
    third = collect(other.url, order1, parallel=False)
    assert first == second
    assert first["a"][0] != first["a"][1]  # the second identical body is a new draw
    assert first != third


def test_metrics_counters_equal_logged_payloads(tmp_path, sims):
    log = tmp_path / "sim.jsonl"
    proc = sims([
        "--seed", "5", "--engines", "2", "--num-spec-tokens", "4", "--acceptance",
        "0.9,0.7,0.5,0.3", "--log", str(log),
    ])  # fmt: skip
    with httpx.Client(base_url=proc.url, timeout=30) as client:
        before = spec_counters(client.get("/metrics").text)
        assert set(before["vllm:spec_decode_num_drafts_total"]) == {"0", "1"}
        assert all(v == 0 for v in before["vllm:spec_decode_num_drafts_total"].values())
        payloads = []
        for i in range(24):
            stream = i % 2 == 1
            path = "/v1/chat/completions" if i % 3 else "/v1/completions"
            body = (
                chat(f"request {i}", max_tokens=10 + i)
                if i % 3
                else {
                    "model": MODEL,
                    "prompt": f"request {i}",
                    "max_tokens": 10 + i,
                    "ignore_eos": True,
                }
            )
            if stream:
                body.update(stream=True, stream_options={"include_usage": True})
            payloads.append(payload_of(client.post(path, json=body), stream))
        after = spec_counters(client.get("/metrics").text)
        entries = read_log(log)
    assert [e["payload"] for e in entries] == payloads and None not in payloads
    for entry, p in zip(entries, payloads):  # invariants on every payload sent
        hist, steps, accepted = (
            p["acceptance_histogram"],
            p["num_spec_steps"],
            p["num_accepted_draft_tokens"],
        )
        assert len(hist) == 5 and sum(hist) == steps == len(p["per_step_accepted"])
        assert sum(j * h for j, h in enumerate(hist)) == accepted == sum(p["per_step_accepted"])
        assert accepted <= p["num_draft_tokens"] == sum(p["per_step_drafted"])
        completion = entry["usage"]["completion_tokens"]
        assert completion == entry["received"]["max_tokens"]  # ignore_eos
        assert 1 + steps + accepted + entry["stats"][0]["nonspec_steps"] == completion
    for engine in ("0", "1"):
        mine = [e["payload"] for e in entries if str(e["engine"]) == engine]
        assert len(mine) == 12  # round robin over the two engines
        assert after["vllm:spec_decode_num_drafts_total"][engine] == sum(
            p["num_spec_steps"] for p in mine
        )
        assert after["vllm:spec_decode_num_draft_tokens_total"][engine] == sum(
            p["num_draft_tokens"] for p in mine
        )
        assert after["vllm:spec_decode_num_accepted_tokens_total"][engine] == sum(
            p["num_accepted_draft_tokens"] for p in mine
        )
        for position in range(4):
            # per step +1 at positions 0..j-1: position i counts steps with j > i
            hits = sum(
                h for p in mine for j, h in enumerate(p["acceptance_histogram"]) if j > position
            )
            per_step = sum(1 for p in mine for j in p["per_step_accepted"] if j > position)
            assert hits == per_step
            assert (
                after["vllm:spec_decode_num_accepted_tokens_per_pos_total"][f"{engine}/{position}"]
                == hits
            )
    # summed over engines (what a scraper must do) = the run's totals
    total_steps = sum(after["vllm:spec_decode_num_drafts_total"].values())
    assert total_steps == sum(p["num_spec_steps"] for p in payloads) > 0


def test_category_acceptance_differs(tmp_path, sims):
    log = tmp_path / "sim.jsonl"
    rates = {}
    proc = sims([
        "--seed", "2", "--acceptance", "0.6", "--category-acceptance", "code=0.95,chat=0.2",
        "--log", str(log),
    ])  # fmt: skip
    with httpx.Client(base_url=proc.url, timeout=30) as client:
        for category in ("code", "chat", None):
            headers = {"X-Specmon-Category": category} if category else {}
            accepted = drafted = 0
            for i in range(15):
                spec = client.post(
                    "/v1/chat/completions", json=chat(f"q{i}", max_tokens=64), headers=headers
                ).json()["metrics"]["speculative_decoding"]
                accepted += spec["num_accepted_draft_tokens"]
                drafted += spec["num_draft_tokens"]
            rates[category] = accepted / drafted
    # flat a with 3 drafts: expected rate = (a + a^2 + a^3) / 3
    # code 0.95 -> (0.95+0.9025+0.857375)/3 = 0.903; chat 0.2 -> 0.083; default 0.6 -> 0.392
    assert rates["code"] > 0.8
    assert rates["chat"] < 0.2
    assert 0.25 < rates[None] < 0.55
    assert {e["category"] for e in read_log(log)} == {"code", "chat", None}


def test_error_rate_answers_500(tmp_path, sims):
    proc = sims(["--error-rate", "1"])
    with httpx.Client(base_url=proc.url) as client:
        response = client.post("/v1/chat/completions", json=chat("x"))
        assert response.status_code == 500
        error = response.json()["error"]
        assert error["code"] == 500 and error["message"] and "param" in error
        counters = spec_counters(client.get("/metrics").text)
        assert counters["vllm:spec_decode_num_drafts_total"]["0"] == 0


def test_malformed_rate_breaks_the_histogram(tmp_path, sims):
    log = tmp_path / "sim.jsonl"
    proc = sims(["--malformed-rate", "1", "--log", str(log)])
    with httpx.Client(base_url=proc.url) as client:
        spec = client.post("/v1/chat/completions", json=chat("x")).json()["metrics"][
            "speculative_decoding"
        ]
    truth = read_log(log)[-1]
    assert truth["fault"] == "malformed"
    assert spec["num_spec_steps"] == truth["stats"][0]["steps"]
    assert sum(spec["acceptance_histogram"]) == spec["num_spec_steps"] + 1  # contradiction


def test_disconnect_rate_cuts_the_stream(tmp_path, sims):
    log = tmp_path / "sim.jsonl"
    proc = sims(["--disconnect-rate", "1", "--log", str(log)])
    with httpx.Client(base_url=proc.url, timeout=30) as client:
        received = b""
        with pytest.raises(httpx.TransportError):
            with client.stream(
                "POST",
                "/v1/chat/completions",
                json=chat("x", stream=True, stream_options={"include_usage": True}),
            ) as response:
                for part in response.iter_bytes():
                    received += part
        assert b"data: " in received and b"[DONE]" not in received
        truth = read_log(log)[-1]
        assert truth["fault"] == "disconnect" and truth["payload"] is None
        rounds = 1 + len(truth["per_step_accepted"]) + truth["stats"][0]["nonspec_steps"]
        assert 0 < truth["rounds_sent"] < rounds
        # /metrics counts only the verify steps streamed before the cut (round 0 = prefill)
        counted = spec_counters(client.get("/metrics").text)
        assert counted["vllm:spec_decode_num_drafts_total"]["0"] == truth["rounds_sent"] - 1
        with pytest.raises(httpx.TransportError):
            client.post("/v1/chat/completions", json=chat("y"))  # non-streaming: cut body
        assert client.get("/health").status_code == 200  # the server lives on


def test_step_times_follow_the_latency_model(tmp_path, sims):
    log = tmp_path / "sim.jsonl"
    # step_time = 0.5 * (1 + 0.5 * (B-1) * 4) + 0.1 * 3: B=1 0.8, B=2 1.8, B=3 2.8, B=4 3.8 ms
    args = [
        "--step-ms",
        "0.5",
        "--draft-ms-per-token",
        "0.1",
        "--batch-slope",
        "0.5",
        "--ttft-ms",
        "300",
        "--log",
        str(log),
    ]
    proc = sims(args)
    with httpx.Client(base_url=proc.url, timeout=30) as client:
        client.post("/v1/chat/completions", json=chat("alone", max_tokens=12))
        alone = read_log(log)[-1]
        assert alone["ttft_ms"] == 300.0
        assert alone["step_ms"] and all(s == pytest.approx(0.8) for s in alone["step_ms"])
        send = lambda i: client.post(
            "/v1/chat/completions", json=chat(f"c{i}", max_tokens=12, stream=True)
        )
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(send, range(4)))
        together = [s for e in read_log(log)[-4:] for s in e["step_ms"]]
    allowed = [0.8, 1.8, 2.8, 3.8]
    assert all(any(s == pytest.approx(a) for a in allowed) for s in together)
    assert max(together) > 0.8 + 1e-9  # steps ran while other requests were in flight


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "specmon", "sim", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "args, words",
    [
        (["--acceptance", "1.5"], "outside 0..1"),
        (["--acceptance", "0.5,0.5"], "--acceptance"),
        (["--num-spec-tokens", "-1"], "--num-spec-tokens"),
        (["--error-rate", "2"], "--error-rate"),
        (["--category-acceptance", "code"], "CATEGORY=P"),
        (["--log", "/nonexistent-dir/x.jsonl"], "--log"),
        (["--max-num-seqs", "0"], "--max-num-seqs"),
        (["--kv-cache-tokens", "0"], "--kv-cache-tokens"),
    ],
)
def test_bad_flags_are_one_line_errors(args, words):
    result = _run_cli("--port", "0", *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specmon: error:") and words in lines[0]
    assert "Traceback" not in result.stderr


def test_busy_port_is_a_one_line_error():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        result = _run_cli("--port", str(busy.getsockname()[1]))
    assert result.returncode == 2
    assert result.stderr.strip().startswith("specmon: error: cannot listen on 127.0.0.1:")
    assert len(result.stderr.strip().splitlines()) == 1


def test_listening_line_comes_first_and_start_sim_reports_failure():
    proc = start_specmon("sim", "--port", "0", stderr=None)
    try:
        line = proc.stdout.readline()
        assert line.startswith("specmon sim listening on http://127.0.0.1:")
        port = int(line.rsplit(":", 1)[1])
        assert 0 < port < 65536
    finally:
        proc.terminate()
        proc.wait(10)
        proc.stdout.close()
    with pytest.raises(UserError):
        start_sim(["--acceptance", "7"], timeout=30)


def test_client_that_leaves_stops_the_stream(tmp_path, sims):
    import time

    log = tmp_path / "sim.jsonl"
    proc = sims(["--step-ms", "40", "--log", str(log)])
    with httpx.Client(base_url=proc.url, timeout=30) as client:
        with client.stream(
            "POST", "/v1/chat/completions", json=chat("long", max_tokens=400, stream=True)
        ) as response:
            lines = response.iter_lines()
            next(lines)  # headers and the first event arrived; now hang up
        deadline = time.monotonic() + 20
        while not log.exists() or not log.read_bytes():
            assert time.monotonic() < deadline, "the sim never logged the abandoned request"
            time.sleep(0.05)
        truth = read_log(log)[-1]
        counted = spec_counters(client.get("/metrics").text)
    # 400 tokens need at least 400 / 4 = 100 rounds; the client left after the first
    rounds = 1 + len(truth["per_step_accepted"]) + truth["stats"][0]["nonspec_steps"]
    assert truth["fault"] == "client_disconnect"
    assert 1 <= truth["rounds_sent"] < rounds
    assert counted["vllm:spec_decode_num_drafts_total"]["0"] == truth["rounds_sent"] - 1
