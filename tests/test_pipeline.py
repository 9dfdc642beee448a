"""specmon.capture + specmon.pipeline: raw captures in, per-request AIPerf metrics out."""

import pytest
from support import metrics_helpers as mh

from specmon.capture import CaptureError, RawCapture, parse_capture_line, read_raw_capture
from specmon.errors import UserError
from specmon.pipeline import process_capture, spec_record_metrics
from specmon.specdecode.record import SpecDecodeAcceptanceRecord

SPEC_TAGS = set(mh.RECORD_SPEC_TAGS)


def test_worked_example_non_streaming_record_metrics():
    r = process_capture(mh.nonstream_capture(mh.vllm_payload(mh.WORKED, k=4), latency_ms=50))
    m = r.metrics
    # s = 8, a = 2+3+1+4+2+0+3+3 = 18, d = 8*4 = 32
    assert m["spec_decode_steps"] == 8
    assert m["spec_decode_accepted_draft_tokens"] == 18
    assert m["spec_decode_draft_tokens"] == 32
    assert m["spec_decode_acceptance_length"] == 3.25  # 1 + 18/8, the server's value verbatim
    assert m["spec_decode_draft_acceptance_rate"] == 56.25  # 100 * 18/32
    assert m["spec_decode_accepted_per_verified"] == 0.65  # (18+8)/(32+8) = 26/40
    assert r.spec.acceptance_histogram == {0: 1, 1: 1, 2: 2, 3: 3, 4: 1}
    assert r.outcome.trace is r.spec and not r.outcome.zero_step and r.engine == "vllm"
    # non-streaming: latency = end - start, no TTFT / ITL
    assert m["request_latency"] == 50.0
    assert m["output_sequence_length"] == 20 and m["input_sequence_length"] == 10
    assert "time_to_first_token" not in m and "inter_token_latency" not in m


def test_acceptance_length_is_taken_verbatim_not_recomputed():
    payload = mh.vllm_payload(mh.WORKED, k=4)
    payload["mean_acceptance_length"] = 3.2500000001  # floats are never cross-checked
    r = process_capture(mh.nonstream_capture(payload))
    assert r.metrics["spec_decode_acceptance_length"] == 3.2500000001


def test_streaming_timing_metrics_by_hand():
    # role chunk (empty content) at 5 ms, content at 20, 30, 45, 60 ms, usage chunk at 61 ms
    cap = mh.stream_capture(
        mh.vllm_payload(mh.SECOND, k=4),
        [20, 30, 45, 60],
        role_ms=5,
        usage_ms=61,
        completion_tokens=20,
    )
    m = process_capture(cap).metrics
    assert m["time_to_first_token"] == 20.0  # first non-empty content, not the role chunk
    assert m["time_to_second_token"] == 10.0  # 30 - 20
    assert m["request_latency"] == 60.0  # last content chunk, not the usage chunk
    # ITL = (60 - 20) / (20 - 1) ms; per-user throughput = 1 / ITL s = 19/40 * 1000 = 475
    assert m["inter_token_latency"] == pytest.approx(40 / 19, rel=1e-12)
    assert m["output_token_throughput_per_user"] == pytest.approx(475.0, rel=1e-12)
    # the payload rides the usage chunk: s 3, a 2, d 12
    assert m["spec_decode_steps"] == 3 and m["spec_decode_accepted_draft_tokens"] == 2
    assert m["spec_decode_accepted_per_verified"] == pytest.approx(5 / 15, rel=1e-15)


def test_itl_needs_two_output_tokens():
    m = process_capture(mh.stream_capture(None, [20], completion_tokens=1)).metrics
    assert m["time_to_first_token"] == 20.0 and m["request_latency"] == 20.0
    assert "inter_token_latency" not in m and "output_token_throughput_per_user" not in m
    assert not SPEC_TAGS & set(m)


def test_completions_streaming_text_content():
    cap = RawCapture(
        endpoint="completions",
        streaming=True,
        request={"prompt": "p"},
        status=200,
        responses=[
            {"choices": [{"text": ""}]},
            {"choices": [{"text": "a"}]},
            {"choices": [{"text": "b"}]},
            {"choices": [], "usage": {"completion_tokens": 3, "prompt_tokens": 2}},
        ],
        start_ns=1000,
        response_ns=[1000 + 2 * mh.MS, 1000 + 4 * mh.MS, 1000 + 7 * mh.MS, 1000 + 8 * mh.MS],
    )
    m = process_capture(cap).metrics
    assert m["time_to_first_token"] == 4.0 and m["request_latency"] == 7.0
    assert m["inter_token_latency"] == 1.5  # (7 - 4) / (3 - 1)
    assert m["output_sequence_length"] == 3 and m["input_sequence_length"] == 2


