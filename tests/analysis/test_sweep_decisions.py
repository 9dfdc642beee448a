"""Sweep decisions and the vLLM schedule against hand computation on fixed cell data."""

from __future__ import annotations

import json

import pytest

from specmon.analysis.sweep import render_sweep_tables
from specmon.decision.cells import decide, summarize, trust_lines, trust_of
from specmon.decision.schedule import build_schedule, validate_schedule, write_schedule
from specmon.decision.sweep_types import Cell, RepeatMeasurement


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


def failing(k: int, conc: int, tput: float, errors: int, requests: int = 10) -> Cell:
    return Cell(k, conc, [RepeatMeasurement(tput, 1.0, requests, error_count=errors)] * 3)


def test_a_k_failing_half_its_requests_is_never_selected():
    # k=4 is fastest on paper (300 tokens/s) but its server failed 10 of 20 requests
    cells = [cell(0, 4, 100, 100, 100), cell(2, 4, 200, 200, 200), failing(4, 4, 300, 10)]
    (d,) = decide(cells)
    assert d.selected_k == 2 and d.best_k == 2
    assert "error rate 50.0% > 1%" in d.excluded[4][0]
    assert any(n.startswith("k=4 excluded: error rate 50.0%") for n in d.notes)
    assert d.to_dict()["excluded"] == {"4": d.excluded[4]}
    # the grid marks it and the table says why; the decision survives the JSON round trip
    text = render_sweep_tables(cells, [d], build_schedule([d]), None)
    assert "300±0.0x" in text and "k=4 excluded: error rate 50.0%" in text
    # 1 error in 100 requests is within the 1% gate: still selectable
    (ok,) = decide([cell(0, 4, 100, 100, 100), failing(4, 4, 300, 1, requests=99)])
    assert ok.selected_k == 4 and not ok.excluded


def test_a_lagging_server_or_too_few_requests_excludes_the_cell():
    lag = Cell(4, 1, [RepeatMeasurement(300.0, 1.0, 10, server_lag_share=0.05)] * 3)
    few = Cell(2, 1, [RepeatMeasurement(250.0, 1.0, 1)] * 3)  # 3 requests over 3 repeats
    (d,) = decide([cell(0, 1, 100, 100, 100), lag, few])
    assert d.selected_k == 0
    # a lag share is seconds behind over the formula's seconds (not a share of the steps)
    assert "server behind its step model (+5.0% of its formula's time > 2%)" in d.excluded[4]
    assert "too few requests (3 < 5)" in d.excluded[2]
    # and a cell of sweep.json written before these fields existed still reads
    old = RepeatMeasurement(1.0, 1.0, 10).to_dict()
    del old["server_lag_share"], old["client_saturated"]
    assert RepeatMeasurement.from_dict(old).server_lag_share is None


def test_an_interrupted_sweep_leaves_out_loads_without_every_k_and_says_incomplete(tmp_path):
    # stopped by SIGTERM: concurrency 1 has every k, concurrency 4 only the k=0 baseline
    cells = [cell(0, 1, 100, 100, 100), cell(1, 1, 150, 150, 150), cell(3, 1, 120, 120, 120)]
    cells.append(cell(0, 4, 300, 300, 300))
    sched = build_schedule(decide(cells), complete=False)
    assert sched["complete"] is False
    # K=0 at batch 4 was only the one k measured there: not in the schedule
    assert sched["num_speculative_tokens_per_batch_size"] == [[1, 1, 1]]
    assert sched["left_out_concurrencies"] == [4]
    path = write_schedule(tmp_path / "s.json", sched)
    assert json.loads(path.read_text())["complete"] is False
    # nothing with every k measured: no schedule, and why
    with pytest.raises(ValueError, match="no concurrency has every k measured"):
        build_schedule(decide([cell(0, 4, 3, 3, 3), cell(2, 1, 5, 5, 5)]), complete=False)
    full = build_schedule(decide(grid({1: 4, 16: 2})))
    assert full["complete"] is True and full["left_out_concurrencies"] == []


