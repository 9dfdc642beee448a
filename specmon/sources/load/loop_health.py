"""Is the load client itself the bottleneck? Two signs, read on the event loop's own thread.

- Lag: a 100 ms timer that fires late means one callback (a blocking sink, a GC pause) held
  the loop. Sustained lag above LAG_WARN_MS is a warning.
- Busy: a loop that is never idle is saturated even when every callback is short (hundreds
  of streams each parsed in microseconds: the timer is only a little late, yet every chunk
  waits in the socket for its turn, and the measured TTFT/ITL include that wait; the
  timing benchmark saw 6 ms of added delay at the median with a timer lag under 10 ms).
  The thread's share of wall time spent running or runnable (waiting for a core) comes from
  Linux's /proc/thread-self/schedstat, so a loop starved by another process still reads as
  busy; elsewhere thread CPU time stands in (which undercounts on a contended machine).
  Sustained busy at or above BUSY_WARN is a warning.

docs/architecture.md ("A saturated client") says where the warning shows.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

LAG_INTERVAL_S = 0.1
LAG_WARN_MS = 25.0  # sustained loop lag above this means latency figures include client delay
BUSY_WARN = 0.9  # running or runnable this share of the last second: the loop is saturated
WINDOW_TICKS = 10  # one second of ticks
SUSTAINED_TICKS = 5  # half a second of it in a row, not one GC pause
SCHEDSTAT = Path("/proc/thread-self/schedstat")


def schedstat_clock() -> Callable[[], float] | None:
    """Seconds this thread has been running or waiting for a core, or None where the
    kernel does not say (fields 1 and 2 of schedstat: on-CPU and run-queue time, in ns)."""
    try:
        with SCHEDSTAT.open() as f:
            f.read()
    except OSError:
        return None

    def busy_s() -> float:
        with SCHEDSTAT.open() as f:
            on_cpu, waiting = f.read().split()[:2]
        return (int(on_cpu) + int(waiting)) / 1e9

    return busy_s


MAX_SPANS = 10_000  # saturated spells kept (a run saturated on and off for hours merges)


@dataclass
class SaturationLog:
    """The run's saturation as a whole: seconds watched, seconds under the warning, the
    worst tick lag and busy share, and the saturated spells (perf_counter ns, the clock of
    a request's start_ns/end_ns: what a segment's window is checked against)."""

    observed_s: float = 0.0
    saturated_s: float = 0.0
    worst_lag_ms: float = 0.0
    max_busy: float = 0.0
    spans: list[list[int]] = field(default_factory=list)

    def add(self, dt_s: float, lag_ms: float, busy: float, warning: bool, now_ns: int) -> None:
        self.observed_s += dt_s
        self.worst_lag_ms = max(self.worst_lag_ms, lag_ms)
        self.max_busy = max(self.max_busy, busy)
        if not warning:
            return
        last = self.spans[-1] if self.spans else None
        step_ns = int(dt_s * 1e9)
        if last is not None and now_ns - last[1] <= 2 * step_ns:  # the same spell goes on
            self.saturated_s += (now_ns - last[1]) / 1e9
            last[1] = now_ns
            return
        # a new spell began SUSTAINED_TICKS ticks ago (the warning waits for them)
        began = now_ns - SUSTAINED_TICKS * step_ns
        self.saturated_s += (now_ns - began) / 1e9
        if len(self.spans) >= MAX_SPANS:
            self.spans[-1][1] = now_ns
        else:
            self.spans.append([began, now_ns])

    @property
    def share(self) -> float:
        return min(1.0, self.saturated_s / self.observed_s) if self.observed_s > 0 else 0.0

    def share_of(self, start_ns: int | None, end_ns: int | None) -> float:
        """The share of [start_ns, end_ns] the client was saturated (0 without a window)."""
        if start_ns is None or end_ns is None or end_ns <= start_ns:
            return 0.0
        hit = sum(max(0, min(b, end_ns) - max(a, start_ns)) for a, b in self.spans)
        return min(1.0, hit / (end_ns - start_ns))

    def to_dict(self) -> dict:
        """The summary JSON's `client_saturation` (a specmon key beside AIPerf's)."""
        return {
            "saturated_share": round(self.share, 4),
            "saturated_s": round(self.saturated_s, 3),
            "observed_s": round(self.observed_s, 3),
            "worst_loop_lag_ms": round(self.worst_lag_ms, 2),
            "max_loop_busy": round(self.max_busy, 3),
            "spells": len(self.spans),
        }


class LoopHealthMonitor:
    """Started as a task on the loop it watches (`run()`); read from any thread."""

    def __init__(self, busy_clock: Callable[[], float] | None = None) -> None:
        self.busy_clock = busy_clock or schedstat_clock() or time.thread_time
        self.recent: deque[float] = deque(maxlen=WINDOW_TICKS)  # lag per tick, ms
        self._marks: deque[tuple[float, float]] = deque(maxlen=WINDOW_TICKS + 1)  # wall, busy
        self.busy = 0.0  # share of the last second the loop's thread was running or runnable
        self.lagging_ticks = 0
        self.busy_ticks = 0
        self.log = SaturationLog()  # the whole run's (the warning itself is the last second's)
        self._last_tick: float | None = None

    async def run(self) -> None:
        self._marks.append((time.perf_counter(), self.busy_clock()))
        while True:
            expected = time.perf_counter() + LAG_INTERVAL_S
            await asyncio.sleep(LAG_INTERVAL_S)
            self.tick(time.perf_counter(), expected)

    def tick(self, now: float, expected: float) -> None:
        lag_ms = max(0.0, (now - expected) * 1000.0)
        self.recent.append(lag_ms)
        self.lagging_ticks = self.lagging_ticks + 1 if lag_ms > LAG_WARN_MS else 0
        self._marks.append((now, self.busy_clock()))
        (wall0, busy0), (wall1, busy1) = self._marks[0], self._marks[-1]
        self.busy = min(1.0, (busy1 - busy0) / (wall1 - wall0)) if wall1 > wall0 else 0.0
        full = len(self._marks) > WINDOW_TICKS  # judge busy over a whole second only
        self.busy_ticks = self.busy_ticks + 1 if full and self.busy >= BUSY_WARN else 0
        dt = LAG_INTERVAL_S if self._last_tick is None else max(0.0, now - self._last_tick)
        self._last_tick = now
        self.log.add(dt, lag_ms, self.busy if full else 0.0, self.warning, int(now * 1e9))

    @property
    def lag_ms(self) -> float:
        """The worst lag over the last second."""
        return max(self.recent, default=0.0)

    @property
    def warning(self) -> bool:
        """Latencies now include the client's own delay."""
        return self.lagging_ticks >= SUSTAINED_TICKS or self.busy_ticks >= SUSTAINED_TICKS
