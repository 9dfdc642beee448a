"""Exports and RunSession: JSON / CSV / JSONL layout as AIPerf 0.13 writes them."""

import json
import threading

import orjson
import pytest
from support import metrics_helpers as mh

from specmon import __version__
from specmon.capture import parse_capture_line
from specmon.errors import UserError
from specmon.export.common import atomic_write
from specmon.export.csv_export import build_csv
from specmon.export.jsonl_export import result_from_record
from specmon.session import RunSession

S = 1_000_000_000


def _session(tmp_path, level="records", captures=(), **kw):
    session = RunSession(tmp_path / "out", level, {"endpoint_type": "chat"}, **kw)
    for cap in captures:
        session.add(cap)
    return session


def _worked():
    return [
        mh.nonstream_capture(mh.vllm_payload(mh.WORKED, k=4), start_ns=0, x_request_id="a"),
        mh.nonstream_capture(mh.vllm_payload(mh.SECOND, k=4), start_ns=S, x_request_id="b"),
    ]


def _read_json(paths):
    return json.loads(paths["json"].read_text())


# ---------------------------------------------------------------------------- JSON


def test_json_layout_with_records(tmp_path):
    paths = _session(tmp_path, captures=_worked()).finish()
    doc = _read_json(paths)
    keys = list(doc)
    assert keys[:4] == ["schema_version", "aiperf_version", "specmon_version", "benchmark_id"]
    assert doc["schema_version"] == "1.4" and doc["specmon_version"] == __version__
    # AIPerf's declared order for the standard metrics, then the run metadata
    assert (
        keys.index("request_throughput")
        < keys.index("request_latency")
        < keys.index("request_count")
        < keys.index("input_config")
    )
    meta = [
        "input_config",
        "was_cancelled",
        "is_complete",
        "error_summary",
        "start_time",
        "end_time",
        "pooled_spec_decode_acceptance_histogram",
    ]
    assert keys[keys.index("input_config") : keys.index("input_config") + len(meta)] == meta
    after = keys[keys.index(meta[-1]) + 1 :]  # AIPerf's undeclared metrics come last
    assert {k for k in keys if k.startswith("spec_decode")} <= set(after)
    assert len(doc["benchmark_id"]) == 12 and doc["is_complete"] is True
    # naive local time with microseconds, as AIPerf writes it: 2026-11-30T07:18:00.003862
    assert len(doc["start_time"]) == 26 and doc["start_time"][10] == "T"
    assert doc["input_config"] == {"endpoint_type": "chat"} and doc["was_cancelled"] is False
    assert doc["error_summary"] == []
    for tag in mh.RECORD_SPEC_TAGS:
        assert list(doc[tag]) == ["unit", *mh.AIPERF_JSON_STATS], tag
    for tag in (
        "spec_decode_token_weighted_acceptance_length",
        "spec_decode_overall_draft_acceptance_rate",
        "total_spec_decode_steps",
        "total_accepted_draft_tokens",
        "total_draft_tokens",
    ):
        assert list(doc[tag]) == ["unit", "avg"], tag
    assert "spec_decode_zero_step_requests" not in doc  # only when > 0
    assert doc["spec_decode_draft_acceptance_rate"]["max"] == 56.25  # percent, 0..100
    assert doc["pooled_spec_decode_acceptance_histogram"] == mh.WORKED_AND_SECOND_POOLED
    assert (
        sum(doc["pooled_spec_decode_acceptance_histogram"].values())
        == doc["total_spec_decode_steps"]["avg"]
    )


def test_json_omits_every_spec_key_without_a_record(tmp_path):
    paths = _session(tmp_path, captures=[mh.nonstream_capture(None), mh.error_capture()]).finish()
    doc = _read_json(paths)
    assert not [k for k in doc if "spec_decode" in k or k.endswith("draft_tokens")]
    assert doc["request_count"] == {"unit": "requests", "avg": 1}
    assert doc["error_request_count"] == {"unit": "requests", "avg": 1}
    assert doc["error_summary"] == [
        {"error_details": {"type": "timeout", "message": "timeout happened"}, "count": 1}
    ]


def test_json_was_cancelled_and_finish_twice(tmp_path):
    session = _session(tmp_path, captures=_worked())
    session.finish(was_cancelled=True)
    paths = session.finish()
    doc = _read_json(paths)
    assert doc["was_cancelled"] is True and doc["is_complete"] is False
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "profile_export.jsonl",
        "profile_export_aiperf.csv",
        "profile_export_aiperf.json",
    ]


# ---------------------------------------------------------------------------- CSV


