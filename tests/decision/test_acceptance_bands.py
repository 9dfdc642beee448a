"""Extrapolated E(k') bands against known per-position acceptance, and truncation-aware a_i."""

from __future__ import annotations

import random

import pytest

from specmon.decision import acceptance as tuning

PROFILES = {  # true conditional acceptance of positions 1..8
    "rising": [0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9],
    "flat": [0.7] * 8,
    "falling": [0.9, 0.82, 0.74, 0.66, 0.58, 0.5, 0.42, 0.34],
}


def true_length(profile: list[float], kp: int) -> float:
    """E(k') = 1 + sum_i prod_{j<=i} a_j."""
    total, run = 1.0, 1.0
    for a in profile[:kp]:
        run *= a
        total += run
    return total


def draw_histogram(profile: list[float], k: int, steps: int, rng: random.Random) -> list[int]:
    hist = [0] * (k + 1)
    for _ in range(steps):
        j = 0
        while j < k and rng.random() < profile[j]:
            j += 1
        hist[j] += 1
    return hist


def test_band_covers_the_truth_on_rising_flat_falling_profiles():
    inside = total = 0
    misses = []
    for name, profile in PROFILES.items():
        for seed in range(40):
            hist = draw_histogram(profile, 4, 1500, random.Random(seed))
            for p in tuning.predictions(hist, 4):
                if not p.extrapolated:
                    continue
                truth = true_length(profile, p.k)
                total += 1
                ok = p.low <= truth <= p.high
                inside += ok
                if not ok:
                    misses.append((name, seed, p.k))
    assert total == 3 * 40 * 4
    assert inside / total >= 0.90, misses[:10]
    # and per profile, not only on average
    for name in PROFILES:
        assert sum(m[0] == name for m in misses) <= 0.10 * 40 * 4, name


def test_old_flat_band_missed_the_rising_truth():
    """The a_k-only band (kept as the inner part) would not cover a rising profile at k+4."""
    profile = PROFILES["rising"]
    hist = draw_histogram(profile, 4, 1500, random.Random(1))
    p8 = next(p for p in tuning.predictions(hist, 4) if p.k == 8)
    pos = tuning.position_estimates(hist, 4)
    lo, hi = pos[-1].ci95
    s4 = pos[-1].unconditional
    length4 = 1 + sum(x.unconditional for x in pos)
    flat_high = length4 + s4 * sum(hi**t for t in range(1, 5))
    truth = true_length(profile, 8)
    assert flat_high < truth <= p8.high


def test_trend_through_two_positions_by_hand():
    # h = [20, 32, 48]: tails 100, 80, 48 -> a_1 = .8, a_2 = .6 ; S_2 = .48, E(2) = 2.28.
    # two points: the weighted line passes through both whatever the weights: a_3 = .4, a_4 = .2
    preds = {p.k: p for p in tuning.predictions([20, 32, 48], 2)}
    assert preds[3].trend_length == pytest.approx(2.28 + 0.48 * 0.4)
    assert preds[4].trend_length == pytest.approx(2.28 + 0.48 * 0.4 + 0.48 * 0.4 * 0.2)
    # the flat point estimate still carries a_2 = .6: E(3) = 2.28 + .48*.6
    assert preds[3].acceptance_length == pytest.approx(2.28 + 0.48 * 0.6)
    assert preds[3].low <= preds[3].trend_length <= preds[3].high


def test_position_trials_count_only_steps_that_drafted_the_position():
    # one request at k=3: steps (accepted, drafted) = (3,3), (1,3), (0,2) near the end, (1,1)
    acc, dra = [3, 1, 0, 1], [3, 3, 2, 1]
    # position 1: accepted >= 0 and drafted >= 1: all 4 ; position 2: accepted >= 1 and
    # drafted >= 2: (3,3), (1,3) -> 2 ; position 3: accepted >= 2 and drafted >= 3: (3,3) -> 1
    trials = tuning.position_trials(acc, dra, 3)
    assert trials == [4, 2, 1]
    hist = {0: 1, 1: 2, 3: 1}
    biased = tuning.position_estimates(hist, 3)
    fixed = tuning.position_estimates(hist, 3, trials)
    # successes: tail_1 = 3, tail_2 = 1, tail_3 = 1; histogram trials 4, 3, 1
    assert [p.trials for p in biased] == [4, 3, 1]
    assert [p.conditional for p in fixed] == [3 / 4, 1 / 2, 1 / 1]
    assert biased[1].conditional == pytest.approx(1 / 3)  # the (1,1) step counted as a rejection
    est = tuning.analyze(hist, 3, trials=trials)
    assert est.acceptance_basis == tuning.TRIALS_FROM_STEPS
    assert tuning.analyze(hist, 3).acceptance_basis == tuning.TRIALS_FROM_HISTOGRAM


def test_position_trials_outside_their_bounds_are_refused():
    with pytest.raises(ValueError, match="position 2"):
        tuning.position_estimates({0: 1, 1: 2, 3: 1}, 3, [4, 5, 1])
    with pytest.raises(ValueError, match="3 position trial counts"):
        tuning.position_estimates({0: 1}, 2, [1, 1, 1])
