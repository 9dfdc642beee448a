"""End-of-run console tables in AIPerf's layout (docs/metrics.md §8.4).

The "LLM Metrics" table, then the "Spec Decode" table and, under it, the one-line pooled
histogram. Columns avg, min, max, p99, p90, p50, std; run-level rows show N/A beyond avg.
Row label = header + " (unit)", with a line break instead of the space when the header is
longer than 30 characters. Neither spec table nor histogram line without a record.
Rendered with rich; plain text when the output is not a terminal.
"""

from __future__ import annotations

import io
import sys
from typing import Any, TextIO

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from specmon.constants import HIST_FOLD_CAP
from specmon.formatting import fmt_number
from specmon.stats import CONSOLE_STAT_KEYS, LLM, METRICS, SPEC

HIST_LABEL = "Accepted drafts per step (% of steps):"
TITLE_PREFIX = "specmon"


def row_label(tag: str) -> str:
    mdef = METRICS[tag]
    sep = "\n" if len(mdef.header) > 30 else " "
    return f"{mdef.header}{sep}({mdef.unit})"


def histogram_line(hist: dict[int, int] | None) -> str | None:
    """`Accepted drafts per step (% of steps):  0: 61%   1: 3% ...` or None when empty.

    Buckets 0..max including gaps (0%); keys >= 8 fold into one `>=8` entry. Percentages
    use Python's formatting of the float, i.e. round half to even (12.5 -> 12, 37.5 -> 38).
    """
    if not hist:
        return None
    total = sum(hist.values())
    if total <= 0:
        return None
    top = max(hist)
    entries = []
    for j in range(min(top, HIST_FOLD_CAP - 1) + 1):
        entries.append(f"{j}: {100.0 * hist.get(j, 0) / total:.0f}%")
    if top >= HIST_FOLD_CAP:
        folded = sum(n for j, n in hist.items() if j >= HIST_FOLD_CAP)
        entries.append(f">={HIST_FOLD_CAP}: {100.0 * folded / total:.0f}%")
    return f"  {HIST_LABEL}  " + "   ".join(entries)


def _table(title: str, blocks: dict[str, dict[str, Any]], group: str) -> Table | None:
    tags = sorted((t for t in blocks if METRICS[t].group == group), key=lambda t: METRICS[t].order)
    if not tags:
        return None
    table = Table(title=title)
    table.add_column("Metric", justify="right", style="cyan")
    for key in CONSOLE_STAT_KEYS:
        table.add_column(key, justify="right", style="green")
    for tag in tags:
        block = blocks[tag]
        table.add_row(
            row_label(tag), *(fmt_number(block.get(k), na="N/A") for k in CONSOLE_STAT_KEYS)
        )
    return table


def render_console(
    blocks: dict[str, dict[str, Any]],
    pooled_histogram: dict[int, int] | None,
    *,
    error_summary: dict[str, int] | None = None,
    width: int = 120,
    fidelity: str | None = None,
) -> str:
    """The tables as plain text (no colour, no control codes)."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False)
    for renderable in _renderables(blocks, pooled_histogram, error_summary, fidelity):
        console.print(renderable)
    return buf.getvalue()


def print_console(
    blocks: dict[str, dict[str, Any]],
    pooled_histogram: dict[int, int] | None,
    *,
    error_summary: dict[str, int] | None = None,
    file: TextIO | None = None,
    fidelity: str | None = None,
) -> None:
    """Print the tables: coloured on a terminal, plain text when piped. fidelity: the
    line saying what the engine reported (specmon.specdecode.fidelity.fidelity_line)."""
    console = Console(file=file, width=None if (file or sys.stdout).isatty() else 120)
    for renderable in _renderables(blocks, pooled_histogram, error_summary, fidelity):
        console.print(renderable)


def _renderables(
    blocks: dict[str, dict[str, Any]],
    pooled_histogram: dict[int, int] | None,
    error_summary: dict[str, int] | None,
    fidelity: str | None = None,
) -> list[RenderableType]:
    items: list[RenderableType] = []
    main = _table(f"{TITLE_PREFIX} | LLM Metrics", blocks, LLM)
    if main is not None:
        items.append(main)
    # The spec table and the histogram line need at least one acceptance record (a
    # counts-only run has draft counts but no steps).
    if "total_draft_tokens" in blocks:
        spec = _table(f"{TITLE_PREFIX} | LLM Metrics: Spec Decode", blocks, SPEC)
        if spec is not None:
            items.append(spec)
        line = histogram_line(pooled_histogram)
        if line:
            items.append(Text(line, style="cyan"))
        if fidelity:
            items.append(Text(fidelity, style="cyan"))
    if error_summary:
        parts = ", ".join(
            f"{k}: {v}" for k, v in sorted(error_summary.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        items.append(Text(f"Errors: {sum(error_summary.values())} ({parts})", style="red"))
    return items
