"""Per-category aggregation: every run-level figure, computed per prompt category.

A `CategoryTable` keeps one `RunAccumulator` per category (the category a dataset row gave
the request, docs/datasets.md), so each category's export blocks are the accumulator's own
summary code run on that category's results (docs/metrics.md §12). Adding
a result is O(1) amortised: a dict lookup, the accumulator's add, five running sums.

Requests without a category are counted under `UNCATEGORIZED` when the run has categorised
ones too; a run where no request had a category has no per-category figures at all.

The acceptance length's 95 % interval treats each request as one cluster of verify steps:
AL = 1 + A/S with A = sum a_r, S = sum s_r over requests r; the ratio estimator's variance
is n/(n-1) * sum (a_r - R s_r)^2 / S^2 with R = A/S (the delta method), computed from the
running sums of a, s, a^2, s^2 and a*s, so it needs no pass over the results.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from specmon.accumulator import RunAccumulator
from specmon.decision.acceptance import Z95
from specmon.pipeline import RequestResult
from specmon.stats import row_value

UNCATEGORIZED = "(none)"
HISTOGRAM_KEY = "pooled_spec_decode_acceptance_histogram"
INTERVAL_KEY = "spec_decode_acceptance_length_ci95"


@dataclass
class _RatioSums:
    """Running sums of per-request accepted drafts (a) and verify steps (s)."""

    n: int = 0
    a: float = 0.0
    s: float = 0.0
    aa: float = 0.0
    ss: float = 0.0
    as_: float = 0.0

    def add(self, accepted: int, steps: int) -> None:
        self.n += 1
        self.a += accepted
        self.s += steps
        self.aa += accepted * accepted
        self.ss += steps * steps
        self.as_ += accepted * steps

    def interval(self) -> tuple[float, float] | None:
        """95 % interval of 1 + A/S (None under two requests or without steps)."""
        if self.n < 2 or self.s <= 0:
            return None
        r = self.a / self.s
        resid = max(self.aa - 2 * r * self.as_ + r * r * self.ss, 0.0)
        se = math.sqrt(self.n / (self.n - 1) * resid) / self.s
        return 1.0 + r - Z95 * se, 1.0 + r + Z95 * se


@dataclass(frozen=True)
class CategoryRow:
    """One line of the live per-category table (None: no value yet)."""

    category: str
    requests: int
    acceptance_length: float | None  # token-weighted: 1 + accepted / steps
    acceptance_length_ci95: tuple[float, float] | None
    draft_acceptance_rate: float | None  # overall, %
    output_token_throughput: float | None  # the category's output tokens / its duration
    ttft_p50_ms: float | None
    errors: int = 0

    def value(self, column: str) -> Any:
        """The figure of one of ROW_FIELDS."""
        if column not in ROW_FIELDS:
            raise ValueError(f"unknown column {column!r}; one of {', '.join(ROW_FIELDS)}")
        return asdict(self)[column]


ROW_FIELDS = (
    "category",
    "requests",
    "acceptance_length",
    "draft_acceptance_rate",
    "output_token_throughput",
    "ttft_p50_ms",
)


class CategoryTable:
    """One accumulator per category, fed result by result (`add`) or by reading an
    append-only results list incrementally (`catch_up`)."""

    def __init__(self) -> None:
        self._by_category: dict[str, RunAccumulator] = {}
        self._ratios: dict[str, _RatioSums] = {}
        self._categorised = False
        self._read = 0  # how much of the list given to catch_up has been read
        self._lock = threading.Lock()  # add() on the load thread vs readers

    # ------------------------------------------------------------------ adding
    def add(self, result: RequestResult) -> None:
        if result.phase == "warmup":
            return
        name = result.category or UNCATEGORIZED
        with self._lock:
            if result.category:
                self._categorised = True
            acc = self._by_category.get(name)
            if acc is None:
                # statistics only: the run's own accumulator keeps the request log, so a
                # category keeps none (10,000 results per category once cost 2.6 kB/request
                # of growth)
                acc = self._by_category[name] = RunAccumulator(live=False, window=0)
                self._ratios[name] = _RatioSums()
            acc.add(result)
            rec = result.outcome.record
            if (
                result.error is None
                and rec is not None
                and rec.num_spec_steps is not None  # counts only: no AL to add
                and not result.outcome.zero_step
            ):
                self._ratios[name].add(rec.num_accepted_draft_tokens, rec.num_spec_steps)

    def catch_up(self, results: Sequence[RequestResult]) -> int:
        """Add results[read:] (an append-only list, e.g. RunAccumulator.results); returns
        how many were added."""
        end = len(results)
        new = results[self._read : end]
        self._read = end
        for result in new:
            self.add(result)
        return len(new)

    # ------------------------------------------------------------------ reading
    def categories(self) -> list[str]:
        """Category names in first-seen order; [] when no request had a category."""
        with self._lock:
            return list(self._by_category) if self._categorised else []

    def accumulator(self, category: str) -> RunAccumulator | None:
        return self._by_category.get(category)

    def interval(self, category: str) -> tuple[float, float] | None:
        with self._lock:
            sums = self._ratios.get(category)
            return None if sums is None else sums.interval()

    def rows(self) -> list[CategoryRow]:
        """The live table's rows (first-seen order), from each category's snapshot."""
        out = []
        for name in self.categories():
            snap = self._by_category[name].snapshot()
            spec, std = snap.spec_rows, snap.std_rows
            out.append(
                CategoryRow(
                    category=name,
                    requests=snap.request_count,
                    acceptance_length=row_value(
                        spec, "spec_decode_token_weighted_acceptance_length"
                    ),
                    acceptance_length_ci95=self.interval(name),
                    draft_acceptance_rate=row_value(
                        spec, "spec_decode_overall_draft_acceptance_rate"
                    ),
                    output_token_throughput=row_value(std, "output_token_throughput"),
                    ttft_p50_ms=row_value(std, "time_to_first_token", "p50"),
                    errors=snap.error_count,
                )
            )
        return out

    def export_block(self) -> dict[str, dict[str, Any]]:
        """{category: {tag: block, ..., the pooled histogram, the AL interval}}: the same
        exact statistics as the run-level blocks (RunAccumulator.summary)."""
        out: dict[str, dict[str, Any]] = {}
        for name in self.categories():
            acc = self._by_category[name]
            block: dict[str, Any] = dict(acc.summary())
            if acc.spec_request_count:
                block[HISTOGRAM_KEY] = {str(j): n for j, n in acc.pooled_histogram_sorted().items()}
            ci = self.interval(name)
            if ci is not None:
                block[INTERVAL_KEY] = {"unit": "ratio", "low": ci[0], "high": ci[1]}
            out[name] = block
        return out

    def histograms(self) -> dict[str, dict[int, int]]:
        """{category: pooled histogram} (categories with spec-decode records only)."""
        return {
            name: self._by_category[name].pooled_histogram_sorted()
            for name in self.categories()
            if self._by_category[name].spec_request_count
        }

    def num_spec_tokens(self) -> int | None:
        for acc in self._by_category.values():
            if acc.num_spec_tokens is not None:
                return acc.num_spec_tokens
        return None


def sort_rows(rows: list[CategoryRow], column: str, descending: bool = False) -> list[CategoryRow]:
    """Rows ordered by one of ROW_FIELDS; rows without a value go last either way."""
    present = [r for r in rows if r.value(column) is not None]
    missing = [r for r in rows if r.value(column) is None]
    present.sort(key=lambda r: r.value(column), reverse=descending)
    return present + missing
