"""`specmon watch --prometheus URL`: a fleet read through a Prometheus-compatible query API.

Every `--interval` one tick of instant queries (server/promql.py, all at one evaluation
time) becomes one `WatchRow` per replica (`--by` label: instance, pod, model_name, ...) and a
`fleet` row, the counters summed before the ratios; the fleet row names the replica whose
acceptance length or throughput is furthest from the fleet's (`imbalance`). The interval's
figures are increases over the interval, the watch's (`total`) increases over the time
since the watch started. Rows go to the same watch_timeseries.csv / .jsonl as a /metrics
watch, so the screen, the headless lines, --alert and the exit statuses are the same.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from specmon.run.watch.runner import (
    HealthFiguresRow,
    ServerTrack,
    SpecFigures,
    WatchRow,
    WatchRun,
)
from specmon.server.promql import (
    RANGES_PER_SCRAPE,
    Counts,
    FleetQuery,
    FleetTick,
    QueryClient,
    QueryError,
    QueryFailed,
    ReplicaFigures,
    explain_empty,
    fleet_tick,
    rate_range,
    scrape_interval,
    staleness,
)

FLEET = "fleet"  # the fleet row's server label


def spec_figures(counts: Counts) -> SpecFigures | None:
    """Ratios from the (extrapolated, fractional) increases; counts shown rounded. None when
    the replica has no drafts series at all (missing, never zero)."""
    d, t, a = counts.drafts, counts.draft_tokens, counts.accepted
    if d is None and t is None:
        return None
    k = max(counts.per_pos, default=-1) + 1
    pos = [counts.per_pos.get(i, 0.0) for i in range(k)]
    hist: list[int] = []
    if k and d is not None:
        hist = [round(d - pos[0])] + [round(pos[j - 1] - pos[j]) for j in range(1, k)]
        hist.append(round(pos[k - 1]))
    return SpecFigures(
        drafts=round(d or 0),
        draft_tokens=round(t or 0),
        accepted=round(a or 0),
        acceptance_rate=a / t if a is not None and t else None,
        acceptance_length=1 + a / d if a is not None and d else None,
        per_position=[p / d for p in pos] if d and k else None,
        histogram=hist,
    )


def imbalance(replicas: dict[str, ReplicaFigures], fleet: ReplicaFigures) -> str | None:
    """The replica furthest from the fleet: its acceptance length against the fleet's (over
    the watch so far), or its generation tokens/s against the replicas' mean."""
    if len(replicas) < 2:
        return None
    worst: tuple[float, str] | None = None
    fleet_al = _al(fleet.window)
    if fleet_al is not None:
        for name, fig in replicas.items():
            al = _al(fig.window)
            if al is not None:
                off = al / fleet_al - 1
                text = f"{name} acceptance length {al:.2f} vs fleet {fleet_al:.2f} ({off:+.0%})"
                worst = max(worst or (abs(off), text), (abs(off), text))
    tps = {n: f.generation_tokens_per_s for n, f in replicas.items()}
    known = {n: v for n, v in tps.items() if v is not None}
    mean = sum(known.values()) / len(known) if known else 0.0
    if len(known) >= 2 and mean > 0:
        for name, value in known.items():
            off = value / mean - 1
            text = f"{name} {value:.0f} generation tok/s vs replica mean {mean:.0f} ({off:+.0%})"
            worst = max(worst or (abs(off), text), (abs(off), text))
    return None if worst is None else f"furthest from the fleet: {worst[1]}"


def _al(counts: Counts) -> float | None:
    d, a = counts.drafts, counts.accepted
    return 1 + a / d if a is not None and d else None


