"""Issue 21's round trip for each new shape: `specmon sim --shape X` (a real process) ->
`specmon --headless` (adapter -> record -> JSONL, JSON, CSV, console) -> `specmon report`
on the raw capture, each with its fidelity label. Every count is checked against the
simulator's ground-truth log (what it decided to send), summed here by hand."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import specmon

pytestmark = pytest.mark.e2e

# shape -> (engine named in the records, fidelity level, the console's line)
SHAPES = {
    "sglext": ("sglang", "histogram", "histogram and counts: no per-step arrays"),
    "openai-predictions": ("openai", "counts", "counts only: no acceptance length per step"),
    "llamacpp": ("llamacpp", "counts", "counts only: no acceptance length per step"),
}
REQUESTS = 10


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _run(url: str, out: Path, streaming: bool, *extra: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable, "-m", "specmon", "--url", url, "--headless", "--request-count",
        str(REQUESTS), "--concurrency", "2", "--output-tokens-mean", "24",
        "--random-seed", "3", "--export-level", "raw", "--artifact-dir", str(out),
        "--streaming" if streaming else "--no-streaming", *extra,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def _check_exports(out: Path, shape: str, truth: dict[str, dict]) -> None:
    engine, level, _ = SHAPES[shape]
    records = _jsonl(out / "profile_export.jsonl")
    assert len(records) == len(truth) == REQUESTS
    accepted = drafted = steps = 0
    for rec in records:
        sent = truth[rec["metadata"]["x_request_id"]]
        spec = rec["spec_decode_acceptance"]
        assert spec["engine"] == engine and rec["metadata"]["acceptance_fidelity"] == level
        assert (spec["num_accepted_draft_tokens"], spec["num_draft_tokens"]) == (
            sent["accepted"],
            sent["drafted"],
        )
        if level == "counts":  # absent, never invented
            assert "num_spec_steps" not in spec and "acceptance_histogram" not in spec
            assert "mean_acceptance_length" not in spec
            assert "spec_decode_acceptance_length" not in rec["metrics"]
        else:
            assert spec["num_spec_steps"] == sent["steps"]
        accepted, drafted, steps = (
            accepted + sent["accepted"],
            drafted + sent["drafted"],
            steps + sent["steps"],
        )
    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    assert doc["acceptance_fidelity"]["level"] == level
    assert doc["acceptance_fidelity"]["engine"] == engine
    assert doc["acceptance_fidelity"]["requests"] == {level: REQUESTS}
    assert doc["total_accepted_draft_tokens"]["avg"] == accepted
    assert doc["total_draft_tokens"]["avg"] == drafted
    assert doc["spec_decode_overall_draft_acceptance_rate"]["avg"] == pytest.approx(
        100 * accepted / drafted, rel=1e-12
    )
    if level == "counts":
        assert "total_spec_decode_steps" not in doc
        assert "spec_decode_token_weighted_acceptance_length" not in doc
        assert "pooled_spec_decode_acceptance_histogram" not in doc
    else:
        assert doc["spec_decode_token_weighted_acceptance_length"]["avg"] == pytest.approx(
            1 + accepted / steps, rel=1e-12
        )
    with open(out / "profile_export_aiperf.csv", newline="") as f:
        rows = list(csv.reader(f))
    at = rows.index(["Acceptance fidelity", "Engine", "Label"])
    assert rows[at + 1][:2] == [level, engine]


@pytest.mark.parametrize("streaming", [False, True], ids=["nonstream", "stream"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_shape_round_trips_with_its_fidelity_label(tmp_path, shape, streaming, sims):
    log, out = tmp_path / "sim.jsonl", tmp_path / "run"
    args = ["--shape", shape, "--num-spec-tokens", "3", "--seed", "5", "--log", str(log)]
    args += ["--acceptance", "0.8,0.6,0.4"]
    sim = sims(args)
    proc = _run(sim.url, out, streaming)  # SGLang: detected from the server, not named
    assert proc.returncode == 0, proc.stderr[-2000:]
    engine, level, label = SHAPES[shape]
    assert f"Acceptance fidelity ({engine}): {label}" in proc.stdout
    truth = {e["x_request_id"]: e["stats"][0] for e in _jsonl(log)}
    assert all(t["drafted"] > 0 for t in truth.values())  # 24 tokens always draft
    _check_exports(out, shape, truth)

    # the raw capture, read back by `specmon report`, gives the same exports and label
    again = tmp_path / "report"
    report = specmon(
        "report", "--input", str(out / "profile_export_raw.jsonl"), "--artifact-dir", str(again),
        timeout=120,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr[-2000:]
    assert f"Acceptance fidelity ({engine}): {label}" in report.stdout
    _check_exports(again, shape, truth)


def test_sglext_requests_ask_for_the_details_and_follow_sglangs_identities(tmp_path, sims):
    """specmon sets return_spec_tokens_details because the server says it is SGLang; the
    simulator answers only such requests. SGLang's first identity holds on what it sent:
    accept_length = completion_tokens / verify_ct (the prefill token folded in). The second,
    proposed = verify_ct x block size, holds only for full-width steps; the simulator's
    last step drafts only up to max_tokens (the ragged case where it is known to fail), so
    proposed is at most verify_ct x k here."""
    out = tmp_path / "run"
    sim = sims(["--shape", "sglext", "--num-spec-tokens", "3", "--seed", "5"])
    proc = _run(sim.url, out, False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for raw in _jsonl(out / "profile_export_raw.jsonl"):
        assert raw["request"]["return_spec_tokens_details"] is True
        body = raw["responses"][-1]
        details = body["sglext"]["spec_tokens_details"]
        tokens = body["usage"]["completion_tokens"]
        assert details["spec_accept_length"] == pytest.approx(tokens / details["spec_verify_ct"])
        assert details["spec_num_proposed_drafts"] <= 3 * details["spec_verify_ct"]
        assert len(details["spec_correct_drafts_histogram"]) == 3 + 1


def test_engine_flag_restricts_detection_end_to_end(tmp_path, sims):
    """--engine vllm against a llama.cpp-shaped server: no record, and the reason is
    counted per request in the summary (issue 16 item 5)."""
    out = tmp_path / "run"
    sim = sims(["--shape", "llamacpp", "--num-spec-tokens", "3", "--seed", "5"])
    proc = _run(sim.url, out, False, "--engine", "vllm")
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    assert doc["no_record_reasons"] == {"other_engine:llamacpp": REQUESTS}
    assert "total_draft_tokens" not in doc and "acceptance_fidelity" not in doc
    for rec in _jsonl(out / "profile_export.jsonl"):
        assert rec["metadata"]["spec_decode_reason"] == "other_engine:llamacpp"


def test_llamacpp_native_completion_round_trips_through_the_adapter(tmp_path, sims):
    """llama.cpp's own /completion (not the OpenAI endpoint) from `specmon sim --shape
    llamacpp`, over real HTTP; the raw capture is read by `specmon report`."""
    import time
    import urllib.request

    log, raw_path = tmp_path / "sim.jsonl", tmp_path / "raw.jsonl"
    sim_args = ["--shape", "llamacpp", "--num-spec-tokens", "3", "--seed", "5"]
    lines = []
    sim = sims([*sim_args, "--log", str(log)])
    for i in range(3):
        request = {"prompt": f"hi {i}", "n_predict": 20, "ignore_eos": True}
        start = time.perf_counter_ns()
        http = urllib.request.Request(
            sim.url + "/completion",
            json.dumps(request).encode(),
            {"Content-Type": "application/json", "X-Request-Id": f"native-{i}"},
        )
        body = json.loads(urllib.request.urlopen(http, timeout=30).read())
        end = time.perf_counter_ns()
        assert body["stop"] is True and body["tokens_predicted"] == 20
        capture = {"endpoint": "completions", "streaming": False, "request": request}
        capture |= {"status": 200, "responses": [body], "start_ns": start}
        capture |= {"response_ns": [end], "end_ns": end, "x_request_id": f"native-{i}"}
        lines.append(json.dumps(capture))
    raw_path.write_text("\n".join(lines) + "\n")
    truth = {e["x_request_id"]: e["stats"][0] for e in _jsonl(log)}
    out = tmp_path / "report"
    report = subprocess.run(
        [sys.executable, "-m", "specmon", "report", "--input", str(raw_path)]
        + ["--artifact-dir", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr[-2000:]
    assert "Acceptance fidelity (llamacpp): counts only" in report.stdout
    for rec in _jsonl(out / "profile_export.jsonl"):
        spec, sent = rec["spec_decode_acceptance"], truth[rec["metadata"]["x_request_id"]]
        assert (spec["num_accepted_draft_tokens"], spec["num_draft_tokens"]) == (
            sent["accepted"],
            sent["drafted"],
        )
        assert spec["completion_tokens"] == 20 and "num_spec_steps" not in spec
