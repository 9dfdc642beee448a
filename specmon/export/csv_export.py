"""profile_export_aiperf.csv: AIPerf's two-section layout (docs/metrics.md §8.2).

Section 1: `Metric,avg,min,max,sum,p1..p99,std`, record metrics sorted by tag.
Blank line. Section 2: `Metric,Value`, run-level metrics sorted by tag.
Metric column = header + " (unit)", no suffix for `count` / `requests`. Ints plain,
reals with 2 decimals, missing empty. CRLF line endings (Python's csv default, as AIPerf).
No histogram.

specmon's addition after AIPerf's two sections (docs/metrics.md §12):
blank line, `Category,Metric,avg,min,...,std` (each category's record metrics), blank line,
`Category,Metric,Value` (its run-level metrics). AIPerf readers stop at the sections they
know; a run without categories has neither. Last, when the run has acceptance records:
blank line, `Acceptance fidelity,Engine,Label` and one row (level, engine, what the engine
reported and what is therefore unavailable; specmon/specdecode/fidelity.py).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from specmon.export.common import atomic_write
from specmon.formatting import fmt_number
from specmon.stats import CSV_STAT_KEYS, METRICS, PCT_KEYS


def metric_label(tag: str) -> str:
    mdef = METRICS[tag]
    if mdef.unit and mdef.unit.lower() not in ("count", "requests"):
        return f"{mdef.header} ({mdef.unit})"
    return mdef.header


def format_number(value: object) -> str:
    """Ints plain, reals with 2 decimals, missing empty."""
    return fmt_number(value, na="", grouping=False, plain_int=True)


def _split(blocks: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(record-metric blocks, run-level blocks); keys that are not metric tags are left out."""
    blocks = {t: b for t, b in blocks.items() if t in METRICS}
    records = {t: b for t, b in blocks.items() if any(k in b for k in PCT_KEYS)}
    scalars = {t: b for t, b in blocks.items() if t not in records}
    return records, scalars


def _category_sections(writer: Any, per_category: dict[str, dict[str, Any]]) -> None:
    split = {name: _split(blocks) for name, blocks in per_category.items()}
    writer.writerow([])
    writer.writerow(["Category", "Metric", *CSV_STAT_KEYS])
    for name, (records, _) in split.items():
        for tag in sorted(records):
            block = records[tag]
            writer.writerow(
                [name, metric_label(tag), *(format_number(block.get(k)) for k in CSV_STAT_KEYS)]
            )
    writer.writerow([])
    writer.writerow(["Category", "Metric", "Value"])
    for name, (_, scalars) in split.items():
        for tag in sorted(scalars):
            writer.writerow([name, metric_label(tag), format_number(scalars[tag].get("avg"))])


def build_csv(
    blocks: dict[str, dict[str, Any]],
    per_category: dict[str, dict[str, Any]] | None = None,
    fidelity: dict[str, Any] | None = None,
) -> str:
    records, scalars = _split(blocks)
    buf = io.StringIO()
    writer = csv.writer(buf)  # lineterminator "\r\n"
    if records:
        writer.writerow(["Metric", *CSV_STAT_KEYS])
        for tag in sorted(records):
            block = records[tag]
            writer.writerow(
                [metric_label(tag), *(format_number(block.get(k)) for k in CSV_STAT_KEYS)]
            )
        if scalars:
            writer.writerow([])
    if scalars:
        writer.writerow(["Metric", "Value"])
        for tag in sorted(scalars):
            writer.writerow([metric_label(tag), format_number(scalars[tag].get("avg"))])
    if per_category:
        _category_sections(writer, per_category)
    if fidelity:
        writer.writerow([])
        writer.writerow(["Acceptance fidelity", "Engine", "Label"])
        writer.writerow([fidelity.get("level"), fidelity.get("engine"), fidelity.get("label")])
    return buf.getvalue()


def write_csv(
    path: str | Path,
    blocks: dict[str, dict[str, Any]],
    per_category: dict[str, dict[str, Any]] | None = None,
    fidelity: dict[str, Any] | None = None,
) -> Path:
    return atomic_write(path, build_csv(blocks, per_category, fidelity).encode("utf-8"))
