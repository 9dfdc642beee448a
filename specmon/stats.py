"""AIPerf statistics and metric definitions: the one place every number's shape comes from.

Console, TUI and exports all call `compute_stats` and read `METRICS`, so a number specmon
prints and the same number in its exports come from the same function
(docs/metrics.md §2): avg, min, max, p1..p99 by linear interpolation between closest
ranks (numpy's default), population std (ddof 0), count, sum. Pure Python, no numpy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specmon.constants import PERCENTILES

PCT_KEYS: tuple[str, ...] = tuple(f"p{q}" for q in PERCENTILES)
# Key order of a record-metric block in profile_export_aiperf.json (AIPerf 0.13).
JSON_STAT_KEYS: tuple[str, ...] = ("avg", *PCT_KEYS, "min", "max", "std", "count", "sum")
# Column order of the first CSV section.
CSV_STAT_KEYS: tuple[str, ...] = ("avg", "min", "max", "sum", *PCT_KEYS, "std")
# Columns of the console tables.
CONSOLE_STAT_KEYS: tuple[str, ...] = ("avg", "min", "max", "p99", "p90", "p50", "std")

_PAIRWISE_BLOCK = 128


def pairwise_sum(values: Sequence[float]) -> float:
    """Sum in numpy's pairwise order so std matches np.std to the last digit."""
    return _pairwise(values, 0, len(values))


def _pairwise(a: Sequence[float], start: int, n: int) -> float:
    if n < 8:
        total = 0.0
        for i in range(start, start + n):
            total += a[i]
        return total
    if n <= _PAIRWISE_BLOCK:
        r = [float(a[start + j]) for j in range(8)]
        i = 8
        stop = n - n % 8
        while i < stop:
            base = start + i
            for j in range(8):
                r[j] += a[base + j]
            i += 8
        total = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for k in range(start + i, start + n):
            total += a[k]
        return total
    half = n // 2
    half -= half % 8
    return _pairwise(a, start, half) + _pairwise(a, start + half, n - half)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks on an ascending sequence.

    virtual index v = q/100 * (n-1); value = x[lo] + (v - lo) * (x[hi] - x[lo]).
    """
    n = len(sorted_values)
    if n == 0:
        raise ValueError("percentile of an empty sequence")
    v = q / 100.0 * (n - 1)
    lo = int(v)
    hi = min(lo + 1, n - 1)
    x_lo = float(sorted_values[lo])
    return x_lo + (v - lo) * (float(sorted_values[hi]) - x_lo)


def population_std(sorted_values: Sequence[float], exact: bool = True) -> float:
    """ddof=0 std. exact=True follows numpy's pairwise order; False uses fsum (faster)."""
    n = len(sorted_values)
    if n == 0:
        return 0.0
    if exact:
        mean = pairwise_sum(sorted_values) / n
        return math.sqrt(pairwise_sum([(x - mean) * (x - mean) for x in sorted_values]) / n)
    mean = math.fsum(sorted_values) / n
    return math.sqrt(math.fsum((x - mean) * (x - mean) for x in sorted_values) / n)


def compute_stats(
    values: Sequence[float],
    *,
    total: float | None = None,
    presorted: bool = False,
    exact: bool = True,
    std: float | None = None,
) -> dict[str, float | int]:
    """The full AIPerf statistics dict of one record metric, in JSON key order.

    `total` is the running sum in arrival order (what AIPerf divides for avg); when absent
    the values are summed in the order given. `std`, when given, is used as is (a live
    view passes a running estimate). Raises ValueError on an empty sequence.
    """
    if not values:
        raise ValueError("no values")
    xs = values if presorted else sorted(values)
    n = len(xs)
    if total is None:
        total = 0.0
        for x in values:
            total += x
    out: dict[str, float | int] = {"avg": float(total) / n}
    for q, key in zip(PERCENTILES, PCT_KEYS):
        out[key] = percentile(xs, q)
    out["min"] = float(xs[0])
    out["max"] = float(xs[-1])
    out["std"] = std if std is not None else population_std(xs, exact=exact)
    out["count"] = n
    out["sum"] = float(total)
    return out


# --------------------------------------------------------------------------- metric tags