def test_csv_layout_by_hand(tmp_path):
    paths = _session(tmp_path, captures=_worked()).finish()
    raw = paths["csv"].read_bytes()
    assert raw.count(b"\r\n") == raw.count(b"\n")  # CRLF everywhere
    text = raw.decode()
    first, second, third = text.split("\r\n\r\n")
    # specmon's last section: the run's fidelity (both records are vLLM summary-level)
    assert third.rstrip("\r\n").split("\r\n") == [
        "Acceptance fidelity,Engine,Label",
        "histogram,vllm,histogram and counts: no per-step arrays",
    ]
    rows1 = first.split("\r\n")
    assert rows1[0] == "Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std"
    labels1 = [r.split(",")[0] for r in rows1[1:]]
    # sorted by tag, not by label: input_sequence_length < ... < spec_decode_steps
    assert labels1 == [
        "E2E Output Token Throughput (tokens/sec/user)",
        "Input Sequence Length (tokens)",
        "Output Sequence Length (tokens)",
        "Request Latency (ms)",
        "Acceptance Length (ratio)",
        "Accepted Draft Tokens (tokens)",
        "Accepted per Verified (ratio)",
        "Draft Acceptance Rate (%)",
        "Draft Tokens (tokens)",
        "Spec Decode Steps",
    ]
    # steps 8 and 3: avg 5.5, sum 11, p1 = 3 + 0.01*5, p25 = 3 + 0.25*5, std = 2.5
    assert (
        rows1[-1]
        == "Spec Decode Steps,5.50,3.00,8.00,11.00,3.05,3.25,3.50,4.25,5.50,6.75,7.50,7.75,7.95,2.50"
    )
    rows2 = second.rstrip("\r\n").split("\r\n")
    assert rows2[0] == "Metric,Value"
    assert rows2[1:] == [
        "Benchmark Duration (sec),1.05",  # 0 .. 1 s + 50 ms
        "Input Token Throughput (tokens/sec),19.05",  # 20 tokens / 1.05 s
        "Output Token Throughput (tokens/sec),38.10",  # 40 tokens / 1.05 s
        "Request Count,2.00",  # a float sum in AIPerf 0.13 too; no suffix for requests
        "Request Error Rate (%),0.00",
        "Request Throughput (requests/sec),1.90",  # 2 / 1.05
        "Overall Draft Acceptance Rate (%),45.45",  # 100 * 20 / 44
        "Token-Weighted Acceptance Length (ratio),2.82",  # 1 + 20 / 11
        "Total Accepted Draft Tokens (tokens),20.00",
        "Total Draft Tokens (tokens),44.00",
        "Total Input Sequence Length (tokens),20.00",
        "Total Output Sequence Length (tokens),40.00",
        "Total Output Tokens (tokens),40.00",
        "Total Spec Decode Steps,11.00",  # no suffix for count
        "Total Token Throughput (tokens/sec),57.14",  # (20 + 40) / 1.05
    ]
    # per request: 20 tokens in 50 ms = 400 tokens/sec/user, for both
    assert rows1[1] == "E2E Output Token Throughput (tokens/sec/user)," + ",".join(
        ["400.00"] * 3 + ["800.00"] + ["400.00"] * 9 + ["0.00"]
    )
    assert "histogram" not in (first + second).lower()  # no pooled histogram in the CSV


def test_csv_zero_step_row_and_missing_cells():
    blocks = {
        "spec_decode_zero_step_requests": {"unit": "requests", "avg": 3},
        "request_latency": {"unit": "ms", "avg": 1.0, "p50": 1.0},
    }
    rows = build_csv(blocks).split("\r\n")
    assert rows[1] == "Request Latency (ms),1.00,,,,,,,,1.00,,,,,"
    assert "Zero-Step Requests,3" in rows  # an int stays plain


# ---------------------------------------------------------------------------- JSONL


def test_jsonl_lines_as_aiperf_writes_them(tmp_path):
    zero = mh.nonstream_capture(mh.vllm_payload([], k=4), start_ns=2 * S, completion_tokens=1)
    caps = [
        *_worked(),
        mh.nonstream_capture(None, start_ns=3 * S),
        zero,
        mh.error_capture("cancelled"),
    ]
    session = _session(tmp_path, captures=caps)
    lines = [orjson.loads(x) for x in session.paths["jsonl"].read_bytes().splitlines()]
    assert len(lines) == 5  # written as they landed, before finish()
    first = lines[0]
    assert list(first) == ["metadata", "metrics", "spec_decode_acceptance"]
    assert first["metadata"]["x_request_id"] == "a"
    assert first["metadata"]["benchmark_phase"] == "profiling"
    assert first["metadata"]["request_start_ns"] == 0
    assert first["metadata"]["request_end_ns"] == 50_000_000
    assert first["metrics"]["spec_decode_draft_acceptance_rate"] == {"value": 56.25, "unit": "%"}
    assert first["metrics"]["spec_decode_steps"] == {"value": 8, "unit": "count"}
    assert first["metrics"]["request_latency"] == {"value": 50.0, "unit": "ms"}
    sda = first["spec_decode_acceptance"]
    assert sda["draft_acceptance_rate"] == 0.5625  # a fraction here
    assert sda["acceptance_histogram"] == {"0": 1, "1": 1, "2": 2, "3": 3, "4": 1}
    assert (
        sda["engine"] == "vllm" and sda["num_spec_tokens"] == 4 and sda["completion_tokens"] == 20
    )
    assert "spec_decode_acceptance" not in lines[2]  # absent, not null
    zero_line = lines[3]
    assert zero_line["spec_decode_acceptance"]["num_spec_steps"] == 0  # verbatim
    assert zero_line["spec_decode_acceptance"]["acceptance_histogram"] == {}
    assert not [t for t in zero_line["metrics"] if t.startswith("spec_decode")]
    err = lines[4]
    assert err["error"]["type"] == "cancelled" and err["metadata"]["was_cancelled"] is True
    assert err["metrics"] == {}
    session.finish()


