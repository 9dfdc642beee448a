"""The server's health beside acceptance: running / waiting requests, KV-cache usage,
preemptions/s, prefix-cache hit rate, generation tokens/s and (specmon sim only) the lag of
its steps behind its own step formula, from the same /metrics
scrapes as the spec-decode counters (server/scrape.py keeps each scrape's HealthSample).

Gauges are the last scrape's; rates are over the last scrape interval
(server/health.py HealthDelta.between). One row summed over engines / DP label sets, then
one per label set when there are several; a series the server does not expose is simply
left out (its column is dropped when no row has it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text

from specmon.server.health import HealthDelta, label_text
from specmon.tui.widgets.shaped import ShapedStatic

# (column title, how to read it off a HealthDelta, format)
COLUMNS: tuple[tuple[str, Callable[[HealthDelta], float | None], str], ...] = (
    ("run", lambda d: d.running, "{:.0f}"),
    ("wait", lambda d: d.waiting, "{:.0f}"),
    ("KV%", lambda d: None if d.kv_cache_usage is None else 100 * d.kv_cache_usage, "{:.1f}"),
    ("preempt/s", lambda d: d.preemptions_per_s, "{:.2f}"),
    (
        "prefix-hit%",
        lambda d: None if d.prefix_cache_hit_rate is None else 100 * d.prefix_cache_hit_rate,
        "{:.1f}",
    ),
    ("gen tok/s", lambda d: d.generation_tokens_per_s, "{:.0f}"),
    # specmon sim only: its steps' lag behind its own step formula (sim/engine.py)
    ("lag%", lambda d: None if d.sim_lag_share is None else 100 * d.sim_lag_share, "{:.1f}"),
)
NO_HEALTH = "server health: no queue / KV-cache series on /metrics"
WAITING = "server health: waiting for a second /metrics scrape"


def health_delta_of(view: Any) -> HealthDelta | None:
    """The last interval's health of a ServerCounterView (None: not enough scrapes)."""
    if view is None:
        return None
    recent = view.health_recent()
    if recent is not None:
        return recent
    last = view.last
    if last is not None and last.health is not None and last.health.present:
        return HealthDelta.between(last.health, last.health, 0.0)  # gauges only
    return None


def health_lines(delta: HealthDelta | None, present: bool = True) -> list[str]:
    """The panel's text: a header and one row summed, then one per label set."""
    if delta is None:
        return [WAITING if present else NO_HEALTH]
    rows: list[tuple[str, HealthDelta]] = [("all" if delta.per_labels else "", delta)]
    if len(delta.per_labels) > 1:
        rows += [(label_text(k) or "-", d) for k, d in sorted(delta.per_labels.items())]
    else:
        rows = [("", delta)]
    shown = [c for c in COLUMNS if any(c[1](d) is not None for _, d in rows)]
    if not shown:
        return [NO_HEALTH]
    name_w = max(len(name) for name, _ in rows)
    cells = [
        [_cell(read(d), fmt) for _, read, fmt in shown] for _, d in rows
    ]  # each column as wide as its widest cell, so the seven fit a 50-column panel
    widths = [
        max([len(title)] + [len(row[i]) for row in cells]) for i, (title, _, _) in enumerate(shown)
    ]
    head = " " * name_w + "".join(f" {t:>{w}}" for (t, _, _), w in zip(shown, widths))
    lines = ["server health (/metrics)", head.rstrip() if name_w else head.lstrip()]
    for (name, _), row in zip(rows, cells):
        line = f"{name:<{name_w}}" + "".join(f" {c:>{w}}" for c, w in zip(row, widths))
        lines.append(line if name_w else line.lstrip())
    if delta.reset:
        lines.append("counters reset: the server restarted")
    return lines


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


class HealthView(ShapedStatic):
    """Shows health_lines() for the selected server; repaints only when the text changes."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._lines: list[str] | None = None
        self.has_health = False  # the last view carried health series (the slot shows)

    def show_view(self, view: Any) -> None:
        present = view is not None and (view.last is None or _has_health(view.last))
        self.has_health = view is not None and view.last is not None and _has_health(view.last)
        self.show(health_lines(health_delta_of(view), present))

    def show(self, lines: list[str]) -> None:
        if lines == self._lines:
            return
        self._lines = list(lines)
        self.show_content(Text("\n".join(lines)), tuple(len(line) for line in lines), len(lines))


def _has_health(sample: Any) -> bool:
    return sample.health is not None and sample.health.present