RECORD = "record"  # one value per request; full statistics
DERIVED = "derived"  # one value per run; `avg` only

LLM = "llm"  # the main "LLM Metrics" console table
SPEC = "spec"  # the "Spec Decode" console table
HIDDEN = "hidden"  # exports only


@dataclass(frozen=True, slots=True)
class MetricDef:
    tag: str
    header: str
    unit: str
    kind: str
    group: str
    order: int


def _defs(*rows: tuple[str, str, str, str, str, int]) -> dict[str, MetricDef]:
    return {r[0]: MetricDef(*r) for r in rows}


# Units are AIPerf's display units; latencies are ms, durations sec.
# one metric a line, so the table reads across
# fmt: off
METRICS: dict[str, MetricDef] = _defs(
    ("time_to_first_token", "Time to First Token", "ms", RECORD, LLM, 100),
    ("time_to_second_token", "Time to Second Token", "ms", RECORD, LLM, 110),
    ("request_latency", "Request Latency", "ms", RECORD, LLM, 300),
    ("decode_duration", "Decode Duration", "ms", RECORD, HIDDEN, 350),
    ("inter_token_latency", "Inter Token Latency", "ms", RECORD, LLM, 400),
    ("output_token_throughput_per_user", "Output Token Throughput Per User", "tokens/sec/user", RECORD, LLM, 500),
    ("e2e_output_token_throughput", "E2E Output Token Throughput", "tokens/sec/user", RECORD, HIDDEN, 510),
    ("output_sequence_length", "Output Sequence Length", "tokens", RECORD, LLM, 600),
    ("input_sequence_length", "Input Sequence Length", "tokens", RECORD, LLM, 700),
    ("output_token_throughput", "Output Token Throughput", "tokens/sec", DERIVED, LLM, 800),
    ("input_token_throughput", "Input Token Throughput", "tokens/sec", DERIVED, HIDDEN, 805),
    ("total_token_throughput", "Total Token Throughput", "tokens/sec", DERIVED, HIDDEN, 810),
    ("request_throughput", "Request Throughput", "requests/sec", DERIVED, LLM, 900),
    ("request_count", "Request Count", "requests", DERIVED, LLM, 1000),
    ("request_error_rate", "Request Error Rate", "%", DERIVED, HIDDEN, 1080),
    ("error_request_count", "Error Request Count", "requests", DERIVED, HIDDEN, 1100),
    ("benchmark_duration", "Benchmark Duration", "sec", DERIVED, HIDDEN, 1200),
    ("total_output_tokens", "Total Output Tokens", "tokens", DERIVED, HIDDEN, 1300),
    ("total_osl", "Total Output Sequence Length", "tokens", DERIVED, HIDDEN, 1310),
    ("total_isl", "Total Input Sequence Length", "tokens", DERIVED, HIDDEN, 1320),
    ("spec_decode_acceptance_length", "Acceptance Length", "ratio", RECORD, SPEC, 5000),
    ("spec_decode_token_weighted_acceptance_length", "Token-Weighted Acceptance Length", "ratio", DERIVED, SPEC, 5010),
    ("spec_decode_draft_acceptance_rate", "Draft Acceptance Rate", "%", RECORD, SPEC, 5020),
    ("spec_decode_overall_draft_acceptance_rate", "Overall Draft Acceptance Rate", "%", DERIVED, SPEC, 5025),
    ("spec_decode_accepted_per_verified", "Accepted per Verified", "ratio", RECORD, SPEC, 5030),
    ("spec_decode_steps", "Spec Decode Steps", "count", RECORD, SPEC, 5040),
    ("spec_decode_zero_step_requests", "Zero-Step Requests", "requests", DERIVED, SPEC, 5045),
    ("spec_decode_accepted_draft_tokens", "Accepted Draft Tokens", "tokens", RECORD, HIDDEN, 5050),
    ("spec_decode_draft_tokens", "Draft Tokens", "tokens", RECORD, HIDDEN, 5060),
    ("total_spec_decode_steps", "Total Spec Decode Steps", "count", DERIVED, HIDDEN, 5140),
    ("total_accepted_draft_tokens", "Total Accepted Draft Tokens", "tokens", DERIVED, HIDDEN, 5150),
    ("total_draft_tokens", "Total Draft Tokens", "tokens", DERIVED, HIDDEN, 5160),
)
# fmt: on

