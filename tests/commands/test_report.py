"""`specmon report`: the real CLI in a subprocess, on files with bad lines, the shipped
sample capture and a run's own raw export."""

import json
from importlib import resources

import pytest
from support import metrics_helpers as mh
from support.cli import specmon
from support.paths import FIXTURES as FIXTURES_DIR

from specmon.session import RunSession

S = 1_000_000_000


def _specmon(*args, cwd=None):
    return specmon(*args, cwd=cwd, timeout=120)


@pytest.mark.e2e
def test_report_skips_bad_lines_and_counts_the_rest(tmp_path):
    raw = tmp_path / "cap.jsonl"
    raw.write_bytes(
        mh.nonstream_capture(mh.vllm_payload(mh.WORKED, k=4), start_ns=0).to_json_line()
        + b"this is not json\n"
        + b'{"endpoint": "chat", "streaming": true}\n'
        + b"\n"
        + mh.nonstream_capture(mh.vllm_payload(mh.SECOND, k=4), start_ns=S).to_json_line()
        + mh.error_capture("timeout").to_json_line()
    )
    out_dir = tmp_path / "out"
    proc = _specmon("report", "--input", str(raw), "--artifact-dir", str(out_dir))
    assert proc.returncode == 0, proc.stderr
    assert f"{raw}:2: skipped: not valid JSON" in proc.stderr
    assert f"{raw}:3: skipped: 'request' must be" in proc.stderr
    assert "Traceback" not in proc.stderr
    doc = json.loads((out_dir / "profile_export_aiperf.json").read_text())
    assert doc["request_count"]["avg"] == 2 and doc["error_request_count"]["avg"] == 1
    assert doc["spec_decode_token_weighted_acceptance_length"]["avg"] == 2.8181818181818183
    assert doc["spec_decode_overall_draft_acceptance_rate"]["avg"] == 45.45454545454545
    assert doc["pooled_spec_decode_acceptance_histogram"] == mh.WORKED_AND_SECOND_POOLED
    assert len((out_dir / "profile_export.jsonl").read_bytes().splitlines()) == 3
    assert (
        "Accepted drafts per step (% of steps):  0: 18%   1: 27%   2: 18%   3: 27%   4: 9%"
        in proc.stdout
    )
    assert "3 captures read, 2 bad lines skipped" in proc.stdout


