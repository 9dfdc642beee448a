"""Tuning estimates against hand computations (docs/tuning.md §2-§5)."""

from __future__ import annotations

import random

import pytest

from specmon.decision import acceptance as tuning
from specmon.decision.acceptance import (
    analyze,
    estimate_draft_cost,
    flat_alpha,
    position_estimates,
    predictions,
    recommend_k,
    tune_report,
    wilson_interval,
)

# Worked example 1 (SPEED-Bench, k=5): histogram 13/9/7/6/4/61 % as counts of N=100 steps.
EXAMPLE1 = [13, 9, 7, 6, 4, 61]
# Worked example 2 (Gemma-4 MTP, k=4): S = .844 .599 .385 .271 as N=1000 steps:
# h0 = 1000-844 = 156, h1 = 844-599 = 245, h2 = 599-385 = 214, h3 = 385-271 = 114, h4 = 271.
EXAMPLE2 = [156, 245, 214, 114, 271]


def test_example1_unconditional_and_conditional():
    pos = position_estimates(EXAMPLE1, 5)
    # S_i = tail / 100: 87, 78 (=87-9), 71, 65, 61
    assert [round(p.unconditional, 2) for p in pos] == [0.87, 0.78, 0.71, 0.65, 0.61]
    # a_i = tail_i / tail_{i-1}: 87/100=.870, 78/87=.897, 71/78=.910, 65/71=.915, 61/65=.938
    assert [round(p.conditional, 2) for p in pos] == [0.87, 0.90, 0.91, 0.92, 0.94]
    # trials n_i = tail_{i-1}: 100, 87, 78, 71, 65
    assert [p.trials for p in pos] == [100, 87, 78, 71, 65]


def test_example1_expected_length_and_flat_alpha():
    preds = predictions(EXAMPLE1, 5)
    exact = {p.k: p.acceptance_length for p in preds if not p.extrapolated}
    # E(5) = 1 + .87 + .78 + .71 + .65 + .61 = 4.62 (AIPerf reported 4.63 token-weighted)
    assert exact[5] == pytest.approx(4.62)
    # E(2) = 1 + .87 + .78 = 2.65
    assert exact[2] == pytest.approx(2.65)
    # A = 1*9 + 2*7 + 3*6 + 4*4 + 5*61 = 362 ; R = 13+9+7+6+4 = 39 ; 362/401 = 0.90274
    assert flat_alpha(EXAMPLE1, 5) == pytest.approx(362 / 401)
    assert flat_alpha(EXAMPLE1, 5) == pytest.approx(0.90274, abs=1e-5)


def test_example1_extrapolation_carries_a_k_forward():
    preds = {p.k: p for p in predictions(EXAMPLE1, 5)}
    assert [k for k, p in preds.items() if p.extrapolated] == [6, 7, 8, 9]
    # a_5 = 61/65 = 0.938462 ; E(6) = 4.62 + 0.61*0.938462 = 4.62 + 0.572462 = 5.192462
    assert preds[6].acceptance_length == pytest.approx(5.192462, abs=1e-6)
    # E(7) = E(6) + 0.61 * 0.938462^2 = 5.192462 + 0.537233 = 5.729695
    assert preds[7].acceptance_length == pytest.approx(5.729695, abs=1e-5)
    # the band holds a_5's Wilson interval (0.85218, 0.97581) carried flat: 4.62 + .61*a,
    # widened by the trend of a_1..a_5 and E(5)'s sampling error (test_acceptance_bands.py)
    assert preds[6].low <= 4.62 + 0.61 * 0.85218
    assert preds[6].high >= 4.62 + 0.61 * 0.97581
    assert preds[6].low < preds[6].acceptance_length < preds[6].high
    # the band widens further out
    assert preds[9].high - preds[9].low > preds[6].high - preds[6].low
    assert preds[5].low is None and preds[5].high is None