def test_legacy_per_choice_shape_gives_the_same_record():
    r = process_capture(
        mh.nonstream_capture(mh.vllm_payload(mh.WORKED, k=4, dense=False), legacy=True)
    )
    assert r.spec is not None and r.metrics["spec_decode_accepted_per_verified"] == 0.65


def test_zero_step_kept_in_trace_only():
    r = process_capture(mh.nonstream_capture(mh.vllm_payload([], k=3), completion_tokens=1))
    assert r.spec is None and r.outcome.zero_step
    assert r.outcome.trace is not None and r.outcome.trace.num_spec_steps == 0
    assert not SPEC_TAGS & set(r.metrics)
    assert r.metrics["request_latency"] == 50.0  # still a valid request


def test_no_payload_and_n_gt_1_give_no_record():
    r = process_capture(mh.nonstream_capture(None))
    assert r.spec is None and r.outcome.trace is None and r.outcome.reason == "absent"
    cap = mh.nonstream_capture(mh.vllm_payload(mh.WORKED, k=4))
    cap.request["n"] = 2
    r = process_capture(cap)
    assert r.spec is None and r.outcome.reason == "n_gt_1"


def test_malformed_payload_is_a_reason_not_an_exception():
    payload = mh.vllm_payload(mh.WORKED, k=4)
    payload["num_spec_steps"] = 9  # histogram sums to 8
    r = process_capture(mh.nonstream_capture(payload))
    assert r.spec is None and r.outcome.reason.startswith("malformed")
    assert r.metrics["request_latency"] == 50.0


def test_garbage_responses_never_raise():
    cap = RawCapture(
        endpoint="chat",
        streaming=True,
        request={},
        status=200,
        responses=[None, 3, "x", [], {"choices": "no"}, {"metrics": []}],
        start_ns=0,
        response_ns=[1, 2, 3],
    )  # misaligned times
    r = process_capture(cap)
    assert r.error is None and r.spec is None


def test_error_requests_carry_kind_and_no_metrics():
    r = process_capture(mh.error_capture("timeout"))
    assert r.error["type"] == "timeout" and r.error_kind == "timeout"
    assert r.metrics == {} and r.spec is None
    cap = mh.nonstream_capture(mh.vllm_payload(mh.WORKED, k=4))
    cap.status = 503  # status >= 400 without an error object is an http_error
    r = process_capture(cap)
    assert r.error == {"type": "http_error", "message": "HTTP 503", "code": 503}
    assert r.metrics == {} and r.spec is None


def test_apv_omitted_without_drafts_and_steps():
    rec = SpecDecodeAcceptanceRecord(
        engine="vllm",
        mean_acceptance_length=1.0,
        draft_acceptance_rate=0.0,
        acceptance_histogram={},
        num_accepted_draft_tokens=0,
        num_draft_tokens=0,
        num_spec_steps=0,
    )
    m = spec_record_metrics(rec)
    assert "spec_decode_accepted_per_verified" not in m
    assert m["spec_decode_steps"] == 0


def test_result_carries_capture_extras():
    cap = mh.nonstream_capture(
        None,
        category="code",
        server="a",
        segment=2,
        x_request_id="r1",
        worker_id="w0",
        benchmark_phase="warmup",
    )
    r = process_capture(cap)
    assert (r.category, r.server, r.segment, r.x_request_id, r.worker_id, r.phase) == (
        "code",
        "a",
        2,
        "r1",
        "w0",
        "warmup",
    )
    assert r.end_ns == 50 * mh.MS and r.start_ns == 0


# ------------------------------------------------------------------ raw capture parsing


def test_capture_round_trip():
    cap = mh.stream_capture(mh.vllm_payload(mh.WORKED, k=4), [10, 20], category="math")
    again = parse_capture_line(cap.to_json_line())
    assert again == cap


@pytest.mark.parametrize(
    "line, needle",
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"metadata": {}, "metrics": {}}', "not a raw capture"),
        (
            b'{"endpoint": "embeddings", "streaming": false, "request": {}, "status": 200}',
            "endpoint",
        ),
        (b'{"endpoint": "chat", "streaming": "yes", "request": {}, "status": 200}', "streaming"),
        (b'{"endpoint": "chat", "streaming": true, "request": [], "status": 200}', "request"),
        (b'{"endpoint": "chat", "streaming": true, "request": {}, "status": "200"}', "status"),
        (
            b'{"endpoint": "chat", "streaming": true, "request": {}, "status": 200, "responses": {}}',
            "responses",
        ),
        (
            b'{"endpoint": "chat", "streaming": true, "request": {}, "status": 200, "error": "boom"}',
            "error",
        ),
        (
            b'{"endpoint": "chat", "streaming": true, "request": {}, "status": 200, "start_ns": 1.5}',
            "start_ns",
        ),
    ],
)
def test_bad_capture_lines_name_the_problem(line, needle):
    with pytest.raises(CaptureError, match=needle):
        parse_capture_line(line)


