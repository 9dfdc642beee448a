"""One scheduler loop per simulated engine, as vLLM's engine core steps its running batch.

Each step, at its start: every running request of the engine draws its next decode step
(specmon/sim/model.py SequencePlan.draw_step, lazily: nothing is drawn ahead) and claims the
KV tokens it adds (specmon/sim/scheduler.py; a claim may preempt). The step's duration is
the latency formula for the batch that actually ran, B = requests running on all engines
after the claims (as vllm:num_requests_running: those in prefill count too), with k from the
schedule (`--spec-schedule`, looked up with B at the step's start) or `--num-spec-tokens`.
The loop sleeps to the step's ABSOLUTE monotonic deadline (previous deadline + duration), so
a late wake-up delays one step and never the ones after it. At the deadline every request
of the step gets its round (one SSE event per request per step); a request whose client has
gone is dropped there, before it draws anything more.

A request joins when its prefill (ttft_ms after admission) is done: its first token goes out
at the next step boundary (at once when the engine is idle), as vLLM streams a step's
outputs at the step's end; a preempted request rejoins after recomputing.

Fidelity (specmon_sim_* on /metrics, counters.py): the loop keeps, per busy period, the
largest lateness of a wake-up behind its deadline. A step's lag is how much further behind
that it fell (max(0, lateness - previous largest)), so the timer's jitter, which the next
absolute deadline absorbs, is counted once, and a loop that cannot keep up (its lateness
keeps growing) is counted in full. A step is late when its lag exceeds 2% of its formula
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

LATE_FACTOR = 1.02  # a step more than 2% over its formula is late (the README's bar)

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

    def join(self, member: Member) -> None:
        """Prefill (or recompute) done: run from the next step boundary."""
        slot = self.slots.get(id(member))
        if slot is None:
            slot = self.slots[id(member)] = _Slot(member)
        slot.joined_at = time.perf_counter()
        self.joining.append(slot)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def leave(self, member: Member) -> None:
        """The request ended: forget it (the loop skips a slot it no longer knows)."""
        self.slots.pop(id(member), None)

    # ----- the loop ---------------------------------------------------------------------
    async def _run(self) -> None:
        deadline = time.perf_counter()  # a busy period starts now
        behind = 0.0  # the largest lateness of this busy period
        while True:
            self._boundary(deadline)
            await asyncio.sleep(0)  # the woken requests write (and finished ones release)
            if not self._claim() and not self.joining:
                return  # idle: the next join starts a new busy period
            if not self.batch:  # only joiners (arrived during the yield): a boundary now
                deadline, behind = time.perf_counter(), 0.0
                continue
            batch_size = self.scheduler.running_total
            step_s = self.latency.step_ms_at(self._k, batch_size) / 1000.0
            deadline += step_s
            await sleep_until(deadline)
            lateness = time.perf_counter() - deadline
            lag = max(0.0, lateness - behind)
            behind = max(behind, lateness)
            lag = lag if step_s > 0 else 0.0
            late = step_s > 0 and lag > (LATE_FACTOR - 1.0) * step_s
            self.counters.add_step(self.engine, step_s, lag, late)
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
            if slot.joined_at > deadline + ON_TIME_S:
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

    _k = 0
