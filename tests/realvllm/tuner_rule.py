"""The sweep's "ahead beyond the noise" bar written out by hand from sweep.json's cells (docs/
sweep.md), for the real-vLLM files that check specmon's decisions against it."""

from __future__ import annotations

import math
import statistics

SIGMA = 1.4826  # 1.4826 MAD estimates a normal sigma
SEPARATION = 3.0  # standard errors between two medians


def throughputs(cell: dict) -> list[float]:
    return [r["output_token_throughput"] for r in cell["repeats"]]


def mad(values: list[float]) -> float:
    med = statistics.median(values)
    return statistics.median(abs(v - med) for v in values)


def median_se(cell: dict) -> float:
    """A median's standard error over n repeats: sqrt(pi/2) sigma / sqrt(n)."""
    tput = throughputs(cell)
    return math.sqrt(math.pi / 2) * SIGMA * mad(tput) / math.sqrt(len(tput))


def ahead(cell: dict, others: list[dict]) -> bool:
    """`cell` measured faster than every one of `others` beyond the noise: its median more
    than 3 standard errors above every other's, or its slowest repeat above every other's
    fastest (the bar an unstable cell clears to stay selectable, and a k > 0 over an
    unstable k=0)."""
    med = statistics.median(throughputs(cell))
    apart = all(
        med - statistics.median(throughputs(o))
        > SEPARATION * math.hypot(median_se(cell), median_se(o))
        for o in others
    )
    slowest_above = all(min(throughputs(cell)) > max(throughputs(o)) for o in others)
    return bool(others) and (apart or slowest_above)
