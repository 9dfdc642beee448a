"""The engine registry (issue 16 item 5, issue 21): each engine declared once, one name per
engine, `--engine` restricting detection with a counted reason, and the two counts-only
adapters (llama.cpp timings, the OpenAI-standard usage counts) read from hand-written
fixtures (tests/fixtures/payloads/README.md names their sources)."""

from __future__ import annotations

import copy

import pytest
from support.adapters_support import load_capture, parsed, responses_of

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
    # the adapters and --engine use the short name; no adapter answers to AIPerf's
    assert "tensorrt_llm" not in seen
    for declared_engine in engines.ENGINES:
        assert len(declared_engine.adapters) >= 1


def test_each_engine_keeps_aiperfs_record_name():
    # AIPerf's record names (its spec-decode engine field: vllm, tensorrt_llm,
    # llamacpp, sglang); openai is specmon's own (AIPerf has no such adapter)
    names = {e.name: e.aiperf_name for e in engines.ENGINES}
    assert names == {
        "vllm": "vllm",
        "trtllm": "tensorrt_llm",
        "sglang": "sglang",
        "llamacpp": "llamacpp",
        "openai": "openai",
    }
    assert engines.record_name("trtllm") == "tensorrt_llm"
    assert engines.record_name("an-outside-adapter") == "an-outside-adapter"


def test_the_simulator_derives_its_shapes_and_owners_from_the_registry():
    from specmon.sim.config import SHAPES, SimConfig

    shapes = {s: engines.engine_of_shape(s).name for s in engines.sim_shapes()}
    assert shapes == {
        "vllm": "vllm",
        "vllm-legacy": "vllm",
        "none": "vllm",
        "trtllm": "trtllm",
        "sglang": "sglang",
        "llamacpp": "llamacpp",
        "openai-predictions": "openai",
    }
    assert set(SHAPES) == set(shapes) | {"sglext"}
    assert SimConfig(shape="sglext").shape == "sglang"
    with pytest.raises(ValueError):
        SimConfig(shape="tensorrt_llm")
    owners = {s: engines.engine_of_shape(s).sim_owner for s in shapes}
    assert owners["trtllm"] == "tensorrt_llm" and owners["none"] == "vllm"
    assert owners["openai-predictions"] == "specmon-sim"  # a gateway names no engine


def test_the_simulators_vllm_counters_are_the_registrys_names():
    from specmon.sim.counters import PER_POSITION, SPEC_SERIES

    vllm = engines.engine("vllm").metrics
    assert [row[2] for row in SPEC_SERIES] == [vllm.steps, vllm.draft_tokens, vllm.accepted]
    assert PER_POSITION[0] == vllm.per_position


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


# ------------------------------------------------------------------ a mixed run's totals


def test_counts_only_records_enter_the_pooled_rate_but_no_step_based_sum(tmp_path):
    """vLLM: 43 steps, 10 accepted of 129; llama.cpp: 9 accepted of 12, no steps. By hand:
    pooled rate 100 * 19 / 141; token-weighted AL 1 + 10 / 43 (the vLLM steps only); the
    run's level is its weakest record's (counts); the histogram is vLLM's alone."""
    session = RunSession(tmp_path / "run", "records")
    for i, name in enumerate(("vllm_merged_summary_chat", "llamacpp_chat")):
        raw = RawCapture.from_dict({**load_capture(name), "start_ns": i, "end_ns": i + 10})
        session.add(raw)
    acc = session.accumulator
    derived = acc.derived_values()
    assert derived["total_accepted_draft_tokens"] == 19
    assert derived["total_draft_tokens"] == 141
    assert derived["total_spec_decode_steps"] == 43
    assert derived["spec_decode_overall_draft_acceptance_rate"] == pytest.approx(100 * 19 / 141)
    assert derived["spec_decode_token_weighted_acceptance_length"] == pytest.approx(1 + 10 / 43)
    assert acc.pooled_histogram_sorted() == {0: 39, 1: 1, 3: 3}
    snap = acc.snapshot()
    assert snap.fidelity == COUNTS
    # the per-request AL column has the vLLM request only
    assert snap.spec_rows["spec_decode_acceptance_length"].count == 1
    doc = session.export_document()
    assert doc["acceptance_fidelity"]["requests"] == {HISTOGRAM: 1, COUNTS: 1}


