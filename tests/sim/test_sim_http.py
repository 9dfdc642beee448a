"""`specmon sim` over real HTTP on loopback: routes, both endpoints, streaming and not,
levels, n > 1, include_usage, error bodies, API key, and the --log ground truth."""

from __future__ import annotations

import httpx
import orjson
import pytest

from specmon.sim.process import start_sim

pytestmark = pytest.mark.e2e
MODEL = "specmon-sim"


def sse_events(text: str) -> list:
    """Split an SSE body into decoded `data:` objects; '[DONE]' kept as the string."""
    events = []
    for block in text.split("\n\n"):
        if not block:
            continue
        assert block.startswith("data: "), block
        data = block[len("data: ") :]
        events.append(data if data == "[DONE]" else orjson.loads(data))
    return events


def read_log(path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def check_vllm_invariants(spec: dict, completion_tokens: int, nonspec: int) -> None:
    hist, steps = spec["acceptance_histogram"], spec["num_spec_steps"]
    accepted, drafted = spec["num_accepted_draft_tokens"], spec["num_draft_tokens"]
    assert len(hist) == spec["num_spec_tokens"] + 1
    assert sum(hist) == steps
    assert sum(j * h for j, h in enumerate(hist)) == accepted
    assert accepted <= drafted
    assert spec["mean_acceptance_length"] == (1 + accepted / steps if steps else 1.0)
    assert spec["draft_acceptance_rate"] == (accepted / drafted if drafted else 0.0)
    assert 1 + steps + accepted + nonspec == completion_tokens
    if spec.get("per_step_accepted") is not None:
        assert len(spec["per_step_accepted"]) == steps == len(spec["per_step_drafted"])
        assert sum(spec["per_step_accepted"]) == accepted
        assert sum(spec["per_step_drafted"]) == drafted
        assert all(
            0 <= a <= d <= spec["num_spec_tokens"]
            for a, d in zip(spec["per_step_accepted"], spec["per_step_drafted"])
        )


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    log = tmp_path_factory.mktemp("sim") / "sim.jsonl"
    with start_sim(
        ["--seed", "7", "--log", str(log), "--num-spec-tokens", "3", "--acceptance", "0.8,0.6,0.4"]
    ) as proc:
        proc.log = log
        with httpx.Client(base_url=proc.url, timeout=30) as client:
            proc.client = client
            yield proc


def chat_body(**extra) -> dict:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Write a haiku about tests."}],
        "max_tokens": 40,
        "ignore_eos": True,
        **extra,
    }


def completion_body(**extra) -> dict:
    return {
        "model": MODEL,
        "prompt": "Once upon a time",
        "max_tokens": 40,
        "ignore_eos": True,
        **extra,
    }


def last_log(sim) -> dict:
    return read_log(sim.log)[-1]


