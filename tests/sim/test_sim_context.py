"""The simulator's context effect (docs/simulator.md "Context effect"): acceptance
a_i * 2^(-prompt tokens / halflife) and a step cost of kv_ms_per_ktoken per 1000 context
tokens held by the running batch, both off by default. Real HTTP against `specmon sim`;
expected values from the formulas, worked out here."""

from __future__ import annotations

import math

import httpx
import pytest

from specmon.sim.config import SimConfig
from specmon.sim.model import LatencyModel, context_acceptance
from specmon.sim.process import start_sim
from tests.sim.test_sim_engine import scrape

pytestmark = pytest.mark.e2e


def completion(url: str, prompt_tokens: int, max_tokens: int) -> dict:
    """One non-streamed completion whose prompt the simulator counts as `prompt_tokens`
    (its estimate: four characters a token)."""
    body = {
        "model": "specmon-sim",
        "prompt": "abcd" * prompt_tokens,
        "max_tokens": max_tokens,
        "ignore_eos": True,
    }
    answer = httpx.post(url + "/v1/completions", json=body, timeout=60).json()
    assert answer["usage"]["prompt_tokens"] == prompt_tokens
    return answer


def test_context_acceptance_formula_by_hand() -> None:
    # 2^(-1000/1000) = 0.5; 2^(-500/1000) = 0.7071...; halflife 0 or no prompt: unchanged
    assert context_acceptance([0.8, 0.6], 1000, 1000.0) == pytest.approx([0.4, 0.3])
    assert context_acceptance([0.8], 500, 1000.0) == pytest.approx([0.8 * 0.70710678])
    assert context_acceptance([0.8], 5000, 0.0) == [0.8]
    assert context_acceptance([0.8], 0, 1000.0) == [0.8]
    model = LatencyModel(step_ms=2.0, kv_ms_per_ktoken=0.5)
    # 2 ms + 0.5 ms * 3 (thousand tokens held) = 3.5 ms
    assert model.step_ms_at(0, 1, 3000) == pytest.approx(3.5)
    # four requests of 1500 tokens hold 6000: 2 + 3 = 5 ms; 4 * E(0) = 4 tokens a step
    assert model.tokens_per_second([], 0, 4, 1500) == pytest.approx(4 * 1000 / 5.0)


def test_context_effect_is_off_by_default() -> None:
    cfg = SimConfig()
    assert cfg.acceptance_context_halflife == 0 and cfg.kv_ms_per_ktoken == 0
    assert cfg.acceptance_for(None, 100_000) == cfg.acceptance


def test_acceptance_falls_with_the_prompt_as_the_formula_says() -> None:
    """k = 1, a = 0.9, halflife 1000: a 1000-token prompt accepts 0.45, a 3000-token one
    0.1125 of its drafts. 12 requests x 199 drafts a length: the binomial's standard error
    is under 0.011, so 0.04 is about 4 of them."""
    args = ["--preset", "zero", "--seed", "3", "--num-spec-tokens", "1", "--acceptance", "0.9"]
    with start_sim([*args, "--acceptance-context-halflife", "1000"]) as sim:
        for prompt, expected in ((1000, 0.45), (3000, 0.9 * 2**-3)):
            accepted = drafted = 0
            for _ in range(12):
                spec = completion(sim.url, prompt, 200)["metrics"]["speculative_decoding"]
                accepted += spec["num_accepted_draft_tokens"]
                drafted += spec["num_draft_tokens"]
            se = math.sqrt(expected * (1 - expected) / drafted)
            assert abs(accepted / drafted - expected) < max(0.04, 4 * se), (prompt, accepted)


def test_step_cost_grows_with_the_context_held() -> None:
    """k = 0, one request at a time: decode step j (1..L-1) holds the prompt P, the prefill
    token and the j tokens claimed so far, so the steps' formula time is
    sum_j (step_ms + kv * (P + 1 + j) / 1000) = (L-1) * (step_ms + kv * (P + 1) / 1000)
    + kv * (L-1) * L / 2 / 1000."""
    step_ms, kv, prompt, length = 1.0, 2.0, 2000, 20
    args = ["--seed", "1", "--num-spec-tokens", "0", "--latency-model", "linear"]
    with start_sim([*args, "--step-ms", str(step_ms), "--kv-ms-per-ktoken", str(kv)]) as sim:
        completion(sim.url, prompt, length)
        metrics = scrape(sim.url)
    steps = length - 1
    expected_ms = steps * (step_ms + kv * (prompt + 1) / 1000) + kv * steps * length / 2 / 1000
    assert metrics["specmon_sim_steps_total"] == steps
    formula_ms = metrics["specmon_sim_step_formula_seconds_total"] * 1000
    assert formula_ms == pytest.approx(expected_ms, rel=1e-6)  # 19 steps of 5.0-5.04 ms
