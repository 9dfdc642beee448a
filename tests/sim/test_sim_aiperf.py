"""AIPerf 0.13 against `specmon sim` (streaming chat): it must print its Spec Decode section
and keep one record per request equal to the simulator's logged payload (it silently drops a
request whose payload arrives twice, so this also proves the payload is sent exactly once).

Needs the cached AIPerf venv and offline tokenizer that reference/aiperf-peer.md describes.
"""

from __future__ import annotations

import os
import subprocess

import orjson
import pytest
from peer.aiperf_peer import AIPERF, HF_HOME, TOKENIZER

from specmon.sim.process import start_sim

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("aiperf")]


def test_aiperf_sees_every_payload_once(tmp_path, aiperf_ready):
    log = tmp_path / "sim.jsonl"
    with start_sim(["--seed", "4", "--log", str(log), "--model", "peer-specdec"]) as sim:
        command = [
            str(AIPERF),
            "profile",
            "--model",
            "peer-specdec",
            "--tokenizer",
            TOKENIZER,
            "--url",
            sim.url,
            "--endpoint-type",
            "chat",
            "--streaming",
            "--concurrency",
            "2",
            "--request-count",
            "12",
            "--isl",
            "32",
            "--osl",
            "24",
            "--extra-inputs",
            "ignore_eos:true",
            "--random-seed",
            "1",
            "--export-level",
            "records",
            "--artifact-dir",
            str(tmp_path / "aiperf"),
            "--ui-type",
            "none",
            "--no-gpu-telemetry",
        ]
        env = dict(os.environ, HF_HOME=str(HF_HOME), HF_HUB_OFFLINE="1")
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "LLM Metrics: Spec Decode" in result.stdout
    truth = {e["x_request_id"]: e for e in map(orjson.loads, log.read_bytes().splitlines())}
    records = [
        orjson.loads(line)
        for line in next((tmp_path / "aiperf").rglob("profile_export.jsonl"))
        .read_bytes()
        .splitlines()
    ]
    assert len(records) == len(truth) == 12
    for record in records:
        sent = truth[record["metadata"]["x_request_id"]]["payload"]
        seen = record["spec_decode_acceptance"]  # absent if AIPerf dropped the payload
        assert seen["num_spec_steps"] == sent["num_spec_steps"]
        assert seen["num_accepted_draft_tokens"] == sent["num_accepted_draft_tokens"]
        assert seen["num_draft_tokens"] == sent["num_draft_tokens"]
        assert seen["mean_acceptance_length"] == sent["mean_acceptance_length"]
        dense = sent["acceptance_histogram"]
        assert seen["acceptance_histogram"] == {str(j): h for j, h in enumerate(dense) if h}
        assert seen["per_step_accepted"] == sent["per_step_accepted"]
