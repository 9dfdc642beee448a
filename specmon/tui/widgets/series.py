"""Panel 3, time series: acceptance length, output tokens/s, TTFT p50 and error rate.

Each series is drawn with our own block sparkline (eighth-cell resolution, 1..N rows) and
labelled with its current, min and max, so it reads at 1 row in an 80x24 terminal and
becomes a full chart when the panel is maximized (the rows grow with the height). The
value -> row mapping is `spark_rows`, a pure function with hand-checked tests. The series
themselves are the screen model's (tui/model/series.py): this module only draws them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.widgets import Static

from specmon.tui.model.series import NOW, SERIES, STALL, Fetch

BLOCKS = " ▁▂▃▄▅▆▇█"  # index = eighths of a cell filled
STALL_MARK = "×"  # a column in which no request ended (model/series.py STALL)
NAME_W = 12  # "TTFT p50 ms "
LABEL_W = 19  # name + current
RANGE_W = 16  # "max 1,234.56" / "min 0.00"


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


def series_lines(
    data: dict[str, list[float | None]], width: int, rows: int, styles: dict[str, Any]
) -> Text:
    """Every series as `rows` lines: name + current on the left, the spark, max/min right."""
    spark_w = max(4, width - LABEL_W - RANGE_W)
    out = Text(no_wrap=True)
    stalls = data.get(STALL, [])[-spark_w:]
    for spec in SERIES:
        values = data.get(spec.key, [])[-spark_w:]
        cur = _current(data, spec.key, values)
        # the range covers the current value too (it is over the newest 3 s, a column over
        # its own span: at 40x12 a current of 3,123 stood beside 2,731..2,816)
        present = [v for v in (*values, cur) if v is not None and math.isfinite(v)]
        lo, hi = (min(present), max(present)) if present else (0.0, 0.0)
        sparks = _marked(spark_rows(values, rows, lo, hi), values, stalls)
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


def _marked(sparks: list[str], values: Sequence[float | None], stalls: Sequence) -> list[str]:
    """The sparkline rows with each stalled column's blank made STALL_MARK (bottom row)."""
    if not any(stalls) or len(stalls) != len(values):
        return sparks
    bottom = "".join(
        STALL_MARK if stall and v is None else ch
        for ch, v, stall in zip(sparks[-1], values, stalls)
    )
    return [*sparks[:-1], bottom]


def _current(data: dict[str, list[float | None]], key: str, shown: list[float | None]):
    """The source's own current value when it gives one, else the newest column's."""
    if key + NOW in data:
        return data[key + NOW][0]
    return next((v for v in reversed(shown) if v is not None), None)


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
        self._fetch: Fetch | None = None

    def show(self, fetch: Fetch) -> None:
        """`fetch(columns, min_column_s)` gives the series binned to that many columns (each
        at least min_column_s long); called again when the widget's size changes."""
        self._fetch = fetch
        data = fetch(self.spark_columns(), 0.0)
        if data == self._data:
            return
        self._data = data
        self._repaint()

    def forget_shown(self) -> None:
        """The theme changed: repaint now with the new colours."""
        self._repaint()

    def on_resize(self) -> None:
        if self._fetch is not None:
            self._data = self._fetch(self.spark_columns(), 0.0)
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


__all__ = ["SeriesView", "series_lines", "spark_rows"]
