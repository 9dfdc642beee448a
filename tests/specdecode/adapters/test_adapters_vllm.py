"""vLLM adapter: merged (root metrics.speculative_decoding, dense list) and legacy
(choices[].speculative_decoding_stats, sparse string keys), streaming and not, chat and
completions. Expected records are computed by hand from docs/metrics.md §5, §10 and
real-vllm.md §4."""

from __future__ import annotations

import copy

import pytest
from support.adapters_support import load_capture, parsed, responses_of, wrap

from specmon.specdecode.adapters import detect
from specmon.specdecode.adapters.vllm import VLLMSpecDecodeAdapter as V

# Summary example: H [39,1,0,3] -> {0:39, 1:1, 3:3}; s = 39+1+0+3 = 43;
# a = 0*39 + 1*1 + 2*0 + 3*3 = 10; d = 129 (given); completion_tokens 50 from usage.
SUMMARY = dict(
    engine="vllm", acceptance_histogram={0: 39, 1: 1, 3: 3}, num_spec_steps=43,
    num_accepted_draft_tokens=10, num_draft_tokens=129, num_spec_tokens=3,
    mean_acceptance_length=1.2325581395348837, draft_acceptance_rate=0.07751937984496124,
    completion_tokens=50, per_step_accepted=None, per_step_drafted=None,
)  # fmt: skip
# Detailed example: H [2,1,0,1] -> {0:2, 1:1, 3:1}; s = 4; a = 1 + 3 = 4; d = 4*3 = 12;
# per-step accepted [0,1,3,0] sums to 4, drafted [3,3,3,3] sums to 12; usage 9 tokens.
DETAILED = dict(
    engine="vllm", acceptance_histogram={0: 2, 1: 1, 3: 1}, num_spec_steps=4,
    num_accepted_draft_tokens=4, num_draft_tokens=12, num_spec_tokens=3,
    mean_acceptance_length=2.0, draft_acceptance_rate=0.3333333333333333,
    completion_tokens=9, per_step_accepted=[0, 1, 3, 0], per_step_drafted=[3, 3, 3, 3],
)  # fmt: skip


def fields(record):
    return {k: getattr(record, k) for k in SUMMARY}


@pytest.mark.parametrize(
    "fixture, expected",
    [
        ("vllm_merged_summary_chat", SUMMARY),  # merged, non-streaming, chat
        ("vllm_merged_summary_chat_stream", SUMMARY),  # merged, streaming, chat
        ("vllm_merged_detailed_completions", DETAILED),  # merged, non-streaming, completions
        ("vllm_merged_detailed_completions_stream", DETAILED),  # merged, streaming, completions
        ("vllm_legacy_chat", SUMMARY),  # legacy, non-streaming, chat
        ("vllm_legacy_chat_stream", SUMMARY),  # legacy, streaming, chat
        ("vllm_legacy_completions", DETAILED),  # legacy, non-streaming, completions
        (
            "vllm_legacy_completions_stream",
            dict(DETAILED, completion_tokens=None),
        ),  # no usage chunk
    ],
)
def test_both_shapes_streaming_and_not(fixture, expected):
    responses, request = responses_of(fixture)
    assert V.can_adapt(responses)
    assert fields(V.adapt(responses)) == expected
    outcome = detect(responses, request)
    assert outcome.reason is None and outcome.engine == "vllm"
    assert fields(outcome.record) == expected


def test_real_vllm_032_body():
    # real-vllm.md §4: H [6,3,0,9] -> {0:6, 1:3, 3:9}; s = 18; a = 3 + 27 = 30; d = 50;
    # per_step_drafted sums to 16*3 + 2*1 = 50; completion_tokens 64.
    record = detect(*responses_of("vllm_merged_real_detailed")).record
    assert record.acceptance_histogram == {0: 6, 1: 3, 3: 9}
    assert (record.num_spec_steps, record.num_accepted_draft_tokens, record.num_draft_tokens) == (
        18,
        30,
        50,
    )
    assert (
        record.mean_acceptance_length == 2.666666666666667 and record.draft_acceptance_rate == 0.6
    )
    assert record.completion_tokens == 64 and sum(record.per_step_drafted) == 50


def test_fully_rejected_kept_verbatim():
    # [20,0,0,0] -> {0:20}; s 20, a 0, d 60, rate 0.0, AL 1.0
    outcome = detect(*responses_of("vllm_merged_fully_rejected"))
    r = outcome.record
    assert r.acceptance_histogram == {0: 20} and r.num_spec_steps == 20
    assert r.num_accepted_draft_tokens == 0 and r.draft_acceptance_rate == 0.0
    assert r.mean_acceptance_length == 1.0 and outcome.zero_step is False


