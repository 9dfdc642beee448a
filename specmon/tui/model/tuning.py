"""The 1 Hz views: the server's /metrics counters, the segments table and, with several
servers, one card per server. Each tick reads one snapshot per server (shared by the
counters and the cards); the segments table is spaced by its own cost."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specmon.interfaces import RunView
from specmon.server.scrape import ServerCounterView
from specmon.stats import MetricRow
from specmon.tui.model.figures import acceptance_of, shown_k
from specmon.tui.model.state import UiState
from specmon.tui.modes import Mode
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


def tuning_of(
    run: RunView | None, mode: Mode, ui: UiState, snap: RunSnapshot, now: float
) -> Tuning | None:
    """The 1 Hz views when they are due at `now` (monotonic s), else None."""
    if now - ui.tune_at < TUNE_EVERY_S:
        return None
    ui.tune_at = now
    snaps = [
        snap if i == ui.selected else session.accumulator.snapshot()
        for i, (_, session) in enumerate(ui.servers)
    ]
    lines, health = _poll_counters(run, mode, ui, snaps)
    segments = _segments(run, mode, ui, now)  # first: the cards and the what-if read its k
    cards = tuple(_cards(ui, snaps)) if ui.multi else ()
    if ui.multi:
        ui.server_std = [s.std_rows for s in snaps]
    return Tuning(tuple(lines), health, segments, cards)


def _poll_counters(
    run: RunView | None, mode: Mode, ui: UiState, snaps: list[RunSnapshot]
) -> tuple[list[str], ServerCounterView | None]:
    lines: list[str] = []
    health = None
    for i, (label, _) in enumerate(ui.servers):
        poller = run.poller(label) if run is not None else None
        if poller is None:
            ui.counters.pop(label, None)
            continue
        view = poller.latest()
        ui.counters[label] = status = counter_status(view, snaps[i], reconciled=mode.reconciles)
        if i == ui.selected:
            lines, health = status.lines, view
    if not lines:
        lines = [
            "server /metrics: not polled (no counters or polling off)"
            if run is not None
            else "server /metrics: not available in a replay"
        ]
    return lines, health


def _segments(run: RunView | None, mode: Mode, ui: UiState, now: float) -> Segments | None:
    if run is None:
        return Segments((), "segments: live runs only")
    if now < ui.segments_at:
        return None
    started = time.monotonic()
    try:  # the live +/- cost: the table's recommendation moves with the what-if's
        rows = run.segment_rows(draft_cost=ui.draft_cost.given)
    except Exception as exc:
        return Segments((), f"segments unavailable: {exc}")
    if rows is None:  # a run without a segments table (a replay, a watch)
        return Segments((), mode.no_segments)
    if rows != ui.rows:
        ui.rows, ui.rows_version = rows, ui.rows_version + 1
    # a slow call (the first one, or a runner that re-reads every result) spaces the next
    ui.segments_at = now + (time.monotonic() - started) / SEGMENTS_DUTY
    return Segments(tuple(segment_cells(rows)), SEGMENTS_FILLING)


def _cards(ui: UiState, snaps: list[RunSnapshot]) -> list[ServerCard]:
    cards = []
    for (label, _), s in zip(ui.servers, snaps):
        counters = ui.counters.get(label)
        acceptance = acceptance_of(s, counters)
        al = _avg(s.spec_rows.get("spec_decode_acceptance_length"))
        rate = _avg(s.spec_rows.get("spec_decode_overall_draft_acceptance_rate"))
        if acceptance.server_wide:  # the counters alone
            al = acceptance.acceptance_length
        estimate = what_if(acceptance.hist, acceptance.k, ui.draft_cost.given, ui.rows, label)
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
