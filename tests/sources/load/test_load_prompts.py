"""Prompt sources, request bodies and the SSE parser (pure code, no server)."""

from __future__ import annotations

import random

import pytest

from specmon.config import RunConfig
from specmon.errors import UserError
from specmon.sources.load.client import SSEParser, error_message
from specmon.sources.load.datasets import PromptSource, load_jsonl_prompts, sample_length
from specmon.sources.load.generator import ArrivalSchedule, RequestFactory
from specmon.sources.load.prompts import BUILTIN_PROMPTS


def test_builtin_set_has_eight_categories_of_six_distinct_prompts():
    required = {
        "code",
        "math",
        "qa",
        "summarization",
        "translation",
        "chat",
        "reasoning",
        "writing",
    }
    assert required <= set(BUILTIN_PROMPTS)
    for category, prompts in BUILTIN_PROMPTS.items():
        assert len(prompts) >= 6, category
        assert len(set(prompts)) == len(prompts), category


def test_synthetic_prompt_has_requested_word_count_and_is_seeded():
    a = PromptSource("synthetic", random.Random(7), input_tokens_mean=100).next()
    b = PromptSource("synthetic", random.Random(7), input_tokens_mean=100).next()
    assert len(a.text.split()) == 100  # stddev 0: exactly the mean, one word per token
    assert a == b and a.category == "synthetic"


def test_sample_length_clamps_to_one_and_follows_stddev():
    rng = random.Random(1)
    assert sample_length(rng, 5, 0) == 5
    draws = [sample_length(rng, 200, 20) for _ in range(4000)]
    mean = sum(draws) / len(draws)
    assert 197 < mean < 203  # standard error 20/sqrt(4000) = 0.32; 3 tokens is ~9 SE
    assert min(sample_length(rng, 1, 50) for _ in range(200)) == 1


def test_jsonl_file_prompts_and_line_numbered_errors(tmp_path):
    good = tmp_path / "p.jsonl"
    good.write_text('{"text": "hello", "category": "chat", "max_tokens": 9}\n\n{"text": "x"}\n')
    prompts = load_jsonl_prompts(str(good))
    assert [(p.text, p.category, p.max_tokens) for p in prompts] == [
        ("hello", "chat", 9),
        ("x", None, None),
    ]
    cases = {
        '{"text": "a"}\n{"txt": "b"}\n': "line 2: unknown key 'txt'",
        '{"text": "a"}\nnot json\n': "line 2: invalid JSON",
        '{"text": ""}\n': "line 1: 'text' must be a non-empty string",
        '{"text": "a", "max_tokens": 0}\n': "line 1: 'max_tokens' must be a positive integer",
        "[1, 2]\n": "line 1: expected a JSON object",
    }
    for content, expected in cases.items():
        bad = tmp_path / "bad.jsonl"
        bad.write_text(content)
        with pytest.raises(UserError, match=expected):
            load_jsonl_prompts(str(bad))
    with pytest.raises(UserError, match="not found"):
        load_jsonl_prompts(str(tmp_path / "missing.jsonl"))


def test_chat_streaming_body_asks_for_usage_and_ignore_eos():
    config = RunConfig(streaming=True, output_tokens_mean=64)
    body = RequestFactory(config, "m", random.Random(0)).body(
        PromptSource("builtin", random.Random(0)).next()
    )
    assert body["model"] == "m" and body["messages"][0]["role"] == "user"
    assert body["max_tokens"] == 64 and body["ignore_eos"] is True
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_extra_inputs_override_stream_options_and_add_keys():
    config = RunConfig(
        streaming=True,
        endpoint_type="completions",
        extra_inputs={"stream_options": {"include_usage": False}, "temperature": 0},
    )
    factory = RequestFactory(config, "m", random.Random(0))
    body, _ = factory.next_request()
    assert "prompt" in body and "messages" not in body
    assert body["stream_options"] == {"include_usage": False}
    assert body["temperature"] == 0


def test_file_max_tokens_beats_output_tokens_mean(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"text": "a", "max_tokens": 5}\n{"text": "b"}\n')
    config = RunConfig(input_file=str(path), output_tokens_mean=40)
    factory = RequestFactory(config, "m", random.Random(0))
    first, second = factory.next_request()[0], factory.next_request()[0]
    assert (first["max_tokens"], second["max_tokens"]) == (5, 40)


def test_constant_schedule_gap_and_poisson_mean():
    assert ArrivalSchedule("constant", 4.0, random.Random(0)).gap() == 0.25
    poisson = ArrivalSchedule("poisson", 50.0, random.Random(3))
    gaps = [poisson.gap() for _ in range(20000)]
    # exponential(50): mean 0.02 s, std 0.02 s; SE of the mean 0.02/sqrt(20000) = 1.4e-4
    assert abs(sum(gaps) / len(gaps) - 0.02) < 0.001


def test_sse_parser_splits_events_across_chunks_and_stops_at_done():
    parser = SSEParser()
    assert parser.feed(b'data: {"a": 1}\n\nda') == [b'{"a": 1}']
    assert parser.feed(b'ta: {"b": 2}\r\n\r\n: keep-alive comment\n\n') == [b'{"b": 2}']
    assert parser.feed(b'event: x\ndata: [DONE]\n\ndata: {"late": 1}\n\n') == []
    assert parser.done


def test_sse_parser_joins_multiline_data_and_flushes_unterminated_tail():
    parser = SSEParser()
    assert parser.feed(b'data: {"a":\ndata: 1}\n\ndata:{"b":2}') == [b'{"a":\n1}']
    assert parser.finish() == [b'{"b":2}']
    assert not parser.done


def test_error_message_reads_openai_error_bodies():
    body = b'{"object": "error", "message": "max_tokens too large", "type": "BadRequestError"}'
    assert error_message(400, body) == "HTTP 400: max_tokens too large"
    assert error_message(500, b'{"error": {"message": "boom"}}') == "HTTP 500: boom"
    assert error_message(502, b"<html>bad gateway</html>") == "HTTP 502: <html>bad gateway</html>"