class FleetWatchRun(WatchRun):
    """A WatchRun whose rows come from the query API: a track per replica, found as they
    answer, and the fleet's. `on_note(line)` gets each distinct warning once (a stale store)."""

    thread_name = "specmon-watch-fleet"

    def __init__(
        self,
        prometheus: str,
        query: FleetQuery,
        artifact_dir: str,
        interval_s: float = 2.0,
        duration_s: float | None = None,
        on_row: Any = None,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        client = QueryClient(prometheus)
        super().__init__({FLEET: client.url}, artifact_dir, interval_s, duration_s, on_row)
        self.client = client
        self.query = query
        self.on_note = on_note
        self.ticks = 0
        self.good_ticks = 0
        self.failed_ticks = 0
        self.last_error: str | None = None
        self.fatal: str | None = None  # a query error: the selector or --by is wrong
        self.spellings: set[str] = set()
        self.notes: list[str] = []
        self.range_s: float | None = None  # the interval figures' range, once the store's
        #                                    scrape interval is known

    async def _watch(self) -> None:
        """A tick every interval (at most one late tick per interval, none skipped silently:
        a tick's queries are bounded by QUERY_TIMEOUT_S) until stopped or --duration."""
        deadline = None if self.duration_s is None else self.started_s + self.duration_s
        async with self.client:
            n = 1
            while not self._stop.is_set():
                due = self.started_s + n * self.interval_s
                if deadline is not None and due > deadline + 1e-6:
                    break
                while time.monotonic() < due and not self._stop.is_set():
                    await asyncio.sleep(min(0.05, max(0.0, due - time.monotonic())))
                if self._stop.is_set():
                    break
                await self._tick(n * self.interval_s)
                if self.fatal is not None:
                    break
                n += 1

    async def _tick(self, window_s: float) -> None:
        self.ticks += 1
        at = time.time()
        try:
            await self._find_range(at)
            range_s = self.range_s or self.interval_s
            tick = await fleet_tick(self.client, self.query, at, range_s, max(window_s, range_s))
            why = None if tick.replicas else await explain_empty(self.client, self.query, at)
        except QueryError as exc:
            self.fatal = why = f"{self.client.url}: {exc} (selector {{{self.query.selector}}})"
        except QueryFailed as exc:
            why = str(exc)
        if why is not None:
            self.failed_ticks += 1
            self.last_error = why
            self._emit(self._error_row(why))
            return
        self.good_ticks += 1
        self._rows(tick)

    async def _find_range(self, at: float) -> None:
        """Once: the interval figures' range from the store's scrape interval (said once)."""
        if self.range_s is not None:
            return
        scrape_s = await scrape_interval(self.client, self.query, at)
        if scrape_s is None:
            return
        self.range_s = rate_range(self.interval_s, scrape_s)
        if self.range_s > self.interval_s:
            self._note(
                f"the store scrapes every {scrape_s:.3g} s: interval figures over the last "
                f"{self.range_s:.3g} s ({RANGES_PER_SCRAPE} scrapes), every {self.interval_s:g} s"
            )

    def _note(self, line: str) -> None:
        if line not in self.notes:
            self.notes.append(line)
            if self.on_note is not None:
                self.on_note(line)

    def _rows(self, tick: FleetTick) -> None:
        note = staleness(tick, self.interval_s)
        if note is not None:
            self._note(note)
        for name, fig in tick.replicas.items():
            self._emit(self._row(name, fig))
        self.spellings.update(tick.spellings)
        fleet = self._row(FLEET, tick.fleet)
        self._emit(_with(fleet, imbalance(tick.replicas, tick.fleet), tick.spellings))

    def _track(self, label: str) -> ServerTrack:
        track = self.tracks.get(label)
        if track is None:
            track = self.tracks[label] = ServerTrack(label, self.client.url, self.started_s)
        return track

    def _base(self, label: str) -> dict[str, Any]:
        track = self._track(label)
        track.scrapes += 1
        return {
            "server": label,
            "url": self.client.url,
            "scrape": track.scrapes,
            "t_s": time.monotonic() - self.started_s,
            "wall_time": time.time(),
        }

    def _row(self, label: str, fig: ReplicaFigures) -> WatchRow:
        health = HealthFiguresRow(
            running=fig.running,
            waiting=fig.waiting,
            kv_cache_usage=fig.kv_cache_usage,
            preemptions_per_s=fig.preemptions_per_s,
            generation_tokens_per_s=fig.generation_tokens_per_s,
        )
        return WatchRow(
            **self._base(label),
            error=None,
            interval_s=self.interval_s,
            interval=spec_figures(fig.interval),
            total=spec_figures(fig.window),
            health=health,
            fidelity="server-wide (Prometheus query API)",
            counters_engine=", ".join(fig.spellings) or None,
            gauges_last_value=dict(fig.gauges),
        )

    def _error_row(self, why: str) -> WatchRow:
        track = self._track(FLEET)
        track.errors += 1
        track.last_error = why
        return WatchRow(**self._base(FLEET), error=why)

    def _emit(self, row: WatchRow) -> None:
        self._track(row.server).rows.append(row)
        if self.writer is not None:
            self.writer.write(row)
        if self.on_row is not None:
            self.on_row(row)

    def outcome(self) -> tuple[int, list[str]]:
        """2 when the store never answered with data (or a query error), 1 when ticks
        failed after a good one, else 0; why, one line each."""
        if self.fatal is not None:
            return 2, [self.fatal]
        if self.good_ticks == 0:
            return 2, [self.last_error or f"no data from {self.client.url} before the end"]
        if self.failed_ticks:
            return 1, [
                f"{self.failed_ticks} of {self.ticks} queries of {self.client.url} failed "
                f"(last: {self.last_error})"
            ]
        return 0, []

    def poller(self, label: str) -> None:
        return None  # no /metrics poller: the figures come from the query API

    def found(self) -> str:
        """Which spelling answered (the headless summary says so)."""
        return ", ".join(sorted(self.spellings)) or "no spec-decode counters"


def _with(row: WatchRow, imbalance_text: str | None, spellings: list[str]) -> WatchRow:
    return replace(row, imbalance=imbalance_text, counters_engine=", ".join(spellings) or None)