def test_minimal_capture_fields_are_optional():
    cap = parse_capture_line(
        b'{"endpoint": "chat", "streaming": false, "request": {}, '
        b'"status": 200, "responses": [{"choices": []}]}'
    )
    assert cap.start_ns is None and cap.response_ns is None and cap.error is None
    r = process_capture(cap)
    assert r.error is None and "request_latency" not in r.metrics


def test_read_raw_capture_reports_line_numbers(tmp_path):
    good = mh.nonstream_capture(None).to_json_line().decode()
    path = tmp_path / "raw.jsonl"
    path.write_text(good + "oops\n\n" + '{"endpoint": "chat"}\n' + good)
    items = list(read_raw_capture(path))
    assert [n for n, _ in items] == [1, 2, 4, 5]  # blank line 3 skipped silently
    assert isinstance(items[0][1], RawCapture) and isinstance(items[3][1], RawCapture)
    assert "not valid JSON" in items[1][1] and "streaming" in items[2][1]


def test_read_raw_capture_missing_file(tmp_path):
    with pytest.raises(UserError, match="not found"):
        list(read_raw_capture(tmp_path / "nope.jsonl"))


def test_time_units_follow_aiperfs_conversion_arithmetic():
    # AIPerf converts ns to ms as value * (1000 / 1e9) = value * 1e-06, which for
    # 1_000_007 ns gives 1.0000069999999999, not 1.000007 (= 1_000_007 / 1e6).
    cap = RawCapture(
        endpoint="chat",
        streaming=True,
        request={},
        status=200,
        responses=[
            {"choices": [{"delta": {"content": "a"}}]},
            {"choices": [{"delta": {"content": "b"}}]},
            {"choices": [], "usage": {"completion_tokens": 2}},
        ],
        start_ns=0,
        response_ns=[1_000_007, 3_000_007, 3_000_100],
    )
    r = process_capture(cap)
    assert r.metrics["time_to_first_token"] == 1.0000069999999999
    assert r.values["time_to_first_token"] == 1_000_007  # integer ns kept
    assert r.metrics["request_latency"] == 3_000_007 * 1e-06
    # ITL in ns = (3_000_007 - 1_000_007) / (2 - 1) = 2_000_000; 1 / (2e6 * 1e-09) = 500
    assert r.values["inter_token_latency"] == 2_000_000.0
    assert r.metrics["output_token_throughput_per_user"] == 500.0
    assert r.end_ns == 3_000_007  # the final content response, not the usage chunk


# ------------------------------------------------------------------ property: never raises

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from specmon.accumulator import RunAccumulator  # noqa: E402

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 10**6)
    | st.floats(allow_nan=True)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "choices",
                    "usage",
                    "metrics",
                    "speculative_decoding",
                    "delta",
                    "content",
                    "text",
                    "completion_tokens",
                    "prompt_tokens",
                    "acceptance_histogram",
                    "num_spec_steps",
                    "x",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)


def _mutated_payload(data):
    payload = mh.vllm_payload(data.draw(st.lists(st.integers(0, 3), max_size=12)), k=3)
    key = data.draw(st.sampled_from(sorted(payload)))
    payload[key] = data.draw(_json)
    return payload


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_and_mutated_captures_never_raise(data):
    acc = RunAccumulator(live=False)
    for i in range(3):
        if data.draw(st.booleans()):
            responses = data.draw(st.lists(_json, max_size=5))
            cap = RawCapture(
                endpoint="chat",
                streaming=data.draw(st.booleans()),
                request={},
                status=data.draw(st.sampled_from([200, 200, 400, 500])),
                responses=responses,
                start_ns=0,
                response_ns=list(range(1, len(responses) + 1)),
            )
        else:
            cap = mh.stream_capture(_mutated_payload(data), [5, 9], start_ns=i)
        r = process_capture(cap)
        if r.spec is not None:
            rec = r.spec
            assert sum(rec.acceptance_histogram.values()) == rec.num_spec_steps > 0
            assert (
                sum(j * n for j, n in rec.acceptance_histogram.items())
                == rec.num_accepted_draft_tokens
                <= rec.num_draft_tokens
            )
        acc.add(r)
    s = acc.summary()
    if "total_spec_decode_steps" in s:
        assert sum(acc.pooled_histogram.values()) == s["total_spec_decode_steps"]["avg"]
