"""The monitor's panels, declared once: id, title, place, contents, the key that maximizes
it and its help line. The main screen's layout, its key bindings, the panels' titles and the
help screen's lines are generated from `PANELS` (docs/architecture.md, "A new panel").

A new panel is one `PanelSpec` in `PANELS` (in screen order) plus its widget; `place` names
the containers it sits in (CONTAINERS), outermost first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Input, Static

from specmon.tui.requests import LOG_HEADER
from specmon.tui.view import LATENCY_COLUMNS, LATENCY_ROWS, SPEC_COLUMNS, SPEC_ROWS
from specmon.tui.widgets.categories import CategoriesView
from specmon.tui.widgets.contexts import ContextView
from specmon.tui.widgets.headline import HeadlineView
from specmon.tui.widgets.health import HealthView
from specmon.tui.widgets.histogram import HistogramView, PositionsView
from specmon.tui.widgets.histogram_chart import HistogramChart
from specmon.tui.widgets.panel import HPanel, Panel, Slot
from specmon.tui.widgets.request_log import RequestLog
from specmon.tui.widgets.series_chart import SeriesPanel
from specmon.tui.widgets.server_latency import ServerLatencyView
from specmon.tui.widgets.stats_table import StatsTable
from specmon.tui.widgets.tuning import CountersView, SegmentsView, ServersView, WhatIfView


@dataclass(frozen=True)
class PanelSpec:
    id: str
    title: str  # its border title ("" for none)
    place: tuple[str, ...]  # the containers it sits in, outermost first (() = the screen)
    contents: Callable[[], Iterable[Widget]]
    key: str | None = None  # the key that maximizes it
    name: str = ""  # the key's short description (bindings)
    help: str = ""  # the help screen's line for the key
    horizontal: bool = False  # its contents side by side
    min_servers: int = 1  # fewer servers: the key says why it shows nothing
    why_not: str = ""  # ... in these words


# The layout's containers (specmon.tcss sizes them); slots are hidden until filled
# (docs/architecture.md, "Layout slots"). `EMPTY_SLOTS` are made even with no panel in them.
CONTAINERS: dict[str, Callable[..., Widget]] = {
    "row-top": Horizontal,
    "col-hist": Vertical,
    "slot-health": Slot,
    "row-tune": Horizontal,
    "slot-sweep": Slot,
    "row-mid": Horizontal,
    "slot-categories": Slot,
}
EMPTY_SLOTS = (("row-tune", "slot-sweep"),)
# the footer's one entry for the panel keys (the help screen lists each key)
FOOTER_KEYS = "1-8"
FILTER_HINT = "filter (text, 'error', category); enter applies, esc closes"

PANELS: tuple[PanelSpec, ...] = (
    PanelSpec("panel-head", "", (), lambda: [HeadlineView(id="headline")]),
    PanelSpec(
        "panel-servers",
        "8 Servers side by side",
        (),
        lambda: [ServersView(id="servers")],
        key="8",
        name="Servers",
        help="maximize the servers side by side (several --url)",
        min_servers=2,
        why_not="one server: 8 compares several (--url A --url B, demo --num-spec-tokens 2,4)",
    ),
    PanelSpec(
        "panel-spec",
        "1 Spec Decode",
        ("row-top",),
        lambda: [
            StatsTable(SPEC_ROWS, SPEC_COLUMNS, "no spec-decode records yet", id="spec-table")
        ],
        key="1",
        name="Spec Decode",
        help="maximize the Spec Decode table",
    ),
    # the histogram with the server's health from /metrics under it (shown, class -filled,
    # while a poller has it): beside the percentile table both keep their width
    PanelSpec(
        "panel-hist",
        "2 Accepted drafts per step",
        ("row-top", "col-hist"),
        lambda: [
            HistogramView(id="histogram"),
            HistogramChart(id="hist-chart"),
            PositionsView(id="positions"),
        ],
        key="2",
        name="Histogram",
        help="maximize the histogram",
        horizontal=True,
    ),
    PanelSpec(
        "panel-health",
        "",
        ("row-top", "col-hist", "slot-health"),
        lambda: [HealthView(id="health")],
    ),
    PanelSpec(
        "panel-whatif",
        "6 What if k were different",
        ("row-tune",),
        lambda: [WhatIfView(id="whatif")],
        key="6",
        name="What-if",
        help="maximize the what-if panel (other k)",
    ),
    PanelSpec(
        "panel-segments",
        "7 Segments · server counters",
        ("row-tune",),
        lambda: [CountersView(id="counters"), SegmentsView(id="segments")],
        key="7",
        name="Segments",
        help="maximize segments and the server's /metrics counters",
    ),
    PanelSpec(
        "panel-plot",
        "3 Time series",
        ("row-mid",),
        lambda: [SeriesPanel(id="series-panel")],
        key="3",
        name="AL over time",
        help="maximize the time series (AL, output tok/s, TTFT p50, errors %)",
    ),
    PanelSpec(
        "panel-latency",
        "4 Latency & throughput",
        ("row-mid",),
        lambda: [
            StatsTable(
                LATENCY_ROWS, LATENCY_COLUMNS, "no completed requests yet", id="latency-table"
            ),
            ServerLatencyView(id="server-latency"),
        ],
        key="4",
        name="Latency",
        help="maximize latency & throughput (every server's, with several)",
    ),
    # shown (class -filled) once requests carry categories: --dataset runs
    PanelSpec(
        "panel-categories",
        "9 Per category (c sort, C reverse) · per context length (x sort, X reverse)",
        ("row-mid", "slot-categories"),
        lambda: [CategoriesView(id="categories"), ContextView(id="contexts")],
        key="9",
        name="Categories",
        help="maximize the per-category (--dataset categories) and per-context-length tables",
    ),
    PanelSpec(
        "panel-log",
        "5 Requests",
        (),
        lambda: [
            Static(LOG_HEADER, id="log-header", markup=False),
            RequestLog(id="request-log"),
            Input(placeholder=FILTER_HINT, id="log-filter"),
        ],
        key="5",
        name="Requests",
        help="maximize the request log",
    ),
)


def by_id(panels: Sequence[PanelSpec], panel_id: str) -> PanelSpec:
    return next(p for p in panels if p.id == panel_id)


def keyed(panels: Sequence[PanelSpec]) -> list[PanelSpec]:
    """The panels a key maximizes, in key order (1, 2, ...)."""
    return sorted((p for p in panels if p.key), key=lambda p: str(p.key))


def build_layout(panels: Sequence[PanelSpec]) -> list[Widget]:
    """The screen's widgets between the header and the footer: each panel in its place."""
    tree: dict[str, list[Any]] = {"": []}  # container id -> its children (ids or panels)
    for spec in panels:
        parent = ""
        for container in spec.place:
            if container not in tree:
                tree[container] = []
                tree[parent].append(container)
            parent = container
        tree[parent].append(spec)
    for parent, slot in EMPTY_SLOTS:
        if parent in tree and slot not in tree:
            tree[slot] = []
            tree[parent].append(slot)
    return [_build(tree, child) for child in tree[""]]


def _build(tree: dict[str, list[Any]], node: str | PanelSpec) -> Widget:
    if isinstance(node, PanelSpec):
        kind = HPanel if node.horizontal else Panel
        panel = kind(*node.contents(), id=node.id, classes="panel")
        panel.border_title = node.title or None
        return panel
    return CONTAINERS[node](*(_build(tree, child) for child in tree[node]), id=node)


def panel_bindings(panels: Sequence[PanelSpec]) -> list[Binding]:
    """One binding per keyed panel; the footer shows the first as one entry for them all."""
    keys = keyed(panels)
    out = [
        Binding(str(p.key), f"screen.maximize_panel('{p.id}')", p.name or p.title, show=False)
        for p in keys
    ]
    if keys:
        first = keys[0]
        out[0] = Binding(
            str(first.key), f"screen.maximize_panel('{first.id}')", "Max", key_display=FOOTER_KEYS
        )
    return out


def panel_help(panels: Sequence[PanelSpec]) -> dict[str, str]:
    """The help screen's line per panel key."""
    return {str(p.key): p.help or f"maximize {p.title}" for p in keyed(panels)}
