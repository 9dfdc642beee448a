"""The simulated vLLM OpenAI-compatible server: a Starlette app served by uvicorn.

Each request gets its own RNG seeded from --seed, a hash of the raw body and category, and
how many times that same body was seen before, so the same requests give the same responses
whatever order they arrive in. Everything a request was sent is written to --log as one
JSON line before the response's last bytes leave (the ground truth for tests).

Pacing: a request waits for admission (specmon/sim/scheduler.py), prefills for ttft_ms,
then runs on its engine's step loop (specmon/sim/engine.py): the loop steps every running
request together on absolute monotonic deadlines, each step lasting the latency formula for
the batch that ran, and hands each request its round at the step's end (its first token at
the first step boundary after prefill, at once when the engine is idle). Steps are drawn
as they run, so a huge max_tokens costs nothing ahead and a client that leaves is dropped
at the next step. Mid-stream chunks are pre-encoded per request (_template).

Timing fields of a --log line (integers, time.monotonic_ns(), i.e. CLOCK_MONOTONIC on Linux,
the clock of time.perf_counter_ns(), shared by every process on the host):
  start_ns     when the request was parsed (before admission)
  admitted_ns  when it first started running
  chunk_ns     streaming: one entry per write, just before the bytes go to the socket:
               entry r (r < rounds) is round r (round 0 = role chunk + first token,
               round r = decode step r), the last entry is the tail (usage chunk and
               [DONE]); non-streaming: one entry, the JSON body's write
  step_ms      each decode step's step_time (ms) as the latency model gave it
  preemptions  times the request was preempted (KV cache full) and recomputed
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, overload

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from specmon.sim import llamacpp, payloads
from specmon.sim.config import SimConfig
from specmon.sim.counters import SpecCounters
from specmon.sim.engine import ON_TIME_S, EngineLoop, sleep_until
from specmon.sim.model import SequencePlan, start_sequence
from specmon.sim.requests import ApiError, ParsedRequest, parse_request
from specmon.sim.schedule import lookup
from specmon.sim.scheduler import Scheduler, Seq
from specmon.specdecode.engines import engine_of_shape
from specmon.specdecode.method import SGLANG_ALGORITHMS, parse_method

# vLLM's method names -> SGLang's --speculative-algorithm (LOOKAHEAD is an older ngram name)
SGLANG_NAMES = {v: k for k, v in SGLANG_ALGORITHMS.items() if k != "LOOKAHEAD"}

# 64 cheap fake words: a token is " " + one of them.
WORDS = tuple(
    [
        "the",
        "of",
        "and",
        "to",
        "in",
        "is",
        "that",
        "for",
        "it",
        "as",
        "with",
        "was",
        "on",
        "be",
        "by",
        "at",
        "this",
        "from",
        "or",
        "an",
        "are",
        "not",
        "but",
        "have",
        "one",
        "all",
        "were",
        "when",
        "we",
        "there",
        "can",
        "which",
        "their",
        "if",
        "will",
        "each",
        "about",
        "how",
        "up",
        "out",
        "them",
        "then",
        "she",
        "many",
        "some",
        "so",
        "these",
        "would",
        "other",
        "into",
        "has",
        "more",
        "her",
        "two",
        "like",
        "him",
        "see",
        "time",
        "could",
        "no",
        "make",
        "than",
        "first",
        "way",
    ]
)
assert len(WORDS) == 64
WORD_BYTES = tuple((" " + w).encode() for w in WORDS)
_TEXT_MARK = "\u2063specmon-text\u2063"  # never in the words: where a chunk's text goes
JSON = "application/json"
SSE = "text/event-stream; charset=utf-8"


class SimState:
    """Process-wide simulator state: config, counters, RNG seeding, in-flight count, log."""

    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        self.base_seed = cfg.seed if cfg.seed is not None else int.from_bytes(os.urandom(8), "big")
        self.occurrences: dict[bytes, int] = {}  # body digest -> times seen (with --seed)
        self.unseeded = 0
        self.request_seq = 0
        self.latency = cfg.latency()
        self.counters = SpecCounters(cfg.model, cfg.num_spec_tokens, cfg.engines)
        self.scheduler = Scheduler(
            self.counters, cfg.engines, cfg.max_num_seqs, cfg.kv_cache_tokens
        )
        k_for = lookup(cfg.schedule_entries(), cfg.num_spec_tokens)
        self.engines = [
            EngineLoop(e, self.scheduler, self.latency, self.counters, k_for)
            for e in range(cfg.engines)
        ]
        self.log_file = open(cfg.log_path, "ab") if cfg.log_path else None
        self.started = int(time.time())

    def rng_for(self, raw_body: bytes, category: str | None) -> random.Random:
        if self.cfg.seed is None:  # no determinism asked: skip the per-body bookkeeping
            self.unseeded += 1
            return random.Random(self.base_seed + self.unseeded)
        digest = hashlib.blake2b(
            raw_body + b"\0" + (category or "").encode(), digest_size=16
        ).digest()
        seen = self.occurrences.get(digest, 0)
        self.occurrences[digest] = seen + 1
        return random.Random(f"{self.base_seed}:{digest.hex()}:{seen}")

    def next_engine(self) -> int:
        self.request_seq += 1
        return (self.request_seq - 1) % self.cfg.engines

    def write_log(self, entry: dict[str, Any]) -> None:
        if self.log_file is not None:
            self.log_file.write(orjson.dumps(entry) + b"\n")
            self.log_file.flush()

    @property
    def in_flight(self) -> int:
        """Requests running (decoding) on every engine: B of the latency model."""
        return self.scheduler.running_total


def _error_response(err: ApiError) -> Response:
    return Response(orjson.dumps(err.body()), status_code=err.status, media_type=JSON)


_ON_TIME_S = ON_TIME_S  # how early a sleep may end (specmon/sim/engine.py)


class _Cut(Exception):
    """Raised inside a body stream to drop the connection mid-response (--disconnect-rate)."""


class RawResponse:
    """An ASGI response fed by an async iterator of byte parts; _Cut leaves it incomplete.

    `on_disconnect`, when given, is called if the client goes away mid-response (uvicorn
    then drops our writes silently, so without it a stream would run on to its end).
    """

    def __init__(
        self,
        parts: AsyncIterator[bytes],
        media_type: str,
        on_disconnect: Callable[[], None] | None = None,
    ) -> None:
        self.parts = parts
        self.media_type = media_type
        self.on_disconnect = on_disconnect

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        watcher = None
        if self.on_disconnect is not None:
            watcher = asyncio.ensure_future(self._watch(receive))
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", self.media_type.encode())],
                }
            )
            try:
                async for part in self.parts:
                    await send({"type": "http.response.body", "body": part, "more_body": True})
            except _Cut:
                return  # uvicorn closes the connection of an unfinished response
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if watcher is not None:
                watcher.cancel()

    async def _watch(self, receive: Any) -> None:
        assert self.on_disconnect is not None
        await _watch_disconnect(receive, self.on_disconnect)


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


class SimRequest:
    """One completion request: its draws, its payloads and its response (JSON or SSE)."""

    def __init__(
        self,
        state: SimState,
        parsed: ParsedRequest,
        body: dict[str, Any],
        category: str | None,
        rng: random.Random,
        x_request_id: str | None,
    ) -> None:
        cfg = state.cfg
        self.state, self.cfg, self.parsed, self.body = state, cfg, parsed, body
        self.category, self.rng, self.x_request_id = category, rng, x_request_id
        self.k = cfg.num_spec_tokens
        self.chat = parsed.endpoint == "chat"
        self.fault = self._draw_fault()
        prefix = "chatcmpl-" if self.chat else "cmpl-"
        self.id = f"{prefix}{rng.getrandbits(128):032x}"
        self.created = int(time.time())
        self.t_start = self.t_first = time.perf_counter()
        self.send_usage = parsed.include_usage or (parsed.stream and cfg.force_include_usage)
        self.engine = state.next_engine()
        self.acceptance = cfg.acceptance_for(category, sum(parsed.prompt_tokens))
        # Lengths now, steps as the engine runs them (engine.py): nothing drawn ahead.
        self.plans: list[SequencePlan] = [
            start_sequence(rng, parsed.max_tokens, parsed.ignore_eos)
            for _ in range(parsed.num_choices)
        ]
        # Text has its own RNG, so the acceptance draws are the same whenever text is made.
        self.text_bits = random.Random(self.id).getrandbits
        self.templates: dict[int, tuple[bytes, bytes]] = {}
        self.single = parsed.num_choices == 1  # vLLM suppresses metrics for n > 1 / many prompts
        self.step_times: list[float] = []
        self.ttft = cfg.ttft_ms
        self.rounds_sent: int | None = None
        self.client_gone = False
        # The engine loop's hand-offs (specmon/sim/engine.py Member).
        self.ready: deque[int] = deque()  # rounds handed over, not yet written
        self.finished = False  # the last round has been handed over
        self.bumped = False  # preempted: wait for readmission, then recompute
        self.waiter: asyncio.Future[None] | None = None
        self.delivered = 0  # rounds taken from `ready` (written, for a stream)
        # KV tokens held once running: the prompt(s) and the prefill token of every choice.
        self.seq = Seq(self.engine, sum(parsed.prompt_tokens) + parsed.num_choices)
        self.start_ns = time.monotonic_ns()
        self.admitted_ns: int | None = None
        self.chunk_ns: list[int] = []
        self.preemptions = 0

    def _client_left(self) -> None:
        self.client_gone = True
        self._wake()  # stop at once: the engine drops it at its next step

    # ----- the engine loop's side (engine.Member) -----------------------------------
    def draw_step(self, k: int) -> int:
        tokens = 0
        for plan in self.plans:
            if not plan.done:
                tokens += plan.draw_step(self.rng, k, self.acceptance)
        return tokens

    def deliver(self, rnd: int, step_ms: float | None) -> bool:
        if step_ms is not None:
            self.step_times.append(step_ms)
        self.ready.append(rnd)
        self.finished = all(plan.done for plan in self.plans)
        self._wake()
        return self.finished

    def bump(self) -> None:
        self.bumped = True
        self._wake()

    def drop(self) -> None:
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def _draw_fault(self) -> str | None:
        cfg, draws = self.cfg, [self.rng.random() for _ in range(3)]
        if draws[0] < cfg.error_rate:
            return "error"
        if draws[1] < cfg.malformed_rate:
            return "malformed"
        if draws[2] < cfg.disconnect_rate:
            return "disconnect"
        return None

    # ----- payloads -------------------------------------------------------------------
    @overload
    def _maybe_corrupt(self, obj: dict[str, Any]) -> dict[str, Any]: ...
    @overload
    def _maybe_corrupt(self, obj: None) -> None: ...
    def _maybe_corrupt(self, obj: dict[str, Any] | None) -> dict[str, Any] | None:
        if obj is not None and self.fault == "malformed":
            return payloads.corrupt(obj)
        return obj

    def vllm_spec(self, streaming: bool) -> dict[str, Any] | None:
        if self.cfg.shape != "vllm" or not self.single or self.k == 0:
            return None
        plan = self.plans[0]
        return self._maybe_corrupt(payloads.vllm_object(plan, self.k, self.cfg.level, streaming))

    def choice_spec(self, index: int, streaming: bool) -> tuple[str, dict[str, Any]] | None:
        """(key, object) to put on choice `index` for the per-choice shapes."""
        shaped = payloads.CHOICE_PAYLOADS.get(self.cfg.shape)
        if shaped is None or self.k == 0:  # no speculation: no spec-decode object anywhere
            return None
        obj = shaped.build(self.plans[index], self.k, self.cfg.level, streaming)
        return None if obj is None else (shaped.key, self._maybe_corrupt(obj))

    def choice_extras(self, index: int) -> dict[str, Any]:
        """The other keys a per-choice shape's engine adds to a finished choice."""
        shaped = payloads.CHOICE_PAYLOADS.get(self.cfg.shape)
        if shaped is None or shaped.extras is None:
            return {}
        return shaped.extras(self.plans[index])

    def sglext(self) -> dict[str, Any] | None:
        if self.cfg.shape != "sglang" or not self.parsed.return_spec_details or self.k == 0:
            return None
        objs = [self._maybe_corrupt(payloads.sglang_object(p, self.k)) for p in self.plans]
        if self.single:
            return {"spec_tokens_details": objs[0]}
        return {"spec_tokens_details": [{"index": i, **o} for i, o in enumerate(objs)]}

    def _timing(self) -> dict[str, float] | None:
        """Measured timing keys (with --enable-per-request-metrics), n = 1 only."""
        if not self.cfg.per_request_metrics:
            return None
        tokens = self.plans[0].completion_tokens
        return payloads.timing_metrics(self.t_start, self.t_first, time.perf_counter(), tokens)

    def usage(self) -> dict[str, Any]:
        prompt = sum(self.parsed.prompt_tokens)
        completion = sum(p.completion_tokens for p in self.plans)
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
            "completion_tokens": completion,
        }
        details = self.usage_details()
        if details is not None:
            usage["completion_tokens_details"] = details
        return usage

    def usage_details(self) -> dict[str, Any] | None:
        """The OpenAI-standard counts (--shape openai-predictions), n = 1 only."""
        if self.cfg.shape != "openai-predictions" or not self.single or self.k == 0:
            return None
        return self._maybe_corrupt(payloads.openai_details(self.plans[0]))

    def root_timings(self) -> dict[str, Any] | None:
        """llama.cpp's root `timings` (--shape llamacpp), n = 1 only."""
        if self.cfg.shape != "llamacpp" or not self.single:
            return None
        elapsed_ms = (time.perf_counter() - self.t_first) * 1000.0 if self.t_first else 0.0
        prompt = sum(self.parsed.prompt_tokens)
        timings = payloads.llamacpp_timings(self.plans[0], prompt, elapsed_ms)
        return self._maybe_corrupt(timings) if "draft_n" in timings else timings

    def counts_payload(self, body: dict[str, Any]) -> Any:
        """Add the counts-only shapes' objects to a body (or the stream's last chunk) and
        return the one sent (None if none)."""
        timings = self.root_timings()
        if timings is not None:
            body["timings"] = timings
            return timings if "draft_n" in timings else None
        usage = body.get("usage")
        return usage.get("completion_tokens_details") if isinstance(usage, dict) else None

    def _text(self, tokens: int) -> str:
        return self._text_bytes(tokens).decode()

    def _text_bytes(self, tokens: int) -> bytes:
        bits = self.text_bits
        return b"".join([WORD_BYTES[bits(6)] for _ in range(tokens)])

    # ----- accounting and log ---------------------------------------------------------
    def account(self, rounds_sent: int | None = None) -> None:
        """Count what was generated (for a cut stream, the spec steps sent before the cut)."""
        counters = self.state.counters
        generated = 0
        for plan in self.plans:
            if rounds_sent is None:
                counters.add_plan(self.engine, plan)
                generated += plan.completion_tokens
            else:  # round 0 is the prefill token, round r >= 1 is decode step r-1
                decode = max(0, rounds_sent - 1)
                counters.add_plan(self.engine, plan, plan.spec_steps_in(decode))
                generated += sum(([1] + plan.step_tokens)[:rounds_sent])
        counters.add_tokens(self.engine, sum(self.parsed.prompt_tokens), generated)

    def log(self, status: int, payload: Any) -> None:
        stats = [
            {
                "completion_tokens": p.completion_tokens,
                "finish_reason": p.finish_reason,
                "steps": p.steps,
                "accepted": p.accepted,
                "drafted": p.drafted,
                "nonspec_steps": p.nonspec_steps,
                "histogram": p.histogram(self.k),
                "per_step_accepted": p.per_step_accepted,
                "per_step_drafted": p.per_step_drafted,
            }
            for p in self.plans
        ]
        entry = {
            "time": time.time(),
            "request_id": self.id,
            "x_request_id": self.x_request_id,
            "endpoint": self.parsed.endpoint,
            "received": self.body,
            "category": self.category,
            "status": status,
            "k": self.k,
            "engine": self.engine,
            "shape": self.cfg.shape,
            "level": self.cfg.level,
            "stream": self.parsed.stream,
            "include_usage": self.parsed.include_usage,
            "usage_chunk": self.send_usage if self.parsed.stream else None,
            "n": self.parsed.n,
            "fault": self.fault,
            "payload": payload,
            "per_step_accepted": self.plans[0].per_step_accepted if self.single else None,
            "per_step_drafted": self.plans[0].per_step_drafted if self.single else None,
            "stats": stats,
            "usage": self.usage() if status == 200 else None,
            "ttft_ms": self.ttft,
            "step_ms": self.step_times,
            "rounds_sent": self.rounds_sent,
            "start_ns": self.start_ns,
            "admitted_ns": self.admitted_ns,
            "chunk_ns": self.chunk_ns,
            "preemptions": self.preemptions,
        }
        self.state.write_log(entry)

    # ----- responses ------------------------------------------------------------------
    async def respond(self, receive: Any = None) -> Any:
        if self.fault == "error":
            self.log(500, None)
            return _error_response(
                ApiError(500, "Simulated internal server error.", "InternalServerError")
            )
        # Watching for a client that leaves costs a task; worth it only when steps take time.
        slow = self.cfg.ttft_ms > 0 or self.state.latency.sleeps
        if self.parsed.stream:
            return RawResponse(self._stream(), SSE, self._client_left if slow else None)
        watcher = None
        if slow and receive is not None:
            watcher = asyncio.ensure_future(_watch_disconnect(receive, self._client_left))
        try:
            return await self._respond_json()
        finally:
            if watcher is not None:
                watcher.cancel()

    async def _respond_json(self) -> Any:
        try:
            async for rnd in self._paced():
                if rnd == 0:
                    self.t_first = time.perf_counter()
            if self.client_gone:  # nobody reads the body: count what was generated
                self._stop_early(self.delivered, "client_disconnect")
                return Response(b"", status_code=200)
            body, payload = self._json_body()
            data = orjson.dumps(body)
            self.chunk_ns.append(time.monotonic_ns())
            if self.fault == "disconnect":
                self.rounds_sent = 0
                self.account(0)
                self.log(200, None)
                return RawResponse(_cut_after(data[: len(data) // 2]), JSON)
            self.account()
            self.log(200, payload)
            return Response(data, media_type=JSON)
        finally:
            self._leave()

    def _leave(self) -> None:
        self.state.engines[self.engine].leave(self)
        self.state.scheduler.release(self.seq)

    # ----- pacing (the engine loop hands the rounds over: specmon/sim/engine.py) -------
    async def _paced(self) -> AsyncIterator[int]:
        """Yield each round as the engine hands it over (0 = the first token, r = decode
        step r); ends after the last one, or when the client has gone."""
        scheduler = self.state.scheduler
        await scheduler.admit(self.seq)
        self.admitted_ns = time.monotonic_ns()
        for prompt, tokens in zip(self.parsed.prompts, self.parsed.prompt_tokens, strict=False):
            scheduler.prefix_lookup(self.engine, prompt, tokens)
        await self._prefill()
        loop = asyncio.get_running_loop()
        while True:
            while self.ready:
                self.delivered += 1
                yield self.ready.popleft()
            if self.finished or self.client_gone:
                return
            if self.bumped:
                await self._recompute()
                continue
            self.waiter = loop.create_future()
            await self.waiter
            self.waiter = None

    async def _prefill(self) -> None:
        """ttft_ms of prefill (or of recomputing after a preemption), then run on the engine."""
        ready_at = time.perf_counter() + self.ttft / 1000.0
        if self.ttft > 0:
            await sleep_until(ready_at)
        self.state.engines[self.engine].join(self, ready_at)

    async def _recompute(self) -> None:
        """Preempted (KV cache full): wait to be readmitted, then recompute and rejoin."""
        self.bumped = False
        await self.state.scheduler.wait_resumed(self.seq)
        self.seq.preempted = False
        self.preemptions += 1
        await self._prefill()

    def _json_body(self) -> tuple[dict[str, Any], Any]:
        """The non-streaming body and the spec-decode payload as sent (None if none)."""
        choices, sent = [], []
        for index, plan in enumerate(self.plans):
            text = self._text(plan.completion_tokens)
            choice = self._json_choice(index, text, plan.finish_reason)
            extra = self.choice_spec(index, streaming=False)
            if extra is not None:
                choice[extra[0]] = extra[1]
                sent.append(extra[1])
            choice.update(self.choice_extras(index))
            choices.append(choice)
        body: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion" if self.chat else "text_completion",
            "created": self.created,
            "model": self.cfg.model,
            "choices": choices,
            "service_tier": None,
            "system_fingerprint": None,
            "usage": {**self.usage(), "prompt_tokens_details": None},
        }
        if self.chat:
            body["prompt_logprobs"] = None
            body["prompt_token_ids"] = None
        body["kv_transfer_params"] = None
        body["ec_transfer_params"] = None
        payload: Any = None
        if self.cfg.shape in ("vllm", "none"):
            spec = self.vllm_spec(streaming=False)
            body["metrics"] = payloads.vllm_metrics(spec, streaming=False, timing=self._timing())
            payload = spec
        elif self.cfg.shape == "sglang":
            ext = self.sglext()
            if ext is not None:
                body["sglext"] = ext
                payload = ext["spec_tokens_details"]
        elif self.cfg.shape in ("llamacpp", "openai-predictions"):
            payload = self.counts_payload(body)
        else:
            payload = sent[0] if self.single and sent else (sent or None)
        return body, payload

    def _json_choice(self, index: int, text: str, finish: str) -> dict[str, Any]:
        if self.chat:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": text,
                "refusal": None,
                "annotations": None,
                "audio": None,
                "function_call": None,
                "tool_calls": [],
                "reasoning_content": None,
            }
            return {
                "index": index,
                "message": message,
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
            }
        return {
            "index": index,
            "text": text,
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": None,
            "prompt_logprobs": None,
        }

    # ----- streaming ------------------------------------------------------------------
    def _base(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk" if self.chat else "text_completion",
            "created": self.created,
            "model": self.cfg.model,
        }

    def _chunk(self, index: int, text: str, finish: str | None) -> dict[str, Any]:
        if self.chat:
            choice: dict[str, Any] = {
                "index": index,
                "delta": {"content": text},
                "logprobs": None,
                "finish_reason": finish,
            }
        else:
            choice = {"index": index, "text": text, "logprobs": None, "finish_reason": finish}
        chunk = {**self._base(), "choices": [choice]}
        if finish is not None:
            choice["stop_reason"] = None
            self._add_choice_spec(choice, index)
            if self.chat:
                chunk["system_fingerprint"] = None
        elif not self.chat:
            choice["stop_reason"] = None
        return chunk

    def _add_choice_spec(self, choice: dict[str, Any], index: int) -> None:
        extra = self.choice_spec(index, streaming=True)
        if extra is not None:
            choice[extra[0]] = extra[1]
            self._sent_choice_specs.append(extra[1])
        choice.update(self.choice_extras(index))

    def _template(self, index: int) -> tuple[bytes, bytes]:
        """A mid-stream chunk of choice `index` as bytes before and after its text: built once
        per request, so a step costs a join, not a JSON encoding (the words need no escape)."""
        parts = self.templates.get(index)
        if parts is None:
            encoded = _sse(self._chunk(index, _TEXT_MARK, None))
            before, _, after = encoded.partition(_TEXT_MARK.encode())
            parts = self.templates[index] = (before, after)
        return parts

    def _round_chunks(self, rnd: int) -> bytes:
        """Round 0 is the prefill token (after the role chunk); round r is each plan's step r-1."""
        out: list[bytes] = []
        for index, plan in enumerate(self.plans):
            if rnd > len(plan.step_tokens):  # this choice ended in an earlier round
                continue
            tokens = 1 if rnd == 0 else plan.step_tokens[rnd - 1]
            last = plan.done and rnd == len(plan.step_tokens)
            if rnd > 0 and not last:
                before, after = self._template(index)
                out += (before, self._text_bytes(tokens), after)
                continue
            if rnd == 0 and self.chat:
                role = {
                    "index": index,
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
                out.append(_sse({**self._base(), "choices": [role], "prompt_token_ids": None}))
            finish = plan.finish_reason if last else None
            out.append(_sse(self._chunk(index, self._text(tokens), finish)))
        return b"".join(out)

    def _tail(self) -> tuple[bytes, Any]:
        """The chunks after the last token (sglext, usage) and the payload sent in them."""
        out, payload = [], None
        ext = self.sglext()
        if ext is not None:
            payload = ext["spec_tokens_details"]
            if not self.send_usage:
                out.append(_sse({**self._base(), "choices": [], "sglext": ext}))
        if self.send_usage:
            chunk: dict[str, Any] = {
                **self._base(),
                "choices": [],
                "usage": self.usage(),
                "system_fingerprint": None,
            }
            spec = self.vllm_spec(streaming=True)
            if spec is not None:
                chunk["metrics"] = payloads.vllm_metrics(
                    spec, streaming=True, timing=self._timing()
                )
                payload = spec
            if ext is not None:
                chunk["sglext"] = ext
            payload = self.counts_payload(chunk) or payload
            out.append(_sse(chunk))
        elif self.cfg.shape == "llamacpp":  # its last chunk carries the timings
            chunk = {**self._base(), "choices": []}
            payload = self.counts_payload(chunk)
            out.append(_sse(chunk))
        if self._sent_choice_specs:
            sent = self._sent_choice_specs
            payload = sent[0] if self.single else sent
        return b"".join(out), payload

    def _count_itl(self) -> None:
        """A finished stream's inter-token latency by the formula and as written, as a client
        measures it: (last token - first) / (tokens - 1); one choice, two tokens or more
        (specmon/sim/counters.py). chunk_ns holds one entry per round written so far."""
        tokens = self.plans[0].completion_tokens
        if not self.single or tokens < 2 or len(self.chunk_ns) < 2:
            return
        formula_s = sum(self.step_times) / 1000.0 / (tokens - 1)
        written_s = (self.chunk_ns[-1] - self.chunk_ns[0]) / 1e9 / (tokens - 1)
        ttft_s = (self.chunk_ns[0] - self.start_ns) / 1e9
        self.state.counters.add_request_itl(self.engine, formula_s, written_s, ttft_s)

    def _stop_early(self, rounds_sent: int, reason: str) -> None:
        self.fault = reason
        self.rounds_sent = rounds_sent
        self.account(rounds_sent)
        self.log(200, None)

    def _cut_due(self, rnd: int) -> bool:
        """--disconnect-rate cuts mid-way: before the first round that starts with half of
        the first choice's tokens sent, or before the last round (lengths are not drawn
        ahead, so the round count is not known before)."""
        if self.fault != "disconnect" or rnd == 0:
            return False
        plan = self.plans[0]
        sent = 1 + sum(plan.step_tokens[: rnd - 1])
        return sent >= plan.completion_tokens // 2 or (self.finished and not self.ready)

    async def _stream(self) -> AsyncIterator[bytes]:
        self._sent_choice_specs: list[dict[str, Any]] = []
        sent = 0
        try:
            async for rnd in self._paced():
                if self.client_gone:  # abort like vLLM: count only what was generated
                    break
                if self._cut_due(rnd):
                    self._stop_early(rnd, "disconnect")
                    raise _Cut()
                if rnd == 0:
                    self.t_first = time.perf_counter()
                data = self._round_chunks(rnd)
                self.chunk_ns.append(time.monotonic_ns())
                sent += 1
                yield data
            if self.client_gone:
                self._stop_early(sent, "client_disconnect")
                return
            tail, payload = self._tail()
            self.rounds_sent = sent
            self.account()
            self._count_itl()
            self.chunk_ns.append(time.monotonic_ns())
            self.log(200, payload)
            yield tail + b"data: [DONE]\n\n"
        finally:
            self._leave()


async def _watch_disconnect(receive: Any, on_disconnect: Callable[[], None]) -> None:
    """Call on_disconnect when the client of a request goes away (ASGI http.disconnect)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    on_disconnect()


async def _cut_after(data: bytes) -> AsyncIterator[bytes]:
    yield data
    raise _Cut()


# ----- routes -------------------------------------------------------------------------------
def _authorized(request: Request) -> bool:
    key = request.app.state.sim.cfg.api_key
    return not key or request.headers.get("authorization") == f"Bearer {key}"


def _unauthorized() -> Response:
    return _error_response(ApiError(401, "Invalid or missing API key.", "AuthenticationError"))


async def models(request: Request) -> Response:
    if not _authorized(request):
        return _unauthorized()
    state: SimState = request.app.state.sim
    card = {
        "id": state.cfg.model,
        "object": "model",
        "created": state.started,
        "owned_by": engine_of_shape(state.cfg.shape).sim_owner,
        "root": state.cfg.model,
        "parent": None,
        "max_model_len": state.cfg.max_model_len,
        "permission": [],
    }
    return Response(orjson.dumps({"object": "list", "data": [card]}), media_type=JSON)


async def health(request: Request) -> Response:
    return Response(b"", status_code=200)


async def version(request: Request) -> Response:
    return Response(orjson.dumps({"version": "0.32.0"}), media_type=JSON)


async def metrics(request: Request) -> Response:
    state: SimState = request.app.state.sim
    state.scheduler.refresh_gauges()
    body = state.counters.exposition()
    if state.cfg.metrics_spelling == "ray":  # Ray Serve's names: ray_vllm_spec_decode_*
        body = body.replace(b"vllm:", b"ray_vllm_")
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")


async def server_info(request: Request) -> Response:
    """SGLang's /get_server_info: server_args with the speculative algorithm."""
    cfg = request.app.state.sim.cfg
    method = parse_method(cfg.spec_method)
    algorithm = "EAGLE" if method is None else SGLANG_NAMES.get(method.method, method.method)
    info = {
        "engine": "sglang",
        "version": "0.5.0-specmon-sim",
        "server_args": {
            "model_path": cfg.model,
            "served_model_name": cfg.model,
            "speculative_algorithm": algorithm if cfg.num_spec_tokens else None,
            "speculative_draft_model_path": method.drafter if method else None,
            "speculative_num_steps": cfg.num_spec_tokens,
            "speculative_num_draft_tokens": cfg.num_spec_tokens + 1,
        },
    }
    return Response(orjson.dumps(info), media_type=JSON)


async def vllm_server_info(request: Request) -> Response:
    """vLLM's dev-mode /server_info (VLLM_SERVER_DEV_MODE=1), config_format=text: the
    VllmConfig's str(), of which the simulator fills the speculative config's repr."""
    cfg = request.app.state.sim.cfg
    method = parse_method(cfg.spec_method)
    spec = "None"
    if cfg.num_spec_tokens and method is not None:
        model = "None" if method.drafter is None else repr(method.drafter)
        spec = (
            f"SpeculativeConfig(method={method.method!r}, model={model}, "
            f"num_spec_tokens={cfg.num_spec_tokens})"
        )
    config = f"model={cfg.model!r}, speculative_config={spec}, served_model_name={cfg.model!r}"
    return Response(orjson.dumps({"vllm_config": config, "vllm_env": {}}), media_type=JSON)


async def _completion(request: Request, endpoint: str) -> Any:
    state: SimState = request.app.state.sim
    if not _authorized(request):
        return _unauthorized()
    raw = await request.body()
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return _error_response(ApiError(400, f"Invalid JSON in request body: {exc}"))
    try:
        cfg = state.cfg
        parsed = parse_request(endpoint, body, cfg.model, cfg.default_max_tokens, cfg.max_model_len)
    except ApiError as err:
        state.write_log(
            {
                "time": time.time(),
                "endpoint": endpoint,
                "received": body,
                "x_request_id": request.headers.get("x-request-id"),
                "category": request.headers.get("x-specmon-category"),
                "status": err.status,
                "error": err.body()["error"],
                "payload": None,
            }
        )
        return _error_response(err)
    category = request.headers.get("x-specmon-category")
    sim = SimRequest(
        state,
        parsed,
        body,
        category,
        state.rng_for(raw, category),
        request.headers.get("x-request-id"),
    )
    return await sim.respond(request.receive)


async def chat_completions(request: Request) -> Any:
    return await _completion(request, "chat")


async def completions(request: Request) -> Any:
    return await _completion(request, "completions")


async def _http_error(request: Request, exc: Exception) -> Response:
    """Unknown route or method: FastAPI's (so vLLM's) {"detail": ...} body."""
    status = getattr(exc, "status_code", 404)
    detail = getattr(exc, "detail", "Not Found")
    return Response(orjson.dumps({"detail": detail}), status_code=status, media_type=JSON)


def build_app(cfg: SimConfig) -> Starlette:
    routes = [
        Route("/v1/models", models),
        Route("/health", health),
        Route("/version", version),
        Route("/metrics", metrics),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
    ]
    if cfg.shape == "sglang":
        routes += [Route("/server_info", server_info), Route("/get_server_info", server_info)]
    elif cfg.shape == "vllm":  # as vLLM in its dev mode: the speculative config's method
        routes += [Route("/server_info", vllm_server_info)]
    if cfg.shape == "llamacpp":  # its native /completion (specmon/sim/llamacpp.py)
        routes += llamacpp.routes(_completion)
    app = Starlette(routes=routes, exception_handlers={404: _http_error, 405: _http_error})
    app.state.sim = SimState(cfg)
    return app
