"""Every engine shape end to end over real HTTP: `specmon sim --shape S` (a uvicorn process)
answers chat and completions, streaming and not; detect() on what came back must give the
simulator's ground truth from its --log (steps, accepted, drafted, histogram, usage)."""

from __future__ import annotations

import json

import httpx
import pytest

from specmon.sim.process import start_sim
from specmon.specdecode.adapters import ParsedResponse, detect

# shape -> the engine a record names (AIPerf's name: tensorrt_llm)
ENGINE = {"vllm": "vllm", "vllm-legacy": "vllm", "trtllm": "tensorrt_llm", "sglang": "sglang"}
PROMPTS = ["def foo(self): return self.foo(self)", "import os\nimport sys\n", "hello there"]


@pytest.fixture(scope="module", params=sorted(ENGINE))
def sim(request, tmp_path_factory):
    log = tmp_path_factory.mktemp("sim") / f"{request.param}.jsonl"
    proc = start_sim(
        [
            "--shape",
            request.param,
            "--seed",
            "7",
            "--num-spec-tokens",
            "3",
            "--acceptance",
            "0.6",
            "--default-max-tokens",
            "24",
            "--log",
            str(log),
        ]
    )
    with proc:
        yield request.param, proc.url, log


def send(url, endpoint, streaming, prompt, shape):
    body = {"model": "specmon-sim", "max_tokens": 24, "temperature": 0}
    if endpoint == "chat":
        path, body["messages"] = "/v1/chat/completions", [{"role": "user", "content": prompt}]
    else:
        path, body["prompt"] = "/v1/completions", prompt
    if shape == "sglang":
        body["return_spec_tokens_details"] = True
    if streaming:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    with httpx.Client(timeout=30) as client:
        reply = client.post(url + path, json=body)
    assert reply.status_code == 200, reply.text
    if not streaming:
        return body, [reply.json()]
    events = [line[len("data: ") :] for line in reply.text.split("\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return body, [json.loads(e) for e in events[:-1]]


def ground_truth(log, count):
    lines = log.read_text().splitlines()
    assert len(lines) == count
    return json.loads(lines[-1])


@pytest.mark.e2e
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("streaming", [False, True])
def test_shape_round_trip(sim, endpoint, streaming):
    shape, url, log = sim
    seen = len(log.read_text().splitlines()) if log.exists() else 0
    for i, prompt in enumerate(PROMPTS):
        request, bodies = send(url, endpoint, streaming, prompt, shape)
        truth = ground_truth(log, seen + i + 1)
        stats = truth["stats"][0]
        outcome = detect([ParsedResponse(b, None, request) for b in bodies], request)
        if stats["steps"] == 0:
            # vLLM / SGLang send a zero-step payload; TensorRT-LLM omits the block
            expected = "absent" if shape == "trtllm" else "zero_step"
            assert outcome.reason == expected and outcome.record is None
            continue
        r = outcome.record
        assert outcome.reason is None and r.engine == ENGINE[shape]
        assert (r.num_spec_steps, r.num_accepted_draft_tokens, r.num_draft_tokens) == (
            stats["steps"],
            stats["accepted"],
            stats["drafted"],
        )
        assert r.acceptance_histogram == {j: n for j, n in enumerate(stats["histogram"]) if n}
        assert r.completion_tokens == truth["usage"]["completion_tokens"]
        # the length every engine's record carries is 1 + a/s (server value or derived)
        assert r.mean_acceptance_length == pytest.approx(1 + stats["accepted"] / stats["steps"])
        if shape in ("vllm", "vllm-legacy"):  # detailed level: per-step arrays verbatim
            assert r.per_step_accepted == stats["per_step_accepted"]
            assert r.per_step_drafted == stats["per_step_drafted"]


@pytest.mark.e2e
def test_n2_is_suppressed_for_every_shape(sim):
    shape, url, _ = sim
    body = {
        "model": "specmon-sim",
        "max_tokens": 8,
        "n": 2,
        "temperature": 0.8,
        "messages": [{"role": "user", "content": "hi"}],
        "return_spec_tokens_details": True,
    }
    reply = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
    assert reply.status_code == 200
    outcome = detect([ParsedResponse(reply.json(), None, body)], body)
    assert outcome.record is None and outcome.reason == "n_gt_1"
    # without the request's own n, the payload count (or SGLang's list form) still tells
    no_request = detect([ParsedResponse(reply.json())], {"messages": []})
    assert no_request.reason in ("n_gt_1", "absent")  # vLLM 0.32 sends "metrics": null
    if shape != "vllm":
        assert no_request.reason == "n_gt_1"
