"""`specmon sim --shape vllm-legacy|trtllm|sglang|none` over real HTTP: each engine's
placement, streaming and not, checked against the simulator's --log ground truth."""

from __future__ import annotations

import httpx
import orjson
import pytest

from specmon.sim.process import start_sim

pytestmark = pytest.mark.e2e
MODEL = "specmon-sim"


def sse_events(text: str) -> list:
    blocks = [b for b in text.split("\n\n") if b]
    return [b[6:] if b == "data: [DONE]" else orjson.loads(b[6:]) for b in blocks]


def last_log(path) -> dict:
    return orjson.loads(path.read_bytes().splitlines()[-1])


def body(stream: bool = False, **extra) -> dict:
    out = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "shape test"}],
        "max_tokens": 30,
        "ignore_eos": True,
        **extra,
    }
    if stream:
        out.update(stream=True, stream_options={"include_usage": True})
    return out


def paths_with(obj, key: str, path: str = "") -> list[str]:
    """Every place in a JSON value where `key` appears (to prove single placement)."""
    found = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == key:
                found.append(f"{path}.{k}")
            found += paths_with(v, key, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            found += paths_with(v, key, f"{path}[{i}]")
    return found


@pytest.fixture
def shape_sim(tmp_path):
    started = []

    def start(shape: str, *args: str):
        log = tmp_path / f"{shape}.jsonl"
        proc = start_sim(["--shape", shape, "--seed", "3", "--log", str(log), *args])
        started.append(proc)
        return proc, httpx.Client(base_url=proc.url, timeout=30), log

    yield start
    for proc in started:
        proc.stop()


def test_legacy_per_choice_sparse(shape_sim):
    proc, client, log = shape_sim("vllm-legacy")
    data = client.post("/v1/chat/completions", json=body()).json()
    stats = data["choices"][0]["speculative_decoding_stats"]
    truth = last_log(log)["stats"][0]
    expected_sparse = {}
    for j in truth["per_step_accepted"]:
        expected_sparse[str(j)] = expected_sparse.get(str(j), 0) + 1
    assert stats["acceptance_histogram"] == expected_sparse  # string keys, zero buckets absent
    assert all(v > 0 for v in stats["acceptance_histogram"].values())
    assert stats["num_spec_steps"] == truth["steps"]
    assert stats["num_accepted_draft_tokens"] == truth["accepted"]
    assert "metrics" not in data
    assert last_log(log)["payload"] == stats
    # streaming: on the finish chunk's choice, never on the usage chunk
    events = sse_events(client.post("/v1/chat/completions", json=body(stream=True)).text)
    carrying = [e for e in events[:-1] if paths_with(e, "speculative_decoding_stats")]
    assert len(carrying) == 1
    assert carrying[0]["choices"][0]["finish_reason"] == "length"
    assert events[-2]["choices"] == [] and "metrics" not in events[-2]
    assert carrying[0]["choices"][0]["speculative_decoding_stats"] == last_log(log)["payload"]


def test_legacy_zero_step_histogram_is_empty_object(shape_sim):
    _, client, _ = shape_sim("vllm-legacy")
    stats = client.post("/v1/chat/completions", json=body(max_tokens=1)).json()["choices"][0][
        "speculative_decoding_stats"
    ]
    assert stats["acceptance_histogram"] == {} and stats["num_spec_steps"] == 0


def test_trtllm_terminal_choice_dense(shape_sim):
    _, client, log = shape_sim("trtllm", "--num-spec-tokens", "4")
    data = client.post(
        "/v1/completions",
        json={"model": MODEL, "prompt": "x", "max_tokens": 30, "ignore_eos": True},
    ).json()
    spec = data["choices"][0]["speculative_decoding"]
    truth = last_log(log)["stats"][0]
    assert set(spec) == {
        "acceptance_rate",
        "total_accepted_draft_tokens",
        "total_draft_tokens",
        "num_spec_steps",
        "acceptance_histogram",
        "num_spec_tokens",
    }
    assert spec["acceptance_histogram"] == truth["histogram"] and len(truth["histogram"]) == 5
    assert spec["total_accepted_draft_tokens"] == truth["accepted"]
    assert spec["total_draft_tokens"] == truth["drafted"]
    assert spec["acceptance_rate"] == truth["accepted"] / truth["drafted"]
    assert spec["num_spec_tokens"] == 4
    assert paths_with(data, "metrics") == [] and paths_with(data, "mean_acceptance_length") == []
    events = sse_events(
        client.post(
            "/v1/completions",
            json={
                "model": MODEL,
                "prompt": "x",
                "max_tokens": 30,
                "ignore_eos": True,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        ).text
    )
    carrying = [e for e in events[:-1] if paths_with(e, "speculative_decoding")]
    assert len(carrying) == 1 and carrying[0]["choices"][0]["finish_reason"] == "length"
    assert carrying[0]["choices"][0]["speculative_decoding"] == last_log(log)["payload"]


def test_trtllm_absent_when_nothing_drafted(shape_sim):
    _, client, log = shape_sim("trtllm")
    # max_tokens 2: prefill token, then one token left -> a non-spec step, no verify step
    data = client.post("/v1/chat/completions", json=body(max_tokens=2)).json()
    assert "speculative_decoding" not in data["choices"][0]
    assert last_log(log)["payload"] is None


def test_sglang_on_request_only(shape_sim):
    _, client, log = shape_sim("sglang")
    assert client.get("/v1/models").json()["data"][0]["owned_by"] == "sglang"
    for route in ("/server_info", "/get_server_info"):
        assert client.get(route).json()["engine"] == "sglang"
    plain = client.post("/v1/chat/completions", json=body()).json()
    assert "sglext" not in plain and "metrics" not in plain
    asked = client.post("/v1/chat/completions", json=body(return_spec_tokens_details=True)).json()
    details = asked["sglext"]["spec_tokens_details"]
    truth = last_log(log)["stats"][0]
    assert details["spec_verify_ct"] == truth["steps"]
    assert details["spec_num_correct_drafts"] == truth["accepted"]
    assert details["spec_num_proposed_drafts"] == truth["drafted"]
    assert details["spec_correct_drafts_histogram"] == truth["histogram"]
    assert details["spec_accept_length"] == 30 / truth["steps"]  # SGLang counts the prefill token
    two = client.post(
        "/v1/chat/completions", json=body(n=2, return_spec_tokens_details=True)
    ).json()
    listed = two["sglext"]["spec_tokens_details"]
    assert isinstance(listed, list) and [d["index"] for d in listed] == [0, 1]
    events = sse_events(
        client.post(
            "/v1/chat/completions", json=body(stream=True, return_spec_tokens_details=True)
        ).text
    )
    carrying = [e for e in events[:-1] if "sglext" in e]
    assert len(carrying) == 1 and carrying[0]["choices"] == []
    assert carrying[0]["sglext"]["spec_tokens_details"] == last_log(log)["payload"]
    # without include_usage the details still come, on their own choices-less chunk
    events = sse_events(
        client.post(
            "/v1/chat/completions",
            json={**body(), "stream": True, "return_spec_tokens_details": True},
        ).text
    )
    carrying = [e for e in events[:-1] if "sglext" in e]
    assert len(carrying) == 1 and "usage" not in carrying[0]


def test_none_sends_no_payload(shape_sim):
    _, client, log = shape_sim("none")
    data = client.post("/v1/chat/completions", json=body()).json()
    assert data["metrics"] is None  # like vLLM with the per-request flag off
    events = sse_events(client.post("/v1/chat/completions", json=body(stream=True)).text)
    assert not any("metrics" in e for e in events[:-1])
    assert events[-2]["usage"]["completion_tokens"] == 30
    assert last_log(log)["payload"] is None
    assert last_log(log)["stats"][0]["steps"] > 0  # the server still speculated
