"""Per-category figures as a sink: every result into a CategoryTable, and the summary's
`per_category` block (docs/metrics.md §12)."""

from __future__ import annotations

from typing import Any

from specmon.analysis.categories import CategoryTable
from specmon.capture import RawCapture
from specmon.pipeline import RequestResult
from specmon.sinks.base import BaseSink

PER_CATEGORY_KEY = "per_category"


class CategorySink(BaseSink):
    def __init__(self, table: CategoryTable | None = None) -> None:
        self.table = table if table is not None else CategoryTable()

    def on_result(self, result: RequestResult, capture: RawCapture | None) -> None:
        self.table.add(result)

    def export_extras(self) -> dict[str, Any]:
        block = self.table.export_block()
        # absent when no request carried a category (no dataset categories in the run)
        return {PER_CATEGORY_KEY: block} if block else {}
