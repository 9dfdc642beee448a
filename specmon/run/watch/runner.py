"""`specmon watch`: observe live servers from their /metrics alone, sending no load.

One `ServerCounterPoller` per server (server/scrape.py) on a scrape loop of its own thread;
each scrape (its `on_sample` hook) becomes one `WatchRow` per server: the interval's
spec-decode deltas (acceptance rate = Δaccepted / Δdraft_tokens, acceptance length =
1 + Δaccepted / Δdrafts, per-position rate = ΔP_i / Δdrafts, the derived histogram
H_0 = D − P_0, H_j = P_{j−1} − P_j, H_k = P_{k−1}: docs/metrics.md §11), the same over the
whole watch (running totals), and the health series (server/health.py), summed and per
label set (engine / DP rank). Rows go to `watch_timeseries.csv` and `.jsonl` as they come
(flushed per row, so the files are complete whenever the watch stops).

Counter resets: the deltas are taken scrape to scrape, never from the first sample, so a
series that went down (the server restarted) counts from zero in that interval
(`counter_delta`), the row is marked `reset`, and the totals go on from the new baseline.

`WatchRun` is an interfaces.RunLifecycle + RunView: no load (no load knobs), every
server's session is empty (the monitor's per-request panels say why).
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import json
import math
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from specmon.accumulator import RunAccumulator
from specmon.event_loop import new_event_loop
from specmon.interfaces import SERIES_TIME, LoadProgress, SessionView
from specmon.server.health import HealthDelta, label_text
from specmon.server.scrape import (
    CounterDelta,
    CounterSample,
    ServerCounterPoller,
    ServerCounterView,
    counter_delta,
)
from specmon.sources.lifecycle import BackgroundRun
from specmon.specdecode.fidelity import SERVER_WIDE
from specmon.specdecode.method import SpecMethod

CSV_NAME = "watch_timeseries.csv"
JSONL_NAME = "watch_timeseries.jsonl"
END_S = 0.5  # at most this long for the last scrape once stopped (a stop ends within a second)
KEEP_ROWS = 4096  # rows per server kept in memory for the screen (the files keep all)
# the header's load text: why the per-request panels (latency, log, per-request acceptance)
# stay empty while acceptance and health come from /metrics
NO_LOAD_LABEL = "watch (no load): per-request panels stay empty; acceptance from /metrics"
# what each per-request panel says in watch mode (the monitor, tui/app.py)
NO_REQUESTS = "watch mode: no requests of its own; server-wide figures from /metrics"


@dataclass(frozen=True)
class SpecFigures:
    """Spec-decode figures over an interval or the whole watch (one label set or summed)."""

    drafts: int | None  # None: a series of it was rejected (missing, never a zero)
    draft_tokens: int | None
    accepted: int | None
    acceptance_rate: float | None
    acceptance_length: float | None
    per_position: list[float] | None
    histogram: list[int]
    missing: dict[str, str] = field(default_factory=dict)  # field -> why it was rejected

    @classmethod
    def of(cls, delta: CounterDelta) -> SpecFigures:
        return cls(
            delta.count("drafts"),
            delta.count("draft_tokens"),
            delta.count("accepted"),
            delta.acceptance_rate,
            delta.acceptance_length,
            delta.per_position_rates,
            delta.histogram(),
            delta.missing,
        )


@dataclass(frozen=True)
class HealthFiguresRow:
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None  # 0..1
    preemptions_per_s: float | None = None
    prefix_cache_hit_rate: float | None = None
    generation_tokens_per_s: float | None = None

    @classmethod
    def of(cls, delta: HealthDelta | None) -> HealthFiguresRow:
        if delta is None:
            return cls()
        return cls(
            delta.running,
            delta.waiting,
            delta.kv_cache_usage,
            delta.preemptions_per_s,
            delta.prefix_cache_hit_rate,
            delta.generation_tokens_per_s,
        )


@dataclass(frozen=True)
class WatchRow:
    """One scrape of one server."""

    server: str
    url: str
    scrape: int  # 1, 2, ... per server
    t_s: float  # seconds since the watch started
    wall_time: float  # time.time() of the row
    error: str | None  # the scrape failed: no figures
    reset: bool = False  # a counter went down since the previous good scrape
    resets: int = 0  # resets seen so far on this server
    interval_s: float | None = None
    interval: SpecFigures | None = None  # this scrape's deltas
    total: SpecFigures | None = None  # since the watch started (across resets)
    health: HealthFiguresRow = field(default_factory=HealthFiguresRow)
    per_labels: dict[str, dict[str, Any]] = field(default_factory=dict)  # several label sets
    # what the figures rest on (docs/metrics.md §10.2): /metrics only, whose counters, and
    # the engine's gauges as read (a last value, never a window)
    fidelity: str = SERVER_WIDE
    counters_engine: str | None = None
    gauges_last_value: dict[str, float] = field(default_factory=dict)
    # a fleet row (watch --prometheus): the replica furthest from the fleet (run/watch/fleet.py)
    imbalance: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def csv_row(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "server": self.server,
            "url": self.url,
            "scrape": self.scrape,
            "t_s": round(self.t_s, 3),
            "wall_time": round(self.wall_time, 3),
            "error": self.error or "",
            "reset": int(self.reset),
            "resets": self.resets,
            "interval_s": _num(self.interval_s),
        }
        for prefix, figs in (("", self.interval), ("total_", self.total)):
            for name in CSV_SPEC:
                value = getattr(figs, name) if figs is not None else None
                if isinstance(value, list):
                    value = ";".join(str(_num(v)) for v in value)
                out[prefix + name] = _num(value)
        for name in CSV_HEALTH:
            out[name] = _num(getattr(self.health, name))
        out["fidelity"] = self.fidelity
        out["counters_engine"] = self.counters_engine or ""
        out["imbalance"] = self.imbalance or ""
        return out


CSV_SPEC = [
    "drafts",
    "draft_tokens",
    "accepted",
    "acceptance_rate",
    "acceptance_length",
    "per_position",
    "histogram",
]
CSV_HEALTH = [f for f in HealthFiguresRow.__dataclass_fields__]
CSV_COLUMNS = [
    *("server", "url", "scrape", "t_s", "wall_time", "error", "reset", "resets", "interval_s"),
    *CSV_SPEC,
    *(f"total_{name}" for name in CSV_SPEC),
    *CSV_HEALTH,
    "fidelity",
    "counters_engine",
    "imbalance",
]


def _num(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return round(value, 6)
    return value


def split_labels(sample: CounterSample) -> dict[tuple[tuple[str, str], ...], CounterSample]:
    """One sample per engine / DP label set (the `position` label kept within each)."""
    out: dict[
        tuple[tuple[str, str], ...], dict[tuple[str, tuple[tuple[str, str], ...]], float]
    ] = {}
    for key, value in sample.series.items():
        labels = tuple(pair for pair in key[1] if pair[0] != "position")
        out.setdefault(labels, {})[key] = value
    # a rejected line's label set is unknown: each label set is missing that field
    return {
        labels: CounterSample(series, sample.taken_s, missing=sample.missing)
        for labels, series in out.items()
    }


@dataclass
class ServerTrack:
    """One server's running state: the previous good sample and the totals since the start."""

    label: str
    url: str
    started_s: float
    scrapes: int = 0
    resets: int = 0
    errors: int = 0
    last_error: str | None = None
    previous: CounterSample | None = None
    totals: dict[str, Any] = field(
        default_factory=lambda: {"drafts": 0, "draft_tokens": 0, "accepted": 0, "pos": []}
    )
    # what the totals miss at their start (the first interval's): counters are
    # cumulative, so a series rejected in between loses nothing once it is back
    missing_start: dict[str, str] | None = None
    rows: deque[WatchRow] = field(default_factory=lambda: deque(maxlen=KEEP_ROWS))

    def add(self, view: ServerCounterView) -> WatchRow:
        self.scrapes += 1
        now = time.monotonic()
        base: dict[str, Any] = {
            "server": self.label,
            "url": self.url,
            "scrape": self.scrapes,
            "t_s": now - self.started_s,
            "wall_time": time.time(),
        }
        sample = view.last
        if view.error is not None or sample is None:
            self.errors += 1
            self.last_error = view.error or "no sample"
            row = WatchRow(**base, error=view.error or "no sample", resets=self.resets)
        elif self.previous is None or sample is self.previous:
            # the first sample is the baseline: nothing to difference yet
            self.previous = sample
            health = HealthFiguresRow.of(_health_gauges(sample))
            row = WatchRow(**base, error=None, resets=self.resets, health=health)
        else:
            row = self._interval_row(base, self.previous, sample)
            self.previous = sample
        self.rows.append(row)
        return row

    def _interval_row(
        self, base: dict[str, Any], prev: CounterSample, cur: CounterSample
    ) -> WatchRow:
        delta = counter_delta(prev, cur)
        health = (
            HealthDelta.between(prev.health, cur.health)
            if prev.health is not None and cur.health is not None
            else None
        )
        reset = bool(delta.resets) or bool(health is not None and health.reset)
        self.resets += int(reset)
        t = self.totals
        t["drafts"] += delta.drafts
        t["draft_tokens"] += delta.draft_tokens
        t["accepted"] += delta.accepted
        pos = t["pos"] + [0] * max(0, len(delta.per_pos) - len(t["pos"]))
        t["pos"] = [
            p + (delta.per_pos[i] if i < len(delta.per_pos) else 0) for i, p in enumerate(pos)
        ]
        if self.missing_start is None:
            self.missing_start = dict(delta.missing_start)
        total = CounterDelta(
            t["drafts"],
            t["draft_tokens"],
            t["accepted"],
            list(t["pos"]),
            base["t_s"],
            delta.label_sets,
            delta.present,
            missing_start=self.missing_start,
            missing_end=delta.missing_end,
        )
        return WatchRow(
            **base,
            error=None,
            reset=reset,
            resets=self.resets,
            interval_s=delta.duration_s,
            interval=SpecFigures.of(delta) if delta.present else None,
            total=SpecFigures.of(total) if delta.present else None,
            health=HealthFiguresRow.of(health),
            per_labels=_per_labels(prev, cur, health),
            counters_engine=delta.engine,
            gauges_last_value=dict(delta.gauges),
        )


