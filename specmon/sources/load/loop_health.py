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


class LoopHealthMonitor:
    """Started as a task on the loop it watches (`run()`); read from any thread."""

    def __init__(self, busy_clock: Callable[[], float] | None = None) -> None:
        self.busy_clock = busy_clock or schedstat_clock() or time.thread_time
        self.recent: deque[float] = deque(maxlen=WINDOW_TICKS)  # lag per tick, ms
        self._marks: deque[tuple[float, float]] = deque(maxlen=WINDOW_TICKS + 1)  # wall, busy
        self.busy = 0.0  # share of the last second the loop's thread was running or runnable
        self.lagging_ticks = 0
        self.busy_ticks = 0

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

    @property
    def lag_ms(self) -> float:
        """The worst lag over the last second."""
        return max(self.recent, default=0.0)

    @property
    def warning(self) -> bool:
        """Latencies now include the client's own delay."""
        return self.lagging_ticks >= SUSTAINED_TICKS or self.busy_ticks >= SUSTAINED_TICKS
