"""Per-category acceptance end to end: `specmon sim` with a different acceptance per
SpecBench category, `specmon --headless --dataset spec_bench` over the real 480 questions;
each category's acceptance length (JSON, CSV, tune, the monitor's panel) matches the one
the simulator was configured with, computed here from the probabilities and the output
length by formula."""

from __future__ import annotations

import asyncio
import csv
import json
from pathlib import Path

import pytest
from sources.datasets.test_datasets import spec_bench_file
from support.cli import specmon

from specmon.export.jsonl_export import result_from_record
from specmon.session import RunSession
from specmon.sim.process import start_sim
from specmon.tui.app import SpecmonApp
from specmon.tui.widgets.categories import CategoriesView

pytestmark = pytest.mark.e2e

K = 3
OUTPUT_TOKENS = 256  # spec_bench's default, sent with ignore_eos: every answer is this long
CONFIGURED = {
    "translation": 0.9,
    "summarization": 0.5,
    "qa": 0.7,
    "math_reasoning": 0.8,
    "rag": 0.6,
}
DEFAULT_P = 0.3  # MT-Bench's categories in the same file
SPEC_BENCH_COUNTS = {name: 80 for name in CONFIGURED}


def expected_acceptance_length(p: float, length: int = OUTPUT_TOKENS, k: int = K) -> float:
    """1 + E[accepted] / E[steps] of one answer of `length` tokens, by the simulator's rule
    (docs: sim/model.py's module docstring): the prefill gives token 1; then each verify
    step drafts d = min(k, remaining - 1) tokens, accepts position i with probability p while
    the previous ones were accepted, and emits accepted + 1; a step with d = 0 is not a spec
    step. Over many requests the token-weighted AL (sum accepted / sum steps) converges to
    the ratio of these expectations."""

    # E[steps], E[accepted] from here with `remaining` tokens still to emit, bottom up
    steps_from, accepted_from = [0.0, 0.0], [0.0, 0.0]  # 0 left: done; 1 left: non-spec
    for remaining in range(2, length):
        drafted = min(k, remaining - 1)
        steps, accepted = 1.0, 0.0
        for j in range(drafted + 1):  # j drafts accepted, then a rejection (or all drafted)
            prob = p**j * ((1 - p) if j < drafted else 1.0)
            steps += prob * steps_from[remaining - j - 1]
            accepted += prob * (j + accepted_from[remaining - j - 1])
        steps_from.append(steps)
        accepted_from.append(accepted)
    steps, accepted = steps_from[length - 1], accepted_from[length - 1]
    return 1.0 + accepted / steps


def test_the_formula_on_cases_worked_by_hand():
    # 3 tokens: prefill, then remaining 2 -> one step drafting 1: E[acc] = p, one step
    assert expected_acceptance_length(0.5, length=3) == pytest.approx(1.5)
    # untruncated limit: 1 + p + p^2 + p^3 (long answers)
    assert expected_acceptance_length(0.9, length=100_000) == pytest.approx(
        1 + 0.9 + 0.81 + 0.729, abs=1e-3
    )


