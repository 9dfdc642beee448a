"""Number and table formatting for every text specmon prints (console, TUI, CLI tables, CSV).

One function, `fmt_number`, formats every number; callers differ only in its arguments:

| where | call | 1234.5 | None |
| --- | --- | --- | --- |
| console tables, TUI cells | `fmt_number(v, na="N/A")` | `1,234.50` | `N/A` |
| CSV export | `fmt_number(v, na="", grouping=False, plain_int=True)` | `1234.50` | `` |
| compare / tune tables | `fmt_number(v, digits)` | `1,234.50` | `-` |
| segments table | `fmt_number(v, digits, grouping=False)` | `1234.50` | `-` |

Bools, non-numbers and non-finite floats print as the missing marker.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specmon.interfaces import LoadProgress


def fmt_number(
    value: object,
    digits: int = 2,
    *,
    na: str = "-",
    grouping: bool = True,
    signed: bool = False,
    suffix: str = "",
    plain_int: bool = False,
) -> str:
    """`value` with `digits` decimals (thousands separators unless `grouping` is off), a
    leading sign when `signed`, then `suffix`; `na` when there is no number to show.
    `plain_int` prints an int as is (the CSV's "ints plain, reals with 2 decimals")."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return na
    if isinstance(value, float) and not math.isfinite(value):
        return na
    if plain_int and isinstance(value, int):
        return str(value)
    spec = ("+" if signed else "") + ("," if grouping else "") + f".{digits}f"
    return f"{value:{spec}}{suffix}"


NO_SPECULATION = "no speculation"


def k_label(k: int | None, short: bool = False) -> str:
    """How every surface names a k: "k=4"; "k=0 (no speculation)" (`short`: "k=0", where
    space is tight); "k=?" while it is not known."""
    if k is None:
        return "k=?"
    if k == 0 and not short:
        return f"k=0 ({NO_SPECULATION})"
    return f"k={k}"


def fmt_signed(value: object, suffix: str = "", digits: int = 2) -> str:
    """A delta: `+1,234.50` and the suffix, `-` when missing."""
    return fmt_number(value, digits, signed=True, suffix=suffix)


def format_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    right: Sequence[bool] | None = None,
    width: int | None = None,
) -> str:
    """A plain-text table (no colour, no box characters): safe in any terminal or log.

    Wider than `width`, it becomes stacked rows (`stacked_rows`): no cell is ever cut."""
    cells = [list(map(str, r)) for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    align = list(right) if right is not None else [i > 0 for i in range(len(headers))]
    if width is not None and sum(widths) + 2 * (len(widths) - 1) > width:
        return "\n".join(stacked_rows(headers, cells, width))

    def line(row: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, align)
        ).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in cells])


def stacked_rows(headers: Sequence[str], rows: Iterable[Sequence[str]], width: int) -> list[str]:
    """Each row as its first cell on a line, then `header value` pairs packed into lines of
    at most `width` (a pair longer than that gets a line of its own, whole)."""
    lines: list[str] = []
    for row in rows:
        pairs = [f"{h} {c}" for h, c in zip(headers[1:], row[1:]) if c.strip()]
        lines.append(str(row[0]))
        lines += pack(pairs, width)
    return lines


def grid_lines(
    corner: str,
    headers: Sequence[str],
    rows: Sequence[tuple[str, Sequence[str]]],
    width: int,
    gap: int = 2,
) -> list[str]:
    """A labelled grid (the sweep's k x concurrency tables): a left-aligned label column,
    then right-aligned value columns, each as wide as its widest cell. Wider than `width`,
    the value columns split into blocks of as many as fit, each block under its own header
    with the labels repeated; a column that fits in no block stacks (`stacked_rows`).
    Nothing is cut."""
    label_w = max([len(corner)] + [len(label) for label, _ in rows])
    widths = [max([len(h)] + [len(cells[i]) for _, cells in rows]) for i, h in enumerate(headers)]
    blocks: list[list[int]] = []
    used = label_w
    for i, w in enumerate(widths):
        if blocks and used + gap + w <= width:
            blocks[-1].append(i)
            used += gap + w
        else:
            blocks.append([i])
            used = label_w + gap + w
    if not headers:
        blocks = [[]]
    if any(label_w + gap + widths[b[0]] > width for b in blocks if b):
        table = [[corner, *headers]] + [[label, *cells] for label, cells in rows]
        return stacked_rows(table[0], table[1:], width)
    lines: list[str] = []
    for n, block in enumerate(blocks):
        if n:
            lines.append("")
        for label, cells in [(corner, headers), *rows]:
            line = label.ljust(label_w) + "".join(
                " " * gap + cells[i].rjust(widths[i]) for i in block
            )
            lines.append(line.rstrip())
    return lines


def wrap_lines(lines: Iterable[str], width: int, indent: str = "  ") -> list[str]:
    """Prose lines (legends, notes) wrapped at spaces to `width`, continuations indented;
    a word (a number, a URL) is never split."""
    import textwrap

    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        out += textwrap.wrap(
            line,
            width,
            initial_indent="",
            subsequent_indent=lead + indent,
            break_long_words=False,
            break_on_hyphens=False,
        ) or [line]
    return out


def pack(items: Sequence[str], width: int, indent: int = 2, sep: str = "  ") -> list[str]:
    """`items` joined by `sep` into lines of at most `width`, each line indented; an item
    longer than a line gets a line of its own, whole: nothing is cut."""
    lines: list[str] = []
    line = ""
    for item in items:
        candidate = f"{line}{sep}{item}" if line else " " * indent + item
        if line and len(candidate) > width:
            lines.append(line)
            candidate = " " * indent + item
        line = candidate
    if line:
        lines.append(line)
    return lines


def server_down_text(down_since: float | None) -> str:
    """ "server down since HH:MM:SS, retrying" (local time) while an outage lasts, else ""
    (LoadProgress.down_since; the header and the headless progress line both show it)."""
    if down_since is None:
        return ""
    import time

    return f"server down since {time.strftime('%H:%M:%S', time.localtime(down_since))}, retrying"


def saturation_text(progress: LoadProgress) -> str:
    """Why the client counts as saturated (LoadProgress.lag_warning), for the headless
    warning and the TUI header: its event loop never idle, or its timer firing late."""
    return (
        f"client saturated (event loop busy {progress.loop_busy * 100:.0f}%, "
        f"lag {progress.loop_lag_ms:.0f} ms)"
    )


# progress toward the run's end: the TUI header and the headless line share it
def fmt_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "--:--"
    seconds = max(0, int(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


@dataclass(frozen=True)
class Progress:
    fraction: float | None  # None when the run is unbounded
    eta_s: float | None
    label: str


def run_progress(
    completed: int, elapsed_s: float, request_count: int | None, duration_s: float | None
) -> Progress:
    """Progress toward --request-count or --benchmark-duration; unbounded runs show totals."""
    if request_count:
        frac = min(completed / request_count, 1.0)
        rate = completed / elapsed_s if elapsed_s > 0 else 0.0
        eta = (request_count - completed) / rate if rate > 0 else None
        return Progress(frac, eta, f"{completed}/{request_count}")
    if duration_s:
        frac = min(elapsed_s / duration_s, 1.0)
        return Progress(
            frac,
            max(duration_s - elapsed_s, 0.0),
            f"{fmt_duration(elapsed_s)}/{fmt_duration(duration_s)}",
        )
    return Progress(None, None, f"{completed} done")
