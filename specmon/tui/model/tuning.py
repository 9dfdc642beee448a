"""The 1 Hz views: the server's /metrics counters, the segments table, the per-category
rows and, with several servers, one card per server. Each tick reads one snapshot per
server (shared by the counters and the cards); the segments table is spaced by its own
cost."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specmon.analysis.categories import CategoryRow, CategoryTable
from specmon.analysis.contexts import ContextRow, ContextTable
from specmon.analysis.groups import GroupedTable
from specmon.interfaces import SessionView
from specmon.server.scrape import ServerCounterView
from specmon.session import RunSession
from specmon.stats import MetricRow, row_value
from specmon.tui.model.figures import acceptance_of, shown_k
from specmon.tui.model.state import Choices, ModelCache, ScreenInputs
from specmon.tui.tuning_view import (
    ServerCard,
    counter_status,
    recommendation_text,
    segment_cells,
    what_if,
)

if TYPE_CHECKING:
    from specmon.accumulator import RunSnapshot

TUNE_EVERY_S = 1.0  # servers, segments and /metrics views: 1 Hz is plenty and bounds their cost
SEGMENTS_DUTY = 0.05  # segment_rows() is incremental (~1 ms a refresh); this bounds the first
#                       call (folds in every result so far) and runners that re-read all
SEGMENTS_FILLING = (
    "segments appear with the first requests; < > concurrency, r R rate, o O output length"
)


@dataclass(frozen=True)
class Segments:
    cells: tuple[tuple[str, ...], ...]
    hint: str


@dataclass(frozen=True)
class Tuning:
    """What the 1 Hz tick shows; `segments` None: the table was not due this tick."""

    counter_lines: tuple[str, ...]
    health: ServerCounterView | None  # the shown server's latest scrape (None: no poller)
    segments: Segments | None
    cards: tuple[ServerCard, ...]  # one per server; empty for a one-server run
    categories: tuple[CategoryRow, ...] = ()  # the shown server's, first-seen order
    contexts: tuple[ContextRow, ...] = ()  # the shown server's per context length


def tuning_of(
    inputs: ScreenInputs, choices: Choices, cache: ModelCache, snap: RunSnapshot, now: float
) -> Tuning | None:
    """The 1 Hz views when they are due at `now` (monotonic s), else None."""
    if now - cache.tune_at < TUNE_EVERY_S:
        return None
    cache.tune_at = now
    snaps = [
        snap if i == choices.selected else session.accumulator.snapshot()
        for i, (_, session) in enumerate(inputs.servers)
    ]
    lines, health = _poll_counters(inputs, choices, cache, snaps)
    segments = _segments(inputs, choices, cache, now)  # first: the cards and what-if read its k
    cards = tuple(_cards(inputs, choices, cache, snaps)) if inputs.multi else ()
    if inputs.multi:
        cache.server_std = [s.std_rows for s in snaps]
    session = inputs.session(choices)
    categories = tuple(_group_table(session, cache, CategoryTable).rows())
    contexts = tuple(_group_table(session, cache, ContextTable).rows())
    return Tuning(tuple(lines), health, segments, cards, categories, contexts)


def _group_table(
    session: SessionView, cache: ModelCache, kind: type[CategoryTable] | type[ContextTable]
) -> GroupedTable:
    """The shown server's per-category (or per-context-length) table: a RunSession's own,
    fed as results land (no second copy of its statistics); else one the cache keeps per
    results list, caught up with the results that arrived since the last tick."""
    if isinstance(session, RunSession):
        return session.categories.table if kind is CategoryTable else session.contexts.table
    results = session.accumulator.results
    table = cache.group_tables.setdefault((kind.__name__, id(results)), kind())
    table.catch_up(results)
    return table


def _poll_counters(
    inputs: ScreenInputs, choices: Choices, cache: ModelCache, snaps: list[RunSnapshot]
) -> tuple[list[str], ServerCounterView | None]:
    lines: list[str] = []
    health = None
    run = inputs.run
    for i, (label, _) in enumerate(inputs.servers):
        poller = run.poller(label) if run is not None else None
        if poller is None:
            cache.counters.pop(label, None)
            continue
        view = poller.latest()
        status = counter_status(view, snaps[i], reconciled=inputs.mode.reconciles)
        cache.counters[label] = status
        if i == choices.selected:
            lines, health = status.lines, view
    if not lines:
        lines = [
            "server /metrics: not polled (no counters or polling off)"
            if run is not None
            else "server /metrics: not available in a replay"
        ]
    return lines, health


def _segments(
    inputs: ScreenInputs, choices: Choices, cache: ModelCache, now: float
) -> Segments | None:
    run = inputs.run
    if run is None:
        return Segments((), "segments: live runs only")
    if now < cache.segments_at:
        return None
    started = time.monotonic()
    try:  # the live +/- cost: the table's recommendation moves with the what-if's
        rows = run.segment_rows(draft_cost=choices.draft_cost.given)
    except Exception as exc:
        return Segments((), f"segments unavailable: {exc}")
    if rows is None:  # a run without a segments table (a replay, a watch)
        return Segments((), inputs.mode.no_segments)
    if rows != cache.rows:
        cache.rows, cache.rows_version = rows, cache.rows_version + 1
    # a slow call (the first one, or a runner that re-reads every result) spaces the next
    cache.segments_at = now + (time.monotonic() - started) / SEGMENTS_DUTY
    return Segments(tuple(segment_cells(rows)), SEGMENTS_FILLING)


def _cards(
    inputs: ScreenInputs, choices: Choices, cache: ModelCache, snaps: list[RunSnapshot]
) -> list[ServerCard]:
    cards = []
    cost = choices.draft_cost.given
    for (label, _), s in zip(inputs.servers, snaps):
        counters = cache.counters.get(label)
        acceptance = acceptance_of(s, counters)
        al = _avg(s.spec_rows.get("spec_decode_acceptance_length"))
        rate = _avg(s.spec_rows.get("spec_decode_overall_draft_acceptance_rate"))
        if acceptance.server_wide:  # the counters alone
            al = acceptance.acceptance_length
        estimate = what_if(
            acceptance.hist, acceptance.k, cost, cache.rows, label,
            row_value(s.std_rows, "output_token_throughput", "avg"),
        )  # fmt: skip
        cards.append(
            ServerCard(
                label=label,
                k=acceptance.k if acceptance.k is not None else shown_k(s, counters),
                requests=int(s.request_count),
                acceptance_length=al,
                acceptance_rate=rate,
                histogram=acceptance.histogram,
                recommendation=recommendation_text(estimate),
                source=" · server-wide" if acceptance.server_wide else "",
                survival=tuple(p.unconditional or 0.0 for p in estimate.estimate.positions)
                if estimate
                else (),
            )
        )
    return cards


def _avg(row: MetricRow | None) -> float | None:
    return None if row is None or row.avg is None else float(row.avg)
