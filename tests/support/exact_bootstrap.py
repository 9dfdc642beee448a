"""The exact bootstrap distribution of a ratio of two statistics over every equally likely
resample of two small samples (n^n x m^m), against which the seeded draws' 90% interval is
checked: a 200- or 1000-draw 5% quantile lies between the exact 1% and 10% quantiles, the
95% one between 90% and 99%."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Sequence


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def score(xs: Sequence[float]) -> float:
    """The sweep's score: median - 1.4826 MAD, at least 0 (docs/tuning.md §10)."""
    med = statistics.median(xs)
    return max(med - 1.4826 * statistics.median(abs(x - med) for x in xs), 0.0)


def ratio_ranges(
    a: Sequence[float], b: Sequence[float], stat: Callable[[Sequence[float]], float]
) -> tuple[tuple[float, float], tuple[float, float]]:
    """(1%, 10%) and (90%, 99%) quantiles of stat(a*) / stat(b*) - 1 (fractions)."""
    ratios = sorted(
        stat(x) / stat(y) - 1
        for x in itertools.product(a, repeat=len(a))
        for y in itertools.product(b, repeat=len(b))
    )

    def at(q: float) -> float:
        return ratios[int(q * (len(ratios) - 1))]

    return (at(0.01), at(0.10)), (at(0.90), at(0.99))


def within(band: tuple[float, float], ranges: tuple[tuple[float, float], ...]) -> bool:
    """Whether a stated band's ends lie in the exact ranges (a 1e-9 slack for rounding)."""
    (lo_a, lo_b), (hi_a, hi_b) = ranges
    low, high = band
    return lo_a - 1e-9 <= low <= lo_b + 1e-9 and hi_a - 1e-9 <= high <= hi_b + 1e-9