def test_example2_lengths_speedups_and_recommendation():
    pos = position_estimates(EXAMPLE2, 4)
    # a = .844, .599/.844 = .7097, .385/.599 = .6427, .271/.385 = .7039
    assert [round(p.conditional, 2) for p in pos] == [0.84, 0.71, 0.64, 0.70]
    preds = {p.k: p for p in predictions(EXAMPLE2, 4, draft_cost=0.1)}
    # E(4) = 1 + .844 + .599 + .385 + .271 = 3.099 ; E(2) = 1 + .844 + .599 = 2.443
    assert preds[4].acceptance_length == pytest.approx(3.099)
    assert preds[2].acceptance_length == pytest.approx(2.443)
    # speedups at c = 0.1: 3.099 / 1.4 = 2.2136 ; 2.443 / 1.2 = 2.0358 (doc: 2.21 vs 2.03 from
    # the rounded E(2) = 2.44)
    assert preds[4].speedup == pytest.approx(2.2136, abs=1e-4)
    assert preds[2].speedup == pytest.approx(2.0358, abs=1e-4)
    # E(3)/1.3 = 2.828/1.3 = 2.175 ; E(5) = 3.099 + .271*.7039 = 3.2898 -> /1.5 = 2.193
    # so k = 4 "wins" under the simple model, as the doc says
    assert preds[5].speedup == pytest.approx(3.2898 / 1.5, abs=1e-3)
    assert analyze(EXAMPLE2, 4, draft_cost=0.1).recommended_k == 4


def test_wilson_interval_by_hand():
    # 87/100, z = 1.96: z^2/n = .038415 ; centre = (.87 + .019207)/1.038415 = .85631
    # half = 1.96/1.038415 * sqrt(.87*.13/100 + 3.8415/40000) = 1.88749 * .035029 = .066117
    lo, hi = wilson_interval(87, 100)
    assert lo == pytest.approx(0.85631 - 0.066117, abs=1e-4)
    assert hi == pytest.approx(0.85631 + 0.066117, abs=1e-4)
    # 0/10: centre = (3.8415/20)/1.38415 = .13877 = half  ->  (0, .27753)
    lo, hi = wilson_interval(0, 10)
    assert lo == pytest.approx(0.0, abs=1e-9)
    assert hi == pytest.approx(0.27753, abs=1e-4)
    # 10/10 mirrors it: (1 - .27753, 1)
    lo, hi = wilson_interval(10, 10)
    assert (lo, hi) == (pytest.approx(0.72247, abs=1e-4), pytest.approx(1.0))
    assert wilson_interval(0, 0) is None


def _geometric_counts(alpha: float, k: int, steps: int) -> list[int]:
    # truncated geometric: P(J=j) = alpha^j (1-alpha) for j < k, P(J=k) = alpha^k
    probs = [alpha**j * (1 - alpha) for j in range(k)] + [alpha**k]
    return [round(steps * p) for p in probs]


def test_flat_alpha_source_expected_counts_is_exactly_flat():
    hist = _geometric_counts(0.7, 4, 1_000_000)
    assert hist == [300000, 210000, 147000, 102900, 240100]
    # A = 210000 + 2*147000 + 3*102900 + 4*240100 = 1773100 ; R = 759900 ; A/(A+R) = 0.7
    assert flat_alpha(hist, 4) == pytest.approx(0.7, abs=1e-12)
    for p in position_estimates(hist, 4):
        assert p.conditional == pytest.approx(0.7, abs=1e-12)
    preds = {p.k: p.acceptance_length for p in predictions(hist, 4)}
    # Leviathan: E(k) = (1 - .7^(k+1)) / .3 ; E(2) = (1-.343)/.3 = 2.19 ; E(5) = (1-.117649)/.3
    assert preds[2] == pytest.approx(2.19)
    assert preds[5] == pytest.approx((1 - 0.7**6) / 0.3)  # extrapolation agrees with the model


