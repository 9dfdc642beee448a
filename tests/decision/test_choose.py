"""decision/choose.py: one answer for k from whatever was measured (hand-computed cases),
and the one-run evaluation against the simulator's formula (benchmarks/bench_kchoice.py)."""

from __future__ import annotations

import sys

import pytest
from support.paths import BENCHMARKS

from specmon.decision.choose import (
    ACROSS_K,
    HISTOGRAM,
    SEGMENTS,
    Measurement,
    choose,
    fit_segment_model,
    least_regret,
)

sys.path.insert(0, str(BENCHMARKS))
import bench_kchoice

# S_1 = .6, S_2 = .3, S_3 = .1, S_4 = 0 -> E(1..4) = 1.6, 1.9, 2.0, 2.0
HIST = {0: 40, 1: 30, 2: 20, 3: 10}


def test_histogram_only_states_the_assumed_cost():
    # c = 0.10: 1.6/1.1 = 1.455, 1.9/1.2 = 1.583, 2.0/1.3 = 1.538, 2.0/1.4 -> k = 2
    got = choose([Measurement(4, None, HIST)])
    assert got.k == 2 and got.source == HISTOGRAM
    assert got.basis == "histogram only, draft cost assumed 0.10"
    assert got.draft_cost == 0.1 and got.draft_cost_assumed
    assert got.gain[2] == pytest.approx(1.9 / 1.2)
    # c = 0.2 given: 1.333, 1.357, 1.25, 1.111 -> k = 2, and said so
    given = choose([Measurement(4, None, HIST)], draft_cost=0.2)
    assert given.k == 2 and "given 0.20" in given.basis and not given.draft_cost_assumed
    # c = 0.6: 1.6/1.6 = 1.0 at best, within 1% of k=0's 1.0 -> speculation off
    assert choose([Measurement(4, None, HIST)], draft_cost=0.6).k == 0


def test_a_better_k_beyond_the_measured_one_is_named_with_its_band():
    # every step accepts both drafts: a_k = 1 carried forward, E(k') = k'+1;
    # c = 0.1: 3/1.2 = 2.5 at k=2; beyond: 7/1.6 = 4.375 at k'=6, +75% over k=2
    got = choose([Measurement(2, None, {2: 100})])
    assert got.extrapolated_k == 6 and got.extrapolated_gain == pytest.approx(4.375)
    assert got.extrapolated_percent == pytest.approx(75.0)
    lo, hi = got.extrapolated_band or (None, None)
    assert lo is not None and hi is not None and 0 < lo <= 75.0 <= hi
    # even the band's low end beats k=2: the answer is k=6, marked extrapolated
    assert got.k == 6 and got.beyond_measured and got.base_k == 2
    assert got.head() == "best k=6 (4.38x, extrapolated)"
    assert f"k=6 predicted +75% [{lo:+.0f}..{hi:+.0f}] over k=2, measure it" in got.text()


def test_an_extrapolated_k_whose_band_may_lose_is_only_a_hint():
    # a_1 = 0.9, a_2 = 0.5 from 20 steps: carried forward a_2 = 0.5 predicts a little more at
    # k' = 3, but the falling trend's band reaches below k=2: stay at k=2, name k=3
    hist = {0: 2, 1: 9, 2: 9}
    got = choose([Measurement(2, None, hist)], draft_cost=0.0)
    assert got.extrapolated_k is not None and got.extrapolated_k > 2
    assert got.extrapolated_band is not None and got.extrapolated_band[0] < 0
    assert got.k == 2 and not got.beyond_measured
    assert "measure it" in got.text() and "extrapolated" not in got.head()


def test_segment_model_recovers_the_verify_cost_by_hand():
    # T(B) = 10 + 0.2 (B-1) 5 at k=4: 10, 13, 25 ms; c = 0 -> a = 10, b = 0.2, d = 0
    m = fit_segment_model(4, {1: 10.0, 4: 13.0, 16: 25.0}, 0.0)
    assert m is not None and m.form == "linear"
    assert (m.a, m.b, m.d) == pytest.approx((10.0, 0.2, 0.0))
    # k' = 1 at B = 16: 25 + 0.2*15*(2 - 5) = 16 ms
    assert m.step_ms(1, 16) == pytest.approx(16.0)
    # c = 0.1: the floor 10 = a (1 + 0.4) -> a = 7.142857, d = 0.7142857 per draft
    m = fit_segment_model(4, {1: 10.0, 4: 13.0, 16: 25.0}, 0.1)
    assert m is not None and m.a == pytest.approx(10 / 1.4) and m.d == pytest.approx(1 / 1.4)


