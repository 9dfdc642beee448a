"""The committed real vLLM 0.32 captures (tests/fixtures/vllm032/, see its README): what the
server sent, checked against reference/real-vllm.md, and `specmon report` on them checked
against hand computation. Runs without vLLM installed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import FIXTURES as FIXTURES_DIR

FIXTURES = FIXTURES_DIR / "vllm032"
LEVELS = ("summary", "detailed")
REQUIRED = {
    "endpoint",
    "streaming",
    "request",
    "status",
    "responses",
    "start_ns",
    "response_ns",
    "end_ns",
    "error",
}


def captures(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines()]


def payload_positions(cap: dict) -> list[int]:
    return [
        i
        for i, r in enumerate(cap["responses"])
        if (r.get("metrics") or {}).get("speculative_decoding") is not None
    ]


def all_files() -> list[str]:
    return sorted(p.stem for p in FIXTURES.glob("*.jsonl"))


def test_fixture_set_is_complete():
    cases = {
        "chat_nonstream",
        "chat_stream",
        "completions_nonstream",
        "completions_stream",
        "chat_n2_nonstream",
        "chat_n2_stream",
        "completions_promptlist2_nonstream",
        "chat_max_tokens1_nonstream",
        "chat_max_tokens1_stream",
        "chat_stream_no_usage",
        "chat_temp08_nonstream",
    }
    assert set(all_files()) == {f"{lvl}_{case}" for lvl in LEVELS for case in cases}


@pytest.mark.parametrize("name", all_files())
def test_every_line_is_a_raw_capture_with_valid_payloads(name):
    for cap in captures(name):
        assert set(cap) >= REQUIRED and cap["status"] == 200 and cap["error"] is None
        assert cap["endpoint"] in ("chat", "completions")
        assert len(cap["response_ns"]) == len(cap["responses"]) >= 1
        assert cap["start_ns"] <= cap["response_ns"][0] and cap["response_ns"][-1] <= cap["end_ns"]
        for i in payload_positions(cap):
            check_invariants(cap["responses"][i]["metrics"]["speculative_decoding"])


def check_invariants(sd: dict) -> None:
    """reference/real-vllm.md §4 invariants, all of which a real vLLM 0.32 kept."""
    hist, steps = sd["acceptance_histogram"], sd["num_spec_steps"]
    acc, drafted, k = sd["num_accepted_draft_tokens"], sd["num_draft_tokens"], sd["num_spec_tokens"]
    assert k == 3 and len(hist) == k + 1 and sum(hist) == steps
    assert sum(j * n for j, n in enumerate(hist)) == acc
    assert sd["mean_acceptance_length"] == (1 + acc / steps if steps else 1.0)
    assert sd["draft_acceptance_rate"] == (acc / drafted if drafted else 0.0)
    assert isinstance(sd["mean_acceptance_length"], float)
    assert isinstance(sd["draft_acceptance_rate"], float)
    if sd.get("per_step_accepted") is not None:
        pa, pd = sd["per_step_accepted"], sd["per_step_drafted"]
        assert len(pa) == len(pd) == steps and sum(pa) == acc and sum(pd) == drafted
        assert all(0 <= a <= d <= k for a, d in zip(pa, pd))


@pytest.mark.parametrize("level", LEVELS)
def test_payload_placement_and_suppression(level):
    for cap in captures(f"{level}_chat_stream") + captures(f"{level}_completions_stream"):
        last = len(cap["responses"]) - 1  # only the final usage chunk, which has no choices
        assert payload_positions(cap) == [last] and cap["responses"][last]["choices"] == []
        sd = cap["responses"][last]["metrics"]["speculative_decoding"]
        assert ("per_step_accepted" in sd) == (level == "detailed")  # stream chunk: exclude_none
    for cap in captures(f"{level}_chat_nonstream") + captures(f"{level}_completions_nonstream"):
        sd = cap["responses"][0]["metrics"]["speculative_decoding"]
        assert "per_step_accepted" in sd  # non-stream body keeps nulls
        assert (sd["per_step_accepted"] is None) == (level == "summary")
        assert (cap["responses"][0]["metrics"]["time_to_first_token_ms"] is None) == (
            level == "summary"
        )
    (n2,) = captures(f"{level}_chat_n2_nonstream")
    assert "metrics" in n2["responses"][0] and n2["responses"][0]["metrics"] is None
    (n2s,) = captures(f"{level}_chat_n2_stream")
    assert payload_positions(n2s) == [] and "usage" in n2s["responses"][-1]
    (plist,) = captures(f"{level}_completions_promptlist2_nonstream")
    assert plist["responses"][0]["metrics"] is None
    (no_usage,) = captures(f"{level}_chat_stream_no_usage")
    assert payload_positions(no_usage) == [] and all(
        "usage" not in r for r in no_usage["responses"]
    )


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(
    "case", ["chat_max_tokens1_nonstream", "chat_max_tokens1_stream", "chat_temp08_nonstream"]
)
def test_zero_step_payloads(level, case):
    (cap,) = captures(f"{level}_{case}")
    (pos,) = payload_positions(cap)
    sd = cap["responses"][pos]["metrics"]["speculative_decoding"]
    assert (sd["acceptance_histogram"], sd["num_spec_steps"], sd["num_draft_tokens"]) == (
        [0, 0, 0, 0],
        0,
        0,
    )
    assert (sd["mean_acceptance_length"], sd["draft_acceptance_rate"]) == (1.0, 0.0)


@pytest.mark.parametrize("level", LEVELS)
def test_golden_values_and_determinism(level):
    # chat prompt 0: [3,1,1,2] -> steps 3+1+1+2 = 7, accepted 1+2+3*2 = 9, drafted 21:
    # AL 1 + 9/7 = 2.2857142857142856, rate 9/21 = 0.42857142857142855
    chat = [
        c["responses"][-1]["metrics"]["speculative_decoding"]
        for c in captures(f"{level}_chat_stream")
    ]
    assert chat[0]["acceptance_histogram"] == [3, 1, 1, 2]
    assert (
        chat[0]["num_spec_steps"],
        chat[0]["num_accepted_draft_tokens"],
        chat[0]["num_draft_tokens"],
    ) == (7, 9, 21)
    assert chat[0]["mean_acceptance_length"] == 2.2857142857142856
    assert chat[0]["draft_acceptance_rate"] == 0.42857142857142855
    # the tiny model is deterministic: streaming and non-streaming give the same numbers
    for name in ("chat", "completions"):
        stream = [
            c["responses"][-1]["metrics"]["speculative_decoding"]
            for c in captures(f"{level}_{name}_stream")
        ]
        plain = [
            c["responses"][0]["metrics"]["speculative_decoding"]
            for c in captures(f"{level}_{name}_nonstream")
        ]
        for s, p in zip(stream, plain):
            assert {k: v for k, v in s.items()} == {k: v for k, v in p.items() if v is not None}


def run_report(files: list[str], tmp_path: Path) -> dict:
    combined = tmp_path / "combined.jsonl"
    combined.write_text("".join((FIXTURES / f"{f}.jsonl").read_text() for f in files))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "specmon",
            "report",
            "--input",
            str(combined),
            "--artifact-dir",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((tmp_path / "out" / "profile_export_aiperf.json").read_text())


@pytest.mark.e2e
@pytest.mark.parametrize("level", LEVELS)
def test_report_on_chat_captures_matches_hand_computation(level, tmp_path):
    summary = run_report([f"{level}_chat_nonstream"], tmp_path)
    # prompt 0: [3,1,1,2] s7 a9 d21; prompt 1: [1,4,2,2] s9 a14 d19
    assert summary["total_spec_decode_steps"]["avg"] == 16  # 7 + 9
    assert summary["total_accepted_draft_tokens"]["avg"] == 23  # 9 + 14
    assert summary["total_draft_tokens"]["avg"] == 40  # 21 + 19
    assert summary["pooled_spec_decode_acceptance_histogram"] == {"0": 4, "1": 5, "2": 3, "3": 4}
    assert summary["spec_decode_token_weighted_acceptance_length"]["avg"] == pytest.approx(
        1 + 23 / 16
    )  # 2.4375
    assert summary["spec_decode_overall_draft_acceptance_rate"]["avg"] == pytest.approx(
        100 * 23 / 40
    )  # 57.5
    al = summary["spec_decode_acceptance_length"]
    # mean of 1 + 9/7 and 1 + 14/9 = (16/7 + 23/9) / 2 = 305/126
    assert al["count"] == 2 and al["avg"] == pytest.approx(305 / 126, rel=1e-12)
    assert (al["min"], al["max"]) == (pytest.approx(16 / 7), pytest.approx(23 / 9))
    # accepted per verified: (s + a) / (s + d) = 16/28 and 23/28, mean 39/56
    assert summary["spec_decode_accepted_per_verified"]["avg"] == pytest.approx(39 / 56, rel=1e-12)


@pytest.mark.e2e
@pytest.mark.parametrize("level", LEVELS)
def test_report_on_every_capture_of_a_level(level, tmp_path):
    names = [f for f in all_files() if f.startswith(level)]
    summary = run_report(names, tmp_path)
    # records with steps: chat [3,1,1,2] [1,4,2,2], completions [0,0,2,5] [1,6,0,4], each
    # captured streaming and not -> steps 2*(16+18) = 68, accepted 2*(23+37) = 120,
    # drafted 2*(40+40) = 160; zero-step: max_tokens1 x2 + temperature 0.8 = 3;
    # n=2 (x2), prompt list and include_usage false carry no payload -> no record.
    assert summary["total_spec_decode_steps"]["avg"] == 68
    assert summary["total_accepted_draft_tokens"]["avg"] == 120
    assert summary["total_draft_tokens"]["avg"] == 160
    # pooled: 2 * ({0:4,1:5,2:3,3:4} + {0:1,1:6,2:2,3:9}) = {0:10,1:22,2:10,3:26}
    assert summary["pooled_spec_decode_acceptance_histogram"] == {
        "0": 10,
        "1": 22,
        "2": 10,
        "3": 26,
    }
    assert summary["spec_decode_zero_step_requests"]["avg"] == 3
    assert summary["spec_decode_acceptance_length"]["count"] == 8
    assert summary["spec_decode_token_weighted_acceptance_length"]["avg"] == pytest.approx(
        1 + 120 / 68
    )
    assert summary["spec_decode_overall_draft_acceptance_rate"]["avg"] == pytest.approx(75.0)
