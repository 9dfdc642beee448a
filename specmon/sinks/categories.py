"""Per-group figures as sinks: every result into a GroupedTable (analysis/groups.py), and
the summary's block for it beside AIPerf's keys: `per_category` (docs/metrics.md §12) and
`per_context_length` (§15)."""

from __future__ import annotations

from typing import Any

from specmon.analysis.categories import CategoryTable
from specmon.analysis.contexts import ContextTable
from specmon.analysis.groups import GroupedTable
from specmon.capture import RawCapture
from specmon.pipeline import RequestResult
from specmon.sinks.base import BaseSink

PER_CATEGORY_KEY = "per_category"
PER_CONTEXT_KEY = "per_context_length"


class GroupSink(BaseSink):
    """Feeds one table; exports its block under `key` (absent when no request had a
    group: no dataset categories, no prompt token counts)."""

    key = ""

    def __init__(self, table: GroupedTable) -> None:
        self.table = table

    def on_result(self, result: RequestResult, capture: RawCapture | None) -> None:
        self.table.add(result)

    def export_extras(self) -> dict[str, Any]:
        block = self.table.export_block()
        return {self.key: block} if block else {}


class CategorySink(GroupSink):
    key = PER_CATEGORY_KEY
    table: CategoryTable

    def __init__(self, table: CategoryTable | None = None) -> None:
        super().__init__(table if table is not None else CategoryTable())


class ContextSink(GroupSink):
    key = PER_CONTEXT_KEY
    table: ContextTable

    def __init__(self, table: ContextTable | None = None) -> None:
        super().__init__(table if table is not None else ContextTable())
