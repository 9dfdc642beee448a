"""TensorRT-LLM adapter: choices[i].speculative_decoding (docs/metrics.md §10)."""

from __future__ import annotations

import pytest
from support.adapters_support import load_capture, parsed, responses_of, wrap

from specmon.specdecode.adapters import detect
from specmon.specdecode.adapters.trtllm import TensorRTLLMSpecDecodeAdapter as T


@pytest.mark.parametrize(
    "fixture, completion_tokens",
    [
        ("trtllm_summary", 7),  # non-streaming chat
        (
            "trtllm_summary_stream",
            7,
        ),  # streaming completions: payload and usage on different chunks
    ],
)
def test_summary(fixture, completion_tokens):
    # [8,0,6,6] -> {0:8, 2:6, 3:6}; s = 20; a = 2*6 + 3*6 = 30; d 60;
    # AL derived = 1 + 30/20 = 2.5; rate 0.5 verbatim;
    # APV = (a+s)/(d+s) = 50/80 = 0.625 (metrics layer, checked here from the counts)
    outcome = detect(*responses_of(fixture))
    r = outcome.record
    # the registry name is trtllm; the record carries AIPerf's name
    assert outcome.engine == "trtllm" and r.engine == "tensorrt_llm"
    assert r.acceptance_histogram == {0: 8, 2: 6, 3: 6}
    assert (r.num_spec_steps, r.num_accepted_draft_tokens, r.num_draft_tokens) == (20, 30, 60)
    assert r.mean_acceptance_length == 2.5 and r.draft_acceptance_rate == 0.5
    assert (r.num_accepted_draft_tokens + r.num_spec_steps) / (
        r.num_draft_tokens + r.num_spec_steps
    ) == 0.625
    assert r.num_spec_tokens == 3 and r.completion_tokens == completion_tokens
    assert r.per_step_accepted is None and r.per_step_drafted is None


def test_all_rejected():
    # [10,0,0,0] -> {0:10}; AL = 1 + 0/10 = 1.0
    r = detect(*responses_of("trtllm_all_rejected")).record
    assert r.acceptance_histogram == {0: 10} and r.mean_acceptance_length == 1.0
    assert r.draft_acceptance_rate == 0.0


def test_all_accepted():
    # [0,0,0,5] -> {3:5}; a = 15, s = 5; AL = 1 + 15/5 = 4.0
    r = detect(*responses_of("trtllm_all_accepted")).record
    assert r.acceptance_histogram == {3: 5} and r.mean_acceptance_length == 4.0
    assert r.draft_acceptance_rate == 1.0


def test_null_k_accepted_with_observed_depth():
    # [2,2,0,1,1] (depth 4, k null): s = 6, a = 2 + 3 + 4 = 9; AL = 1 + 9/6 = 1 + 1.5 = 2.5
    r = detect(*responses_of("trtllm_null_k")).record
    assert r.num_spec_tokens is None and r.acceptance_histogram == {0: 2, 1: 2, 3: 1, 4: 1}
    assert r.mean_acceptance_length == 2.5


def test_can_adapt_defers_on_none_and_empty():
    assert T.can_adapt(wrap({"choices": [{"index": 0, "finish_reason": "stop"}]})) is False
    assert T.can_adapt(wrap({"choices": [{"speculative_decoding": {}}]})) is False
    assert T.can_adapt(wrap({"choices": [{"speculative_decoding": None}]})) is False
    assert T.can_adapt(responses_of("trtllm_summary")[0]) is True


def test_missing_usage():
    capture = load_capture("trtllm_summary")
    del capture["responses"][0]["usage"]
    assert detect(parsed(capture)).record.completion_tokens is None


def test_two_choices_with_payloads_is_n_gt_1():
    capture = load_capture("trtllm_summary")
    choice = dict(capture["responses"][0]["choices"][0], index=1)
    capture["responses"][0]["choices"].append(choice)
    outcome = detect(parsed(capture), {"messages": []})
    assert outcome.record is None and outcome.reason == "n_gt_1"
