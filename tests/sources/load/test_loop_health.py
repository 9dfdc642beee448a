"""The load loop's saturation signs (sources/load/loop_health.py): the busy share and the
timer lag, by hand with a scripted clock, then on a real event loop kept busy by many short
callbacks (the case a late timer alone misses)."""

from __future__ import annotations

import asyncio
import time

from specmon.sources.load.loop_health import (
    LAG_INTERVAL_S,
    LoopHealthMonitor,
    schedstat_clock,
)


class ScriptedClock:
    def __init__(self) -> None:
        self.busy_s = 0.0

    def __call__(self) -> float:
        return self.busy_s


def run_ticks(monitor, clock, busy_per_tick: list[float], start: float = 0.0) -> float:
    """Ticks of 0.1 s wall time each, on time; the thread was busy `b` seconds of each.
    Returns the wall time reached (the next call's `start`)."""
    wall = start
    if not monitor._marks:
        monitor._marks.append((wall, clock()))
    for busy in busy_per_tick:
        wall += LAG_INTERVAL_S
        clock.busy_s += busy
        monitor.tick(wall, wall)  # fired exactly when expected: no lag at all
    return wall


def test_busy_share_is_the_last_second_and_warns_when_sustained():
    clock = ScriptedClock()
    monitor = LoopHealthMonitor(busy_clock=clock)
    # 9 ticks at 0.1 s busy each: 0.9 s busy of 0.9 s, but the window is not a full second yet
    wall = run_ticks(monitor, clock, [0.1] * 9)
    assert abs(monitor.busy - 1.0) < 1e-9 and not monitor.warning
    # tick 10 completes the window; ticks 10..13 are four sustained ones, tick 14 the fifth
    wall = run_ticks(monitor, clock, [0.1] * 4, wall)
    assert not monitor.warning
    run_ticks(monitor, clock, [0.1], wall)
    assert monitor.warning and monitor.lag_ms == 0.0  # busy alone, with no timer lag


def test_half_busy_never_warns_and_the_share_is_exact():
    clock = ScriptedClock()
    monitor = LoopHealthMonitor(busy_clock=clock)
    run_ticks(monitor, clock, [0.05, 0.04] * 20)
    # the last second: ten ticks of 0.05/0.04 alternating: 0.45 s / 1.0 s
    assert abs(monitor.busy - 0.45) < 1e-9
    assert not monitor.warning


def test_a_late_timer_warns_after_half_a_second():
    monitor = LoopHealthMonitor(busy_clock=ScriptedClock())
    monitor._marks.append((0.0, 0.0))
    for i in range(1, 6):
        monitor.tick(now=i * 0.2, expected=i * 0.2 - 0.03)  # each tick 30 ms late (> 25)
        assert monitor.warning == (i == 5)
    assert abs(monitor.lag_ms - 30.0) < 1e-6


def test_a_real_loop_full_of_short_callbacks_reads_busy():
    # Linux says how long the thread ran or waited for a core, so a contended machine still
    # reads a loop that never idles as busy (thread CPU time alone would not)
    assert schedstat_clock() is not None

    async def scenario() -> tuple[float, bool, float, bool]:
        monitor = LoopHealthMonitor()
        task = asyncio.create_task(monitor.run())
        await asyncio.sleep(1.3)  # idle: the timer is all that runs
        idle = (monitor.busy, monitor.warning)
        deadline = time.perf_counter() + 2.5
        while time.perf_counter() < deadline:  # 0.5 ms of work, then yield: never idle
            spin = time.perf_counter() + 0.0005
            while time.perf_counter() < spin:
                pass
            await asyncio.sleep(0)
        busy = (monitor.busy, monitor.warning)
        task.cancel()
        return (*idle, *busy)

    idle_busy, idle_warned, busy, warned = asyncio.run(scenario())
    assert idle_busy < 0.5 and not idle_warned
    assert busy >= 0.9 and warned


def test_the_run_log_counts_saturated_time_worst_lag_and_spells_by_hand():
    """Issue 31 item 6: the whole run's saturation, fed a scripted lag. 10 ticks on time,
    10 ticks 30 ms late, 10 on time, 0.1 s apart: the warning fires at the fifth late tick
    (t = 1.5 s), its spell began five ticks earlier (t = 1.0 s) and lasts to the last late
    tick (t = 2.0 s): 1.0 s saturated of 3.0 s watched, share 1/3, worst lag 30 ms."""
    monitor = LoopHealthMonitor(busy_clock=ScriptedClock())
    monitor._marks.append((0.0, 0.0))
    for i in range(1, 31):
        late = 0.03 if 11 <= i <= 20 else 0.0
        monitor.tick(now=i * 0.1, expected=i * 0.1 - late)
    log = monitor.log
    assert abs(log.observed_s - 3.0) < 1e-6
    assert abs(log.saturated_s - 1.0) < 1e-6
    assert abs(log.share - 1 / 3) < 1e-6
    assert abs(log.worst_lag_ms - 30.0) < 1e-6
    assert len(log.spans) == 1
    (a, b) = log.spans[0]
    assert abs(a - 1.0e9) < 1e3 and abs(b - 2.0e9) < 1e3
    # a window's share: [0.5 s, 1.5 s] holds half a second of the spell
    assert abs(log.share_of(int(0.5e9), int(1.5e9)) - 0.5) < 1e-6
    assert log.share_of(int(2.5e9), int(3.0e9)) == 0.0
    d = log.to_dict()
    assert d["saturated_share"] == 0.3333 and d["spells"] == 1 and d["worst_loop_lag_ms"] == 30.0


def test_two_spells_stay_apart_and_a_clean_run_logs_none():
    monitor = LoopHealthMonitor(busy_clock=ScriptedClock())
    monitor._marks.append((0.0, 0.0))
    late_ticks = set(range(1, 7)) | set(range(20, 26))  # two spells of six late ticks
    for i in range(1, 31):
        late = 0.05 if i in late_ticks else 0.0
        monitor.tick(now=i * 0.1, expected=i * 0.1 - late)
    # each: the warning at its fifth late tick, spell from five ticks before to its sixth
    assert len(monitor.log.spans) == 2
    assert abs(monitor.log.saturated_s - 2 * 0.6) < 1e-6
    clean = LoopHealthMonitor(busy_clock=ScriptedClock())
    clean._marks.append((0.0, 0.0))
    for i in range(1, 11):
        clean.tick(now=i * 0.1, expected=i * 0.1)
    assert clean.log.saturated_s == 0.0 and clean.log.spans == [] and clean.log.share == 0.0