SPEC_RECORD_TAGS: tuple[str, ...] = (
    "spec_decode_acceptance_length",
    "spec_decode_draft_acceptance_rate",
    "spec_decode_accepted_per_verified",
    "spec_decode_steps",
    "spec_decode_accepted_draft_tokens",
    "spec_decode_draft_tokens",
)
STD_RECORD_TAGS: tuple[str, ...] = tuple(
    t for t, d in METRICS.items() if d.kind == RECORD and not t.startswith("spec_decode")
)


def is_spec_tag(tag: str) -> bool:
    return tag.startswith("spec_decode") or tag in (
        "total_spec_decode_steps",
        "total_accepted_draft_tokens",
        "total_draft_tokens",
    )


Number = float | int


@dataclass(frozen=True, slots=True)
class MetricRow:
    """One metric's statistics, typed: what the live view reads and what the JSON export
    block is written from (`block()`). A record metric (one value per request) has every
    column; a derived one (one value per run) only `avg` (`derived`)."""

    unit: str
    avg: Number | None
    derived: bool = False
    p1: Number | None = None
    p5: Number | None = None
    p10: Number | None = None
    p25: Number | None = None
    p50: Number | None = None
    p75: Number | None = None
    p90: Number | None = None
    p95: Number | None = None
    p99: Number | None = None
    min: Number | None = None
    max: Number | None = None
    std: Number | None = None
    count: int | None = None
    sum: Number | None = None

    def get(self, column: str) -> Number | None:
        """A column by its export name ("avg", "p50", "std", ...); None when it has none."""
        if column not in JSON_STAT_KEYS:
            raise KeyError(column)
        value: Number | None = getattr(self, column)
        return value

    def block(self) -> dict[str, Any]:
        """The JSON export block: {unit, avg, p1.., min, max, std, count, sum} or {unit, avg}."""
        block: dict[str, Any] = {"unit": self.unit}
        for key in ("avg",) if self.derived else JSON_STAT_KEYS:
            block[key] = getattr(self, key)
        return block

    @classmethod
    def of_block(cls, block: Mapping[str, Any]) -> MetricRow:
        """The row a JSON export block was written from (block()'s inverse): a block with
        only `avg` is a derived metric's; a column that is not a number reads as None."""
        values = {key: _number(block.get(key)) for key in JSON_STAT_KEYS}
        count = values.pop("count")
        derived = all(values[key] is None for key in JSON_STAT_KEYS if key not in ("avg", "count"))
        return cls(
            str(block.get("unit", "")),
            derived=derived and count is None,
            count=None if count is None else int(count),
            **values,
        )


Rows = Mapping[str, MetricRow]  # tag -> its statistics (RunSnapshot.spec_rows / std_rows)


def row_value(rows: Rows, tag: str, column: str = "avg") -> float | None:
    """One column of one metric's row, as a float; None when the run has no value for it."""
    row = rows.get(tag)
    value = None if row is None else row.get(column)
    return None if value is None else float(value)


def summary_rows(summary: Mapping[str, Any]) -> dict[str, MetricRow]:
    """Every metric block of an export summary (a known tag holding a block), typed."""
    return {
        tag: MetricRow.of_block(block)
        for tag, block in summary.items()
        if tag in METRICS and isinstance(block, Mapping)
    }


def _number(value: Any) -> Number | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def metric_row(
    tag: str, stats: dict[str, Number] | None = None, *, value: Number | None = None
) -> MetricRow:
    """A metric's row from compute_stats' dict (a record metric) or its one value."""
    unit = METRICS[tag].unit
    if stats is None:
        return MetricRow(unit, value, derived=True)
    return MetricRow(
        unit,
        **{k: stats[k] for k in JSON_STAT_KEYS},  # type: ignore[arg-type]
    )


def metric_block(
    tag: str, stats: dict[str, Number] | None = None, *, value: Number | None = None
) -> dict[str, Any]:
    """A JSON export block: {unit, avg, p1.., min, max, std, count, sum} or {unit, avg}."""
    return metric_row(tag, stats, value=value).block()