def test_routes(sim):
    models = sim.client.get("/v1/models").json()
    assert [m["id"] for m in models["data"]] == [MODEL]
    assert models["data"][0]["owned_by"] == "vllm"
    assert sim.client.get("/health").status_code == 200
    assert sim.client.get("/version").json() == {"version": "0.32.0"}
    metrics = sim.client.get("/metrics")
    assert metrics.status_code == 200
    for family in (
        "vllm:spec_decode_num_drafts_total",
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_per_pos_total",
        "vllm:spec_decode_num_drafts_created",
    ):
        assert family + '{engine="0",model_name="specmon-sim"' in metrics.text
    for position in range(3):
        assert f'position="{position}"' in metrics.text
    assert 'position="3"' not in metrics.text  # positions 0..k-1 only
    # vLLM's dev-mode /server_info: the speculative config's repr, here with no method set
    # (no preset names one: the suite's simulators run --preset zero)
    info = sim.client.get("/server_info").json()["vllm_config"]
    assert "speculative_config=None" in info
    missing = sim.client.get("/get_server_info")  # only the sglang shape has it
    assert missing.status_code == 404 and missing.json() == {"detail": "Not Found"}
    wrong_method = sim.client.get("/v1/chat/completions")
    assert wrong_method.status_code == 405 and wrong_method.json() == {
        "detail": "Method Not Allowed"
    }


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_non_streaming_body(sim, endpoint):
    path, body = (
        ("/v1/chat/completions", chat_body())
        if endpoint == "chat"
        else ("/v1/completions", completion_body())
    )
    response = sim.client.post(path, json=body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    data = response.json()
    assert data["object"] == ("chat.completion" if endpoint == "chat" else "text_completion")
    assert data["model"] == MODEL and len(data["choices"]) == 1
    choice = data["choices"][0]
    text = choice["message"]["content"] if endpoint == "chat" else choice["text"]
    assert len(text.split()) == 40  # one fake word per token
    assert choice["finish_reason"] == "length"  # ignore_eos: exactly max_tokens
    assert data["usage"]["completion_tokens"] == 40
    assert data["usage"]["total_tokens"] == data["usage"]["prompt_tokens"] + 40
    # metrics is the last key, with the five timing keys present as null
    assert list(data)[-1] == "metrics"
    metrics = data["metrics"]
    assert {k: v for k, v in metrics.items() if k != "speculative_decoding"} == dict.fromkeys(
        [
            "time_to_first_token_ms",
            "generation_time_ms",
            "queue_time_ms",
            "mean_itl_ms",
            "tokens_per_second",
        ]
    )
    spec = metrics["speculative_decoding"]
    log = last_log(sim)
    assert log["payload"] == spec and log["status"] == 200 and log["received"] == body
    assert spec["per_step_accepted"] == log["per_step_accepted"]
    check_vllm_invariants(spec, 40, log["stats"][0]["nonspec_steps"])
    assert spec["num_spec_tokens"] == 3


def test_floats_keep_a_decimal_point(sim):
    # max_tokens 1: no verify step -> mean 1.0, rate 0.0, all-zero histogram, per_step null
    response = sim.client.post("/v1/chat/completions", json=chat_body(max_tokens=1))
    assert '"mean_acceptance_length":1.0' in response.text
    assert '"draft_acceptance_rate":0.0' in response.text
    spec = response.json()["metrics"]["speculative_decoding"]
    assert spec["acceptance_histogram"] == [0, 0, 0, 0] and spec["num_spec_steps"] == 0
    assert spec["per_step_accepted"] is None and spec["per_step_drafted"] is None


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_streaming_one_chunk_per_step_and_payload_once(sim, endpoint):
    path, body = (
        ("/v1/chat/completions", chat_body())
        if endpoint == "chat"
        else ("/v1/completions", completion_body())
    )
    body.update(stream=True, stream_options={"include_usage": True})
    response = sim.client.post(path, json=body)
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    events = sse_events(response.text)
    assert events[-1] == "[DONE]"
    events = events[:-1]
    if endpoint == "chat":
        assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        events = events[1:]
    usage_chunk = events[-1]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["completion_tokens"] == 40
    content = events[:-1]
    log = last_log(sim)
    stats = log["stats"][0]

    # token counts per chunk: 1 (prefill), then j+1 per spec step, then 1 per non-spec step
    def tokens(event):
        choice = event["choices"][0]
        return len((choice["delta"]["content"] if endpoint == "chat" else choice["text"]).split())

    expected = [1] + [j + 1 for j in stats["per_step_accepted"]] + [1] * stats["nonspec_steps"]
    assert [tokens(e) for e in content] == expected
    assert sum(expected) == 40
    assert content[-1]["choices"][0]["finish_reason"] == "length"
    assert all(e["choices"][0]["finish_reason"] is None for e in content[:-1])
    # the payload rides the usage chunk only (AIPerf 0.13 drops a record it sees twice)
    carrying = [e for e in events if "metrics" in e]
    assert carrying == [usage_chunk]
    spec = usage_chunk["metrics"]["speculative_decoding"]
    assert list(usage_chunk["metrics"]) == ["speculative_decoding"]  # exclude_none: no timing keys
    assert spec == log["payload"]
    check_vllm_invariants(spec, 40, stats["nonspec_steps"])
    assert spec["per_step_accepted"] == stats["per_step_accepted"]


def test_stream_without_include_usage_has_no_payload(sim):
    for body in (
        chat_body(stream=True),
        chat_body(stream=True, stream_options={"include_usage": False}),
    ):
        events = sse_events(sim.client.post("/v1/chat/completions", json=body).text)
        assert events[-1] == "[DONE]"
        assert not any("usage" in e or "metrics" in e for e in events[:-1])
        assert last_log(sim)["payload"] is None
        assert last_log(sim)["stats"][0]["completion_tokens"] == 40


def test_n2_metrics_null(sim):
    data = sim.client.post("/v1/chat/completions", json=chat_body(n=2)).json()
    assert data["metrics"] is None
    assert [c["index"] for c in data["choices"]] == [0, 1]
    assert data["usage"]["completion_tokens"] == 80
    log = last_log(sim)
    assert log["payload"] is None and len(log["stats"]) == 2
    events = sse_events(
        sim.client.post(
            "/v1/chat/completions",
            json=chat_body(n=2, stream=True, stream_options={"include_usage": True}),
        ).text
    )
    usage = [e for e in events[:-1] if e["choices"] == []]
    assert len(usage) == 1 and "metrics" not in usage[0]
    assert usage[0]["usage"]["completion_tokens"] == 80
    finishes = sorted(
        e["choices"][0]["index"]
        for e in events[:-1]
        if e["choices"] and e["choices"][0]["finish_reason"]
    )
    assert finishes == [0, 1]


def test_completions_prompt_lists(sim):
    two = sim.client.post("/v1/completions", json=completion_body(prompt=["a b", "c d"])).json()
    assert two["metrics"] is None and len(two["choices"]) == 2
    one = sim.client.post("/v1/completions", json=completion_body(prompt=["a b"])).json()
    assert one["metrics"]["speculative_decoding"]["num_spec_tokens"] == 3
    ids = sim.client.post("/v1/completions", json=completion_body(prompt=[1, 2, 3, 4, 5])).json()
    assert ids["usage"]["prompt_tokens"] == 5 and ids["metrics"] is not None


@pytest.mark.parametrize(
    "path, body, status, param",
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]}, 400, "model"),
        ("/v1/chat/completions", {"model": MODEL}, 400, "messages"),
        ("/v1/chat/completions", {"model": MODEL, "messages": []}, 400, "messages"),
        ("/v1/completions", {"model": MODEL}, 400, "prompt"),
        ("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
        ("/v1/completions", {"model": MODEL, "prompt": "x", "n": 0}, 400, "n"),
        (
            "/v1/completions",
            {"model": MODEL, "prompt": "x", "stream_options": {"include_usage": True}},
            400,
            "stream_options",
        ),
        ("/v1/completions", {"model": "other", "prompt": "x"}, 404, "model"),
    ],
)
def test_error_bodies(sim, path, body, status, param):
    response = sim.client.post(path, json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == status and error["param"] == param and error["message"]
    assert error["type"] == ("BadRequestError" if status == 400 else "NotFoundError")


def test_invalid_json_is_400(sim):
    response = sim.client.post(
        "/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "BadRequestError"


def test_api_key(tmp_path):
    with start_sim(["--api-key", "sekret"]) as proc, httpx.Client(base_url=proc.url) as client:
        body = chat_body(max_tokens=3)
        missing = client.post("/v1/chat/completions", json=body)
        wrong = client.post(
            "/v1/chat/completions", json=body, headers={"Authorization": "Bearer nope"}
        )
        right = client.post(
            "/v1/chat/completions", json=body, headers={"Authorization": "Bearer sekret"}
        )
        assert missing.status_code == wrong.status_code == 401
        assert missing.json()["error"]["code"] == 401
        assert right.status_code == 200
        assert client.get("/v1/models").status_code == 401
        assert client.get("/health").status_code == 200
        assert client.get("/metrics").status_code == 200


def test_summary_level(tmp_path):
    with start_sim(["--level", "summary"]) as proc, httpx.Client(base_url=proc.url) as client:
        spec = client.post("/v1/chat/completions", json=chat_body()).json()["metrics"][
            "speculative_decoding"
        ]
        assert spec["per_step_accepted"] is None and spec["per_step_drafted"] is None
        assert sum(spec["acceptance_histogram"]) == spec["num_spec_steps"] > 0
        events = sse_events(
            client.post(
                "/v1/chat/completions",
                json=chat_body(stream=True, stream_options={"include_usage": True}),
            ).text
        )
        spec = events[-2]["metrics"]["speculative_decoding"]
        assert "per_step_accepted" not in spec and "per_step_drafted" not in spec
        assert len(spec) == 7


def test_log_is_written_before_the_response_ends(sim):
    before = len(read_log(sim.log))
    sim.client.post("/v1/completions", json=completion_body(stream=True))
    entries = read_log(sim.log)
    assert len(entries) == before + 1
    assert entries[-1]["endpoint"] == "completions" and entries[-1]["stream"] is True


def test_force_include_usage_and_per_request_timing(tmp_path):
    log = tmp_path / "sim.jsonl"
    args = [
        "--enable-force-include-usage",
        "--enable-per-request-metrics",
        "--ttft-ms",
        "20",
        "--step-ms",
        "1",
        "--log",
        str(log),
    ]
    with start_sim(args) as proc, httpx.Client(base_url=proc.url, timeout=30) as client:
        # no stream_options at all: the forced usage chunk still carries the stats
        events = sse_events(client.post("/v1/chat/completions", json=chat_body(stream=True)).text)
        usage = events[-2]
        assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 40
        metrics = usage["metrics"]
        assert metrics["speculative_decoding"] == read_log(log)[-1]["payload"]
        # timing keys are real floats now; ttft covers at least the simulated 20 ms
        assert metrics["time_to_first_token_ms"] >= 20.0
        # mean ITL = generation / (40 - 1); tokens/s = 40 / (ttft + generation)
        assert metrics["mean_itl_ms"] == pytest.approx(metrics["generation_time_ms"] / 39)
        assert metrics["tokens_per_second"] == pytest.approx(
            40 / ((metrics["time_to_first_token_ms"] + metrics["generation_time_ms"]) / 1000)
        )
        body = client.post("/v1/chat/completions", json=chat_body()).json()
        assert isinstance(body["metrics"]["generation_time_ms"], float)
        assert body["metrics"]["generation_time_ms"] > 0
        # n > 1 drops the timing keys with the stats
        assert client.post("/v1/chat/completions", json=chat_body(n=2)).json()["metrics"] is None
