"""/metrics per engine (issue 21 item 3): TensorRT-LLM's released counters are read where
present, SGLang's (and TensorRT-LLM's) gauges are a last value, never a window, and the
window's line names whose counters it used. Pages written by hand from the series names
in docs/metrics.md §10.1; every figure below computed by hand."""

from __future__ import annotations

from specmon.server.scrape import counter_delta, describe_window, parse_counters

TRTLLM = """# TYPE trtllm_spec_decode_num_draft_tokens_total counter
trtllm_spec_decode_num_draft_tokens_total{{engine_type="trtllm",model_name="m"}} {drafted}
# TYPE trtllm_spec_decode_num_accepted_tokens_total counter
trtllm_spec_decode_num_accepted_tokens_total{{engine_type="trtllm",model_name="m"}} {accepted}
# TYPE trtllm_spec_decode_acceptance_length gauge
trtllm_spec_decode_acceptance_length{{engine_type="trtllm",model_name="m"}} {al}
# TYPE trtllm_spec_decode_draft_overhead gauge
trtllm_spec_decode_draft_overhead{{engine_type="trtllm",model_name="m"}} 0.12
"""

SGLANG = """# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="m",engine_type="unified",tp_rank="0"} 2.75
# TYPE sglang:spec_accept_rate gauge
sglang:spec_accept_rate{model_name="m",engine_type="unified",tp_rank="0"} 0.58
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",engine_type="unified",tp_rank="0"} 3
"""

VLLM = """vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 30
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 12
"""


def test_trtllm_counters_give_a_windowed_rate_and_no_acceptance_length():
    before = parse_counters(TRTLLM.format(drafted=100, accepted=40, al=2.0), taken_s=0.0)
    after = parse_counters(TRTLLM.format(drafted=400, accepted=220, al=2.5), taken_s=5.0)
    assert before.present and before.engine == "trtllm" and before.label_sets == 1
    delta = counter_delta(before, after)
    # (220 - 40) / (400 - 100) = 180 / 300 = 0.6; no verify-step counter: no AL
    assert (delta.draft_tokens, delta.accepted, delta.drafts) == (300, 180, 0)
    assert delta.acceptance_rate == 0.6 and delta.acceptance_length is None
    # the gauges are the later scrape's values as read, not a difference
    assert delta.gauges == {
        "trtllm_spec_decode_acceptance_length": 2.5,
        "trtllm_spec_decode_draft_overhead": 0.12,
    }
    line = describe_window(delta)
    assert line.startswith("server /metrics (trtllm counters, 1 engine(s), server-wide)")
    assert "draft acceptance 60.0%" in line and "no acceptance length from counters" in line
    assert "gauges (last value, not a window)" in line
    assert "trtllm_spec_decode_acceptance_length 2.5" in line


def test_sglang_gauges_are_a_last_value_and_never_counters():
    before, after = parse_counters(SGLANG, taken_s=0.0), parse_counters(SGLANG, taken_s=3.0)
    assert not after.present and after.series == {}
    assert after.engine == "sglang"
    delta = counter_delta(before, after)
    assert (delta.drafts, delta.draft_tokens, delta.accepted) == (0, 0, 0)
    assert delta.gauges == {"sglang:spec_accept_length": 2.75, "sglang:spec_accept_rate": 0.58}
    line = describe_window(delta)
    assert line.startswith("server /metrics: no spec-decode counters")
    assert "gauges (last value, not a window): sglang:spec_accept_length 2.75" in line


def test_vllm_window_names_its_counters():
    zero = parse_counters("", taken_s=0.0)
    after = parse_counters(VLLM, taken_s=2.0)
    assert after.engine == "vllm" and after.gauges == {}
    line = describe_window(counter_delta(zero, after))
    # 1 + 12 / 10 = 2.20, 12 / 30 = 40.0%
    assert line.startswith("server /metrics (vllm counters, 1 engine(s), server-wide)")
    assert "acceptance length 2.20" in line and "draft acceptance 40.0%" in line
    assert "gauges" not in line