def test_the_headline_names_the_fidelity_beside_the_acceptance_figures():
    from specmon.tui.widgets.headline import headline_of, headline_text

    spec = {"spec_decode_overall_draft_acceptance_rate": {"avg": 75.0}}
    text = headline_text(headline_of(spec, {}, 0, "-", "", COUNTS), {}).plain
    first = text.splitlines()[0]
    assert first.startswith("AL N/A  tok-wtd AL N/A  draft acc N/A")
    assert "overall 75.00%  (counts)  errors 0" in first
    assert len(first.rstrip()) <= 76  # fits 80 columns with the borders
    full = headline_text(headline_of(spec, {}, 0, "-", "", PER_STEP), {}).plain
    assert "(full)" in full.splitlines()[0] and "counts" not in full


# ------------------------------------------------------------------ non-comparable modes


SUFFIX_MRV2 = {
    "vllm_config": "model='m', speculative_config=SpeculativeConfig(method='suffix', "
    "num_spec_tokens=8), ...",
    "environment": {"VLLM_USE_V2_MODEL_RUNNER": "1"},
}
FLY = {
    "vllm_config": {"speculative_config": {"method": "eagle3", "rejection_sample_method": "fly"}}
}


def test_verification_notes_name_the_non_comparable_modes():
    from specmon.specdecode.fidelity import (
        LOSSY,
        SUFFIX_MAYBE,
        SUFFIX_PADDING,
        verification_notes,
    )

    assert verification_notes(SUFFIX_MRV2) == (SUFFIX_PADDING,)
    assert verification_notes({"vllm_config": "speculative_config={'method': 'suffix'}"}) == (
        SUFFIX_MAYBE,
    )
    assert verification_notes(FLY) == (LOSSY,)
    exact = {"vllm_config": {"speculative_config": {"method": "eagle3"}}}
    assert verification_notes(exact) == () and verification_notes(None) == ()


def _serve_once(body: dict) -> tuple[str, object]:
    """A loopback HTTP server answering /server_info with body (404 elsewhere)."""
    import http.server
    import json
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            data = json.dumps(body).encode()
            self.send_response(200 if self.path == "/server_info" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(data if self.path == "/server_info" else b"{}")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server


def test_the_note_is_asked_of_the_server_and_written_on_every_record(tmp_path):
    from specmon.run.load.runner import verification_note
    from specmon.specdecode.fidelity import LOSSY, fidelity_line

    url, server = _serve_once(FLY)
    try:
        note = verification_note(url, None)
    finally:
        server.shutdown()
    assert note == LOSSY
    session = RunSession(tmp_path / "run", "records")
    session.verification_note = note
    raw = RawCapture.from_dict({**load_capture("vllm_merged_summary_chat"), "start_ns": 0})
    assert session.add(raw).spec.verification_note == LOSSY
    paths = session.finish()
    import json

    line = json.loads(paths["jsonl"].read_text().splitlines()[0])
    assert line["spec_decode_acceptance"]["verification_note"] == LOSSY
    doc = json.loads(paths["json"].read_text())
    assert doc["acceptance_fidelity"]["not_comparable"] == [LOSSY]
    acc = session.accumulator
    assert fidelity_line(acc.fidelity_counts, acc.engine, tuple(acc.verification_notes)) == (
        f"Acceptance fidelity (vllm): histogram and counts: no per-step arrays; {LOSSY}"
    )


def test_a_server_without_server_info_gives_no_note():
    from specmon.run.load.runner import verification_note

    url, server = _serve_once({})
    try:
        assert verification_note(url.replace("127.0.0.1", "127.0.0.1") + "/nothing", None) is None
        assert verification_note(url, None) is None  # answers, names no mode
    finally:
        server.shutdown()


def test_sglang_generate_with_the_newer_field_names():
    # verify_ct 6, correct 10, proposed 18 = 6 x (4 - 1), histogram [1, 2, 1, 2]:
    # 1+2+1+2 = 6 steps and 0*1 + 1*2 + 2*1 + 3*2 = 10 accepted; AL = 1 + 10/6
    record = detect(*responses_of("sglang_generate_v2_names")).record
    assert record.engine == "sglang" and record.fidelity == HISTOGRAM
    assert (record.num_spec_steps, record.num_accepted_draft_tokens) == (6, 10)
    assert record.num_draft_tokens == 18
    assert record.acceptance_histogram == {0: 1, 1: 2, 2: 1, 3: 2}
    assert record.mean_acceptance_length == pytest.approx(1 + 10 / 6)