def _health_gauges(sample: CounterSample) -> HealthDelta | None:
    """The gauges of one sample (no interval yet: no rates)."""
    if sample.health is None or not sample.health.present:
        return None
    return HealthDelta.between(sample.health, sample.health, 0.0)


def _per_labels(
    prev: CounterSample, cur: CounterSample, health: HealthDelta | None
) -> dict[str, dict[str, Any]]:
    """Each engine / DP label set's interval figures, when there are several."""
    before, after = split_labels(prev), split_labels(cur)
    health_per = health.per_labels if health is not None else {}
    keys = set(after) | set(health_per)
    if len(keys) <= 1:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for labels in sorted(keys):
        entry: dict[str, Any] = {}
        if labels in after:
            empty = CounterSample({}, prev.taken_s)
            entry["spec"] = asdict(
                SpecFigures.of(counter_delta(before.get(labels, empty), after[labels]))
            )
        if labels in health_per:
            entry["health"] = asdict(HealthFiguresRow.of(health_per[labels]))
        out[label_text(labels) or "(no labels)"] = entry
    return out


class TimeseriesWriter:
    """watch_timeseries.csv + .jsonl, one row per scrape, flushed as written."""

    def __init__(self, artifact_dir: Path) -> None:
        artifact_dir.mkdir(parents=True, exist_ok=True)
        self.csv_path = artifact_dir / CSV_NAME
        self.jsonl_path = artifact_dir / JSONL_NAME
        self._csv_file: IO[str] = open(self.csv_path, "w", newline="", encoding="utf-8")
        self._jsonl: IO[str] = open(self.jsonl_path, "w", encoding="utf-8")
        self._csv = csv.DictWriter(self._csv_file, fieldnames=CSV_COLUMNS)
        self._csv.writeheader()
        self._lock = threading.Lock()
        self.rows = 0

    def write(self, row: WatchRow) -> None:
        with self._lock:
            if self._jsonl.closed:
                return
            self._csv.writerow(row.csv_row())
            self._jsonl.write(json.dumps(row.to_json(), separators=(",", ":")) + "\n")
            self._csv_file.flush()
            self._jsonl.flush()
            self.rows += 1

    def close(self) -> None:
        with self._lock:
            self._csv_file.close()
            self._jsonl.close()


