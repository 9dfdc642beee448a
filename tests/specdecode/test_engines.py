"""The engine registry (issue 16 item 5, issue 21): each engine declared once, one name per
engine, `--engine` restricting detection with a counted reason, and the two counts-only
adapters (llama.cpp timings, the OpenAI-standard usage counts) read from hand-written
fixtures (tests/fixtures/payloads/README.md names their sources)."""

from __future__ import annotations

import copy

import pytest
from adapters_support import load_capture, parsed, responses_of

from specmon.capture import RawCapture
from specmon.session import RunSession
from specmon.specdecode import engines
from specmon.specdecode.adapters import (
    adapter_engine,
    detect,
    registered_adapters,
    reset_reason_counts,
)
from specmon.specdecode.fidelity import COUNTS, HISTOGRAM, PER_STEP, weakest


@pytest.fixture(autouse=True)
def clean_counts():
    reset_reason_counts()
    yield
    reset_reason_counts()


# ------------------------------------------------------------------ the registry


def test_every_builtin_adapter_reads_a_declared_engine_under_its_one_name():
    declared = set(engines.ENGINE_NAMES)
    assert declared == {"vllm", "trtllm", "sglang", "llamacpp", "openai"}
    seen = {adapter_engine(e) for e in registered_adapters()}
    assert declared <= seen
    # TensorRT-LLM has one name: the record, --engine and the exports say trtllm
    assert "tensorrt_llm" not in seen
    for declared_engine in engines.ENGINES:
        assert len(declared_engine.adapters) >= 1


def test_request_options_come_from_the_registry():
    assert engines.request_options("sglang") == {"return_spec_tokens_details": True}
    for name in ("auto", "vllm", "trtllm", "llamacpp", "openai", None):
        assert engines.request_options(name) == {}
    assert engines.probed_engines() == ("sglang",)


@pytest.mark.parametrize(
    ("owner", "expected"),
    [("sglang", "sglang"), ("vllm", "vllm"), ("tensorrt_llm", "trtllm"), ("llamacpp", "llamacpp")],
)
def test_models_listing_names_the_engine_by_its_owner(owner, expected):
    listing = {"object": "list", "data": [{"id": "m", "owned_by": owner}]}
    assert engines.engine_of_models(listing) == expected


def test_unknown_owner_and_bad_listings_name_no_engine():
    for listing in ({"data": [{"id": "m", "owned_by": "organization-owner"}]}, {}, [], None):
        assert engines.engine_of_models(listing) is None


def test_server_info_signature():
    assert engines.engine_of_server_info({"server_args": {"model_path": "m"}}) == "sglang"
    # vLLM's dev-mode /server_info is never taken for SGLang, even with a shared key
    assert engines.engine_of_server_info({"vllm_config": "...", "server_args": {}}) is None
    assert engines.engine_of_server_info({"engine": "sglang"}) == "sglang"
    assert engines.engine_of_server_info({"version": "1"}) is None


def test_run_config_engine_choices_are_the_registry_names():
    from specmon.config import RunConfig

    for name in engines.ENGINE_NAMES:
        assert RunConfig(engine=name).engine == name
    with pytest.raises(ValueError):
        RunConfig(engine="tensorrt_llm")


# ------------------------------------------------------------------ --engine restricts


def test_engine_restriction_takes_only_that_engines_payload():
    responses, request = responses_of("vllm_merged_summary_chat")
    assert detect(responses, request, "vllm").record.engine == "vllm"
    outcome = detect(responses, request, "sglang")
    assert outcome.record is None and outcome.reason == "other_engine:vllm"
    assert "--engine sglang" in outcome.detail


def test_engine_restriction_on_an_answer_without_payload_is_absent():
    responses, request = responses_of("llamacpp_no_drafts")
    assert detect(responses, request, "llamacpp").reason == "absent"


def _vllm_with_gateway_counts() -> dict:
    """A vLLM merged payload (k=3, 6 steps) beside the gateway's usage counts of the same."""
    capture = copy.deepcopy(load_capture("vllm_merged_summary_chat"))
    spec = capture["responses"][0]["metrics"]["speculative_decoding"]
    accepted, drafted = spec["num_accepted_draft_tokens"], spec["num_draft_tokens"]
    capture["responses"][0]["usage"]["completion_tokens_details"] = {
        "accepted_prediction_tokens": accepted,
        "rejected_prediction_tokens": drafted - accepted,
    }
    return capture


