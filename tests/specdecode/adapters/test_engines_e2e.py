"""Issue 6's end-to-end check: `specmon --headless` against `specmon sim` in each engine's
shape (TensorRT-LLM, SGLang, vLLM's per-choice shape), streaming and not. The console shows
the Spec Decode section, the trace names the right engine, and every number equals a hand
computation from the simulator's ground-truth log (what it actually sent)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

# shape -> the exported `engine` (AIPerf's name: tensorrt_llm)
ENGINES = {"trtllm": "tensorrt_llm", "sglang": "sglang", "vllm-legacy": "vllm"}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("streaming", [False, True], ids=["nonstream", "stream"])
@pytest.mark.parametrize("shape", list(ENGINES))
def test_headless_run_over_each_engine_shape(tmp_path, shape, streaming, sims):
    log, out = tmp_path / "sim.jsonl", tmp_path / "run"
    sim = sims(
        [
            "--shape",
            shape,
            "--num-spec-tokens",
            "4",
            "--seed",
            "9",
            "--acceptance",
            "0.8,0.7,0.6,0.5",
            "--log",
            str(log),
        ]
    )
    # SGLang is detected from the server (its /server_info), not named by a flag
    cmd = [
        sys.executable,
        "-m",
        "specmon",
        "--url",
        sim.url,
        "--headless",
        "--request-count",
        "12",
        "--concurrency",
        "3",
        "--output-tokens-mean",
        "24",
        "--random-seed",
        "2",
        "--artifact-dir",
        str(out),
    ]
    proc = subprocess.run(
        cmd + (["--streaming"] if streaming else ["--no-streaming"]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "LLM Metrics: Spec Decode" in proc.stdout
    assert "Accepted drafts per step (% of steps):" in proc.stdout

    sent = {e["x_request_id"]: e["stats"][0] for e in _jsonl(log)}
    records = _jsonl(out / "profile_export.jsonl")
    assert len(records) == len(sent) == 12
    steps = accepted = drafted = 0
    pooled: dict[str, int] = {}
    for rec in records:
        truth = sent[rec["metadata"]["x_request_id"]]
        spec = rec["spec_decode_acceptance"]
        assert spec["engine"] == ENGINES[shape]
        assert (
            spec["num_spec_steps"],
            spec["num_accepted_draft_tokens"],
            spec["num_draft_tokens"],
        ) == (truth["steps"], truth["accepted"], truth["drafted"])
        assert spec["acceptance_histogram"] == {
            str(j): n for j, n in enumerate(truth["histogram"]) if n
        }
        if shape != "vllm-legacy":  # TRT-LLM and SGLang: derived from the counts, 1 + a/s
            assert spec["mean_acceptance_length"] == 1 + truth["accepted"] / truth["steps"]
        assert truth["steps"] > 0  # 24 tokens always leave verify steps, so nothing is dropped
        steps, accepted, drafted = (
            steps + truth["steps"],
            accepted + truth["accepted"],
            drafted + truth["drafted"],
        )
        for j, n in enumerate(truth["histogram"]):
            if n:
                pooled[str(j)] = pooled.get(str(j), 0) + n

    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    assert doc["total_spec_decode_steps"]["avg"] == steps
    assert doc["total_accepted_draft_tokens"]["avg"] == accepted
    assert doc["total_draft_tokens"]["avg"] == drafted
    assert doc["pooled_spec_decode_acceptance_histogram"] == pooled
    assert doc["spec_decode_token_weighted_acceptance_length"]["avg"] == pytest.approx(
        1 + accepted / steps, rel=1e-12
    )
    assert doc["spec_decode_overall_draft_acceptance_rate"]["avg"] == pytest.approx(
        100 * accepted / drafted, rel=1e-12
    )