@pytest.mark.e2e
def test_missing_file_is_one_line_and_exit_2(tmp_path):
    proc = _specmon("report", "--input", str(tmp_path / "nope.jsonl"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"specmon: error: raw capture file not found: {tmp_path / 'nope.jsonl'}"
    ]


@pytest.mark.e2e
def test_file_without_any_capture_is_a_user_error(tmp_path):
    raw = tmp_path / "bad.jsonl"
    raw.write_text("nope\n[]\n")
    proc = _specmon("report", "--input", str(raw), "--artifact-dir", str(tmp_path / "o"))
    assert proc.returncode == 2
    assert "no valid capture line" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.e2e
def test_default_artifact_dir(tmp_path):
    raw = tmp_path / "mycap.jsonl"
    raw.write_bytes(mh.nonstream_capture(None).to_json_line())
    proc = _specmon("report", "--input", str(raw), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "artifacts" / "report-mycap"
    assert (out / "profile_export_aiperf.json").is_file()
    assert (out / "profile_export_aiperf.csv").is_file()
    assert "Spec Decode" not in proc.stdout  # no record, no spec table


def _payload_of(body):
    """The spec payload of a response in either vLLM shape, or None."""
    if isinstance(body.get("metrics"), dict):
        return body["metrics"].get("speculative_decoding")
    for choice in body.get("choices") or []:
        if choice.get("speculative_decoding_stats"):
            return choice["speculative_decoding_stats"]
    return None


@pytest.mark.e2e
def test_shipped_sample_capture(tmp_path):
    sample = resources.files("specmon") / "data" / "sample_capture.jsonl"
    lines = [json.loads(x) for x in sample.read_text().splitlines()]
    shapes = {
        ("metrics" in json.dumps(c["responses"]), c["streaming"], c["endpoint"]) for c in lines
    }
    assert len(shapes) == 8  # both shapes x streaming or not x chat and completions
    # independent recomputation of the totals from the raw payloads
    steps = accepted = drafted = records = 0
    for cap in lines:
        if cap["error"]:
            continue
        payloads = [p for p in map(_payload_of, cap["responses"]) if p]
        assert len(payloads) == 1
        p = payloads[0]
        hist = p["acceptance_histogram"]
        hsum = sum(hist) if isinstance(hist, list) else sum(hist.values())
        if p["num_spec_steps"] == 0 or hsum != p["num_spec_steps"]:
            continue  # the zero-step and the malformed request
        records += 1
        steps += p["num_spec_steps"]
        accepted += p["num_accepted_draft_tokens"]
        drafted += p["num_draft_tokens"]
    proc = _specmon("report", "--input", str(sample), "--artifact-dir", str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "o" / "profile_export_aiperf.json").read_text())
    assert doc["spec_decode_steps"]["count"] == records == 24
    assert doc["total_spec_decode_steps"]["avg"] == steps
    assert doc["spec_decode_token_weighted_acceptance_length"]["avg"] == 1.0 + accepted / steps
    assert doc["spec_decode_overall_draft_acceptance_rate"]["avg"] == (accepted / drafted) * 100.0
    assert doc["spec_decode_zero_step_requests"]["avg"] == 1
    assert doc["error_request_count"]["avg"] == 1 and doc["request_count"]["avg"] == 26
    assert "malformed" in proc.stdout and "Spec Decode" in proc.stdout


@pytest.mark.e2e
def test_report_on_a_runs_raw_export_reproduces_it(tmp_path):
    caps = [
        mh.nonstream_capture(
            mh.vllm_payload(mh.WORKED, k=4), start_ns=0, wall_start_ns=1_700_000_000 * S
        ),
        mh.stream_capture(
            mh.vllm_payload([1, 3, 0, 2], k=4), [15, 22, 30, 41], start_ns=S, completion_tokens=12
        ),
        mh.nonstream_capture(mh.vllm_payload([], k=4), start_ns=2 * S),
        mh.nonstream_capture(mh.vllm_payload([1], k=4), start_ns=0, benchmark_phase="warmup"),
        mh.error_capture("broken_stream", start_ns=3 * S),
    ]
    session = RunSession(tmp_path / "run", "raw", {})
    for cap in caps:
        session.add(cap)
    live = json.loads(session.finish()["json"].read_text())
    proc = _specmon(
        "report",
        "--input",
        str(tmp_path / "run" / "profile_export_raw.jsonl"),
        "--artifact-dir",
        str(tmp_path / "rep"),
    )
    assert proc.returncode == 0, proc.stderr
    again = json.loads((tmp_path / "rep" / "profile_export_aiperf.json").read_text())
    skip = {"benchmark_id", "input_config", "start_time", "end_time"}
    assert {k: v for k, v in again.items() if k not in skip} == {
        k: v for k, v in live.items() if k not in skip
    }
    assert "0 warmup" not in proc.stdout and "1 warmup" in proc.stdout


@pytest.mark.e2e
def test_report_on_real_vllm_032_captures(tmp_path):
    """Captures of a real vLLM 0.32 (tests/fixtures/vllm032, summary level): 15 requests."""
    fixtures = sorted((FIXTURES_DIR / "vllm032").glob("summary_*.jsonl"))
    raw = tmp_path / "vllm032.jsonl"
    raw.write_bytes(b"".join(p.read_bytes() for p in fixtures))
    proc = _specmon("report", "--input", str(raw), "--artifact-dir", str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "o" / "profile_export_aiperf.json").read_text())
    # Per the fixture README, each of 4 prompts x endpoint appears streamed and not:
    # histograms [3,1,1,2] [1,4,2,2] [0,0,2,5] [1,6,0,4], twice each -> [10,22,10,26]
    assert doc["pooled_spec_decode_acceptance_histogram"] == {"0": 10, "1": 22, "2": 10, "3": 26}
    assert doc["spec_decode_steps"]["count"] == 8
    assert doc["total_spec_decode_steps"]["avg"] == 68.0  # 2 * (7 + 9 + 7 + 11)
    assert doc["total_accepted_draft_tokens"]["avg"] == 120.0  # 2 * (9 + 14 + 19 + 18)
    assert doc["total_draft_tokens"]["avg"] == 160.0  # 2 * (21 + 19 + 19 + 21)
    assert doc["spec_decode_token_weighted_acceptance_length"]["avg"] == 1.0 + 120 / 68
    assert doc["spec_decode_overall_draft_acceptance_rate"]["avg"] == 75.0  # 120 / 160
    # max_tokens 1 (streamed and not) and the sampled request that never matched
    assert doc["spec_decode_zero_step_requests"]["avg"] == 3.0
    assert doc["request_count"]["avg"] == 15.0 and "error_request_count" not in doc
    # steps per request: 7, 9, 7, 11 twice each -> sorted [7,7,7,7,9,9,11,11]; median 8
    assert doc["spec_decode_steps"]["p50"] == 8.0 and doc["spec_decode_steps"]["avg"] == 8.5
    lines = [
        json.loads(x) for x in (tmp_path / "o" / "profile_export.jsonl").read_text().splitlines()
    ]
    assert sum("spec_decode_acceptance" in x for x in lines) == 11  # 8 records + 3 zero-step