class _EmptySession:
    """A server's session in watch mode: no requests, so an empty accumulator."""

    def __init__(self, artifact_dir: Path) -> None:
        self.accumulator = RunAccumulator()
        self._artifact_dir = artifact_dir
        self.spec_method: SpecMethod | None = None  # a watch sends no request to learn it

    @property
    def artifact_dir(self) -> Path | None:
        return self._artifact_dir


class WatchRun(BackgroundRun):
    """Polls every server's /metrics every `interval_s` until `stop()` or `duration_s`.

    `on_row(row)` is called on the scrape thread for every row (after it is written)."""

    thread_name = "specmon-watch"

    def __init__(
        self,
        targets: Mapping[str, str],
        artifact_dir: str | Path,
        interval_s: float = 2.0,
        duration_s: float | None = None,
        on_row: Any = None,
    ) -> None:
        super().__init__()
        self.targets = dict(targets)
        self.artifact_dir = Path(artifact_dir)
        self.interval_s = interval_s
        self.duration_s = duration_s
        self.on_row = on_row
        self.started_s = time.monotonic()
        self.tracks = {
            label: ServerTrack(label, url, self.started_s) for label, url in self.targets.items()
        }
        self.pollers: dict[str, ServerCounterPoller] = {}
        self._sessions = {label: _EmptySession(self.artifact_dir) for label in self.targets}
        self.writer: TimeseriesWriter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()

    # RunLifecycle (BackgroundRun) --------------------------------------------------------
    def _launch(self) -> None:
        self.writer = TimeseriesWriter(self.artifact_dir)
        self.started_s = time.monotonic()
        for track in self.tracks.values():
            track.started_s = self.started_s
        self._loop = new_event_loop()

    def _main(self) -> None:
        assert self._loop is not None
        try:
            self._loop.run_until_complete(self._watch())
        finally:
            self._loop.close()
            if self.writer is not None:
                self.writer.close()

    async def _watch(self) -> None:
        """Scrape until stopped or `--duration`; the start and the end never wait on a slow
        /metrics (each scrape is bounded, and the watch ends within END_S of its stop)."""
        starting = asyncio.ensure_future(self._start_pollers())
        deadline = None if self.duration_s is None else self.started_s + self.duration_s
        while not self._stop.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.05)
        if not starting.done():
            starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        for poller in self.pollers.values():
            poller.on_sample = None  # stop() takes a last sample: not a row of its own
        ends = asyncio.gather(*(poller.stop() for poller in self.pollers.values()))
        try:
            await asyncio.wait_for(ends, END_S)
        except TimeoutError:  # a slow page: the rows so far are the watch
            pass
        for poller in self.pollers.values():
            await poller.close()

    async def _start_pollers(self) -> None:
        for label, url in self.targets.items():
            poller = ServerCounterPoller(url, self.interval_s)
            poller.on_sample = lambda view, label=label: self._on_sample(label, view)
            self.pollers[label] = poller
            await poller.start()  # the baseline row

    def outcome(self) -> tuple[int, list[str]]:
        """The exit status of a watch that ended by itself (docs/monitoring.md, "specmon watch" exit
        statuses) and why, one line per server: 2 when no server was ever reached, 1 when
        a scrape failed (or series were rejected) after a good one, else 0."""
        lines: list[str] = []
        reached = False
        for label, track in self.tracks.items():
            poller = self.pollers.get(label)
            rejected = poller.latest().rejected if poller is not None else {}
            good = track.scrapes - track.errors
            reached = reached or good > 0
            if good == 0:
                why = track.last_error or "no answer before the watch ended"
                lines.append(f"never reached {track.url}: {why}")
                continue
            if track.errors:
                lines.append(
                    f"{track.errors} of {track.scrapes} scrapes of {track.url} failed "
                    f"(last: {track.last_error})"
                )
            if rejected:
                why = ", ".join(f"{n} {reason}" for reason, n in rejected.items())
                lines.append(f"{track.url}: rejected series: {why}")
        if not reached:
            return 2, lines
        return (1 if lines else 0), lines

    def _on_sample(self, label: str, view: ServerCounterView) -> None:
        row = self.tracks[label].add(view)
        if self.writer is not None:
            self.writer.write(row)
        if self.on_row is not None:
            self.on_row(row)

    def _request_stop(self) -> None:
        self._stop.set()

    def progress(self) -> LoadProgress:
        errors = sum(t.errors for t in self.tracks.values())
        phase = "done" if self.finished else "profiling"
        elapsed = time.monotonic() - self.started_s
        return LoadProgress(0, 0, None, 0, errors, 0.0, phase, elapsed_s=elapsed)

    # RunView --------------------------------------------------------------------------
    @property
    def servers(self) -> dict[str, tuple[None, SessionView]]:
        return {label: (None, session) for label, session in self._sessions.items()}

    def poller(self, label: str) -> ServerCounterPoller | None:
        return self.pollers.get(label)

    def segment_rows(self, draft_cost: float | str | None = None) -> list[dict[str, Any]] | None:
        return None  # segments are load changes: a watch makes none

    def series(
        self, label: str, window_s: float | None, columns: int
    ) -> dict[str, list[float | None]]:
        """The monitor's time series (tui/widgets/series.py keys) from this server's rows."""
        rows = list(self.tracks[label].rows)
        now = rows[-1].t_s if rows else 0.0
        return watch_series(rows, window_s, now, columns, self.interval_s)