@pytest.fixture(scope="module")
def spec_bench_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cat") / "run"
    accept = ",".join(f"{name}={p}" for name, p in CONFIGURED.items())
    sim_args = ["--ttft-ms", "0", "--step-ms", "0", "--draft-ms-per-token", "0", "--seed", "3"]
    sim_args += ["--num-spec-tokens", str(K), "--acceptance", str(DEFAULT_P)]
    with start_sim([*sim_args, "--category-acceptance", accept]) as sim:
        proc = specmon(
            "--url", sim.url, "--headless", "--dataset", "spec_bench", "--input-file",
            str(spec_bench_file()), "--request-count", "480", "--concurrency", "16",
            "--artifact-dir", str(out), timeout=300,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out


def _per_category(out: Path) -> dict:
    return json.loads((out / "profile_export_aiperf.json").read_text())["per_category"]


def test_json_per_category_matches_the_configured_acceptance(spec_bench_run):
    per_category = _per_category(spec_bench_run)
    assert {name: per_category[name]["request_count"]["avg"] for name in CONFIGURED} == (
        SPEC_BENCH_COUNTS
    )
    assert len(per_category) == 13 and "(none)" not in per_category  # 5 + MT-Bench's 8
    for name, p in {**CONFIGURED, "writing": DEFAULT_P, "coding": DEFAULT_P}.items():
        block = per_category[name]
        expected = expected_acceptance_length(p)
        al = block["spec_decode_token_weighted_acceptance_length"]["avg"]
        ci = block["spec_decode_acceptance_length_ci95"]
        assert ci["low"] <= expected <= ci["high"], (name, expected, al, ci)
        assert ci["low"] < al < ci["high"]
        # the interval is informative: narrower than the gap between neighbouring settings
        assert ci["high"] - ci["low"] < 0.2
        hist = {int(j): n for j, n in block["pooled_spec_decode_acceptance_histogram"].items()}
        steps = block["total_spec_decode_steps"]["avg"]
        accepted = block["total_accepted_draft_tokens"]["avg"]
        assert sum(hist.values()) == steps and sum(j * n for j, n in hist.items()) == accepted
        assert al == pytest.approx(1 + accepted / steps)
        # every answer has 256 tokens: output = requests * 256
        assert block["total_output_tokens"]["avg"] == block["request_count"]["avg"] * 256


def test_categories_add_up_to_the_run(spec_bench_run):
    doc = json.loads((spec_bench_run / "profile_export_aiperf.json").read_text())
    per_category = doc["per_category"]
    for tag in ("request_count", "total_spec_decode_steps", "total_accepted_draft_tokens"):
        assert sum(b[tag]["avg"] for b in per_category.values()) == doc[tag]["avg"]
    pooled = {int(j): n for j, n in doc["pooled_spec_decode_acceptance_histogram"].items()}
    summed: dict[int, int] = {}
    for block in per_category.values():
        for j, n in block["pooled_spec_decode_acceptance_histogram"].items():
            summed[int(j)] = summed.get(int(j), 0) + n
    assert summed == pooled


def test_csv_per_category_section(spec_bench_run):
    text = (spec_bench_run / "profile_export_aiperf.csv").read_text()
    rows = list(csv.reader(text.splitlines()))
    header = rows.index(["Category", "Metric", "Value"])
    values = {(r[0], r[1]): r[2] for r in rows[header + 1 :] if r}
    per_category = _per_category(spec_bench_run)
    for name in CONFIGURED:
        al = per_category[name]["spec_decode_token_weighted_acceptance_length"]["avg"]
        assert values[(name, "Token-Weighted Acceptance Length (ratio)")] == f"{al:.2f}"
        assert values[(name, "Request Count")] == "80.00"
    assert any(r[:2] == ["Category", "Metric"] and "p50" in r for r in rows)


def test_tune_by_category_gives_each_categorys_acceptance(spec_bench_run):
    proc = specmon("tune", "--by-category", "--json", str(spec_bench_run), timeout=120)
    assert proc.returncode == 0, proc.stderr
    reports = {r["label"].split(" · ")[1]: r for r in json.loads(proc.stdout)}
    assert set(CONFIGURED) <= set(reports)
    for name, p in CONFIGURED.items():
        # a_1 is a binomial proportion of steps: the configured p is inside its interval
        pos1 = reports[name]["positions"][0]
        low, high = pos1["conditional_ci95"]
        assert low <= p <= high, (name, pos1)


def test_monitor_panel_shows_the_same_per_category_figures(spec_bench_run):
    lines = (spec_bench_run / "profile_export.jsonl").read_text().splitlines()
    results = [result_from_record(json.loads(line)) for line in lines]
    session = RunSession.from_results(results)
    per_category = _per_category(spec_bench_run)

    async def check() -> None:
        app = SpecmonApp(session, source="replay", freeze_elapsed=1.0)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("9")
            await pilot.pause()
            view = app.query_one(CategoriesView)
            assert app.screen.maximized is not None
            rows = {r.category: r for r in view.rows}
            for name, p in CONFIGURED.items():
                row = rows[name]
                assert row.requests == 80
                al = per_category[name]["spec_decode_token_weighted_acceptance_length"]["avg"]
                assert row.acceptance_length == pytest.approx(al)
                low, high = row.acceptance_length_ci95
                assert low <= expected_acceptance_length(p) <= high
            await pilot.press("c", "c")  # category -> requests -> acceptance length
            await pilot.pause()
            assert view.sort_column == "acceptance_length"
            order = [r.category for r in view.rows][:5]
            assert order == sorted(CONFIGURED, key=CONFIGURED.get, reverse=True)
            screen = app.export_screenshot()  # what the terminal shows
            for name in CONFIGURED:
                assert name in screen and f"{rows[name].acceptance_length:.2f}" in screen

    asyncio.run(check())