def test_segment_model_finds_a_roofline_knee():
    # max(10, 0.05 B 5) at B = 1, 4, 16, 64: 10, 10, 10, 16 -> floor 10, b = 0.05
    m = fit_segment_model(4, {1: 10.0, 4: 10.0, 16: 10.0, 64: 16.0}, 0.0)
    assert m is not None and m.form == "roofline"
    assert (m.a, m.b) == pytest.approx((10.0, 0.05))
    assert m.step_ms(1, 64) == pytest.approx(10.0)  # 0.05*64*2 = 6.4 < floor


def test_one_k_at_several_loads_answers_per_load_and_says_why_not():
    # k=4, flat-ish histogram; the step time grows steeply with load
    segs = [
        Measurement(4, 1, HIST, 10.0),
        Measurement(4, 64, HIST, 10.0 + 0.2 * 63 * 5),
        Measurement(4, 16, HIST, None),  # no TPOT in that segment
    ]
    low, high = choose(segs, 1), choose(segs, 64)
    assert low.source == high.source == SEGMENTS
    assert "step time measured per segment (2 loads at k=4)" in low.basis
    assert "draft cost unknown" in low.basis
    assert high.k is not None and low.k is not None and high.k < low.k
    none = choose(segs, 16)
    assert none.k is None and "concurrency 16" in (none.why or "")


def test_least_regret_by_hand():
    # two costs; k=1 loses 0% / 20%, k=2 loses 10% / 0% -> k=2 (worst 10% < 20%)
    tables = [{0: 1.0, 1: 2.0, 2: 1.8}, {0: 1.0, 1: 1.6, 2: 2.0}]
    assert least_regret(tables, 2) == 2


def test_least_regret_reads_the_loss_against_the_central_best():
    # k=1 measured (the same in both), k=2 extrapolated: cautious (its band's low end) and
    # central values, under a cheap (A) and a costly (B) draft cost
    cautious = [{0: 1.0, 1: 2.0, 2: 2.1}, {0: 1.0, 1: 2.0, 2: 1.9}]
    central = [{0: 1.0, 1: 2.0, 2: 2.4}, {0: 1.0, 1: 2.0, 2: 1.95}]
    # against the cautious tops (2.1, 2.0): k=1 loses 4.8% / 0, k=2 0 / 5% -> k=1
    assert least_regret(cautious, 2) == 1
    # against the central tops (2.4, 2.0): k=1 loses 16.7% / 0, k=2 12.5% / 5% -> k=2
    assert least_regret(cautious, 2, reference=central) == 2
    # the allowed k only (an SLO), even when a smaller k has the least regret
    assert least_regret(central, 2, allowed={0}) == 0


def test_runs_at_several_k_at_one_load_fit_the_draft_cost():
    # step = 10 (1 + 0.2 k) at k = 2, 4: c = 0.2 -> as the histogram with c = 0.2: k = 2
    runs = [Measurement(2, 8, {0: 40, 1: 30, 2: 30}, 14.0), Measurement(4, 8, HIST, 18.0)]
    got = choose(runs, 8)
    assert got.source == ACROSS_K and got.k == 2 and got.draft_cost == pytest.approx(0.2)
    assert "measured at k=2,4" in got.basis
    # the given draft cost does not override what the runs measured
    assert choose(runs, 8, draft_cost=0.01).k == 2


@pytest.mark.parametrize("seed", [0, 1])
def test_one_run_at_k4_loses_at_most_5_percent_against_the_simulator_formula(seed):
    rows = bench_kchoice.evaluate(requests=120, seed=seed)
    # 3 draft costs x 2 latency models x 3 profiles x 4 concurrencies
    assert len(rows) == 72
    assert all(r.picked is not None and 0 <= r.picked <= 8 for r in rows)
    worst = max(rows, key=lambda r: r.loss)
    assert worst.loss <= 0.05, worst
    # beyond the measured k: the extrapolated answer (the band's low end must win, its loss
    # read against the central best) recovers most of what stopping at k=4 lost on the
    # falling profile (16% at concurrency 1, d0): 4.4% at most (9.0% with the reference at
    # the band's low end too), and on the flat one 6.3% (11.1%)
    falling = [r for r in rows if r.profile == "falling"]
    assert max(r.loss_any for r in falling) <= 0.05
    assert max(r.loss_any for r in rows if r.profile == "flat") <= 0.08
    assert any(r.picked > 4 for r in falling)
    # the load moves the answer: flat acceptance, no draft cost: a smaller k at 64 than at 1
    by = {(r.model, r.profile, r.concurrency): r.picked for r in rows}
    assert by[("linear/d0", "flat", 64)] < by[("linear/d0", "flat", 1)]