def test_flat_alpha_source_sampled_stays_within_intervals():
    rng = random.Random(20261130)
    k, alpha, hist = 4, 0.7, {}
    for _ in range(20_000):
        j = 0
        while j < k and rng.random() < alpha:
            j += 1
        hist[j] = hist.get(j, 0) + 1
    for p in position_estimates(hist, k):
        lo, hi = p.ci95
        assert lo <= alpha <= hi, (p.position, p.ci95)
        assert hi - lo < 0.05  # thousands of trials: a tight interval
    assert flat_alpha(hist, k) == pytest.approx(alpha, abs=0.01)


def test_degenerate_inputs_give_none_without_raising():
    empty = analyze({}, 3, draft_cost=0.1)
    assert empty.steps == 0 and empty.flat_alpha is None and empty.recommended_k is None
    assert [p.unconditional for p in empty.positions] == [None, None, None]
    assert all(p.conditional is None and p.ci95 is None and p.trials == 0 for p in empty.positions)
    assert all(p.acceptance_length is None and p.speedup is None for p in empty.predictions)
    zero_k = analyze({0: 50}, 0, draft_cost=0.1)
    assert zero_k.positions == [] and zero_k.predictions == [] and zero_k.flat_alpha is None
    # every step rejected the first draft: a_1 = 0/10, deeper positions never tried
    rejected = analyze([10, 0, 0, 0], 3)
    assert rejected.positions[0].conditional == 0.0 and rejected.positions[0].trials == 10
    assert rejected.positions[1].conditional is None and rejected.positions[1].trials == 0
    assert [p.acceptance_length for p in rejected.predictions] == [1.0] * 7
    assert rejected.flat_alpha == 0.0  # A = 0, R = 10


def test_recommendation_is_zero_when_no_k_beats_plain_decoding():
    # nothing accepted: E = 1 for every k', speedup 1/(1+0.5k') < 1 -> turn speculation off
    est = analyze([100, 0, 0], 2, draft_cost=0.5)
    assert est.recommended_k == 0
    assert "no k beats" in est.caveat
    assert recommend_k([]) is None
    assert analyze(EXAMPLE1, 5).recommended_k is None  # no draft cost, no recommendation


def test_recommendation_beyond_measured_k_says_so():
    est = analyze(EXAMPLE1, 5, draft_cost=0.05)
    # a_5 = .94 is high and c small: E(9)/1.45 = 6.707/1.45 = 4.63 beats E(5)/1.25 = 3.70
    assert est.recommended_k == 9
    assert "beyond the measured k=5" in est.caveat and "batch size" in est.caveat


def test_histogram_outside_k_is_rejected():
    with pytest.raises(ValueError, match="more than k=2"):
        analyze({0: 1, 3: 2}, 2)
    with pytest.raises(ValueError, match="negative"):
        analyze({0: -1}, 2)


def test_estimate_draft_cost_least_squares():
    # step_time = 10 (1 + 0.2 k): 12 ms at k=1, 14 at k=2, 18 at k=4
    assert estimate_draft_cost([(1, 12.0), (2, 14.0), (4, 18.0)]) == pytest.approx(0.2)
    # noise symmetric around the line leaves the least-squares fit unchanged
    pts = [(1, 12.5), (1, 11.5), (2, 14.0), (4, 18.0)]
    assert estimate_draft_cost(pts) == pytest.approx(0.2)
    # one k only: no slope to fit; a falling line is unphysical
    assert estimate_draft_cost([(3, 10.0), (3, 11.0)]) is None
    assert estimate_draft_cost([(1, 12.0), (4, 9.0)]) is None
    assert estimate_draft_cost([]) is None


