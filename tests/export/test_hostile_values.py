"""Values checked at the edge (issue 19 item 5), live and in `specmon report`: spec-decode
counts past 2^63-1 make the record malformed, a reported acceptance length or rate that its
own counts contradict makes it contested, and either way the request is kept, counted by
reason, and never raises. Real processes against tests/support/hostile_server.py."""

from __future__ import annotations

import json

import orjson
import pytest
from support.cli import specmon
from support.hostile_server import GOOD, HostileServer, _body, _usage


def _spec_text(al: object, rate: object, steps: object, accepted: object, drafted: object,
               hist: str) -> bytes:  # fmt: skip
    return (
        f'{{"mean_acceptance_length":{al},"draft_acceptance_rate":{rate},'
        f'"acceptance_histogram":{hist},"num_spec_steps":{steps},'
        f'"num_accepted_draft_tokens":{accepted},"num_draft_tokens":{drafted},'
        f'"num_spec_tokens":3}}'
    ).encode()


# 100 steps, 23 accepted, 300 drafted: AL 1.23, rate 0.0767 by the counts
CONSISTENT_HIST = "[80,17,3,0]"  # 17 + 2*3 = 23 accepted over 100 steps
CASES = {
    "good": GOOD,  # AL 1 + 1/2 = 1.5
    "at_2_63": _body(_usage(2, 2), _spec_text(2.0, 0.5, 2**63, 1, 2**63, f"[{2**63 - 1},1,0,0]")),
    "past_2_64": _body(
        _usage(2, 2), _spec_text(2.0, 0.5, 2**64 + 5, 1, 2**64 + 5, f"[{2**64 + 4},1,0,0]")
    ),
    "al_1e308": _body(_usage(2, 2), _spec_text(1e308, 23 / 300, 100, 23, 300, CONSISTENT_HIST)),
    "al_1000": _body(_usage(2, 2), _spec_text(1000, 23 / 300, 100, 23, 300, CONSISTENT_HIST)),
    "rate_zero": _body(_usage(2, 2), _spec_text(1.23, 0, 100, 23, 300, CONSISTENT_HIST)),
    "rounded": _body(_usage(2, 2), _spec_text(1.23, 0.077, 100, 23, 300, CONSISTENT_HIST)),
}


@pytest.mark.e2e
def test_absurd_counts_and_contradicting_floats_are_counted_never_raised(tmp_path):
    out, count = tmp_path / "run", 2 * len(CASES)
    with HostileServer(CASES) as server:
        proc = specmon("run", "--url", server.url, "--headless", "--export-level", "raw", "--request-count", str(count), "--concurrency", "1", "--artifact-dir", str(out), timeout=180)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "OverflowError" not in proc.stderr
    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    assert doc["request_count"]["avg"] == count  # every request kept
    reasons = doc["no_record_reasons"]
    assert reasons["contested"] == 6  # AL 1e308, AL 1000, rate 0: twice each
    assert sum(n for r, n in reasons.items() if r.startswith("malformed")) == 4
    # only good (AL 1.5) and rounded (AL 1.23) records count: mean (1.5 + 1.23) / 2 twice
    assert doc["spec_decode_acceptance_length"]["avg"] == (1.5 + 1.5 + 1.23 + 1.23) / 4
    assert doc["total_spec_decode_steps"]["avg"] == 2 * (2 + 100)

    report = tmp_path / "report"
    again = specmon("report", "-i", str(out / "profile_export_raw.jsonl"), "--artifact-dir", str(report), timeout=120)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert f"{count} captures read, 0 bad lines skipped" in again.stdout
    redo = json.loads((report / "profile_export_aiperf.json").read_text())
    assert redo["request_count"] == doc["request_count"]
    assert redo["no_record_reasons"] == reasons


@pytest.mark.e2e
def test_report_keeps_a_line_whose_counts_pass_2_64(tmp_path):
    """Written by another tool: integers no 64-bit type holds. The line is read (with its
    request) and its record is malformed, counted; the good line beside it counts."""
    line = {
        "endpoint": "chat", "streaming": False, "request": {"model": "m"}, "status": 200,
        "responses": [orjson.loads(GOOD)], "start_ns": 1_000, "response_ns": [5_000],
        "end_ns": 6_000, "error": None,
    }  # fmt: skip
    huge = json.loads(json.dumps(line))
    spec = huge["responses"][0]["metrics"]["speculative_decoding"]
    spec.update(num_spec_steps=2**70, num_draft_tokens=2**70, acceptance_histogram=[2**70, 0])
    path = tmp_path / "raw.jsonl"
    path.write_text(json.dumps(line) + "\n" + json.dumps(huge) + "\n")  # Python's big ints
    proc = specmon("report", "-i", str(path), "--artifact-dir", str(tmp_path / "r"), timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "2 captures read, 0 bad lines skipped" in proc.stdout
    doc = json.loads((tmp_path / "r" / "profile_export_aiperf.json").read_text())
    assert doc["request_count"]["avg"] == 2
    assert sum(doc["no_record_reasons"].values()) == 1
    assert doc["spec_decode_acceptance_length"]["avg"] == 1.5