def test_jsonl_round_trip_gives_the_same_summary(tmp_path):
    caps = [
        *_worked(),
        mh.stream_capture(mh.vllm_payload([1, 2, 0], k=4), [5, 9, 12], start_ns=2 * S),
        mh.nonstream_capture(mh.vllm_payload([], k=4), start_ns=3 * S),
        mh.error_capture(),
    ]
    session = _session(tmp_path, captures=caps)
    session.finish()
    lines = session.paths["jsonl"].read_bytes().splitlines()
    replay = RunSession.from_results(result_from_record(orjson.loads(x)) for x in lines)
    live, again = session.accumulator.summary(), replay.accumulator.summary()
    assert again == live
    assert replay.accumulator.pooled_histogram == session.accumulator.pooled_histogram
    assert replay.accumulator.zero_step_requests == 1
    assert replay.accumulator.error_summary == session.accumulator.error_summary
    assert replay.paths == {} and replay.artifact_dir is None


# ---------------------------------------------------------------------------- levels


def test_export_levels(tmp_path):
    warm = mh.nonstream_capture(mh.vllm_payload([1], k=4), benchmark_phase="warmup")
    summary = _session(tmp_path / "s", "summary", [warm, *_worked()]).finish()
    assert set(summary) == {"json", "csv"}
    raw = _session(tmp_path / "r", "raw", [warm, *_worked()])
    paths = raw.finish()
    assert set(paths) == {"json", "csv", "jsonl", "raw"}
    assert len(paths["jsonl"].read_bytes().splitlines()) == 2  # warmup left out
    raw_lines = paths["raw"].read_bytes().splitlines()
    assert len(raw_lines) == 3  # ...but kept in the raw capture
    back = parse_capture_line(raw_lines[1])
    assert back.responses and back.x_request_id == "a"  # full responses preserved
    with pytest.raises(UserError, match="export-level"):
        RunSession(tmp_path / "x", "everything", {})


def test_results_drop_responses_after_writing(tmp_path):
    session = _session(tmp_path, captures=_worked())
    assert session.accumulator.results[0].capture.responses == []
    kept = _session(tmp_path / "k", captures=_worked(), keep_responses=True)
    assert kept.accumulator.results[0].capture.responses


def test_concurrent_adds_are_safe(tmp_path):
    session = _session(tmp_path)

    def worker(offset):
        for i in range(200):
            session.add(
                mh.nonstream_capture(mh.vllm_payload([1, 2], k=4), start_ns=(offset + i) * 1000)
            )

    threads = [threading.Thread(target=worker, args=(n * 1000,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    paths = session.finish()
    lines = paths["jsonl"].read_bytes().splitlines()
    assert len(lines) == 800 and all(orjson.loads(x)["metrics"] for x in lines)
    doc = _read_json(paths)
    assert doc["request_count"]["avg"] == 800
    assert doc["total_accepted_draft_tokens"]["avg"] == 2400.0  # 800 * (1 + 2)


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    target = tmp_path / "f.json"
    atomic_write(target, b"old")
    atomic_write(target, b"new")
    assert target.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_unwritable_artifact_dir_is_a_user_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError, match="artifact dir"):
        RunSession(blocker / "sub", "records", {})


def test_exports_take_the_umask_mode_like_screenshots(tmp_path):
    """Issue 20: exports were 0600 (mkstemp) while screenshots were 0644. Under umask 022 a
    new export is 0666 & ~022 = 0644; under 027 it is 0640."""
    import os
    import stat

    from specmon.export.common import atomic_write, open_new_stream

    old = os.umask(0o022)
    try:
        path = atomic_write(tmp_path / "a.json", b"{}")
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        with open_new_stream(tmp_path / "b.jsonl") as fh:
            fh.write(b"{}\n")
        assert stat.S_IMODE((tmp_path / "b.jsonl").stat().st_mode) == 0o644
        os.umask(0o027)
        assert stat.S_IMODE(atomic_write(tmp_path / "c.csv", b"x").stat().st_mode) == 0o640
    finally:
        os.umask(old)
