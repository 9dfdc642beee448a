"""specmon.interop.aiperf on hand-built AIPerf 0.13 raw records (layout as AIPerf 0.13.0
writes profile_export_raw.jsonl: metadata, start_perf_ns, payload, status, responses of
{perf_ns, packets:[{name, value}]} for SSE or {perf_ns, text} for a JSON body)."""

from __future__ import annotations

import json

import pytest
from peer.aiperf_peer import record_differences, summary_differences

from specmon.errors import UserError
from specmon.interop.aiperf import (
    raw_record_to_capture,
    read_raw_export,
    read_records_export,
    read_summary_export,
    spec_decode_summary,
    write_captures,
)

SPEC = {
    "mean_acceptance_length": 2.0,
    "draft_acceptance_rate": 0.5,
    "acceptance_histogram": [2, 1, 0, 1],
    "num_spec_steps": 4,
    "num_accepted_draft_tokens": 4,
    "num_draft_tokens": 8,
    "num_spec_tokens": 3,
}
META = {
    "x_request_id": "r-1",
    "benchmark_phase": "profiling",
    "worker_id": "worker_1",
    "request_start_ns": 1_000_000_000,
    "request_end_ns": 1_000_900_000,
}


def sse(perf_ns: int, data: str) -> dict:
    return {"perf_ns": perf_ns, "packets": [{"name": "data", "value": data}]}


def streaming_record() -> dict:
    usage_chunk = {
        "choices": [],
        "usage": {"completion_tokens": 9},
        "metrics": {"speculative_decoding": SPEC},
    }
    return {
        "metadata": META,
        "start_perf_ns": 500,
        "status": 200,
        "payload": {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        "responses": [
            sse(600, json.dumps({"choices": [{"delta": {"content": "a"}}]})),
            sse(700, json.dumps(usage_chunk)),
            sse(700, "[DONE]"),
        ],
    }


def test_streaming_record_becomes_capture():
    cap = raw_record_to_capture(streaming_record())
    assert cap["endpoint"] == "chat" and cap["streaming"] is True and cap["status"] == 200
    # [DONE] is dropped; two JSON events with their perf_ns
    assert cap["response_ns"] == [600, 700]
    assert cap["responses"][1]["metrics"]["speculative_decoding"] == SPEC
    assert cap["start_ns"] == 500
    # end on the perf clock = start + (wall end - wall start) = 500 + 900_000
    assert cap["end_ns"] == 900_500
    assert cap["error"] is None
    assert (cap["x_request_id"], cap["worker_id"], cap["wall_start_ns"]) == (
        "r-1",
        "worker_1",
        1_000_000_000,
    )
    assert cap["benchmark_phase"] == "profiling"


def test_json_body_and_http_error():
    record = {
        "metadata": {"x_request_id": "r-2"},
        "start_perf_ns": 10,
        "status": 500,
        "payload": {"model": "m", "prompt": "p"},
        "responses": [{"perf_ns": 20, "text": '{"error": {"message": "boom"}}'}],
        "error": {"code": 500, "type": "Internal Server Error", "message": "boom"},
    }
    cap = raw_record_to_capture(record)
    assert cap["endpoint"] == "completions" and cap["streaming"] is False
    assert cap["responses"] == [{"error": {"message": "boom"}}] and cap["response_ns"] == [20]
    assert cap["end_ns"] == 20  # no wall times: the last response's time
    assert cap["error"] == {"type": "http_error", "message": "boom"}
    assert cap["benchmark_phase"] == "profiling"


@pytest.mark.parametrize(
    "aiperf_type, kind",
    [
        ("ClientConnectorError", "connection_error"),
        ("TimeoutError", "timeout"),
        ("CancelledError", "cancelled"),
        ("SomethingElse", "SomethingElse"),
    ],
)
def test_transport_errors_map_to_specmon_kinds(aiperf_type, kind):
    record = {
        "metadata": {},
        "start_perf_ns": 1,
        "status": 0,
        "responses": [],
        "payload": {"model": "m", "prompt": "p"},
        "error": {"code": None, "type": aiperf_type, "message": "refused"},
    }
    assert raw_record_to_capture(record)["error"] == {"type": kind, "message": "refused"}


def test_bad_lines_are_counted_by_line_number(tmp_path):
    good = json.dumps(streaming_record())
    no_payload = json.dumps({"metadata": {}, "start_perf_ns": 1, "responses": []})
    no_endpoint = json.dumps({**streaming_record(), "payload": {"model": "m"}})
    (tmp_path / "profile_export_raw.jsonl").write_text(
        "\n".join([good, "{not json", no_payload, "[1, 2]", "", no_endpoint, good]) + "\n"
    )
    report = read_raw_export(tmp_path)
    assert len(report.captures) == 2
    assert [s.split(":")[0] for s in report.skipped] == ["line 2", "line 3", "line 4", "line 6"]
    out = tmp_path / "caps.jsonl"
    assert write_captures(report.captures, out) == 2
    assert json.loads(out.read_text().splitlines()[0])["x_request_id"] == "r-1"


def test_missing_files_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="--export-level raw"):
        read_raw_export(tmp_path)
    with pytest.raises(UserError, match="no such file"):
        read_records_export(tmp_path)
    with pytest.raises(UserError, match="no such file"):
        read_summary_export(tmp_path)
    (tmp_path / "profile_export_aiperf.json").write_text("[1]")
    with pytest.raises(UserError, match="not a JSON object"):
        read_summary_export(tmp_path)


