"""The acceptance alarms' rules on hand-built sequences: each fires where its rule says
and stays quiet on a steady run (figures worked out by hand in the comments)."""

from __future__ import annotations

import itertools
import random

from specmon.analysis import alarms as A
from specmon.analysis.alarms import AlarmMonitor, Observation, mean_and_se, significant_drop


def feed(values: list[float], k: float = 3, tps: list[float] | None = None) -> AlarmMonitor:
    monitor = AlarmMonitor()
    speeds = tps if tps is not None else [100.0] * len(values)
    for i, (al, s) in enumerate(zip(values, speeds)):
        monitor.observe(Observation(al, k, end_ns=1_000_000_000 * (i + 1), output_tps=s))
    return monitor


def names(monitor: AlarmMonitor) -> list[str]:
    return [a.name for a in monitor.alarms]


def steady(n: int) -> list[float]:
    """A steady run: 2.0, 3.0, 2.5 repeating (mean 2.5; never 1.0, never k+1 = 4)."""
    return list(itertools.islice(itertools.cycle([2.0, 3.0, 2.5]), n))


def test_mean_and_se_by_hand() -> None:
    # 1, 2, 3: mean 2, sample variance 1, se = sqrt(1/3)
    mean, se = mean_and_se([1.0, 2.0, 3.0])
    assert mean == 2.0 and abs(se - 3**-0.5) < 1e-12


def test_significant_drop_needs_four_se_and_the_minimum() -> None:
    # before 2,3 x15 (se of each mean = sqrt(0.2586/30) = 0.0928); after 1,2 (drop 1.0)
    before, after = [2.0, 3.0] * 15, [1.0, 2.0] * 15
    assert significant_drop(before, after)[0]  # 1.0 > 4 * hypot(0.0928, 0.0928) = 0.525
    # a drop of 0.4 < 0.525: inside the noise (but over 3 s.e., 0.394)
    assert not significant_drop(before, [1.6 + x for x in [0.0, 1.0] * 15])[0]
    assert significant_drop(before, [1.6 + x for x in [0.0, 1.0] * 15], sigmas=3)[0]
    # noise-free means, drop 0.05: over 4 s.e. (0) but under DRIFT_MIN_DROP
    assert not significant_drop([2.0] * 30, [1.95] * 30)[0]


def test_a_steady_random_run_raises_nothing() -> None:
    # 20,000 requests, acceptance length uniform on 1..4 (mean 2.5): ~660 windows, none
    # over 4 s.e. (at 3 s.e. seeds 3-6 of this generator raise false drifts)
    rng = random.Random(1)
    values = [1 + 3 * rng.random() for _ in range(20_000)]
    assert feed(values, tps=[100 + rng.random() for _ in values]).alarms == []


def test_steady_run_raises_nothing() -> None:
    assert feed(steady(300)).alarms == []


def test_garbled_fires_at_the_twentieth_request_near_one() -> None:
    monitor = feed([1.0, 1.04] * 10 + [1.0] * 5)  # mean 1.02 <= 1.1 at request 20
    assert names(monitor) == ["garbled_drafter"]
    assert monitor.alarms[0].since_request == A.GARBLED_REQUESTS
    assert monitor.alarms[0].since_s == 19.0  # ends 1 s apart, from the first one's
    assert "1.02" in monitor.alarms[0].message


def test_garbled_quiet_just_above_the_margin_and_ends_when_acceptance_returns() -> None:
    assert feed([1.15] * 40).alarms == []  # 1.15 > 1 + 0.1
    monitor = feed([1.0] * 20 + [3.0] * 5)
    # at request 22 the last 20 are 18 x 1.0 + 2 x 3.0: mean 1.2 > 1.1, so it ends there
    assert monitor.alarms[0].until_request == 22 and monitor.active == []


def test_repetition_needs_k_plus_one_on_every_request() -> None:
    monitor = feed([4.0] * 20)  # k = 3: 4.0 is every draft accepted
    assert names(monitor) == ["degenerate_repetition"]
    assert monitor.alarms[0].since_request == 20
    assert feed([4.0] * 19 + [3.9] + [4.0] * 18).alarms == []  # no 20 in a row
    assert feed([4.0] * 40, k=5).alarms == []  # k = 5: 4.0 is not k+1


def test_drift_fires_on_a_drop_below_the_baseline() -> None:
    # baseline: the first 100, 2,3 x50 (mean 2.5, se 0.0503); then 1.5,2.5 (mean 2.0, se
    # 0.0928): looked at every 30 requests from 130 on, when the window is all new; the drop
    # 0.5 > 4 * hypot(0.0503, 0.0928) = 0.422
    values = [2.0, 3.0] * 50 + [1.5, 2.5] * 15
    monitor = feed(values)
    assert names(monitor) == ["acceptance_drift"]
    assert monitor.alarms[0].since_request == 130
    assert "below the run's baseline" in monitor.alarms[0].message
    assert feed(values[:129]).alarms == []  # not looked at before the window ends


def test_drift_quiet_for_a_drop_inside_the_noise() -> None:
    assert feed([2.0, 3.0] * 50 + [1.8, 2.8] * 60).alarms == []  # drop 0.2 < 0.422


def test_not_paying_fires_when_acceptance_rises_and_speed_does_not() -> None:
    values = [2.0, 3.0] * 15 + [3.0, 4.0] * 15  # acceptance up by 1.0 (> 0.525)
    monitor = feed(values, tps=[100.0] * 30 + [95.0] * 30)  # speed down
    assert "speculation_not_paying" in names(monitor)
    assert names(monitor).count("acceptance_drift") == 0  # up is not drift


def test_not_paying_quiet_when_speed_rises_with_acceptance() -> None:
    values = [2.0, 3.0] * 15 + [3.0, 4.0] * 15
    assert feed(values, tps=[100.0] * 30 + [103.0] * 30).alarms == []  # +3% > 2%
    # flat within 2% counts as not paying
    assert "speculation_not_paying" in names(feed(values, tps=[100.0] * 30 + [101.0] * 30))
