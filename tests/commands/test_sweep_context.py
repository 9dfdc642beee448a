"""`specmon sweep --input-tokens` on `specmon sim` with a known context effect: each
prompt length gets its own decision, and it is the k the simulator's formula says is best at
that length (docs/simulator.md "Context effect", docs/tuning.md "k by context length").

The simulator (linear model, written here from its documentation, not from specmon.sim):

    a(c) = 0.95 * 2^(-c / 4096)                       (c: the request's prompt tokens)
    step(k) = 12 + 3 * k + 0.75 * C / 1000 ms         (C: context tokens the batch holds)

At concurrency 1 a request of prompt P holds about P + OUT / 2 tokens on average, so its
throughput is E(k) / step(k) with E(k) = 1 + a + ... + a^k. With k in {1, 4}:
512-token prompts (a = 0.87): k=4 ~158 tok/s against k=1 ~122 (+30 %); 8192-token prompts
(a = 0.24): k=1 ~58 against k=4 ~43 (+35 %). Both gaps are far over the 10 % the issue
asks, so a pick within 3 % of the analytic best's throughput is the analytic best k.

Margin, as tests/commands/test_sweep_accuracy.py's: the sweep excludes a cell whose
simulator ran more than 2 % behind its formula, or whose per-token time the client measured
more than 2 % off it (docs/simulator.md). On this project's 2-core machine at load average
27, 12-27 ms steps ran 2.0 % behind once and a client measured -2.6 % once, so the
analytic best cell of a length was excluded and the other k picked. A miss is counted as
the decision's unless the sweep flagged the analytic best cell so; the test fails when that
happened at every length. (4-9 ms steps were flagged more often: 1.8-2.2 % behind.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specmon.decision.schedule import SCHEDULE_NAME
from specmon.sim.schedule import validate

pytestmark = pytest.mark.e2e

STEP_MS, DRAFT_MS, KV_MS, A0, HALFLIFE = 12.0, 3.0, 0.75, 0.95, 4096
LENGTHS = [512, 8192]
OUTPUT_TOKENS = 16
KS = [1, 4]


def analytic_tps(prompt: float, k: int) -> float:
    a = A0 * 2 ** (-prompt / HALFLIFE)
    tokens = sum(a**i for i in range(k + 1))
    step = STEP_MS + DRAFT_MS * k + KV_MS * (prompt + OUTPUT_TOKENS / 2) / 1000
    return tokens * 1000 / step


def _picks_the_analytic_best(root: Path, length: int, picks: dict[int, int]) -> bool:
    """The length's pick is within 3 % of the analytic best k's throughput (so, with the
    gap over 10 %, it is that k); False only where the sweep excluded the analytic best
    cell by a health gate (the miss is then the machine's, named in sweep.json)."""
    # the prompt the simulator counted (its usage), from the length's own exports
    records = root / f"ctx{length}" / "k1" / "c1" / "r1" / "profile_export.jsonl"
    prompts = [
        json.loads(line)["metrics"]["input_sequence_length"]["value"]
        for line in records.read_text().splitlines()
    ]
    prompt = sum(prompts) / len(prompts)
    # synthetic prompts of L words; the simulator counts four characters a token
    assert length <= prompt < 1.3 * length
    rates = {k: analytic_tps(prompt, k) for k in KS}
    best = max(KS, key=rates.__getitem__)
    other = min(KS, key=rates.__getitem__)
    assert rates[best] >= 1.10 * rates[other]  # the issue's >= 10 % analytic gap
    if rates[picks[length]] >= 0.97 * rates[best]:
        return True
    decision = json.loads((root / f"ctx{length}" / "sweep.json").read_text())["decisions"][0]
    assert str(best) in decision["excluded"], (length, picks, rates, decision["text"])
    return False


def test_sweep_decides_k_per_input_length(tmp_path: Path) -> None:
    sim = (
        "{python} -m specmon sim --port {port} --num-spec-tokens {k} --latency-model linear "
        f"--step-ms {STEP_MS} --draft-ms-per-token {DRAFT_MS} --acceptance {A0} "
        f"--acceptance-context-halflife {HALFLIFE} --kv-ms-per-ktoken {KV_MS} --seed 5"
    )
    argv = [
        *(sys.executable, "-m", "specmon", "sweep", "--serve", sim),
        *("--num-spec-tokens", ",".join(map(str, KS)), "--concurrency", "1"),
        *("--input-tokens", ",".join(map(str, LENGTHS)), "--repeats", "2"),
        *("--segment-requests", "4", "--warmup-request-count", "1"),
        *("--output-tokens-mean", str(OUTPUT_TOKENS), "--artifact-dir", str(tmp_path)),
    ]
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=240,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    doc = json.loads((tmp_path / "sweep.json").read_text())
    assert doc["schema"] == "specmon-sweep-context/1" and doc["input_tokens"] == LENGTHS
    assert doc["context"] == 512  # the median of two lengths: the lower one, a measured one
    picks = {row["input_tokens"]: row["selected_k"] for row in doc["table"]}
    flagged = [
        length for length in LENGTHS if not _picks_the_analytic_best(tmp_path, length, picks)
    ]
    assert len(flagged) < len(LENGTHS), f"every length's best cell was flagged\n{out}"
    if not flagged:
        assert picks == {512: 4, 8192: 1}
        assert doc["k_differs_by_context"] == [
            {"concurrency": 1, "selected_k": {"512": 4, "8192": 1}}
        ]
    # the schedule kept is the --context length's, under vLLM's merged key only
    schedule = json.loads((tmp_path / SCHEDULE_NAME).read_text())
    own = json.loads((tmp_path / "ctx512" / SCHEDULE_NAME).read_text())
    assert schedule == own
    validate(schedule["num_speculative_tokens_per_batch_size"])  # vLLM's rules (sim/schedule.py)
    text = json.dumps(schedule)
    assert "num_speculative_tokens_per_batch_size" in text
    assert "per_seq_len" not in text and "speculative_token_schedule" not in text
    assert "selected k by input length" in proc.stdout and "k=4" in proc.stdout