def test_spec_decode_summary_keeps_only_spec_keys():
    summary = {
        "spec_decode_steps": {"avg": 1},
        "total_spec_decode_steps": {"avg": 4},
        "total_draft_tokens": {"avg": 8},
        "total_accepted_draft_tokens": {"avg": 4},
        "pooled_spec_decode_acceptance_histogram": {"0": 2},
        "total_osl": {"avg": 9},
        "request_latency": {"avg": 3},
    }
    assert set(spec_decode_summary(summary)) == {
        "spec_decode_steps",
        "total_spec_decode_steps",
        "total_draft_tokens",
        "total_accepted_draft_tokens",
        "pooled_spec_decode_acceptance_histogram",
    }


def test_comparison_helpers_catch_differences():
    theirs = {
        "spec_decode_steps": {"unit": "count", "avg": 2.5, "sum": 5.0, "count": 2},
        "spec_decode_acceptance_length": {"unit": "ratio", "avg": 2.0000000001},
        "pooled_spec_decode_acceptance_histogram": {"0": 1, "3": 2},
    }
    same = json.loads(json.dumps(theirs))
    same["spec_decode_acceptance_length"]["avg"] = 2.0000000001 * (1 + 1e-12)  # within 1e-9
    assert summary_differences(theirs, same) == []
    off = json.loads(json.dumps(theirs))
    off["spec_decode_steps"]["sum"] = 5.000000001  # a count field: must be exact
    off["pooled_spec_decode_acceptance_histogram"] = {"0": 1, "3": 1}
    del off["spec_decode_acceptance_length"]
    assert len(summary_differences(theirs, off)) == 3
    rec = {
        "metadata": {"x_request_id": "a"},
        "spec_decode_acceptance": {"num_spec_steps": 4},
        "metrics": {"spec_decode_steps": {"value": 4, "unit": "count"}},
    }
    other = json.loads(json.dumps(rec))
    other["metrics"]["spec_decode_steps"]["value"] = 5
    assert record_differences([rec], [rec]) == []
    assert len(record_differences([rec], [other])) == 1


def test_command_line_converts_and_reports(tmp_path, capsys):
    from specmon.interop.aiperf import main

    (tmp_path / "profile_export_raw.jsonl").write_text(json.dumps(streaming_record()) + "\nnope\n")
    out = tmp_path / "caps.jsonl"
    assert main([str(tmp_path), str(out)]) == 0
    printed = capsys.readouterr()
    assert "1 captures written" in printed.out and "1 lines skipped" in printed.out
    assert "skipped line 2: not JSON" in printed.err
    assert len(out.read_text().splitlines()) == 1
    assert main([str(tmp_path / "missing"), str(out)]) == 2
    assert capsys.readouterr().err.startswith("specmon: error: no AIPerf raw export at")
