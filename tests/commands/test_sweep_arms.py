"""`specmon sweep --verify-schedule --variant` against real `specmon sim` processes: the arms
are measured at every concurrency and reported against the best fixed k and k=0."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from tests.commands.test_sweep_run import (
    cells_of,
    load_flags,
    new_marker,
    processes_with,
    read_doc,
    run_sweep,
    sim_template,
)

SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"


def _scheduled_k(schedule: dict, concurrency: int) -> int:
    """The largest k the schedule file gives any batch of 1..`concurrency` requests ([lo,
    hi, k] rows, inclusive): a batch at concurrency 2 is sometimes a single request."""
    return max(k for lo, _hi, k in schedule[SCHEDULE_KEY] if lo <= concurrency)


def _median_tput(cell: dict) -> float:
    return statistics.median(r["output_token_throughput"] for r in cell["repeats"])


def _healthy_best(doc: dict, c: int) -> tuple[int | None, float | None]:
    """The best fixed k at c by hand: the highest median among the cells no gate excluded."""
    decision = next(d for d in doc["decisions"] if d["concurrency"] == c)
    gated = {int(k) for k, reasons in decision["excluded"].items() if reasons}
    medians = {k: _median_tput(cell) for (k, cc), cell in cells_of(doc).items() if cc == c}
    healthy = [k for k in medians if k not in gated]
    if not healthy:  # a busy machine may gate every fixed k: then there is no best
        return None, None
    k = max(healthy, key=lambda k: (medians[k], -k))
    return k, medians[k]


# steps of 10 ms and acceptance 0.9: k=2 wins over k=0 by far, so the schedule has a k to
# run unless a busy machine trips every gate (lagging server, unstable repeats): then the
# sweep must say it did not measure the schedule, which the test checks instead
STEP = "--step-ms 1 "


def templates(marker: str) -> tuple[str, str, str]:
    """(--serve, --baseline-serve, the variant: the same simulator drafting 1 token)."""
    serve = sim_template(marker).replace(STEP, "--step-ms 10 ").replace("0.7", "0.9")
    baseline = serve.replace("--num-spec-tokens {k}", "--num-spec-tokens 0")
    return serve, baseline, serve.replace("--num-spec-tokens {k}", "--num-spec-tokens 1")


@pytest.mark.e2e
def test_schedule_and_variant_arms_are_measured_and_compared(tmp_path: Path) -> None:
    marker = new_marker()
    serve, baseline, variant = templates(marker)
    assert STEP in sim_template(marker) and "--acceptance 0.9" in serve
    args = ["--serve", serve, "--baseline-serve", baseline]
    args += ["--num-spec-tokens", "2", "--concurrency", "1,2", "--repeats", "3"]
    args += ["--verify-schedule", "--variant", f"k1={variant}", "--artifact-dir", str(tmp_path)]
    proc = run_sweep(args + load_flags())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = read_doc(tmp_path)
    path = tmp_path / "speculative_k_schedule.json"  # none when no concurrency selected a k
    schedule = json.loads(path.read_text()) if path.exists() else None
    ran = schedule is not None and max(e[2] for e in schedule[SCHEDULE_KEY]) > 0
    names = ["schedule", "k1"] if ran else ["k1"]
    if not ran:  # k=0 everywhere, or no schedule: the sweep says why it measured none
        assert "specmon sweep: arm schedule not measured: " in proc.stdout
    heads = [line.split(":")[0] for line in proc.stdout.splitlines() if line.startswith("cell ")]
    assert heads[4:] == [f"cell arm {n} concurrency={c}" for n in names for c in (1, 2)]
    assert sorted(cells_of(doc)) == [(0, 1), (0, 2), (2, 1), (2, 2)]  # arms are not k cells
    arm_cells = {(a["arm"], a["concurrency"]): a for a in doc["arm_cells"]}
    assert sorted(arm_cells) == sorted((n, c) for n in names for c in (1, 2))
    for (name, c), cell in arm_cells.items():
        assert cell["error"] is None and len(cell["repeats"]) == 3
        # the variant drafts 1 token; the schedule arm drafts what the schedule gives this
        # concurrency (never above k=2, the only k measured; k=0 drafts nothing: no steps)
        top = 1 if name == "k1" else _scheduled_k(schedule, c)
        assert top <= 2
        for r in cell["repeats"]:
            assert max(map(int, r["histogram"]), default=0) <= top
            if top == 0:
                assert not r["histogram"]
        assert (tmp_path / f"arm-{name}" / f"c{c}" / "r3" / "profile_export.jsonl").exists()
    if ran:  # the schedule arm's server got the schedule file the sweep wrote
        log = (tmp_path / "server-arm-schedule.log").read_text().splitlines()[0]
        assert "--spec-schedule" in log and "speculative_k_schedule.json" in log
        assert "--num-spec-tokens 2" in log  # the schedule's largest K
    assert [a["name"] for a in doc["arms"]] == names
    for arm in doc["arms"]:
        assert [p["concurrency"] for p in arm["points"]] == [1, 2]
        for point in arm["points"]:
            c = point["concurrency"]
            median = _median_tput(arm_cells[(arm["name"], c)])
            best_k, best = _healthy_best(doc, c)
            k0 = _median_tput(cells_of(doc)[(0, c)])
            assert point["output_token_throughput"] == pytest.approx(median)
            assert point["best_k"] == best_k
            if best is None:
                assert point["vs_best_k_percent"] is None
            else:
                assert point["vs_best_k_percent"] == pytest.approx((median / best - 1) * 100)
            decision = next(d for d in doc["decisions"] if d["concurrency"] == c)
            if decision["excluded"].get("0"):  # no speedup over a gated baseline
                assert point["vs_k0_percent"] is None
            else:
                assert point["vs_k0_percent"] == pytest.approx((median / k0 - 1) * 100)
    assert "arms (median output tok/s" in proc.stdout
    assert f"{names[0]}: vs the best fixed k " in proc.stdout
    assert processes_with(f"--seed {marker}") == []  # every server, the arms' too, stopped
