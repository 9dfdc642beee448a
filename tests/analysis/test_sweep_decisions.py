"""Sweep decisions and the vLLM schedule against hand computation on fixed cell data."""

from __future__ import annotations

import json

import pytest

from specmon.analysis.sweep import (
    build_schedule,
    decide,
    render_sweep_tables,
    summarize,
    validate_schedule,
    write_schedule,
)
from specmon.analysis.sweep_types import Cell, RepeatMeasurement


def cell(k: int, conc: int, *tputs: float) -> Cell:
    return Cell(k, conc, [RepeatMeasurement(t, 1.0, 10) for t in tputs])


def test_median_mad_score_by_hand():
    st = summarize(cell(2, 4, 100.0, 104.0, 90.0))
    # median 100; |dev| = 0, 4, 10 -> MAD 4; rel .04; score 100 - 1.4826*4 = 94.0696
    assert (st.median, st.mad) == (100.0, 4.0)
    assert st.relative_mad == pytest.approx(0.04)
    assert st.score == pytest.approx(94.0696)
    assert not st.unstable and not st.few_repeats


def test_tie_within_one_percent_goes_to_smaller_k_and_percents():
    cells = [
        cell(0, 1, 100, 100, 100),  # score 100
        cell(2, 1, 150, 150, 150),  # score 150
        cell(4, 1, 151, 151, 151),  # score 151: top; 150 >= .99*151 = 149.49 -> k=2 wins
        cell(6, 1, 149, 149, 149),  # 149 < 149.49: not within 1%
    ]
    (d,) = decide(cells)
    assert d.best_k == 4 and d.selected_k == 2
    assert d.selected_vs_best_percent == pytest.approx(100 * (150 / 151 - 1))
    assert d.selected_vs_k0_percent == pytest.approx(50.0)


def test_unstable_cell_is_never_selected_and_missing_baseline():
    cells = [
        cell(2, 8, 200, 200, 200),
        # median 300, |dev| 0, 60, 100 -> MAD 60, rel .2 > .1: unstable though highest
        cell(4, 8, 300, 360, 200),
    ]
    (d,) = decide(cells)
    assert d.unstable_ks == [4] and d.best_k == 4 and d.selected_k == 2
    assert d.selected_vs_k0_percent is None  # no baseline at this concurrency
    assert d.selected_vs_best_percent == pytest.approx(0.0)  # top stable score is k=2's


def test_all_unstable_selects_nothing_and_says_why():
    (d,) = decide([cell(2, 4, 100, 130, 70), cell(3, 4, 100, 150, 50)])
    assert d.selected_k is None and "unstable" in d.reason
    with pytest.raises(ValueError, match="nothing to schedule"):
        build_schedule([d])


def test_few_repeats_still_decide_and_missing_cells_listed():
    cells = [cell(0, 1, 100), cell(3, 1, 140), cell(0, 4, 300, 310), cell(3, 4), cell(5, 4, 200)]
    d1, d4 = decide(cells)
    assert d1.selected_k == 3 and d1.few_repeats  # one repeat: MAD 0, score = median
    assert d1.selected_vs_k0_percent == pytest.approx(40.0)
    assert d1.missing_ks == [5]
    # at 4: k=3 has no repeat -> missing; k=0 two repeats: median 305, MAD 5, rel .016,
    # score 305 - 7.413 = 297.587 beats k=5's 200
    assert d4.missing_ks == [3] and d4.selected_k == 0
    assert d4.selected_score == pytest.approx(305 - 1.4826 * 5)


def grid(sel: dict[int, int]) -> list[Cell]:
    """Cells where the k in sel[conc] has 200 tokens/s and every other k 100."""
    return [
        cell(k, c, *([200.0] * 3 if k == kk else [100.0] * 3))
        for c, kk in sel.items()
        for k in (0, 2, 4)
    ]


def test_schedule_gaps_carry_previous_k_and_merge():
    sched = build_schedule(decide(grid({1: 4, 4: 4, 16: 2, 64: 0})))
    # 1..3 k4, 4..15 k4 (merged), 16..63 k2, 64 k0
    assert sched["num_speculative_tokens_per_batch_size"] == [[1, 15, 4], [16, 63, 2], [64, 64, 0]]
    validate_schedule(sched["num_speculative_tokens_per_batch_size"])
    assert sched["batch_size_proxy"] == "client concurrency"
    assert [r["measured_at"] for r in sched["ranges"]] == [[1, 4], [16], [64]]
    assert sched["speculative_config_fragment"] == {
        "num_speculative_tokens": 4,
        "num_speculative_tokens_per_batch_size": [[1, 15, 4], [16, 63, 2], [64, 64, 0]],
    }
    assert sched["selected_vs_k0_percent"]["16"] == pytest.approx(100.0)


def test_schedule_single_concurrency_not_starting_at_one():
    sched = build_schedule(decide(grid({8: 2})))
    assert sched["num_speculative_tokens_per_batch_size"] == [[1, 8, 2]]
    assert [(r["start"], r["end"], r["source"]) for r in sched["ranges"]] == [
        (1, 7, "carried"),
        (8, 8, "measured"),
    ]


class StubModel:
    """best_k 2 below 10, else 0: what the schedule asks of a model."""

    basis = "stub"

    def best_k(self, concurrency: int) -> int:
        return 2 if concurrency < 10 else 0


def test_schedule_gaps_from_model_are_marked_predicted(tmp_path):
    sched = build_schedule(decide(grid({1: 4, 16: 0})), model=StubModel())  # type: ignore[arg-type]
    # 1 measured k4; 2..9 predicted k2; 10..15 predicted k0; 16 measured k0
    assert sched["num_speculative_tokens_per_batch_size"] == [[1, 1, 4], [2, 9, 2], [10, 16, 0]]
    assert [(r["start"], r["end"], r["predicted"]) for r in sched["ranges"]] == [
        (1, 1, False),
        (2, 9, True),
        (10, 15, True),
        (16, 16, False),
    ]
    path = write_schedule(tmp_path / "speculative_k_schedule.json", sched)
    assert json.loads(path.read_text())["num_speculative_tokens_per_batch_size"][1] == [2, 9, 2]


def test_validate_schedule_rejects_gaps_and_bad_start():
    for bad in ([[2, 4, 1]], [[1, 3, 1], [5, 8, 2]], [[1, 3, -1]], []):
        with pytest.raises(ValueError):
            validate_schedule(bad)


def test_tables_fit_100_columns_and_mark_selection():
    concs = (1, 4, 16, 64)
    # median 1000 + 100 k, MAD 5: k=6 has the top score at every concurrency
    cells = [
        cell(k, c, 1000.0 + 100 * k, 1005.0 + 100 * k, 995.0 + 100 * k)
        for k in range(7)
        for c in concs
        if (k, c) != (3, 1)
    ]
    cells.append(cell(3, 1, 5000, 9000, 100))  # median 5000, MAD 4000: unstable
    decisions = decide(cells)
    text = render_sweep_tables(cells, decisions, build_schedule(decisions), None)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100
    row6 = next(line for line in lines if line.startswith("k=6"))
    assert row6.split() == ["k=6"] + ["1600±5.0*"] * 4
    row3 = next(line for line in lines if line.startswith("k=3"))
    assert row3.split()[1] == "5000±4000!"
    # vs k=0 at concurrency 1: scores (1600 - 7.413) / (1000 - 7.413) = 1.6045 -> +60.4%
    assert next(line for line in lines if line.startswith("vs k=0")).split()[2] == "+60.4%"
    assert "  [[1, 64, 6]]" in lines