def watch_series(
    rows: list[WatchRow],
    window_s: float | None,
    now_s: float,
    columns: int,
    interval_s: float = 1.0,
) -> dict[str, list[float | None]]:
    """Rows binned by time into at most `columns` bins over the last `window_s` (None: the
    watch), a bin never shorter than the scrape interval (no empty bins between scrapes):
    acceptance length 1 + Σaccepted / Σdrafts and the server's generation tokens/s (the
    mean of its scrapes) per bin; TTFT and errors need requests, so they stay empty."""
    start = 0.0 if window_s is None else max(0.0, now_s - window_s)
    span = max(now_s - start, interval_s)
    width = max(span / max(columns, 1), interval_s)
    columns = max(1, min(columns, math.ceil(span / width - 1e-9)))
    drafts, accepted = [0] * columns, [0] * columns
    tok: list[list[float]] = [[] for _ in range(columns)]
    for row in rows:
        if row.t_s < start or row.error is not None:
            continue
        b = min(int((row.t_s - start) / width), columns - 1)
        figs = row.interval
        if figs is not None and figs.drafts is not None and figs.accepted is not None:
            drafts[b] += figs.drafts  # a rejected series adds nothing (missing, not 0)
            accepted[b] += figs.accepted
        if row.health.generation_tokens_per_s is not None:
            tok[b].append(row.health.generation_tokens_per_s)
    empty: list[float | None] = [None] * columns
    return {
        "al": [1 + a / d if d else None for a, d in zip(accepted, drafts)],
        "tok_s": [sum(t) / len(t) if t else None for t in tok],
        "ttft_p50": list(empty),
        "err_pct": list(empty),
        SERIES_TIME: [start + (b + 0.5) * width for b in range(columns)],
    }