def test_tune_report_json_shape():
    rep = tune_report({"0": 13, "1": 9, "2": 7, "3": 6, "4": 4, "5": 61}, 5, draft_cost=0.1)
    assert set(rep) == {
        "num_spec_tokens",
        "steps",
        "positions",
        "flat_alpha",
        "draft_cost",
        "predictions",
        "recommended_k",
    }
    assert rep["num_spec_tokens"] == 5 and rep["steps"] == 100 and rep["draft_cost"] == 0.1
    assert set(rep["positions"][0]) == {
        "position",
        "unconditional",
        "conditional",
        "conditional_ci95",
        "trials",
    }
    assert set(rep["predictions"][0]) == {
        "k",
        "acceptance_length",
        "extrapolated",
        "low",
        "high",
        "speedup",
    }
    assert [p["position"] for p in rep["positions"]] == [1, 2, 3, 4, 5]
    assert [p["k"] for p in rep["predictions"]] == list(range(1, 10))
    assert isinstance(rep["positions"][0]["conditional_ci95"], list)
    # E(1)/(1+0.1) = 1.87/1.1 = 1.7
    assert rep["predictions"][0]["speedup"] == pytest.approx(1.7)
    assert rep["recommended_k"] == analyze(EXAMPLE1, 5, 0.1).recommended_k
    assert tuning.EXTRAPOLATE == 4


def test_flat_alpha_misfit_positions():
    # Example 1: alpha = 0.9027 ; a_1 = .87 with Wilson (0.7902, 0.9224) contains it, and so
    # do a_2..a_5 (e.g. a_5 = .938, (0.8522, 0.9758)): 100 steps cannot reject flatness
    est = analyze(EXAMPLE1, 5)
    assert tuning.positions_rejecting_flat_alpha(est.flat_alpha, est.positions) == []
    # the same shape at 100x the steps: a_1 = .87 has interval ~(0.863, 0.877), which
    # excludes 0.9027; a_5 = .938 (n = 6500, ~(0.932, 0.944)) excludes it from above
    big = analyze([13_00 * 10, 9_00 * 10, 7_00 * 10, 6_00 * 10, 4_00 * 10, 61_00 * 10], 5)
    bad = tuning.positions_rejecting_flat_alpha(big.flat_alpha, big.positions)
    assert 1 in bad and 5 in bad
    assert tuning.positions_rejecting_flat_alpha(None, big.positions) == []


def _sim_step_ms(k: int, batch: int, step_ms=10.0, draft_ms=1.0, slope=0.01) -> float:
    # specmon sim's latency model: step_ms (1 + slope (B-1)(k+1)) + draft_ms k
    return step_ms * (1 + slope * (batch - 1) * (k + 1)) + draft_ms * k


def test_recommended_k_falls_as_concurrency_rises():
    """Runs at k = 2, 4, 6 under one load: the draft cost c fitted from their step times
    (as decision/choose.py does at one load), then the k=6 histogram's predictions."""
    hist6 = _geometric_counts(0.8, 6, 1_000_000)  # flat alpha 0.8 at k = 6

    def at(batch: int) -> tuning.TuningEstimate:
        cost = estimate_draft_cost([(k, _sim_step_ms(k, batch)) for k in (2, 4, 6)])
        return tuning.analyze(hist6, 6, cost)

    low, high = at(1), at(33)
    # B = 1: t = 10 + 1 k -> c = 0.1 ; B = 33: t = 10 (1 + .32 (k+1)) + k = 13.2 + 4.2 k
    # -> c = 4.2 / 13.2 = 0.318
    assert low.draft_cost == pytest.approx(0.1) and high.draft_cost == pytest.approx(4.2 / 13.2)
    # E(k') = (1 - .8^(k'+1)) / .2 ; c = .1: E(6)/1.6 = 3.951/1.6 = 2.470 > E(5)/1.5 = 2.459
    # and > E(7)/1.7 = 4.161/1.7 = 2.448 -> 6 ; c = .318: E(3)/1.954 = 2.952/1.954 = 1.511 >
    # E(2)/1.636 = 1.491 and E(4)/2.272 = 1.480 -> 3
    assert low.recommended_k == 6 and high.recommended_k == 3
