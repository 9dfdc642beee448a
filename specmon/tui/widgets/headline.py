"""Panel 0, the headline: the figures a GPU-box user needs, in three dense lines (the k
line wraps onto a fourth where its basis is longer than the terminal is wide).

Shown at every size above the detailed panels, so an 80x24 terminal has acceptance length
(per-request mean and token-weighted), the draft acceptance rate, output tokens/s, TTFT p50
and p99, TPOT p50 (AIPerf's inter token latency), errors and the recommended k with its basis without maximizing anything.
Every number comes from the same snapshot statistics as the tables and exports (one
definition per figure); request throughput is in the header, once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from specmon.specdecode.fidelity import SHORT
from specmon.tui.layout import SMALL_BELOW  # under it, the headline is one line
from specmon.tui.model.figures import Headline, headline_of
from specmon.tui.model.series import RECENT_S
from specmon.tui.view import NA
from specmon.tui.widgets.shaped import ShowsChanges

__all__ = ["Headline", "HeadlineView", "Recent", "headline_line", "headline_of", "headline_text"]


def _n(value: float | None, fmt: str = ",.2f") -> str:
    return NA if value is None else format(value, fmt)


def _pct(value: float | None) -> str:
    """ "55.04%", or the bare NA: never "N/A%" (the watch headline had no per-request rate)."""
    return NA if value is None else _n(value) + "%"


@dataclass(frozen=True)
class Recent:
    """Output tok/s of the last `window_s` (requests that ended in it): a stall shows here
    at once, where the run's average hardly moves."""

    tok_s: float | None
    window_s: float = RECENT_S

    @property
    def text(self) -> str:
        return f"{self.window_s:g} s: {_n(self.tok_s, ',.1f')}"


def headline_line(h: Headline, recent: Recent | None, width: int) -> str:
    """The headline in one line for a small terminal (40x12 up to 80x24): AL, out tok/s
    (the last window's beside it, room allowing) and the measured answer, its margins, then
    its figure dropped first when the line is too long."""
    k = h.recommendation
    tok = _n(h.output_tok_s, ",.1f")
    now = f" ({recent.text})" if recent is not None and recent.tok_s is not None else ""
    mid = k.split(", ")[0].split(" (")[0]  # "measured best k=4: 1,234 tok/s"
    short = mid.split(":")[0]  # "measured best k=4"
    for k_text, now_text in ((k, now), (mid, now), (short, now), (short, "")):
        line = f"AL {_n(h.al)} · {tok} tok/s{now_text} · {k_text}"
        if len(line) <= width:
            return line
    return line


def headline_text(h: Headline, styles: dict[str, Any], recent: Recent | None = None) -> Text:
    """Three lines: acceptance, latency/throughput, the k recommendation."""
    label, value = styles.get("label", ""), styles.get("value", "bold")
    out = Text(no_wrap=True, overflow="ellipsis")

    def pair(name: str, text: str, style: Any = None) -> None:
        out.append(name + " ", style=label)
        out.append(text, style=value if style is None else style)
        out.append("  ")

    good = styles.get("good", value)
    pair("AL", _n(h.al), good)
    pair("tok-wtd AL", _n(h.al_token_weighted), good)
    pair("draft acc", _pct(h.draft_rate_pct))
    pair("overall", _pct(h.overall_rate_pct))
    tag = SHORT.get(h.fidelity or "")
    if tag:  # which of the record's fields these figures rest on
        out.append(f"({tag})  ", style=label)
    pair("errors", str(h.errors), styles.get("error", value) if h.errors else value)
    out.append("\n")
    if recent is None or recent.tok_s is None:
        pair("out tok/s", _n(h.output_tok_s, ",.1f"))
    else:  # the last window beside the run's figure: a stall shows
        out.append("out tok/s ", style=label)
        out.append(_n(h.output_tok_s, ",.1f"), style=value)
        out.append(f" ({recent.text})  ", style=label)
    pair("TTFT p50", _n(h.ttft_p50_ms, ",.1f"))
    pair("p99", _n(h.ttft_p99_ms, ",.1f") + " ms")
    pair("TPOT p50", _n(h.itl_p50_ms, ",.2f") + " ms")
    out.append("\n")
    pair("k:", h.recommendation, styles.get("accent", value))
    out.append(h.basis, style=label)
    out.rstrip()
    return out


class HeadlineView(ShowsChanges[Headline], Static):
    COMPONENT_CLASSES = {"headline--label", "headline--good", "headline--error", "headline--accent"}
    DEFAULT_CSS = """
    HeadlineView { height: auto; }
    HeadlineView > .headline--label { color: $text-muted; }
    HeadlineView > .headline--good { color: $success; text-style: bold; }
    HeadlineView > .headline--error { color: $error; text-style: bold reverse; }
    HeadlineView > .headline--accent { color: $accent; text-style: bold; }
    """

    _recent: Recent | None = None

    def show_recent(self, recent: Recent | None) -> None:
        """The last window's output tok/s (the time series' bins know it), repainted with
        the headline it stands beside."""
        if recent == self._recent:
            return
        self._recent = recent
        if self._shown is not None:
            self.paint(self._shown)

    def paint(self, headline: Headline) -> None:
        width, height = self.app.size
        if width < SMALL_BELOW[0] or height < SMALL_BELOW[1]:
            inner = max(1, self.size.width or width - 2)
            self.update(Text(headline_line(headline, self._recent, inner), no_wrap=True))
            return
        style = self.get_component_rich_style
        styles = {
            "label": style("headline--label", partial=True),
            "value": "bold",
            "good": style("headline--good", partial=True),
            "error": style("headline--error", partial=True),
            "accent": style("headline--accent", partial=True),
        }
        self.update(_fitted(headline_text(headline, styles, self._recent)))


def _fitted(text: Text) -> Group:
    """The figure lines stay one line each; the k line wraps at words instead of losing
    the end of its basis at 80 columns (issue: the recommended k with its basis)."""
    *figures, k_line = text.split("\n")
    for line in figures:
        line.no_wrap, line.overflow = True, "ellipsis"
    k_line.no_wrap, k_line.overflow = False, "fold"
    return Group(*figures, k_line)
