"""Per-category aggregation: every run-level figure, computed per prompt category.

A `CategoryTable` is a GroupedTable (analysis/groups.py) keyed by the category a dataset
row gave the request (docs/datasets.md), so each category's export blocks are the
accumulator's own summary code run on that category's results (docs/metrics.md §12).

Requests without a category are counted under `UNCATEGORIZED` when the run has categorised
ones too; a run where no request had a category has no per-category figures at all. The
acceptance length's 95 % interval is analysis/groups.py's (each request one cluster of
verify steps).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from specmon.analysis.groups import HISTOGRAM_KEY, INTERVAL_KEY, GroupedTable, sort_rows
from specmon.stats import row_value

UNCATEGORIZED = "(none)"
__all__ = ["HISTOGRAM_KEY", "INTERVAL_KEY", "UNCATEGORIZED", "CategoryTable", "sort_rows"]


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


class CategoryTable(GroupedTable):
    """One accumulator per category (analysis/groups.py GroupedTable)."""

    def __init__(self) -> None:
        # TTFT stays in memory: the live row shows its p50 (the others are running figures)
        super().__init__(
            lambda result: result.category, UNCATEGORIZED, frozenset({"time_to_first_token"})
        )

    def categories(self) -> list[str]:
        """Category names in first-seen order; [] when no request had a category."""
        return self.groups()

    def rows(self) -> list[CategoryRow]:
        """The live table's rows (first-seen order), from each category's snapshot."""
        out = []
        for name in self.categories():
            acc = self.accumulator(name)
            assert acc is not None
            snap = acc.snapshot()
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
