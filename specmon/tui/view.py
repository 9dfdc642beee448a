"""Pure view-model helpers for the monitor: typed snapshot rows in, display rows out.

No Textual here, so every number the screen shows is testable without a terminal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specmon.constants import HIST_FOLD_CAP
from specmon.formatting import fmt_number
from specmon.stats import DERIVED, METRICS, SPEC, MetricRow

NA = "N/A"

# The end-of-run Spec Decode console table (docs/metrics.md §8.4): the SPEC-group metrics of
# specmon.stats in display order, so the live table and the exports share one definition.
SPEC_ROWS: tuple[tuple[str, str, str, bool], ...] = tuple(
    (d.tag, d.header, d.unit, d.kind == DERIVED)
    for d in sorted(METRICS.values(), key=lambda d: d.order)
    if d.group == SPEC
)
SPEC_COLUMNS = ("avg", "min", "max", "p99", "p90", "p50", "std")

# Latency & throughput panel: tag, label, unit, derived.
LATENCY_ROWS: tuple[tuple[str, str, str, bool], ...] = (
    ("time_to_first_token", "TTFT", "ms", False),
    ("inter_token_latency", "TPOT", "ms", False),  # AIPerf: inter token latency
    ("request_latency", "Request Latency", "ms", False),
    ("output_token_throughput_per_user", "Output tok/s/user", "tokens/sec/user", False),
    ("output_token_throughput", "Output tok/s", "tokens/sec", True),
    ("request_throughput", "Requests/s", "requests/sec", True),
)
LATENCY_COLUMNS = ("avg", "p50", "p90", "p99")


def stat_rows(
    stats: Mapping[str, MetricRow],
    rows: Sequence[tuple[str, str, str, bool]],
    columns: Sequence[str],
) -> list[tuple[str, list[str]]]:
    """(label, cells) for each row whose tag has data; derived rows fill only `avg`."""
    out = []
    for tag, header, unit, derived in rows:
        row = stats.get(tag)
        if row is None:
            continue
        cells = [
            fmt_number(row.get(col), na=NA) if (col == "avg" or not derived) else NA
            for col in columns
        ]
        out.append((f"{header} ({unit})", cells))
    return out


@dataclass(frozen=True)
class HistBucket:
    label: str
    count: int
    pct: float  # 0..100 of all verify steps


def fold_histogram(hist: dict[int, int], cap: int = HIST_FOLD_CAP) -> list[HistBucket]:
    """Buckets 0..max observed (gaps shown as 0), keys >= cap folded into one '>=cap' bucket."""
    total = sum(hist.values())
    if total <= 0:
        return []
    top = max(j for j, n in hist.items() if n)
    buckets = []
    for j in range(min(top, cap - 1) + 1):
        buckets.append((str(j), hist.get(j, 0)))
    if top >= cap:
        buckets.append((f">={cap}", sum(n for j, n in hist.items() if j >= cap)))
    return [HistBucket(label, n, 100.0 * n / total) for label, n in buckets]


def bar(fraction: float, width: int) -> str:
    """A horizontal bar of `width` cells with eighth-block resolution."""
    fraction = min(max(fraction, 0.0), 1.0)
    eighths = round(fraction * width * 8)
    full, rest = divmod(eighths, 8)
    partial = " ▏▎▍▌▋▊▉"[rest] if rest else ""
    return ("█" * full + partial).ljust(width)
