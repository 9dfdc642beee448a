"""The simulator's engine state behind vLLM's health series (admission, KV cache, prefix cache).

Per engine, like vLLM's scheduler but much simpler:

- Admission: at most `max_num_seqs` requests run (decode); the rest wait in FIFO order
  (vllm:num_requests_running / vllm:num_requests_waiting). A waiting request is admitted
  when a slot is free and its tokens, and those its next step adds, fit in the KV cache
  (a lone request always fits).
- KV cache: a running request holds prompt + generated-so-far tokens; usage is the sum over
  running requests / `kv_cache_tokens` (vllm:kv_cache_usage_perc, 0..1).
- Preemption: when a step's new tokens would overflow the cache, the newest running request
  is preempted (vllm:num_preemptions_total): it frees its tokens, goes to the front of the
  queue and, once readmitted, recomputes (holds prompt + generated again) and resumes. A
  request that is the only one running is never preempted, so nothing livelocks.
- Prefix cache: prompts are cut into blocks of BLOCK_TOKENS tokens (token-id prompts) or
  BLOCK_CHARS bytes of UTF-8 text (about 4 a token, as requests.estimate_tokens); a block
  hits when the same chain of leading blocks was seen before on that engine. Queries count
  every prompt token; hits count BLOCK_TOKENS per leading hit block, at most prompt - 1
  (the last prompt token is always computed, as in vLLM).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from specmon.sim.counters import SpecCounters

BLOCK_TOKENS = 16
BLOCK_CHARS = 4 * BLOCK_TOKENS
PREFIX_CACHE_BLOCKS = 100_000  # per engine; oldest forgotten first (bounded memory)


@dataclass(eq=False)
class Seq:
    """One request's claim on its engine: the KV tokens it holds while running."""

    engine: int
    tokens: int  # prompt + generated so far
    need: int = 0  # tokens its next step must add (kept while it waits after a preemption)
    running: bool = False
    preempted: bool = False  # cleared by the request once it has recomputed
    resume: asyncio.Future | None = None  # resolved at each (re)admission


@dataclass
class _Engine:
    running: list[Seq] = field(default_factory=list)  # admission order, newest last
    waiting: deque[Seq] = field(default_factory=deque)
    held: int = 0
    prefix: OrderedDict[bytes, None] = field(default_factory=OrderedDict)


class Scheduler:
    """Admission, KV accounting and preemption for every engine; keeps the gauges current."""

    def __init__(
        self, counters: SpecCounters, engines: int, max_num_seqs: int, kv_cache_tokens: int
    ) -> None:
        self.counters = counters
        self.max_num_seqs = max_num_seqs
        self.capacity = kv_cache_tokens
        self.engines = [_Engine() for _ in range(engines)]
        self.running_total = 0

    @property
    def held_total(self) -> int:
        """KV tokens held by the running requests of every engine (prompt + generated)."""
        return sum(eng.held for eng in self.engines)

    # ----- admission ----------------------------------------------------------------------
    async def admit(self, seq: Seq) -> None:
        """Run `seq` now if it fits, else wait in the queue until it is admitted."""
        eng = self.engines[seq.engine]
        if not eng.waiting and self._fits(eng, seq):
            self._start(eng, seq)
            return
        seq.resume = asyncio.get_running_loop().create_future()
        eng.waiting.append(seq)
        await self.wait_resumed(seq)

    async def wait_resumed(self, seq: Seq) -> None:
        """Wait until a queued or preempted `seq` runs again. Loops because it may be
        readmitted and preempted again (a new future) before this coroutine wakes."""
        while not seq.running:
            assert seq.resume is not None
            await seq.resume

    def release(self, seq: Seq) -> None:
        """The request ended (or was cancelled): drop it from wherever it is."""
        eng = self.engines[seq.engine]
        if seq.running:
            self._stop(eng, seq)
        elif seq in eng.waiting:
            eng.waiting.remove(seq)
        self._admit_waiting(eng)

    # ----- KV cache -----------------------------------------------------------------------
    def grow(self, seq: Seq, tokens: int) -> bool:
        """Hold `tokens` more for a running seq; False when seq itself had to be preempted."""
        eng = self.engines[seq.engine]
        assert seq.running, "grow() on a request that is not running"
        seq.need = tokens
        while eng.held + tokens > self.capacity and len(eng.running) > 1:
            victim = eng.running[-1]
            self._preempt(eng, victim)
            if victim is seq:
                self._admit_waiting(eng)
                return False
        seq.tokens += tokens
        seq.need = 0
        eng.held += tokens
        self._admit_waiting(eng)
        return True

    def _preempt(self, eng: _Engine, victim: Seq) -> None:
        self._stop(eng, victim)
        victim.preempted = True
        victim.resume = asyncio.get_running_loop().create_future()
        eng.waiting.appendleft(victim)  # vLLM puts preempted requests first in line
        self.counters.add_preemption(victim.engine)

    # ----- prefix cache -------------------------------------------------------------------
    def prefix_lookup(self, engine: int, prompt: str | list[int], prompt_tokens: int) -> int:
        """Count one prompt's prefix-cache query; return its hit tokens (module docstring)."""
        eng = self.engines[engine]
        hit_blocks, missed, chain = 0, False, b""
        for block in _blocks(prompt):
            chain = hashlib.blake2b(chain + block, digest_size=16).digest()
            if not missed and chain in eng.prefix:
                hit_blocks += 1
                eng.prefix.move_to_end(chain)
            else:
                missed = True
                eng.prefix[chain] = None
        while len(eng.prefix) > PREFIX_CACHE_BLOCKS:
            eng.prefix.popitem(last=False)
        hits = max(0, min(hit_blocks * BLOCK_TOKENS, prompt_tokens - 1))
        self.counters.add_prefix(engine, prompt_tokens, hits)
        return hits

    # ----- internals ----------------------------------------------------------------------
    def _fits(self, eng: _Engine, seq: Seq) -> bool:
        if len(eng.running) >= self.max_num_seqs:
            return False
        # room for its next step too, or a request preempted for want of it would be
        # readmitted at once and preempted again
        return not eng.running or eng.held + seq.tokens + seq.need <= self.capacity

    def _start(self, eng: _Engine, seq: Seq) -> None:
        eng.running.append(seq)
        seq.running = True
        eng.held += seq.tokens
        self.running_total += 1
        if seq.resume is not None and not seq.resume.done():
            seq.resume.set_result(None)

    def _stop(self, eng: _Engine, seq: Seq) -> None:
        eng.running.remove(seq)
        seq.running = False
        eng.held -= seq.tokens
        self.running_total -= 1

    def _admit_waiting(self, eng: _Engine) -> None:
        while eng.waiting and self._fits(eng, eng.waiting[0]):
            self._start(eng, eng.waiting.popleft())

    def refresh_gauges(self) -> None:
        """Set the running/waiting/KV gauges from the state (at each scrape, not each step:
        a zero-latency simulator should not pay for gauges nobody reads)."""
        for engine, eng in enumerate(self.engines):
            usage = eng.held / self.capacity
            self.counters.set_health(engine, len(eng.running), len(eng.waiting), usage)


def _blocks(prompt: str | list[int]) -> list[bytes]:
    """Full blocks only: a partial last block is never cached."""
    if isinstance(prompt, str):
        data = prompt.encode()
        size = BLOCK_CHARS
        return [data[i : i + size] for i in range(0, len(data) - size + 1, size)]
    size = BLOCK_TOKENS
    return [
        b",".join(str(t).encode() for t in prompt[i : i + size])
        for i in range(0, len(prompt) - size + 1, size)
    ]
