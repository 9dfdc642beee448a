"""One scheduler loop per simulated engine, as vLLM's engine core steps its running batch.

Each step, at its start: every running request of the engine draws its next decode step
(specmon/sim/model.py SequencePlan.draw_step, lazily: nothing is drawn ahead) and claims the
KV tokens it adds (specmon/sim/scheduler.py; a claim may preempt). The step's duration is
the latency formula for the batch that actually ran, B = requests running on all engines
after the claims (as vllm:num_requests_running: those in prefill count too), with k from the
schedule (`--spec-schedule`, looked up with B at the step's start) or `--num-spec-tokens`,
plus the KV reads of the context tokens the running batch holds then (`--kv-ms-per-ktoken`).
The loop sleeps to the step's ABSOLUTE monotonic deadline (previous deadline + duration), so
a late wake-up delays one step and never the ones after it. At the deadline every request
of the step gets its round (one SSE event per request per step); a request whose client has
gone is dropped there, before it draws anything more.

A request joins when its prefill (ttft_ms after admission) is done: its first token goes out
at the next step boundary (at once when the engine is idle), as vLLM streams a step's
outputs at the step's end; a preempted request rejoins after recomputing.

Fidelity (specmon_sim_* on /metrics, counters.py). Each wake-up's lateness behind its
deadline is not all lag: the timer wakes up to a millisecond late, a busy machine can stall
the process for tens of ms, and the next absolute deadlines absorb both (the loop catches
up, the mean step holds). What the clients lose is lateness that persists. So the loop
keeps, per busy period (from a join on an idle engine until it idles again: a sweep's
repeat, for one), the smallest lateness of the last LAG_WINDOW_S seconds of wake-ups, and a
step's lag is how far that persistent lateness rose above its highest value so far. A loop
that cannot keep up (lateness growing step after step) is counted in full, a window late; a
stall it recovers from within the window, and jitter, are not counted; nothing is counted
in a period's first window. When the period ends (the engine idles), the lateness of its
last step counts too, beyond what was already counted: the requests that ended then did
end that late, and there is no later step to catch up with. A step is late when its lag exceeds 2% of its formula
duration; "actual duration" = formula + lag. A zero-time step (every latency 0) has no
schedule to fall behind and is counted as a step only.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from specmon.sim.counters import SpecCounters
    from specmon.sim.model import LatencyModel
    from specmon.sim.scheduler import Scheduler, Seq

LATE_FACTOR = 1.02  # a step more than 2% over its formula is late (docs/simulator.md's bar)
LAG_WINDOW_S = 0.1  # lateness must persist this long to count as lag (module docstring)

# A wake-up this close to its deadline counts as on time: uvloop's timers are whole
# milliseconds on a cached clock, so sleeping the last fraction again would only spin.
ON_TIME_S = 0.0002


async def sleep_until(deadline: float) -> None:
    """Sleep until time.perf_counter() reaches `deadline` (absolute, so lateness never adds up)."""
    while (left := deadline - time.perf_counter()) > ON_TIME_S:
        await asyncio.sleep(left)


class Member(Protocol):
    """What the loop needs of a request (specmon/sim/server.py SimRequest)."""

    seq: Seq
    client_gone: bool

    def draw_step(self, k: int) -> int:
        """Draw the next step of every unfinished choice; the KV tokens it adds."""

    def deliver(self, rnd: int, step_ms: float | None) -> bool:
        """Hand round `rnd` to the request (0 = first token); True when it was the last."""

    def bump(self) -> None:
        """The request was preempted: wake it so it waits for readmission and recomputes."""

    def drop(self) -> None:
        """Its client has gone: wake it to stop (it counts what it sent)."""


class LagMeter:
    """One busy period's lag (module docstring): the rise of its persistent lateness, the
    smallest lateness of the last LAG_WINDOW_S seconds (a monotonic deque: O(1) a step)."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.window: deque[tuple[float, float]] = deque()  # (wake time, lateness), rising
        self.counted = 0.0
        self.last = 0.0  # the lateness of the latest wake-up

    def finish(self) -> float:
        """The period ended: its last step's lateness not yet counted."""
        rise = max(0.0, self.last - self.counted)
        self.counted += rise
        return rise

    def step(self, now: float, lateness: float) -> float:
        """This step's lag: how far the persistent lateness rose above its highest so far."""
        self.last = lateness
        window = self.window
        while window and window[-1][1] >= lateness:
            window.pop()
        window.append((now, lateness))
        # keep the last wake-up at or before the window's start: after a stall (no wake-up
        # for longer than the window) the lateness from before it is still the baseline
        while len(window) > 1 and window[1][0] <= now - LAG_WINDOW_S:
            window.popleft()
        if now - self.start < LAG_WINDOW_S:
            return 0.0
        persistent = window[0][1]
        if persistent <= self.counted:
            return 0.0
        rise, self.counted = persistent - self.counted, persistent
        return rise


class _Slot:
    """One request's place in its engine: rounds handed out and its step in hand."""

    __slots__ = ("claimed", "drawn", "joined_at", "member", "rounds", "tokens")

    def __init__(self, member: Member) -> None:
        self.member = member
        self.rounds = 0  # rounds handed out (round 0 = the first token, r = decode step r)
        self.drawn = 0  # decode steps drawn (one more than rounds - 1: a step in hand)
        self.claimed = 0  # decode steps whose KV tokens are held
        self.tokens = 0  # KV tokens of the drawn step
        self.joined_at = 0.0  # perf_counter() when its prefill (or recompute) ended


