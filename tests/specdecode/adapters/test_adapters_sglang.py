"""SGLang adapter: sglext.spec_tokens_details (object for n = 1, list for n > 1) and the
native /generate meta_info keys (docs/metrics.md §10)."""

from __future__ import annotations

import pytest
from support.adapters_support import load_capture, parsed, responses_of, wrap

from specmon.specdecode.adapters import detect
from specmon.specdecode.adapters.sglang import SGLangSpecDecodeAdapter as S


@pytest.mark.parametrize(
    "fixture",
    [
        "sglang_chat",
        "sglang_chat_stream",
        "sglang_generate",
        "sglang_generate_stream",
    ],
)
def test_counts_mapped_and_length_derived(fixture):
    # histogram [1,2,1,2] -> {0:1, 1:2, 2:1, 3:2}; verify_ct s = 6;
    # correct drafts a = 1*2 + 2*1 + 3*2 = 10; proposed d = 18 (= 6 steps * block 3);
    # AL from counts = 1 + 10/6 = 1.6666666666666667, NOT spec_accept_length 17/6 = 2.83
    # (that one divides completion_tokens, so it counts the prefill token).
    outcome = detect(*responses_of(fixture))
    r = outcome.record
    assert outcome.engine == "sglang" and r.engine == "sglang"
    assert r.acceptance_histogram == {0: 1, 1: 2, 2: 1, 3: 2}
    assert (r.num_spec_steps, r.num_accepted_draft_tokens, r.num_draft_tokens) == (6, 10, 18)
    assert r.mean_acceptance_length == 1 + 10 / 6
    assert r.draft_acceptance_rate == 0.5555555555555556  # spec_accept_rate verbatim = 10/18
    assert r.num_spec_tokens is None and r.per_step_accepted is None


def test_completion_tokens_from_usage_on_openai_endpoints():
    assert detect(*responses_of("sglang_chat")).record.completion_tokens == 17
    assert detect(*responses_of("sglang_generate")).record.completion_tokens is None  # no usage


def test_generate_stream_cumulative_snapshots_last_wins():
    # two meta_info snapshots of one sequence (3 steps, then 6): not n > 1, the last wins
    outcome = detect(*responses_of("sglang_generate_stream"))
    assert outcome.reason is None and outcome.record.num_spec_steps == 6


def test_list_form_is_n_gt_1():
    outcome = detect(*responses_of("sglang_chat_n2"))
    assert outcome.record is None and outcome.reason == "n_gt_1" and outcome.engine == "sglang"
    assert S.adapt(responses_of("sglang_chat_n2")[0]) is None


def test_single_element_list_is_the_one_sequence():
    capture = load_capture("sglang_chat_n2")
    details = capture["responses"][0]["sglext"]["spec_tokens_details"]
    del details[1]
    assert detect(parsed(capture)).record.num_spec_steps == 6


def test_rate_derived_when_missing():
    capture = load_capture("sglang_chat")
    del capture["responses"][0]["sglext"]["spec_tokens_details"]["spec_accept_rate"]
    assert detect(parsed(capture)).record.draft_acceptance_rate == 10 / 18


def test_defaults_all_zero_is_zero_step():
    # spec_tokens_details with its defaults (0 / []) -> s 0: a zero-step request
    details = {
        "spec_accept_rate": 0.0,
        "spec_accept_length": 0.0,
        "spec_num_correct_drafts": 0,
        "spec_num_proposed_drafts": 0,
        "spec_verify_ct": 0,
        "spec_correct_drafts_histogram": [],
        "spec_cap_lens_histogram": [],
    }
    outcome = detect(wrap({"choices": [], "sglext": {"spec_tokens_details": details}}))
    assert outcome.zero_step and outcome.reason == "zero_step"
    assert outcome.zero_step_record.acceptance_histogram == {}
    assert outcome.zero_step_record.mean_acceptance_length == 1.0


@pytest.mark.parametrize(
    "body",
    [
        {"choices": [], "sglext": {"cached_tokens_details": {"device": 3}}},
        {"choices": [], "sglext": {"spec_tokens_details": {}}},
        {"choices": [], "sglext": None},
        {"text": "x", "meta_info": {"prompt_tokens": 3, "spec_verify_ct": 4}},  # verify count only
    ],
)
def test_absent(body):
    assert S.can_adapt(wrap(body)) is False
    assert detect(wrap(body)).reason == "absent"


def test_sampling_params_n_is_n_gt_1():
    responses, request = responses_of("sglang_generate")
    request["sampling_params"]["n"] = 2
    assert detect(responses, request).reason == "n_gt_1"
