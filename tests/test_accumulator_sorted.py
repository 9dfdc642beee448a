"""accumulator.SortedValues (the live view's incremental order statistics) against sorted().

Expected values come from Python's sorted() and from compute_stats on a sorted list, the
way the statistics were computed before the blocks existed.
"""

from __future__ import annotations

import random

import pytest

from specmon.accumulator import MetricColumn, SortedValues
from specmon.stats import compute_stats


def _values(rng: random.Random, kind: str, n: int) -> list:
    if kind == "int":
        return [rng.randrange(0, 50) for _ in range(n)]  # many duplicates
    if kind == "float":
        return [rng.uniform(0, 1e6) for _ in range(n)]
    return [
        rng.choice([rng.randrange(0, 100), float(rng.randrange(0, 100)), rng.random()])
        for _ in range(n)
    ]  # ints and equal floats mixed


@pytest.mark.parametrize("kind", ["int", "float", "mixed"])
def test_every_index_matches_sorted_through_rebuilds_inserts_and_splits(kind):
    rng = random.Random(7)
    sv, everything = SortedValues(), []
    # 2,000 first (one sort: 0 <= 32 * 2000), then batches of 10 (inserted one by one:
    # 2000 > 32 * 10), 6,000 more values, so 512-value blocks fill past 1,024 and split.
    batches = [_values(rng, kind, 2000)] + [_values(rng, kind, 10) for _ in range(600)]
    batches += [sorted(_values(rng, kind, 10)), sorted(_values(rng, kind, 10), reverse=True)]
    for batch in batches:
        sv.update(batch)
        everything.extend(batch)
    expected = sorted(everything)
    assert len(sv) == len(expected) == 8020
    assert sv.to_list() == expected
    assert [sv[i] for i in range(len(sv))] == expected
    assert sv[-1] == expected[-1] and sv[-len(sv)] == expected[0]
    assert max(len(b) for b in sv._blocks) <= 2 * SortedValues.LOAD  # splits happened
    assert len(sv._blocks) > 8020 // (2 * SortedValues.LOAD)
    with pytest.raises(IndexError):
        sv[len(sv)]


def test_empty_and_single_value():
    sv = SortedValues()
    assert len(sv) == 0 and not sv and sv.to_list() == []
    sv.update([])
    sv.update([3.5])
    assert sv[0] == sv[-1] == 3.5


@pytest.mark.parametrize("exact", [True, False])
def test_column_statistics_equal_a_full_sort_after_each_refresh(exact):
    rng = random.Random(11)
    column, seen = MetricColumn(), []
    for step in range(40):
        for _ in range(rng.choice([1, 5, 400])):
            value = rng.uniform(0, 100) if step % 2 else rng.randrange(0, 100)
            column.add(value)
            seen.append(value)
        frozen = column.freeze()
        got = column.stats(frozen, exact=exact)
        n, total, running_std = frozen
        want = compute_stats(
            sorted(seen), total=total, presorted=True, std=None if exact else running_std
        )
        assert got == want