def test_richer_shape_wins_auto_detection_and_restriction_picks_the_counts():
    capture = _vllm_with_gateway_counts()
    spec = capture["responses"][0]["metrics"]["speculative_decoding"]
    auto = detect(parsed(capture), capture["request"])
    assert auto.record.engine == "vllm" and auto.record.fidelity == HISTOGRAM
    only = detect(parsed(capture), capture["request"], "openai").record
    assert only.engine == "openai" and only.fidelity == COUNTS
    assert (only.num_accepted_draft_tokens, only.num_draft_tokens) == (
        spec["num_accepted_draft_tokens"],
        spec["num_draft_tokens"],
    )
    assert only.num_spec_steps is None and only.acceptance_histogram is None


def test_session_with_an_engine_counts_foreign_payloads_as_a_reason(tmp_path):
    capture = load_capture("trtllm_summary")
    session = RunSession(tmp_path / "run", "records", engine="vllm")
    for i in range(3):
        raw = RawCapture.from_dict({**capture, "start_ns": i, "end_ns": i + 10})
        result = session.add(raw)
        assert result.spec is None and result.outcome.reason == "other_engine:trtllm"
    assert session.accumulator.spec_reasons == {"other_engine:trtllm": 3}
    doc = session.export_document()
    assert doc["no_record_reasons"] == {"other_engine:trtllm": 3}
    assert "acceptance_fidelity" not in doc  # no record, so no level to state


# ------------------------------------------------------------------ the counts-only adapters


def test_llamacpp_native_completion_is_a_counts_only_record():
    # the fixture: draft_n 12, draft_n_accepted 9, tokens_predicted 16
    record = detect(*responses_of("llamacpp_completion_native")).record
    assert record.engine == "llamacpp" and record.fidelity == COUNTS
    assert (record.num_accepted_draft_tokens, record.num_draft_tokens) == (9, 12)
    assert record.draft_acceptance_rate == 9 / 12
    assert record.completion_tokens == 16  # tokens_predicted: /completion has no usage
    assert record.num_spec_steps is None
    assert record.mean_acceptance_length is None and record.acceptance_histogram is None


def test_llamacpp_chat_takes_completion_tokens_from_usage_and_the_last_timings():
    for name in ("llamacpp_chat", "llamacpp_chat_stream"):
        record = detect(*responses_of(name)).record
        # the stream's mid-way timings (6 drafted, 4 accepted) are running totals: the
        # last one (12, 9) is the request's
        assert (record.num_accepted_draft_tokens, record.num_draft_tokens) == (9, 12), name
        assert record.completion_tokens == 16


def test_openai_counts_give_proposed_as_accepted_plus_rejected():
    for name in ("openai_predictions_chat", "openai_predictions_chat_stream"):
        record = detect(*responses_of(name)).record
        # accepted 12, rejected 6: proposed 18, rate 12 / 18
        assert record.engine == "openai" and record.fidelity == COUNTS
        assert (record.num_accepted_draft_tokens, record.num_draft_tokens) == (12, 18)
        assert record.draft_acceptance_rate == pytest.approx(2 / 3, rel=1e-15)
        assert record.completion_tokens == 20


def test_counts_only_request_metrics_leave_out_every_step_based_one():
    from specmon.pipeline import spec_record_metrics

    record = detect(*responses_of("openai_predictions_chat")).record
    assert spec_record_metrics(record) == {
        "spec_decode_draft_acceptance_rate": pytest.approx(100 * 12 / 18),
        "spec_decode_accepted_draft_tokens": 12,
        "spec_decode_draft_tokens": 18,
    }


# ------------------------------------------------------------------ fidelity levels


@pytest.mark.parametrize(
    ("fixture", "level"),
    [
        ("vllm_merged_detailed_completions", PER_STEP),
        ("vllm_merged_summary_chat", HISTOGRAM),
        ("trtllm_summary", HISTOGRAM),
        ("sglang_chat", HISTOGRAM),
        ("llamacpp_chat", COUNTS),
        ("openai_predictions_chat", COUNTS),
    ],
)
def test_each_shape_has_its_fidelity(fixture, level):
    assert detect(*responses_of(fixture)).record.fidelity == level


def test_a_runs_fidelity_is_its_weakest_records():
    assert weakest([PER_STEP, HISTOGRAM]) == HISTOGRAM
    assert weakest([PER_STEP, COUNTS, HISTOGRAM]) == COUNTS
    assert weakest([]) is None
