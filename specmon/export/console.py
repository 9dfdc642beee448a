"""End-of-run console tables in AIPerf's layout (docs/metrics.md §8.4).

The "LLM Metrics" table, then the "Spec Decode" table and, under it, the one-line pooled
histogram. Columns avg, min, max, p99, p90, p50, std; run-level rows show N/A beyond avg.
Row label = header + " (unit)", with a line break instead of the space when the header is
longer than 30 characters. Neither spec table nor histogram line without a record.
Rendered with rich; plain text when the output is not a terminal.

Whole at any width (issue 20 item 3): a table wider than the terminal first takes short
labels (SHORT_LABELS), then drops columns (std, min, max, then the percentiles, p99 and p50
last) down to three, and below that prints each metric as stacked lines; no number is cut.
AIPerf's "Inter Token Latency" is TPOT in vLLM's words, and the label says both.
"""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from specmon.constants import HIST_FOLD_CAP
from specmon.formatting import fmt_number, pack
from specmon.stats import CONSOLE_STAT_KEYS, LLM, METRICS, SPEC

HIST_LABEL = "Accepted drafts per step (% of steps):"
TITLE_PREFIX = "specmon"
DEFAULT_WIDTH = 120  # piped output (a log, a file): as wide as before
# vLLM's bench serve calls AIPerf's Inter Token Latency ((latency - TTFT) / (OSL - 1)) TPOT
HEADERS = {"inter_token_latency": "TPOT · Inter Token Latency"}
SHORT_LABELS = {
    "time_to_first_token": "TTFT ms",
    "time_to_second_token": "TT2T ms",
    "request_latency": "Latency ms",
    "inter_token_latency": "TPOT ms",
    "output_token_throughput_per_user": "tok/s/user",
    "output_sequence_length": "OSL tokens",
    "input_sequence_length": "ISL tokens",
    "output_token_throughput": "Out tok/s",
    "request_throughput": "Req/s",
    "request_count": "Requests",
    "spec_decode_acceptance_length": "AL",
    "spec_decode_token_weighted_acceptance_length": "Tok-wtd AL",
    "spec_decode_draft_acceptance_rate": "Draft acc %",
    "spec_decode_overall_draft_acceptance_rate": "Overall acc %",
    "spec_decode_accepted_per_verified": "Acc/verified",
    "spec_decode_steps": "Steps",
    "spec_decode_zero_step_requests": "Zero-step req",
}
DROP_FIRST = ("std", "min", "max")  # then the percentiles other than p99 and p50, then p99
KEEP_LAST = ("p50", "p99")  # vllm bench serve's Median / P99: the last percentiles to go
MIN_COLUMNS = 3  # fewer would hide most figures: narrower than avg + two, the rows stack


def row_label(tag: str) -> str:
    mdef = METRICS[tag]
    header = HEADERS.get(tag, mdef.header)
    sep = "\n" if len(header) > 30 else " "
    return f"{header}{sep}({mdef.unit})"


def short_label(tag: str) -> str:
    return SHORT_LABELS.get(tag) or f"{METRICS[tag].header} {METRICS[tag].unit}"


def stat_keys(percentiles: tuple[int, ...] | None = None) -> tuple[str, ...]:
    """The columns: avg, min, max, the chosen percentiles (highest first), std."""
    if percentiles is None:
        return CONSOLE_STAT_KEYS
    chosen = tuple(f"p{q}" for q in sorted(set(percentiles), reverse=True))
    return ("avg", "min", "max", *chosen, "std")


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


def _table(
    title: str,
    blocks: dict[str, dict[str, Any]],
    group: str,
    width: int,
    keys: tuple[str, ...] = CONSOLE_STAT_KEYS,
) -> RenderableType | None:
    """The widest layout that fits `width`: long labels, short labels, fewer columns, and
    last stacked lines (each metric's figures under its label)."""
    tags = sorted((t for t in blocks if METRICS[t].group == group), key=lambda t: METRICS[t].order)
    if not tags:
        return None
    for label, shown in _layouts(keys):
        table = _boxed(title, blocks, tags, label, shown)
        if _width_of(table) <= width:
            return table
    return _stacked(title, blocks, tags, keys, width)