class EngineLoop:
    """The engine's step loop: runs while any request is running or joining on it."""

    def __init__(
        self,
        engine: int,
        scheduler: Scheduler,
        latency: LatencyModel,
        counters: SpecCounters,
        k_for: Callable[[int], int],
    ) -> None:
        self.engine = engine
        self.scheduler = scheduler
        self.latency = latency
        self.counters = counters
        self.k_for = k_for  # batch size -> drafts per step
        self.batch: list[_Slot] = []
        self.joining: deque[_Slot] = deque()
        self.slots: dict[int, _Slot] = {}  # id(member) -> slot, for rejoining after preemption
        self._task: asyncio.Task[None] | None = None
        self._k = k_for(1)  # drafts per step of the step in progress

    def join(self, member: Member, ready_at: float) -> None:
        """Prefill (or recompute) done at perf_counter() time `ready_at` (its deadline, not
        the wake-up, which may come a little early): run from the next step boundary."""
        slot = self.slots.get(id(member))
        if slot is None:
            slot = self.slots[id(member)] = _Slot(member)
        slot.joined_at = ready_at
        self.joining.append(slot)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def leave(self, member: Member) -> None:
        """The request ended: forget it (the loop skips a slot it no longer knows)."""
        self.slots.pop(id(member), None)

    # ----- the loop ---------------------------------------------------------------------
    async def _run(self) -> None:
        deadline = time.perf_counter()  # a busy period starts now
        lag = LagMeter(deadline)
        while True:
            self._boundary(deadline)
            await asyncio.sleep(0)  # the woken requests write (and finished ones release)
            if not self._claim() and not self.joining:
                self.counters.add_lag(self.engine, lag.finish())
                return  # idle: the next join starts a new busy period
            if not self.batch:  # only joiners: a new busy period from the first one's prefill
                self.counters.add_lag(self.engine, lag.finish())
                first = min(slot.joined_at for slot in self.joining)
                deadline = max(time.perf_counter(), first)
                await sleep_until(deadline)
                lag = LagMeter(deadline)
                continue
            batch_size = self.scheduler.running_total
            context = self.scheduler.held_total  # the batch's KV reads (--kv-ms-per-ktoken)
            step_s = self.latency.step_ms_at(self._k, batch_size, context) / 1000.0
            deadline += step_s
            await sleep_until(deadline)
            now = time.perf_counter()
            step_lag = lag.step(now, now - deadline) if step_s > 0 else 0.0
            late = step_s > 0 and step_lag > (LATE_FACTOR - 1.0) * step_s
            self.counters.add_step(self.engine, step_s, step_lag, late, batch_size)
            self._finish_step(step_s * 1000.0)

    def _boundary(self, deadline: float) -> None:
        """Joiners enter the batch: a fresh one gets its first token now, a resumed one runs
        its step in hand at the next step; preempted or abandoned ones are sent away. One
        that joined after the step's deadline (while the loop woke late) waits for the next
        boundary: the step that ended at the deadline could not have held its prefill."""
        later: deque[_Slot] = deque()
        while self.joining:
            slot = self.joining.popleft()
            member = slot.member
            if slot.joined_at > deadline:
                later.append(slot)
                continue
            if id(member) not in self.slots:
                continue
            if member.client_gone:
                self._drop(slot)
            elif member.seq.preempted:
                member.bump()
            elif slot.rounds == 0:
                slot.rounds = 1
                if member.deliver(0, None):
                    self.leave(member)
                else:
                    self.batch.append(slot)
            else:
                self.batch.append(slot)
        self.joining = later

    def _claim(self) -> bool:
        """Start a step: each running request draws its step and holds its KV tokens; the
        ones preempted (by their own claim or a later one) leave the batch. False if empty."""
        self._k = self.k_for(self.scheduler.running_total)
        kept: list[_Slot] = []
        for slot in self._served():
            member = slot.member
            if slot.drawn < slot.rounds and not member.seq.preempted:  # no step in hand
                slot.tokens = member.draw_step(self._k)
                slot.drawn += 1
            if member.seq.running and slot.claimed < slot.drawn:
                if self.scheduler.grow(member.seq, slot.tokens):
                    slot.claimed = slot.drawn
            kept.append(slot)
        self.batch = []
        for slot in kept:  # a claim may have preempted a request that had already claimed
            if slot.member.seq.preempted or not slot.member.seq.running:
                slot.member.bump()
            else:
                self.batch.append(slot)
        return bool(self.batch)

    def _finish_step(self, step_ms: float) -> None:
        """The step's deadline: hand each request its round; the finished ones leave."""
        kept: list[_Slot] = []
        for slot in self._served():
            member = slot.member
            rnd = slot.rounds
            slot.rounds += 1
            if member.deliver(rnd, step_ms):
                self.scheduler.release(member.seq)  # B of the next step no longer counts it
                self.leave(member)
            else:
                kept.append(slot)
        self.batch = kept

    def _served(self) -> Iterator[_Slot]:
        """The batch's slots still to serve; a request whose client went away is dropped."""
        for slot in self.batch:
            if id(slot.member) not in self.slots:
                continue
            if slot.member.client_gone:
                self._drop(slot)
                continue
            yield slot

    def _drop(self, slot: _Slot) -> None:
        self.scheduler.release(slot.member.seq)
        self.leave(slot.member)
        slot.member.drop()
