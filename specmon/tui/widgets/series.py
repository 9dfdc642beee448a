"""Panel 3, time series: acceptance length, output tokens/s, TTFT p50 and error rate.

Each series is drawn with our own block sparkline (eighth-cell resolution, 1..N rows) and
labelled with its current, min and max, so it reads at 1 row in an 80x24 terminal and
becomes a full chart when the panel is maximized (the rows grow with the height). The
value -> row mapping is `spark_rows`, a pure function with hand-checked tests.

Definitions (docs/architecture.md, "Time series"): per time bin of the window, AL is
token-weighted (1 + Σaccepted / Σsteps of the requests that ended in the bin), output
tokens/s is Σ output tokens of those requests / bin width, TTFT p50 their median TTFT and
the error rate errors / requests ended in the bin.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.widgets import Static

if TYPE_CHECKING:
    from specmon.pipeline import RequestResult

BLOCKS = " ▁▂▃▄▅▆▇█"  # index = eighths of a cell filled
BIN_S = 0.25  # fine bins; a window folds them into at most `columns` display bins
NAME_W = 12  # "TTFT p50 ms "
LABEL_W = 19  # name + current
RANGE_W = 16  # "max 1,234.56" / "min 0.00"


@dataclass(frozen=True)
class SeriesSpec:
    key: str
    name: str
    fmt: str  # format spec of the numbers


SERIES: tuple[SeriesSpec, ...] = (
    SeriesSpec("al", "AL", ".2f"),
    SeriesSpec("tok_s", "out tok/s", ",.0f"),
    SeriesSpec("ttft_p50", "TTFT p50 ms", ",.1f"),
    SeriesSpec("err_pct", "errors %", ".1f"),
)


def spark_rows(values: Sequence[float | None], rows: int, lo: float, hi: float) -> list[str]:
    """Column sparkline of `values` over `rows` text rows, top row first.

    A value maps to a level of 1..rows*8 eighth-cells: lo -> 1 (a visible baseline), hi ->
    rows*8, linear between; None (no data in that bin) is a blank column. With hi == lo
    a zero sits on the baseline and any other value at mid height.
    """
    cells = rows * 8
    levels: list[int | None] = []
    for v in values:
        if v is None or not math.isfinite(v):
            levels.append(None)
        elif hi <= lo:  # flat: zero on the baseline (no errors), anything else mid height
            levels.append(1 if v == 0 else max(1, cells // 2))
        else:
            frac = min(max((v - lo) / (hi - lo), 0.0), 1.0)
            levels.append(1 + round(frac * (cells - 1)))
    out = []
    for r in range(rows):  # r = 0 is the top row
        floor = (rows - 1 - r) * 8
        out.append(
            "".join(" " if lv is None else BLOCKS[min(max(lv - floor, 0), 8)] for lv in levels)
        )
    return out


@dataclass
class _Cell:
    """What the requests that ended in one time bin add up to."""

    requests: int = 0
    errors: int = 0
    tokens: int = 0
    steps: int = 0
    accepted: int = 0
    ttfts: list[float] = field(default_factory=list)

    def merge(self, other: _Cell) -> None:
        self.requests += other.requests
        self.errors += other.errors
        self.tokens += other.tokens
        self.steps += other.steps
        self.accepted += other.accepted
        self.ttfts.extend(other.ttfts)


class SeriesBins:
    """Per-request figures summed into fine time bins, fed incrementally from `results`.

    Time is seconds from the first result's start (results arrive in completion order, so
    the first one started at about the run's start); only results new since the last call
    are read, so a refresh costs O(new).
    """

    def __init__(self, width_s: float = BIN_S) -> None:
        self.width_s = width_s
        self.seen = 0
        self._origin_ns: int | None = None
        self._bins: dict[int, _Cell] = {}

    def add(self, results: Sequence[RequestResult]) -> None:
        for i in range(self.seen, len(results)):
            point = result_point(results[i])
            if point is None:
                continue
            end_ns, start_ns, ok, tokens, steps, accepted, ttft = point
            if self._origin_ns is None:
                self._origin_ns = start_ns if start_ns is not None else end_ns
            t = max(0.0, (end_ns - self._origin_ns) / 1e9)
            cell = self._bins.setdefault(int(t / self.width_s), _Cell())
            cell.requests += 1
            cell.errors += 0 if ok else 1
            cell.tokens += tokens
            cell.steps += steps
            cell.accepted += accepted
            if ttft is not None:
                cell.ttfts.append(ttft)
        self.seen = len(results)

    def last_s(self) -> float:
        return (max(self._bins) + 1) * self.width_s if self._bins else 0.0

    def series(
        self, window_s: float | None, now_s: float, columns: int
    ) -> dict[str, list[float | None]]:
        """Each series as `columns` display bins over the last `window_s` (None: the run)."""
        columns = max(columns, 1)
        start = 0.0 if window_s is None else max(0.0, now_s - window_s)
        span = max(now_s - start, self.width_s)
        # a display bin is never finer than a fine bin: a short run gets fewer columns
        # (a 10 ms bin would turn one request's tokens into a huge tokens/s)
        width = max(span / columns, self.width_s)
        columns = max(1, min(columns, math.ceil(span / width - 1e-9)))
        folded = [_Cell() for _ in range(columns)]
        for b, cell in self._bins.items():
            t = b * self.width_s
            if t < start:
                continue
            folded[min(int((t - start) / width), columns - 1)].merge(cell)
        out: dict[str, list[float | None]] = {s.key: [] for s in SERIES}
        for c in folded:
            out["al"].append(1 + c.accepted / c.steps if c.steps else None)
            out["tok_s"].append(c.tokens / width if c.requests else None)
            out["ttft_p50"].append(_median(c.ttfts))
            out["err_pct"].append(100.0 * c.errors / c.requests if c.requests else None)
        return out


def result_point(
    r: RequestResult,
) -> tuple[int, int | None, bool, int, int, int, float | None] | None:
    """(end ns, start ns, ok, output tokens, steps, accepted, TTFT ms) of one result; the
    one place that reads RequestResult fields for the time series. Warmup is left out."""
    if r.phase == "warmup" or r.end_ns is None:
        return None
    metrics = r.metrics or {}
    spec = r.spec
    # a counts-only record (no verify steps) has no AL to add to a bin
    steps = spec.num_spec_steps if spec is not None else None
    accepted = spec.num_accepted_draft_tokens if spec is not None and steps is not None else 0
    ttft = metrics.get("time_to_first_token")
    return (
        int(r.end_ns),
        r.start_ns,
        r.ok,
        int(metrics.get("output_sequence_length") or 0) if r.ok else 0,
        steps or 0,
        accepted,
        float(ttft) if ttft is not None and r.ok else None,
    )


def _median(xs: list[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def series_lines(
    data: dict[str, list[float | None]], width: int, rows: int, styles: dict[str, Any]
) -> Text:
    """Every series as `rows` lines: name + current on the left, the spark, max/min right."""
    spark_w = max(4, width - LABEL_W - RANGE_W)
    out = Text(no_wrap=True)
    for spec in SERIES:
        values = data.get(spec.key, [])[-spark_w:]
        present = [v for v in values if v is not None]
        cur = next((v for v in reversed(values) if v is not None), None)
        lo, hi = (min(present), max(present)) if present else (0.0, 0.0)
        sparks = spark_rows(values, rows, lo, hi)
        for r, spark in enumerate(sparks):
            if r == 0:
                out.append(f"{spec.name:<{NAME_W}}", style=styles.get("name", ""))
                out.append(f"{_num(cur, spec.fmt):>{LABEL_W - NAME_W}}", style="bold")
            else:
                out.append(" " * LABEL_W)
            out.append(" " + spark.rjust(spark_w - 1), style=styles.get(spec.key, ""))
            if rows == 1:
                rng = f"{_num(lo, spec.fmt)}..{_num(hi, spec.fmt)}" if present else "no data"
            elif r == 0:
                rng = f"max {_num(hi, spec.fmt)}" if present else "no data"
            elif r == rows - 1:
                rng = f"min {_num(lo, spec.fmt)}" if present else ""
            else:
                rng = ""
            out.append(f" {rng:<{RANGE_W - 1}}", style=styles.get("range", ""))
            out.append("\n")
    out.rstrip()
    return out


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


class SeriesView(Static):
    """The four series; rows per series follow the widget's height (1 at 80x24)."""

    COMPONENT_CLASSES = {"series--al", "series--tok", "series--ttft", "series--err", "series--dim"}
    DEFAULT_CSS = """
    SeriesView { height: 1fr; }
    SeriesView > .series--al { color: $success; }
    SeriesView > .series--tok { color: $accent; }
    SeriesView > .series--ttft { color: $warning; }
    SeriesView > .series--err { color: $error; }
    SeriesView > .series--dim { color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._data: dict[str, list[float | None]] = {}
        self._fetch: Callable[[int], dict[str, list[float | None]]] | None = None

    def show(self, fetch: Callable[[int], dict[str, list[float | None]]]) -> None:
        """`fetch(columns)` gives the series binned to that many columns; called again when
        the widget's size changes (a maximized panel gets more bins and rows)."""
        self._fetch = fetch
        data = fetch(self.spark_columns())
        if data == self._data:
            return
        self._data = data
        self._repaint()

    def on_resize(self) -> None:
        if self._fetch is not None:
            self._data = self._fetch(self.spark_columns())
        self._repaint()

    def spark_columns(self) -> int:
        return max(4, (self.size.width or 80) - LABEL_W - RANGE_W)

    def rows_per_series(self) -> int:
        return max(1, (self.size.height or len(SERIES)) // len(SERIES))

    def _repaint(self) -> None:
        style = self.get_component_rich_style
        styles = {
            "al": style("series--al", partial=True),
            "tok_s": style("series--tok", partial=True),
            "ttft_p50": style("series--ttft", partial=True),
            "err_pct": style("series--err", partial=True),
            "name": style("series--dim", partial=True),
            "range": style("series--dim", partial=True),
        }
        rows = self.rows_per_series()
        text = series_lines(self._data, self.size.width or 80, rows, styles)
        self.update(text, layout=False)


__all__ = ["SERIES", "SeriesBins", "SeriesView", "spark_rows"]
