"""Issue 35 item 1: nothing a request raises escapes the accounting. A header aiohttp
refuses (a category holding CR LF), or any other exception inside a request task, is one
counted error of kind `client_error` on that request (in the JSONL and the summary's error
count), never a success with invented timestamps; a category holding any control character
is refused when the prompts are read, naming the file and the line."""

from __future__ import annotations

import asyncio
import json
import unicodedata

import pytest
from support.hostile_server import GOOD, MODEL, HostileServer

from specmon.capture import RawCapture
from specmon.config import RunConfig
from specmon.errors import UserError
from specmon.pipeline import process_capture
from specmon.session import RunSession
from specmon.sources.datasets import load_dataset
from specmon.sources.load.client import LoadClient, new_capture
from specmon.sources.load.datasets import load_jsonl_prompts
from specmon.sources.load.generator import LoadGenerator

# every character Unicode calls a control character: C0, DEL and C1 (65 of them)
CONTROL = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cc"]


def test_the_sweep_covers_c0_del_and_c1():
    assert len(CONTROL) == 32 + 1 + 32
    assert {"\r", "\n", "\x00", "\x1b", "\t", "\x7f", "\x85"} <= set(CONTROL)


def _prompt_file(tmp_path, category: str) -> str:
    path = tmp_path / "prompts.jsonl"
    rows = [{"text": "hello", "category": "ok"}, {"text": "bye", "category": category}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


@pytest.mark.parametrize("char", CONTROL, ids=lambda c: f"U+{ord(c):04X}")
def test_input_file_category_with_a_control_character_is_refused_naming_the_line(tmp_path, char):
    path = _prompt_file(tmp_path, f"wri{char}ting")
    with pytest.raises(UserError) as info:
        load_jsonl_prompts(path)
    message = str(info.value)
    assert message.startswith(f"input file {path} line 2: 'category'")
    assert f"U+{ord(char):04X}" in message and "\n" not in message


def _dataset_rows(kind: str, category: str) -> list[dict]:
    if kind in ("spec_bench", "mt_bench"):
        return [
            {"question_id": 1, "category": "ok", "turns": ["hi"]},
            {"question_id": 2, "category": category, "turns": ["hi"]},
        ]
    if kind == "speed_bench":
        turn = {"role": "user", "content": "hi"}
        return [
            {"question_id": "a", "category": "ok", "messages": [turn]},
            {"question_id": "b", "category": category, "messages": [turn]},
        ]
    conversation = [{"from": "human", "value": "hi"}]
    return [
        {"conversations": conversation, "category": "ok"},
        {"conversations": conversation, "category": category},
    ]


@pytest.mark.parametrize("kind", ["spec_bench", "mt_bench", "speed_bench", "sharegpt"])
def test_dataset_category_with_any_control_character_is_refused_naming_the_row(tmp_path, kind):
    for char in CONTROL:
        path = tmp_path / f"{kind}.jsonl"
        rows = _dataset_rows(kind, f"wri{char}ting")
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        with pytest.raises(UserError) as info:
            load_dataset(kind, str(path))
        message = str(info.value)
        assert message.startswith(f"input file {path} line 2: 'category'"), message
        assert f"U+{ord(char):04X}" in message and "\n" not in message


def test_a_header_aiohttp_refuses_is_a_client_error_with_real_stamps():
    async def send() -> RawCapture:
        async with LoadClient(server.url, max_connections=1, request_timeout=10) as client:
            capture = new_capture("chat", False, {"model": MODEL})
            return await client.send(capture, category="wri\r\nting")

    with HostileServer({"good": GOOD}) as server:
        capture = asyncio.run(send())
    assert capture.error is not None and capture.error["type"] == "client_error"
    assert "ValueError" in capture.error["message"]
    assert capture.start_ns is not None and capture.end_ns is not None
    assert 0 < capture.start_ns <= capture.end_ns
    assert server.sent == []  # nothing reached the server
    result = process_capture(capture)
    assert result.error_kind == "client_error" and result.values == {}


def test_an_answer_stamped_before_its_request_is_an_error_not_a_negative_latency():
    capture = RawCapture("chat", False, {}, 200, [json.loads(GOOD)], 5_000, [4_000], 0)
    result = process_capture(capture)
    assert result.error_kind == "invalid_timing"
    assert "request_latency" not in result.values


def test_every_exception_inside_a_request_task_is_a_counted_error(tmp_path, monkeypatch):
    """Every second request raises inside the client (as a refused header does): 3 of 6 are
    client_error rows in the JSONL and the summary, the other 3 successes, no latency < 0."""
    real = LoadClient._exchange
    calls = []

    async def flaky(self, capture, category):
        calls.append(1)
        if len(calls) % 2 == 0:
            raise ValueError("Forbidden control character detected in headers")
        return await real(self, capture, category)

    monkeypatch.setattr(LoadClient, "_exchange", flaky)
    with HostileServer({"good": GOOD}) as server:
        config = RunConfig(url=[server.url], model=MODEL, request_count=6, concurrency=1)
        session = RunSession(tmp_path, "records", {})
        generator = LoadGenerator(config, MODEL, server.url, session.add)
        asyncio.run(generator.run())
        session.finish()
    assert (generator.completed, generator.errors) == (6, 3)
    rows = [json.loads(x) for x in (tmp_path / "profile_export.jsonl").read_text().splitlines()]
    kinds = [row["error"]["type"] if row.get("error") else None for row in rows]
    assert kinds.count("client_error") == 3 and kinds.count(None) == 3
    for row in rows:
        latency = row["metrics"].get("request_latency")
        assert latency is None or latency["value"] > 0
    summary = json.loads((tmp_path / "profile_export_aiperf.json").read_text())
    assert summary["error_summary"][0]["count"] == 3
    assert "client_error" in json.dumps(summary["error_summary"])
    assert summary["request_count"]["avg"] == 3