def _layouts(keys: tuple[str, ...]) -> list[tuple[Any, tuple[str, ...]]]:
    """Long labels with every column, then short labels shedding columns one by one."""
    order = [k for k in DROP_FIRST if k in keys]
    pcts = sorted((k for k in keys if k.startswith("p")), key=lambda k: -int(k[1:]))
    order += [k for k in pcts if k not in KEEP_LAST] + [k for k in pcts if k in KEEP_LAST]
    out: list[tuple[Any, tuple[str, ...]]] = [(row_label, keys), (short_label, keys)]
    shown = list(keys)
    for key in order:
        if len(shown) <= MIN_COLUMNS:
            break
        shown.remove(key)
        out.append((short_label, tuple(shown)))
    return out


def _boxed(
    title: str,
    blocks: dict[str, dict[str, Any]],
    tags: list[str],
    label: Any,
    keys: tuple[str, ...],
) -> Table:
    table = Table(title=title)
    table.add_column("Metric", justify="right", style="cyan", no_wrap=True)
    for key in keys:
        table.add_column(key, justify="right", style="green", no_wrap=True)
    for tag in tags:
        block = blocks[tag]
        table.add_row(label(tag), *(fmt_number(block.get(k), na="N/A") for k in keys))
    return table


def _width_of(renderable: RenderableType) -> int:
    console = Console(width=10_000, color_system=None)
    return console.measure(renderable).maximum


def _stacked(
    title: str,
    blocks: dict[str, dict[str, Any]],
    tags: list[str],
    keys: tuple[str, ...],
    width: int,
) -> Group:
    """Under each label, `key value` pairs packed into lines of at most `width`."""
    lines: list[RenderableType] = [Text(title, style="bold")]
    for tag in tags:
        lines.append(Text(short_label(tag), style="cyan"))
        pairs = [f"{k} {fmt_number(blocks[tag].get(k), na='N/A')}" for k in keys]
        pairs = [p for p in pairs if not p.endswith(" N/A")] or pairs[:1]
        for line in pack(pairs, width, indent=2):
            lines.append(Text(line, style="green", no_wrap=True, overflow="ignore"))
    return Group(*lines)


@dataclass(frozen=True)
class Layout:
    """What the tables are fitted to: the columns available and the percentiles shown
    (None: CONSOLE_STAT_KEYS' p99, p90, p50)."""

    width: int = DEFAULT_WIDTH
    percentiles: tuple[int, ...] | None = None


def render_console(
    blocks: dict[str, dict[str, Any]],
    pooled_histogram: dict[int, int] | None,
    *,
    error_summary: dict[str, int] | None = None,
    width: int = DEFAULT_WIDTH,
    percentiles: tuple[int, ...] | None = None,
    fidelity: str | None = None,
) -> str:
    """The tables as plain text (no colour, no control codes)."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False)
    layout = Layout(width, percentiles)
    for renderable in _renderables(blocks, pooled_histogram, error_summary, fidelity, layout):
        console.print(renderable)
    return buf.getvalue()


def output_width(file: TextIO | None = None) -> int:
    """The columns to fit: the terminal's on a terminal ($COLUMNS first, as shutil reads
    it), else 120, so a log or a pipe reads the same wherever it was written."""
    import shutil

    if (file or sys.stdout).isatty():
        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    return DEFAULT_WIDTH


def print_console(
    blocks: dict[str, dict[str, Any]],
    pooled_histogram: dict[int, int] | None,
    *,
    error_summary: dict[str, int] | None = None,
    file: TextIO | None = None,
    percentiles: tuple[int, ...] | None = None,
    fidelity: str | None = None,
) -> None:
    """Print the tables: coloured on a terminal, plain text when piped. fidelity: the
    line saying what the engine reported (specmon.specdecode.fidelity.fidelity_line)."""
    layout = Layout(output_width(file), percentiles)
    console = Console(file=file, width=layout.width)
    for renderable in _renderables(blocks, pooled_histogram, error_summary, fidelity, layout):
        console.print(renderable)


def _renderables(
    blocks: dict[str, dict[str, Any]],
    pooled_histogram: dict[int, int] | None,
    error_summary: dict[str, int] | None,
    fidelity: str | None = None,
    layout: Layout | None = None,
) -> list[RenderableType]:
    items: list[RenderableType] = []
    layout = layout or Layout()
    width, keys = layout.width, stat_keys(layout.percentiles)
    main = _table(f"{TITLE_PREFIX} | LLM Metrics", blocks, LLM, width, keys)
    if main is not None:
        items.append(main)
    # The spec table and the histogram line need at least one acceptance record (a
    # counts-only run has draft counts but no steps).
    if "total_draft_tokens" in blocks:
        spec = _table(f"{TITLE_PREFIX} | LLM Metrics: Spec Decode", blocks, SPEC, width, keys)
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