def headless_line(row: WatchRow) -> str:
    """One line per scrape and server: the interval's acceptance, the watch's, the health."""
    head = f"[{row.t_s:7.1f}s] {row.server}"
    if row.error is not None:
        return f"{head}: scrape failed: {row.error}"
    parts = []
    if row.interval is None:
        parts.append("baseline" if row.interval_s is None else "no spec-decode counters")
    else:
        parts.append(_spec_text(row.interval, row.total))
    h = row.health
    for name, value, fmt in (
        ("run", h.running, "{:.0f}"),
        ("wait", h.waiting, "{:.0f}"),
        ("kv", _pct(h.kv_cache_usage), "{:.1f}%"),
        ("preempt/s", h.preemptions_per_s, "{:.2f}"),
        ("prefix-hit", _pct(h.prefix_cache_hit_rate), "{:.1f}%"),
        ("gen tok/s", h.generation_tokens_per_s, "{:.0f}"),
    ):
        if value is not None:
            parts.append(f"{name} {fmt.format(value)}")
    if row.reset:
        parts.append(f"RESET (server restarted; {row.resets} so far)")
    line = f"{head}: " + "  ".join(parts)
    if row.imbalance is not None:  # a fleet row (watch --prometheus)
        line += f"\n[{row.t_s:7.1f}s] imbalance: {row.imbalance}"
    return line


def _spec_text(interval: SpecFigures, total: SpecFigures | None) -> str:
    if interval.missing:  # a rejected series: its figures are missing, never read as 0
        why = ", ".join(f"{name} rejected: {reason}" for name, reason in interval.missing.items())
        al = f"AL - acc - ({why})"
    elif not interval.drafts:
        al = "AL -"
    else:
        rate = interval.acceptance_rate
        al = (
            f"AL {_fixed(interval.acceptance_length)} acc "
            f"{'-' if rate is None else f'{100 * rate:.1f}%'} pos ["
            + " ".join(f"{r:.2f}" for r in interval.per_position or [])
            + f"] steps {interval.drafts}"
        )
    if total is not None and total.acceptance_length is not None:
        al += f" | watch AL {total.acceptance_length:.2f} steps {total.drafts}"
    return al


def _fixed(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _pct(value: float | None) -> float | None:
    return None if value is None else 100 * value