@pytest.mark.parametrize("fixture", ["vllm_merged_zero_step", "vllm_legacy_zero_step"])
def test_zero_step_dropped_but_kept_for_the_trace(fixture):
    responses, request = responses_of(fixture)
    kept = V.adapt(responses)  # adapter level: the record itself, hist {}
    assert kept.acceptance_histogram == {} and kept.num_spec_steps == 0
    assert kept.mean_acceptance_length == 1.0 and kept.completion_tokens == 1
    outcome = detect(responses, request)  # parser level (AIPerf newest): no record, counted
    assert outcome.record is None and outcome.zero_step and outcome.reason == "zero_step"
    assert outcome.zero_step_record == kept and outcome.engine == "vllm"


def test_missing_k_skips_only_the_length_check():
    # [1,2,1,0,1] has 5 buckets (k would be 4); s = 5, a = 2 + 2 + 4 = 8, d 20; no usage
    r = detect(*responses_of("vllm_merged_missing_k")).record
    assert r.num_spec_tokens is None and r.acceptance_histogram == {0: 1, 1: 2, 2: 1, 4: 1}
    assert r.num_accepted_draft_tokens == 8 and r.completion_tokens is None


def test_null_k_is_absent_too():
    capture = load_capture("vllm_merged_missing_k")
    capture["responses"][0]["metrics"]["speculative_decoding"]["num_spec_tokens"] = None
    assert detect(parsed(capture)).record.num_spec_tokens is None


@pytest.mark.parametrize(
    "fixture, reason",
    [
        ("vllm_n2_metrics_null", "n_gt_1"),  # request n = 2, "metrics": null
        ("vllm_multi_prompt_completions", "n_gt_1"),  # prompt list of two strings
        ("vllm_spec_flag_off_stream", "absent"),  # usage chunk without a metrics key
    ],
)
def test_suppressed_and_absent(fixture, reason):
    outcome = detect(*responses_of(fixture))
    assert outcome.record is None and outcome.reason == reason and not outcome.zero_step


def test_metrics_null_without_n_is_absent_not_malformed():
    capture = load_capture("vllm_n2_metrics_null")
    del capture["request"]["n"]
    assert detect(parsed(capture), capture["request"]).reason == "absent"


def test_tokenized_prompt_is_one_prompt():
    # the streaming completions fixture sends prompt [17, 4, 99]: ONE tokenized prompt
    responses, request = responses_of("vllm_merged_detailed_completions_stream")
    assert request["prompt"] == [17, 4, 99]
    assert detect(responses, request).record is not None


@pytest.mark.parametrize(
    "bodies",
    [
        [],  # no responses
        [{"choices": [{"index": 0, "message": {"content": "x"}}]}],  # response without stats
        [{"choices": [], "usage": {"completion_tokens": 5}}],  # usage only
        [{"metrics": {"speculative_decoding": {}}}],  # empty stats dict
        [{"metrics": {"speculative_decoding": None, "time_to_first_token_ms": None}}],
        [
            {
                "metrics": {
                    "speculative_decoding": {"num_spec_steps": 3, "acceptance_histogram": [3, 0]}
                }
            }
        ],
        # a TensorRT-LLM-shaped object at vLLM's location: no mean_acceptance_length key
        [
            {
                "metrics": {
                    "speculative_decoding": {
                        "acceptance_rate": 0.5,
                        "total_accepted_draft_tokens": 30,
                        "total_draft_tokens": 60,
                        "num_spec_steps": 20,
                        "acceptance_histogram": [8, 0, 6, 6],
                    }
                }
            }
        ],
        [{"choices": [{"speculative_decoding_stats": None}]}],
        [{"metrics": [1, 2]}, {"choices": "x"}],
    ],
)
def test_absent_or_unrecognized_is_not_claimed(bodies):
    responses = wrap(*bodies)
    assert V.can_adapt(responses) is False
    assert V.adapt(responses) is None
    assert detect(responses).reason == "absent"


def test_no_usage_gives_no_completion_tokens():
    capture = load_capture("vllm_merged_summary_chat")
    del capture["responses"][0]["usage"]
    assert detect(parsed(capture)).record.completion_tokens is None


def test_completion_tokens_from_last_non_empty_usage():
    capture = load_capture("vllm_merged_summary_chat_stream")
    # a per-chunk usage earlier (12 tokens) and an empty usage after the final one
    capture["responses"][1]["usage"] = {"completion_tokens": 12}
    capture["responses"].append({"choices": [], "usage": {}})
    assert detect(parsed(capture)).record.completion_tokens == 50


