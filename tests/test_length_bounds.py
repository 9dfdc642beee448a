"""Issue 35 item 4: prompt and output lengths have a documented maximum (config.MAX_TOKENS,
2^20) checked when the options are read (one line, status 2), and a sampled length never
passes it whatever the stddev."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from specmon.config import MAX_TOKENS
from specmon.sources.load.datasets import sample_length


@pytest.mark.e2e
@pytest.mark.parametrize("flag", ["--synthetic-input-tokens-mean", "--output-tokens-mean"])
def test_a_length_past_the_maximum_is_one_line_and_status_2(flag):
    proc = subprocess.run(
        [sys.executable, "-m", "specmon", "run", "--headless", "--url", "http://127.0.0.1:9",
         flag, "1000000000"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "less than or equal to 1048576" in proc.stderr


def test_a_sampled_length_stays_within_1_and_the_maximum():
    assert MAX_TOKENS == 2**20
    rng = random.Random(1)
    draws = [sample_length(rng, 1000, 1e9) for _ in range(200)]
    assert max(draws) == MAX_TOKENS and min(draws) == 1  # a 1e9 stddev hits both bounds


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("prompts", "source"),
    [([], "builtin"), (["--prompt-source", "builtin"], "builtin"),
     (["--input-file", "p.jsonl"], "file")],
)  # fmt: skip
def test_a_synthetic_length_for_prompts_that_are_not_synthetic_is_refused(prompts, source):
    # the builtin prompts are 10-50 tokens: a 4,000-token mean given beside them was
    # ignored without a word (a run "at 4,000 tokens" measured 20-token prompts)
    proc = subprocess.run(
        [sys.executable, "-m", "specmon", "run", "--headless", "--url", "http://127.0.0.1:9",
         "--synthetic-input-tokens-mean", "4000", *prompts],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert f"these prompts ({source}) keep their own" in proc.stderr
    assert "drop --synthetic-input-tokens-mean" in proc.stderr


def test_a_synthetic_length_with_synthetic_prompts_or_at_its_default_is_accepted():
    from specmon.config import RunConfig

    url = ["http://127.0.0.1:9"]
    assert RunConfig(url=url, prompt_source="synthetic", synthetic_input_tokens_mean=4000)
    # a config written back whole (a sweep's repeat, a worker) names every field at its
    # default: not a length given by the user
    whole = RunConfig(url=url).model_dump()
    assert RunConfig(**whole).effective_prompt_source == "builtin"
    with pytest.raises(ValueError, match="synthetic-input-tokens-stddev"):
        RunConfig(url=url, synthetic_input_tokens_stddev=5.0)
