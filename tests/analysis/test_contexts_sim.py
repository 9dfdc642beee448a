"""A run with mixed prompt lengths shows and exports acceptance per context bucket, end to
end: `specmon sim` whose acceptance falls with the prompt (a = 0.9 * 2^(-prompt / 2000),
docs/simulator.md "Context effect") answers `specmon --headless` over 200- and 6000-token
prompts; each bucket's draft acceptance in `per_context_length` is the formula's."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from specmon.sim.process import start_sim

pytestmark = pytest.mark.e2e

A0, HALFLIFE, OUTPUT = 0.9, 2000, 64
# the simulator counts four characters a token: "abcd" * n is n tokens
PROMPTS = {"<1k": 200, "4-16k": 6000}  # about 264 and 6064 at the end (+ the role)


def test_mixed_prompt_lengths_get_their_own_acceptance(tmp_path: Path) -> None:
    rows = [
        {"text": "abcd" * tokens, "max_tokens": OUTPUT}
        for _ in range(20)
        for tokens in PROMPTS.values()
    ]
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    sim_args = ["--preset", "zero", "--seed", "4", "--num-spec-tokens", "1"]
    sim_args += ["--acceptance", str(A0), "--acceptance-context-halflife", str(HALFLIFE)]
    with start_sim(sim_args) as sim:
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "specmon", "--url", sim.url, "--headless"),
                *("--prompt-source", "file", "--input-file", str(prompts)),
                *("--request-count", "40", "--concurrency", "4", "--artifact-dir", str(out)),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    per = doc["per_context_length"]
    assert list(per) == list(PROMPTS)
    for bucket, tokens in PROMPTS.items():
        block = per[bucket]
        assert block["request_count"]["avg"] == 20
        expected = A0 * 2 ** (-tokens / HALFLIFE)  # k = 1: the rate is a itself
        drafted = block["total_draft_tokens"]["avg"]
        rate = block["spec_decode_overall_draft_acceptance_rate"]["avg"] / 100
        se = math.sqrt(expected * (1 - expected) / drafted)
        assert abs(rate - expected) < 4.5 * se, (bucket, rate, expected, drafted)
        ci = block["spec_decode_draft_acceptance_rate_ci95"]
        assert ci["low"] < rate < ci["high"] and ci["high"] - ci["low"] < 0.2
        assert [p["position"] for p in block["spec_decode_acceptance_by_position"]] == [1]
    records = [json.loads(line) for line in (out / "profile_export.jsonl").read_text().splitlines()]
    for record in records:  # the context at the end: the usage's prompt plus output tokens
        metrics = record["metrics"]
        prompt = metrics["input_sequence_length"]["value"]
        assert metrics["output_sequence_length"]["value"] == OUTPUT
        assert record["metadata"]["context_tokens"] == prompt + OUTPUT
        assert min(abs(prompt - tokens) for tokens in PROMPTS.values()) <= 2  # + the role