def test_last_payload_wins_at_adapter_level_but_detect_suppresses():
    summary = load_capture("vllm_merged_summary_chat")["responses"][0]
    detailed = load_capture("vllm_merged_detailed_completions")["responses"][0]
    responses = wrap(summary, detailed)
    assert V.adapt(responses).acceptance_histogram == {0: 2, 1: 1, 3: 1}  # the later one
    outcome = detect(responses)  # two payload-carrying responses: the n > 1 backstop
    assert outcome.record is None and outcome.reason == "n_gt_1"


def test_empty_payload_beside_a_real_one_is_ignored():
    capture = load_capture("vllm_merged_summary_chat_stream")
    capture["responses"][1]["metrics"] = {"speculative_decoding": {}}
    assert fields(detect(parsed(capture)).record) == SUMMARY


def test_legacy_n2_two_choices_with_stats_is_n_gt_1():
    capture = load_capture("vllm_legacy_chat")
    body = capture["responses"][0]
    second = copy.deepcopy(body["choices"][0])
    second["index"] = 1
    body["choices"].append(second)
    assert detect(parsed(capture), {"messages": []}).reason == "n_gt_1"


def test_merged_wins_when_both_shapes_appear():
    legacy = load_capture("vllm_legacy_completions")["responses"][0]  # detailed numbers
    legacy["metrics"] = load_capture("vllm_merged_summary_chat")["responses"][0]["metrics"]
    assert detect(wrap(legacy)).record.num_spec_steps == 43  # the merged (summary) payload


def test_int_keys_in_a_python_built_legacy_histogram():
    capture = load_capture("vllm_legacy_chat")
    stats = capture["responses"][0]["choices"][0]["speculative_decoding_stats"]
    stats["acceptance_histogram"] = {0: 39, "1": 1, 3: 3, "2": 0}
    assert detect(parsed(capture)).record.acceptance_histogram == {0: 39, 1: 1, 3: 3}


def test_rate_taken_verbatim_within_rounding_of_the_counts():
    capture = load_capture("vllm_merged_summary_chat")
    stats = capture["responses"][0]["metrics"]["speculative_decoding"]
    rounded = round(stats["num_accepted_draft_tokens"] / stats["num_draft_tokens"], 3)  # 0.078
    stats["draft_acceptance_rate"] = rounded
    r = detect(parsed(capture)).record
    assert r.draft_acceptance_rate == rounded and isinstance(r.draft_acceptance_rate, float)


@pytest.mark.parametrize("value", [1, 0, 1.0])
def test_a_rate_its_own_counts_contradict_is_contested(value):
    capture = load_capture("vllm_merged_summary_chat")
    stats = capture["responses"][0]["metrics"]["speculative_decoding"]
    stats["draft_acceptance_rate"] = value  # the counts say 10/129 = 0.0775
    outcome = detect(parsed(capture))
    assert outcome.record is None and outcome.reason == "contested"


def test_legacy_bucket_above_k_only_rejected_when_k_known():
    # {"0": 40, "5": 2}: s = 42, a = 5*2 = 10 -> consistent; bucket 5 > k = 3 contradicts k
    capture = load_capture("vllm_legacy_chat")
    stats = capture["responses"][0]["choices"][0]["speculative_decoding_stats"]
    stats.update(  # AL follows the counts: 1 + 10/42
        acceptance_histogram={"0": 40, "5": 2},
        num_spec_steps=42,
        mean_acceptance_length=1 + 10 / 42,
    )
    assert detect(parsed(capture)).reason == "malformed:histogram_length"
    del stats["num_spec_tokens"]  # variable-length drafting: no bound to check against
    assert detect(parsed(capture)).record.acceptance_histogram == {0: 40, 5: 2}


def test_a_k_of_2_63_minus_1_with_counts_of_k_3_is_rejected_with_a_counted_reason():
    """Issue 35 item 7: the payload's own counts say k = 3 (legacy: a sparse histogram has
    no length to check); the live advice must never name k = 9223372036854775807."""
    from specmon.specdecode.adapters import reason_counts, reset_reason_counts

    capture = load_capture("vllm_legacy_chat")
    stats = capture["responses"][0]["choices"][0]["speculative_decoding_stats"]
    good = detect(parsed(capture)).record
    assert good is not None and good.num_spec_tokens == 3
    stats["num_spec_tokens"] = 2**63 - 1
    reset_reason_counts()
    outcome = detect(parsed(capture))
    assert outcome.record is None and outcome.reason == "implausible_k"
    assert "exceeds the maximum" in outcome.detail
    assert reason_counts().get("implausible_k") == 1
    # k 3 again, but 200 drafts in 43 steps (at most 43 x 3 = 129), the rate following them
    stats.update(num_spec_tokens=3, num_draft_tokens=200, draft_acceptance_rate=10 / 200)
    outcome = detect(parsed(capture))
    assert outcome.reason == "implausible_k"
    assert outcome.detail == "num_draft_tokens 200 > num_spec_steps 43 x num_spec_tokens 3"
