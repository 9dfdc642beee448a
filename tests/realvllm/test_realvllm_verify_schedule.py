"""`specmon sweep --verify-schedule` on a real vLLM 0.32 (issue 17 item 9c): with the draft
model equal to the target at temperature 0, a small sweep (k = 1, 3; concurrency 1 and 4)
writes a schedule, restarts vLLM with it as `num_speculative_tokens_per_batch_size` in the
--speculative-config, vLLM accepts it (the server starts and serves) and the "schedule" arm is
measured at every concurrency. No k=0 baseline: with every draft accepted the schedule could
then be k=0 everywhere, which the sweep rightly does not measure as an arm, and the test is
about vLLM taking the schedule. Three server starts.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from sweep_fakes import sweep_argv

from realvllm.server import MODEL_DIR, server_env, sweep_templates, vllm_schedule_verdicts

pytestmark = [pytest.mark.realvllm, pytest.mark.xdist_group("realvllm")]

CONCURRENCY = (1, 4)


def test_verify_schedule_restarts_vllm_with_the_schedule(realvllm_ready, tmp_path):
    serve, _ = sweep_templates({"method": "draft_model", "model": str(MODEL_DIR)})
    args = ["--serve", serve, "--num-spec-tokens", "1,3", "--concurrency", "1,4"]
    args += ["--repeats", "3", "--segment-requests", "6", "--warmup-request-count", "2"]
    args += ["--output-tokens-mean", "32", "--model", "tiny", "--random-seed", "3"]
    args += ["--extra-inputs", '{"temperature": 0}', "--ready-timeout", "600"]
    args += ["--artifact-dir", str(tmp_path), "--stop-on-error", "--verify-schedule"]
    proc = subprocess.run(
        sweep_argv(args), capture_output=True, text=True, timeout=2400, env=server_env()
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    ranges = json.loads((tmp_path / "speculative_k_schedule.json").read_text())[
        "num_speculative_tokens_per_batch_size"
    ]
    assert vllm_schedule_verdicts([ranges]) == [None]
    # the arm's server was started with that schedule in its --speculative-config
    logs = [p for p in tmp_path.glob("server-*.log") if "schedule" in p.name]
    assert logs, sorted(p.name for p in tmp_path.iterdir())
    assert json.dumps(ranges) in logs[0].read_text(errors="replace")
    doc = json.loads((tmp_path / "sweep.json").read_text())
    arms = {a["name"]: a for a in doc["arms"]}
    points = arms["schedule"]["points"]
    assert [p["concurrency"] for p in points] == list(CONCURRENCY)
    assert all(p["output_token_throughput"] > 0 for p in points), points
    print("schedule", ranges, "arm", points)
