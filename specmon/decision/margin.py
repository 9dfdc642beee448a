"""A measured margin: how much one arm beat another (answer / other - 1), with the 90%
interval of the same ratio over bootstrap draws. One declaration for every surface that
states a margin: the live measured answer (decision/measured.py, draws over requests) and
the sweep's decisions (decision/cells.py, draws over repeats)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

LEVEL = 0.90  # the stated intervals are 90%


def quantile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between the order statistics (numpy's default)."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def interval(ratios: Sequence[float]) -> tuple[float, float]:
    """The central LEVEL interval of bootstrap draws."""
    tail = (1 - LEVEL) / 2
    return quantile(ratios, tail), quantile(ratios, 1 - tail)


@dataclass(frozen=True)
class Margin:
    """answer / other - 1 (a ratio when `times`), measured, with its 90% interval (None:
    no noise known, too few measurements to draw from)."""

    other: int
    value: float
    low: float | None
    high: float | None

    def percent(self) -> str:
        band = "" if self.low is None else f" [{100 * self.low:+.1f}..{100 * self.high:+.1f}]"  # type: ignore[operator]
        return f"{100 * self.value:+.1f}%{band}"

    def times(self) -> str:
        band = "" if self.low is None else f" [{1 + self.low:.2f}..{1 + self.high:.2f}]"  # type: ignore[operator]
        return f"{1 + self.value:.2f}x{band}"

    def to_dict(self) -> dict[str, Any]:
        band = None if self.low is None else [self.low, self.high]
        return {"k": self.other, "ratio_minus_1": self.value, "interval90": band}