class FallingModel:
    """The model's best k: 4 at batch 1, falling by one every 4 batch sizes, floor 0."""

    basis = "stub"

    def best_k(self, concurrency: int) -> int:
        return max(0, 4 - concurrency // 4)


def test_model_filled_gaps_stay_monotone_between_anchors():
    # anchors k=2 at 1 and k=2 at 8: the model's 4,3,... in between may not zig-zag
    sched = build_schedule(decide(grid({1: 2, 8: 2})), model=FallingModel())  # type: ignore[arg-type]
    assert sched["num_speculative_tokens_per_batch_size"] == [[1, 8, 2]]


def test_a_measured_zigzag_is_kept_and_noted():
    # measured 4, 2, 4, 0 at 1, 4, 16, 64: the k=2 dip at 4 and the peak at 16 are measured
    sched = build_schedule(decide(grid({1: 4, 4: 2, 16: 4, 64: 0})), model=FallingModel())  # type: ignore[arg-type]
    assert "measured k=2 at batch 4 beats the model's k=3 here" in sched["notes"]
    assert "measured k=4 at batch 16 beats the model's k=0 here" in sched["notes"]
    ks = [e[2] for e in sched["num_speculative_tokens_per_batch_size"]]
    # 1..3: the model's 4 clamped to [2, 4] -> 4; 5..15: its 3, 3, 2, ... held within
    # [previous, 4] on the way up from 2 -> 3; 17..63: its 0 within [0, 4] -> 0
    assert ks == [4, 2, 3, 4, 0]


def test_p_selected_is_a_seeded_bootstrap_over_repeats():
    # k=2 beats k=0 in every repeat: every draw selects it
    sure = decide([cell(0, 1, 100, 101, 99), cell(2, 1, 150, 151, 149)])[0]
    assert sure.selected_k == 2 and sure.p_selected == 1.0
    # k=2 and k=3 overlap repeat by repeat: draws split, the same split every time
    close = [cell(2, 1, 150, 140, 160), cell(3, 1, 152, 138, 158)]
    d = decide(close)[0]
    assert d.p_selected is not None and 0.0 < d.p_selected < 1.0
    assert decide(close)[0].p_selected == d.p_selected
    # one repeat per cell: no bootstrap to speak of
    assert decide([cell(0, 1, 100), cell(2, 1, 150)])[0].p_selected is None
    assert "P(sel.)" in render_sweep_tables(close, [d], None, None)


def lagging(k: int, conc: int, tput: float, share: float) -> Cell:
    return Cell(k, conc, [RepeatMeasurement(tput, 1.0, 10, server_lag_share=share)] * 3)


def test_a_lag_every_cell_shares_is_decided_anyway_and_said():
    # a busy machine: every server ran behind its step model; the decision still picks,
    # and says why it should not be trusted yet
    (d,) = decide([lagging(0, 1, 100, 0.3), lagging(2, 1, 150, 0.4)])
    assert d.selected_k == 2 and set(d.excluded) == {0, 2}
    assert any(n.startswith("every cell here ran on a saturated client") for n in d.notes)
    assert any(n.startswith("k=2 flagged: server behind") for n in d.notes)
    # but one healthy cell beside them: only it can be selected
    (h,) = decide([cell(0, 1, 100, 100, 100), lagging(2, 1, 150, 0.4)])
    assert h.selected_k == 0 and any(n.startswith("k=2 excluded") for n in h.notes)
    # errors are never waived, even when every cell has them
    (e,) = decide([failing(0, 1, 100, 5), failing(2, 1, 150, 5)])
    assert e.selected_k is None


def test_an_unstable_cell_that_beats_every_other_repeat_is_still_selected():
    """A real vLLM with a drafter that never agrees: k=0's repeats spread 192-406 tok/s
    (median 337, MAD 69, relative .20 > .10: unstable), k=1's 76-98. k=0's slowest repeat
    beats k=1's fastest, so no noise can reverse the order: k=0 is selected (score
    337 - 1.4826 * 69 = 234.7), not k=1. Equal extremes (200 against 200) do not count."""
    (d,) = decide([cell(0, 1, 192, 219, 406, 381, 337), cell(1, 1, 76, 90, 98, 96, 89)])
    assert d.unstable_ks == [0] and d.selected_k == 0
    assert d.selected_score == pytest.approx(337 - 1.4826 * 69)
    assert any("beats every other k beyond the noise" in n for n in d.notes)
    # every bootstrap draw selects it too: k=0's slowest draw (>= 192) beats k=1's fastest
    # (<= 98), and a stable draw scores over 0.85 x 192; so P(sel.) = 1.00 (0.47 when the
    # draws were decided without the dominance rule)
    assert d.p_selected == 1.0


def test_an_unstable_cell_above_every_other_beyond_its_noise_is_still_selected():
    """Under load one slow repeat must not hand the load to a k at half the speed (a real
    vLLM at load 9-18: k=0 at a median of 132 tok/s, unstable, against a steady 63 at k=1).
    A median's standard error: sqrt(pi/2) * 1.4826 * MAD / sqrt(n) = 1.85817 MAD / sqrt(n).
    k=0: 60, 100, 130, 135, 150: median 130, deviations 70, 30, 0, 5, 20 -> MAD 20 (relative
    .154: unstable), se = 1.85817 * 20 / sqrt 5 = 16.620; its slowest (60) is below k=1's
    fastest (66). k=1: 62, 63, 64, 63, 66: median 63, MAD 1, se 0.831. 130 - 63 = 67 >
    3 * hypot(16.620, 0.831) = 49.92: k=0 stays selectable and is selected (score 130 -
    1.4826 * 20 = 100.35)."""
    (d,) = decide([cell(0, 1, 60, 100, 130, 135, 150), cell(1, 1, 62, 63, 64, 63, 66)])
    assert d.unstable_ks == [0] and d.selected_k == 0
    assert d.selected_score == pytest.approx(130 - 1.4826 * 20)
    # noise as large as the gap: k=0 at 50, 70, 100, 130, 140: median 100, deviations 50,
    # 30, 0, 30, 40 -> MAD 30, se 24.93; 100 - 63 = 37 < 3 * hypot(24.93, 0.831) = 74.8:
    # unstable and not kept; k=1, below it, is not ahead of it either: nothing is selected
    # (k=1's score, 61.5, beat k=0's 55.5, and the rule before selected the slower k)
    (o,) = decide([cell(0, 1, 50, 70, 100, 130, 140), cell(1, 1, 62, 63, 64, 63, 66)])
    assert o.unstable_ks == [0] and o.selected_k is None and o.best_k == 0
    assert not any("beyond the noise" in n for n in o.notes)
    assert o.reason.startswith("the k=0 baseline is unstable (relative MAD 0.30 > 0.10)")


def test_a_k_that_scores_below_an_unstable_baseline_is_not_selected_over_it():
    """A real vLLM with a drafter that never agrees, at concurrency 1 on a busy machine.
    k=0: 101, 128, 135, 153, 177: median 135, deviations 34, 7, 0, 18, 42 -> MAD 18
    (relative .133: unstable), se = 1.85817 * 18 / sqrt 5 = 14.958; not kept, since 135 - 94
    = 41 < 3 * hypot(14.958, 1.85817 * 4 / sqrt 5) = 45.97 and its slowest (101) is below
    k=1's fastest (112). k=1: 90, 93, 94, 102, 112: median 94, MAD 4, below k=0: nothing is
    selected (k=1 was, before)."""
    k0 = cell(0, 1, 101, 128, 135, 153, 177)
    (d,) = decide([k0, cell(1, 1, 90, 93, 94, 102, 112)])
    assert d.unstable_ks == [0] and d.selected_k is None and d.best_k == 0
    assert d.reason == (
        "the k=0 baseline is unstable (relative MAD 0.13 > 0.10) and k=1 is not ahead of "
        "its median 135.0 beyond the noise: measure again"
    )
    assert d.p_selected is None
    # k=1 at 110, 112, 113, 114, 115: median 113, MAD 1, score 111.52, above k=0's score
    # (135 - 1.4826 * 18 = 108.31) but its median below k=0's: still nothing (the rule
    # before selected k=1 on that score)
    (o,) = decide([k0, cell(1, 1, 110, 112, 113, 114, 115)])
    assert o.selected_k is None and o.reason.startswith("the k=0 baseline is unstable")
    # k=1 at 175, 183, 184, 185, 186: median 184, deviations 9, 1, 0, 1, 2 -> MAD 1, se
    # 0.831; 184 - 135 = 49 > 3 * hypot(14.958, 0.831) = 44.94, though its slowest (175) is
    # below k=0's fastest (177): ahead beyond the noise, selected (score 184 - 1.4826), the
    # baseline's instability said
    (a,) = decide([k0, cell(1, 1, 175, 183, 184, 185, 186)])
    assert a.selected_k == 1 and a.selected_score == pytest.approx(184 - 1.4826)
    assert "the k=0 baseline is unstable: the speedup is uncertain" in a.notes
    assert a.selected_vs_k0_percent == pytest.approx(
        100 * ((184 - 1.4826) / (135 - 1.4826 * 18) - 1)
    )


def test_a_busy_machine_baseline_hands_no_k_the_pick():
    """Seen in CI with a second real vLLM on the same 2 cores: a drafter that accepted 0 of
    4,662 drafts, k=0's repeats 103, 121, 140, 264, 348 tok/s: median 140, deviations 37,
    19, 0, 124, 208 -> MAD 37 (relative .264), se = 1.85817 * 37 / sqrt 5 = 30.747. k=1:
    175, 176, 181, 181, 194: median 181, deviations 6, 5, 0, 0, 13 -> MAD 5, se 4.155, score
    181 - 7.413 = 173.59, far above k=0's 140 - 54.86 = 85.14 (the old rule selected k=1).
    But 181 - 140 = 41 < 3 * hypot(30.747, 4.155) = 93.08, and k=1's slowest (175) is below
    k=0's fastest (348): the repeats cannot order them, so nothing is selected; the best
    median is k=1's, said as such."""
    k0 = cell(0, 1, 103, 121, 140, 264, 348)
    (d,) = decide([k0, cell(1, 1, 175, 176, 181, 181, 194)])
    assert d.selected_k is None and d.best_k == 1 and d.unstable_ks == [0]
    assert d.reason == (
        "the k=0 baseline is unstable (relative MAD 0.26 > 0.10) and k=1 is not ahead of "
        "its median 140.0 beyond the noise: measure again"
    )


def test_p_selected_redecides_each_draw_by_the_rule_that_selected():
    """k=0's repeats 300, 400, 500: median 400, MAD 100 (relative .25: unstable), but its
    slowest (300) beats k=1's fastest (102), so k=0 is kept and selected (score 400 -
    148.26 = 251.74 against k=1's 101 - 1.4826 = 99.52). Every bootstrap draw keeps it:
    three values drawn from {300, 400, 500} either repeat one (MAD 0: stable, score >= 300
    against k=1's at most 102) or are all three (unstable, and its slowest, 300, still beats
    the fastest k=1 can draw, 102). So P(sel.) = 1.00. Drawn by a rule without the
    dominance, the 6 of 27 draws of three distinct values went to k=1 (about 0.78)."""
    (d,) = decide([cell(0, 1, 300, 400, 500), cell(1, 1, 100, 101, 102)])
    assert d.unstable_ks == [0] and d.selected_k == 0
    assert d.selected_score == pytest.approx(400 - 1.4826 * 100)
    assert d.p_selected == 1.0


def test_a_cell_with_an_error_is_never_a_candidate():
    """A cell the runner flagged keeps the repeats it measured (here its payloads reported
    another k); `decide` leaves it out whoever calls, as the arms' best fixed k does: at
    concurrency 1 the slower, healthy k=2 (150 tok/s) is selected over the flagged k=4
    (300), and concurrency 8, whose only cell is flagged, gets no decision at all."""
    wrong = "the server for k=4 reports num_spec_tokens 3"
    flagged = [RepeatMeasurement(300.0, 1.0, 10)] * 3
    cells = [
        cell(0, 1, 100, 100, 100),
        cell(2, 1, 150, 150, 150),
        Cell(4, 1, flagged, error=wrong),
        Cell(4, 8, flagged, error=wrong),
        Cell(6, 1),  # not measured yet
    ]
    (d,) = decide(cells)
    assert d.concurrency == 1 and d.selected_k == 2
    assert [s.k for s in d.candidates] == [0, 2] and d.missing_ks == []


def test_a_doubted_cell_above_the_pick_makes_the_decision_uncertain():
    # k=4 ran on a lagging server (excluded) yet measured 300 tok/s, above the pick k=0's 100
    lag = Cell(4, 1, [RepeatMeasurement(300.0, 1.0, 10, server_lag_share=0.05)] * 3)
    (d,) = decide([cell(0, 1, 100, 100, 100), lag])
    assert d.selected_k == 0 and d.uncertain is not None
    assert d.uncertain.startswith(
        "k=4 measured 300.0 tok/s above the pick's 100.0 but was excluded"
    )
    assert d.head().startswith("uncertain: re-measure (k=4 measured 300.0")
    assert d.head().endswith("; selected k=0 (100.0 tok/s, P(sel.)=1.00)")
    assert d.to_dict()["uncertain"] == d.uncertain
    # below the pick, or excluded for its errors or the SLO: the pick stands, certain
    slow = Cell(4, 1, [RepeatMeasurement(90.0, 1.0, 10, server_lag_share=0.05)] * 3)
    assert decide([cell(0, 1, 100, 100, 100), slow])[0].uncertain is None
    broken = failing(4, 1, 300, 10)
    assert decide([cell(0, 1, 100, 100, 100), broken])[0].uncertain is None


def test_trust_verdict_lists_every_exclusion_per_load():
    lag = Cell(4, 1, [RepeatMeasurement(300.0, 1.0, 10, server_lag_share=0.05)] * 3)
    decisions = decide([cell(0, 1, 100, 100, 100), lag, cell(0, 4, 200, 200, 200)])
    trust = trust_of(decisions)
    why = "server behind its step model (+5.0% of its formula's time > 2%)"
    assert trust["trust"] == "flagged"
    assert trust["excluded_cells"] == {"1": {"4": [why]}}
    assert trust["trust_reasons"] == [
        f"concurrency 1: k=4 excluded: {why}",
        f"concurrency 1: uncertain: re-measure ({decisions[0].uncertain})",
        "concurrency 4: k=4 not measured here",
    ]
    assert trust_lines(trust)[0] == "trust: flagged (3 reasons)"
    # the schedule file carries the same verdict, outside the fragment vLLM reads
    sched = build_schedule(decisions)
    assert {k: sched[k] for k in trust} == trust
    assert set(sched["speculative_config_fragment"] or {}) <= {
        "num_speculative_tokens",
        "num_speculative_tokens_per_batch_size",
    }
    clean = trust_of(decide(grid({1: 4, 16: 2})))
    assert clean == {"trust": "clean", "trust_reasons": [], "excluded_cells": {}}
    assert trust_of(decide(grid({1: 4})), complete=False)["trust_reasons"] == [
        "the sweep was interrupted: not every cell was measured"
    ]
