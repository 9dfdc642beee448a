"""The load generator: request bodies, arrival schedules and the dispatch loop (asyncio).

Closed loop: keep `concurrency` requests in flight. Open loop: send at `request_rate`
(constant or seeded poisson arrivals), optionally capped by `concurrency`. Warmup requests
go first, tagged benchmark_phase=warmup. Concurrency, rate and output length can change while
the loop runs (set_* methods, called on the loop's own thread).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from specmon.capture import RawCapture
from specmon.config import RunConfig
from specmon.errors import ServerUnreachable, UserError
from specmon.interfaces import LoadProgress
from specmon.segment_plan import SegmentLog, parse_segments
from specmon.sources.datasets import ConversationSource, answer_text, dataset_source
from specmon.sources.load.client import LoadClient, again, describe_exception, new_capture
from specmon.sources.load.datasets import Prompt, PromptSource, sample_length
from specmon.sources.load.loop_health import LoopHealthMonitor
from specmon.specdecode.engines import request_options

Sink = Callable[[RawCapture], None]  # each request, sent or given up, as the typed record
log = logging.getLogger(__name__)

RETRY_AFTER_CAP_S = 30.0  # the most a 429's Retry-After holds a slot back
RATE_LIMIT_RETRIES = 5  # times one request is re-sent after a 429 before it stays an error
# A connection failure (nothing reached a server) is retried by the same slot after
# min(CAP, BASE * 2**attempt) seconds, times a jitter in [0.5, 1) so slots do not retry in
# step (docs/architecture.md, "A dead or wrong server").
BACKOFF_BASE_S = 0.05
BACKOFF_CAP_S = 2.0
FIRST_N = 10  # the first N decided requests all failing with one HTTP status is a user error


def backoff_delay(attempt: int, rng: random.Random) -> float:
    """Seconds before retry number `attempt` (0 for the first retry)."""
    return min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2.0 ** min(attempt, 30)) * rng.uniform(0.5, 1.0)


def unreachable(capture: RawCapture) -> bool:
    """Nothing reached a server: no status line came back (refused, reset, DNS, ...)."""
    error = capture.error
    return error is not None and error.get("type") == "connection_error" and not capture.status


class Outages:
    """The spells in which no request reached the server (wall-clock `time.time()`), for
    --max-outage and for the end-of-run verdict (an outage is named, not guessed at)."""

    def __init__(self, max_s: float) -> None:
        self.max_s = max_s
        self.spells: list[tuple[float, float | None]] = []  # (start, end; None: still down)

    @property
    def down_since(self) -> float | None:
        return self.spells[-1][0] if self.spells and self.spells[-1][1] is None else None

    def down(self, now: float) -> None:
        if self.down_since is None:
            self.spells.append((now, None))

    def up(self, now: float) -> None:
        if self.down_since is not None:
            self.spells[-1] = (self.spells[-1][0], now)

    def overdue(self, now: float) -> ServerUnreachable | None:
        """The stop once the current spell has lasted --max-outage seconds."""
        since = self.down_since
        if since is None or now - since < self.max_s:
            return None
        return ServerUnreachable(
            f"server unreachable since {clock(since)}; stopped after {self.max_s:g} s"
        )


def clock(wall_s: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(wall_s))


Spell = tuple[float, float | None]  # (wall-clock start, end; None: still down)


def merge_spells(spells: list[Spell]) -> list[Spell]:
    """Spells seen by several senders (the --workers processes each keep their own) as the
    server's: overlapping ones joined, in time order."""
    merged: list[Spell] = []
    for start, end in sorted(spells, key=lambda spell: spell[0]):
        if merged and (merged[-1][1] is None or start <= merged[-1][1]):
            last_start, last_end = merged[-1]
            joined = None if last_end is None or end is None else max(last_end, end)
            merged[-1] = (last_start, joined)
        else:
            merged.append((start, end))
    return merged


def describe_outages(spells: list[tuple[float, float | None]]) -> str | None:
    """'server unreachable 19:25:05-19:26:10' (every spell), or None without one."""
    if not spells:
        return None
    parts = [f"{clock(a)}-{clock(b) if b is not None else 'end'}" for a, b in spells]
    return "server unreachable " + ", ".join(parts)


def retry_after_s(capture: RawCapture) -> float | None:
    """The Retry-After a 429 asked for, capped (None: not a 429, or retried enough)."""
    error = capture.error
    if capture.status != 429 or error is None:
        return None
    asked = error.get("retry_after_s")
    return min(RETRY_AFTER_CAP_S, asked if isinstance(asked, float) else 1.0)


class FirstStatusCheck:
    """Watches the first FIRST_N decided requests (not cancelled, not unreachable): when all
    failed with the same 4xx status (404 wrong model, 401 bad key) the run is a user error,
    reported with the server's own message. A shorter run is judged on what it made."""

    def __init__(self, n: int = FIRST_N) -> None:
        self.n = n
        self.seen: list[tuple[int, str]] = []  # (status, message); status 0 for a success

    def note(self, capture: RawCapture) -> UserError | None:
        """Record one decided request; the error once the window is full and uniform."""
        if len(self.seen) >= self.n:
            return None
        error = capture.error
        if error is not None and error.get("type") == "http_error":
            self.seen.append((int(capture.status), str(error.get("message", ""))))
        else:
            self.seen.append((0, ""))
        return self.verdict() if len(self.seen) == self.n else None

    def verdict(self) -> UserError | None:
        """The user error when every request seen so far failed with one HTTP status."""
        statuses = {status for status, _ in self.seen}
        if len(statuses) != 1 or not 400 <= min(statuses) < 500 or 429 in statuses:
            return None  # a success, mixed statuses, a 5xx or rate limiting is no verdict
        status, message = self.seen[0]
        message = " ".join(message.split())[:300]  # the server's message, on one line
        return UserError(
            f"all of the first {len(self.seen)} requests failed with HTTP {status} "
            f"(check --model, --api-key and --url): {message}"
        )


class RequestFactory:
    """Builds request bodies from prompts: model, max_tokens + ignore_eos, streaming options."""

    def __init__(self, config: RunConfig, model: str, rng: random.Random) -> None:
        self.endpoint = config.endpoint_type
        self.streaming = config.streaming
        self.model = model
        self.extra_inputs = config.extra_inputs
        self.output_tokens_mean = config.output_tokens_mean
        self.output_tokens_stddev = config.output_tokens_stddev
        # What the engine needs in each body to send its per-request stats (SGLang's
        # return_spec_tokens_details, docs/metrics.md §10.1); the user's keys still win.
        self.engine_options = request_options(config.engine)
        self.rng = rng
        self.dataset = config.dataset
        self.prompts: PromptSource | ConversationSource
        self.warmup_prompts: PromptSource | ConversationSource
        if config.dataset:
            self.prompts = dataset_source(config, rng)
            self.warmup_prompts = dataset_source(config, rng, warmup=True)
        else:
            self.prompts = self.warmup_prompts = PromptSource(
                config.effective_prompt_source,
                rng,
                input_tokens_mean=config.synthetic_input_tokens_mean,
                input_tokens_stddev=config.synthetic_input_tokens_stddev,
                input_file=config.input_file,
            )

    def body(self, prompt: Prompt) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model}
        if self.endpoint == "chat":
            body["messages"] = [{"role": r, "content": c} for r, c in prompt.history]
            body["messages"].append({"role": "user", "content": prompt.text})
        else:
            body["prompt"] = transcript(prompt) if prompt.history else prompt.text
        max_tokens = prompt.max_tokens
        if self.dataset and self.output_tokens_mean is not None:
            max_tokens = None  # --output-tokens-mean overrides the dataset's lengths
        if max_tokens is None and self.output_tokens_mean is not None:
            max_tokens = sample_length(self.rng, self.output_tokens_mean, self.output_tokens_stddev)
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
            body["ignore_eos"] = True
        if self.streaming:
            body["stream"] = True
            body["stream_options"] = {
                "include_usage": True
            }  # vLLM puts the stats on the usage chunk
        body.update(self.engine_options)
        if self.extra_inputs:  # the user's keys win, including stream_options
            body.update(copy.deepcopy(self.extra_inputs))
        return body

    def next_prompt(self, phase: str = "profiling") -> Prompt | None:
        """None while a dataset's next turns wait for their answers."""
        return (self.warmup_prompts if phase == "warmup" else self.prompts).next()

    def answered(self, prompt: Prompt, capture: RawCapture) -> None:
        """A request finished: a multi-turn source needs its answer for the next turn."""
        if prompt.conversation is not None and isinstance(self.prompts, ConversationSource):
            self.prompts.answered(prompt, answer_text(capture))

    def next_request(self) -> tuple[dict[str, Any], str | None]:
        prompt = self.next_prompt()
        assert prompt is not None, "only multi-turn datasets wait, and they use next_prompt"
        return self.body(prompt), prompt.category


def transcript(prompt: Prompt) -> str:
    """A multi-turn prompt for the completions endpoint: the history as labelled lines."""
    labels = {"system": "System", "user": "User", "assistant": "Assistant"}
    lines = [f"{labels.get(role, role)}: {content}" for role, content in prompt.history]
    return "\n\n".join([*lines, f"User: {prompt.text}", "Assistant:"])


class ArrivalSchedule:
    """Inter-arrival gaps for the open loop: constant 1/R, or exponential(R) for poisson."""

    def __init__(self, mode: str, rate: float, rng: random.Random) -> None:
        self.mode = mode
        self.rate = rate
        self.rng = rng

    def gap(self) -> float:
        if self.mode == "poisson":
            return self.rng.expovariate(self.rate)
        return 1.0 / self.rate


class LoadGenerator:
    """Runs warmup then profiling against one server; every finished request goes to `sink`."""

    def __init__(
        self,
        config: RunConfig,
        model: str,
        base_url: str,
        sink: Sink,
        *,
        server_label: str | None = None,
        worker_id: str | None = None,
        seed: int | None = None,
        arrival_offset_s: float = 0.0,
        segment_log: SegmentLog | None = None,
        before_profiling: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self.before_profiling = before_profiling  # e.g. restart the /metrics window
        self.base_url = base_url
        self.sink = sink
        self.server_label = server_label
        self.worker_id = worker_id
        rng = random.Random(config.random_seed if seed is None else seed)
        self.factory = RequestFactory(config, model, rng)
        self.concurrency = config.effective_concurrency
        self.rate = config.request_rate
        self.schedule = ArrivalSchedule(
            config.request_rate_mode, config.request_rate or 1.0, random.Random(rng.random())
        )
        self.request_count = config.request_count
        self.duration = config.benchmark_duration
        self.lag = LoopHealthMonitor()
        self.phase = "warmup"
        self.sent = self.completed = self.errors = self.warmup_completed = 0
        self.segment: int | None = None
        self.segment_log = segment_log
        self.plan = parse_segments(config.segments) if config.segments else None
        if self.plan and config.segment_requests:
            self.request_count = config.segment_requests * len(self.plan)
        self.profiling_started: float | None = None
        self._tasks: set[asyncio.Task] = set()
        self._wake: asyncio.Event | None = None
        self._stop_requested = False
        self._drain_until = 0.0  # perf_counter time the in-flight requests are cancelled at
        self._next_arrival = 0.0
        self.arrival_offset_s = arrival_offset_s  # phase shift between constant-rate workers
        # perf_counter seconds of recent open-loop arrivals (bounded: a monitor may run for days)
        self.arrival_times: deque[float] = deque(maxlen=100_000)
        self.last_dispatch_s: float | None = None
        self.retries = 0  # connection-failed attempts, each recorded as a connection_error
        self.outages = Outages(config.max_outage)
        self._sending = True  # False once a --benchmark-duration ends: no more retries
        # why the run stopped itself (FirstStatusCheck, --max-outage)
        self.fatal: UserError | ServerUnreachable | None = None
        self._first = FirstStatusCheck()
        self._backoff_rng = random.Random(rng.random())

    @property
    def down_since(self) -> float | None:
        """time.time() of the current outage's start (None: the server answers)."""
        return self.outages.down_since

    # run-time knobs (loop thread) ---------------------------------------------------
    def set_concurrency(self, value: int | None) -> None:
        self.concurrency = value
        self._poke()

    def set_request_rate(self, value: float | None, mode: str | None = None) -> None:
        self.rate = value
        if value is not None:
            self.schedule.rate = value
            self._next_arrival = time.perf_counter() + self.schedule.gap()
        if mode is not None:
            self.schedule.mode = mode
        self._poke()

    def set_output_tokens(self, mean: int | None, stddev: float = 0.0) -> None:
        self.factory.output_tokens_mean = mean
        self.factory.output_tokens_stddev = stddev

    def request_stop(self) -> None:
        """Stop sending at once; what is in flight may finish for --drain-timeout seconds,
        then is cancelled (each recorded as cancelled). Later calls change nothing."""
        if self._stop_requested:
            return
        drain = self.config.drain_timeout
        self._stop_requested = True
        self._drain_until = time.perf_counter() + drain
        if drain <= 0 or not self._tasks:
            self._cancel_in_flight()
        else:
            asyncio.get_running_loop().call_later(drain, self._cancel_in_flight)
        self._poke()

    def _cancel_in_flight(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def _cancel_and_wait(self) -> None:
        """Cancel what is still in flight and wait until each is recorded (as cancelled)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def progress(self) -> LoadProgress:
        elapsed = time.perf_counter() - self.profiling_started if self.profiling_started else 0.0
        return LoadProgress(
            self.sent,
            self.completed,
            self.request_count,
            len(self._tasks),
            self.errors,
            round(self.lag.lag_ms, 2),
            self.phase,
            self.warmup_completed,
            self.lag.warning,
            elapsed,
            self.retries,
            self.down_since,
            round(self.lag.busy, 3),
        )

    # the loop ------------------------------------------------------------------------
    async def run(self) -> None:
        self._wake = asyncio.Event()
        lag_task = asyncio.create_task(self.lag.run())
        try:
            async with LoadClient(
                self.base_url,
                max_connections=0,
                request_timeout=self.config.request_timeout,
                api_key=self.config.api_key,
                max_response_bytes=self.config.max_response_bytes,
            ) as client:
                self._client = client
                if self.config.warmup_request_count and not self._stop_requested:
                    await self._phase_loop("warmup", self.config.warmup_request_count, None)
                    await self._drain(None)
                    if self.before_profiling is not None and not self._stop_requested:
                        # blocking on purpose: nothing is in flight, and the window must
                        # start before the first profiling request
                        self.before_profiling()
                self.phase = "profiling"
                self.profiling_started = time.perf_counter()
                if self.plan and not self._stop_requested:
                    await self._scripted_segments()
                elif not self._stop_requested:
                    deadline = self.profiling_started + self.duration if self.duration else None
                    await self._phase_loop("profiling", self.request_count, deadline)
                    self.phase = "stopping"
                    self._sending = deadline is None  # the duration is over: drain only
                    await self._drain(self.config.drain_timeout if deadline else None)
                    await self._cancel_and_wait()  # while the client is open: cancelled
        finally:
            self.phase = "stopping"
            drain_left = self._drain_until - time.perf_counter()
            if self._tasks and self._stop_requested and drain_left > 0:
                await asyncio.wait(set(self._tasks), timeout=drain_left)  # the graceful drain
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            lag_task.cancel()
            self.phase = "done"
        fatal = self.fatal or self._first.verdict()  # a short run that failed uniformly
        if fatal is not None:
            raise fatal

    async def _scripted_segments(self) -> None:
        """--segments: each step's settings for N requests or S seconds, drained between steps
        so a segment's requests never share the server with the previous segment's."""
        assert self.plan is not None
        seconds, count = self.config.segment_duration, self.config.segment_requests
        for index, step in enumerate(self.plan):
            if self._stop_requested:
                return
            self._apply_step(index, step)
            deadline = time.perf_counter() + seconds if seconds else None
            await self._phase_loop("profiling", count, deadline)
            await self._drain(self.config.drain_timeout if deadline else None)

    def _apply_step(self, index: int, step: dict[str, Any]) -> None:
        if "concurrency" in step:
            self.set_concurrency(step["concurrency"])
        if "request_rate" in step:
            self.set_request_rate(step["request_rate"])
        if "output_tokens" in step:
            self.set_output_tokens(step["output_tokens"], self.factory.output_tokens_stddev)
        self.segment = index
        if self.segment_log is not None:
            self.segment_log.record(index, self.settings())

    def settings(self) -> dict[str, Any]:
        """The load settings now (what a segment row shows)."""
        return {
            "concurrency": self.concurrency,
            "request_rate": self.rate,
            "output_tokens": self.factory.output_tokens_mean,
        }

    async def _phase_loop(self, phase: str, count: int | None, deadline: float | None) -> None:
        issued = 0
        self._next_arrival = time.perf_counter() + self.arrival_offset_s
        while not self._stop_requested and (count is None or issued < count):
            if deadline is not None and time.perf_counter() >= deadline:
                return
            if self.rate is not None and not await self._wait_arrival(deadline):
                continue  # woken by a knob change, a completion or stop: re-check
            if not await self._wait_slot(deadline):
                continue
            decided_s = time.perf_counter()  # the dispatch instant, checked and recorded
            if deadline is not None and decided_s >= deadline:
                return  # a slot freed after the deadline
            prompt = self.factory.next_prompt(phase)
            if prompt is None:  # the next turns wait for answers: a completion pokes
                timeout = None if deadline is None else deadline - time.perf_counter()
                await self._sleep_or_wake(timeout)
                continue
            self._launch(phase, prompt, decided_s)
            issued += 1

    async def _wait_arrival(self, deadline: float | None) -> bool:
        """Sleep until the next scheduled arrival; False when interrupted before it."""
        now = time.perf_counter()
        if now < self._next_arrival:
            until = self._next_arrival if deadline is None else min(self._next_arrival, deadline)
            await self._sleep_or_wake(until - now)
            if time.perf_counter() < self._next_arrival:
                return False
        self.arrival_times.append(time.perf_counter())
        # Schedule from the planned time, not from now, so small delays do not lower the
        # rate; after a stall of over a second, do not burst to catch up.
        self._next_arrival = max(self._next_arrival, now - 1.0) + self.schedule.gap()
        return True

    async def _wait_slot(self, deadline: float | None) -> bool:
        while self.concurrency is not None and len(self._tasks) >= self.concurrency:
            if self._stop_requested:
                return False
            timeout = None if deadline is None else deadline - time.perf_counter()
            if timeout is not None and timeout <= 0:
                return False
            await self._sleep_or_wake(timeout)
        return not self._stop_requested

    async def _sleep_or_wake(self, timeout: float | None) -> bool:
        """Wait for a poke (completion, knob, stop) or the timeout; True when poked."""
        assert self._wake is not None
        self._wake.clear()
        try:  # asyncio.timeout: wait_for can swallow a cancel on 3.11 (gh-86296)
            async with asyncio.timeout(timeout):
                await self._wake.wait()
            return True
        except TimeoutError:
            return False

    async def _drain(self, grace: float | None) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)

    def _launch(self, phase: str, prompt: Prompt, decided_s: float) -> None:
        body = self.factory.body(prompt)
        streaming = body.get("stream") is True  # --extra-inputs may have turned it on or off
        capture = new_capture(
            self.factory.endpoint, streaming, body, benchmark_phase=phase, **self._tags(prompt)
        )
        if phase == "profiling":
            self.sent += 1
            # the instant the deadline was checked, not after building the body: under a
            # busy core that took past a deadline the check had met (+24 us seen)
            self.last_dispatch_s = decided_s
        task = asyncio.get_running_loop().create_task(self._one(capture, prompt))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _tags(self, prompt: Prompt) -> dict[str, Any]:
        """What a capture carries besides the exchange: its prompt's category and dataset
        row, and where this generator sends from (server, worker, load segment)."""
        row = {"category": prompt.category, "question_id": prompt.question_id, "turn": prompt.turn}
        return {
            **row,
            "server": self.server_label,
            "worker_id": self.worker_id,
            "segment": self.segment,
        }

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:  # retrieved: no stray trace
            log.error("recording a request failed: %s", describe_exception(task.exception()))
        self._poke()

    async def _one(self, capture: RawCapture, prompt: Prompt) -> None:
        """Send one request; while nothing reaches the server, record the failed attempt and
        retry it after a backoff, so an outage neither spins nor uses up --request-count."""
        attempt, answered = 0, False
        try:
            while True:
                await self._client.send(capture, prompt.category)
                delay = self._retry_delay(capture, attempt)
                if delay is None:
                    break
                # the next attempt is made before this one is recorded: the sinks release
                # a recorded capture's prompt and bodies (sinks/memory.py)
                retry = again(capture)
                self._record_retry(capture)
                await asyncio.sleep(delay)
                attempt += 1
                capture = retry
            answered = True
            # Recording (process_capture and every sink) holds the loop for a while: let the
            # other streams whose chunks arrived with this one's end stamp them first, or the
            # last tokens of requests ending together are stamped late, one recording after
            # another, and their ITL reads high (+1.5-3% at 16-64 streams of 4 ms steps).
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            if not capture.error and not answered:  # cancelled in a backoff: never finished
                capture.error = {
                    "type": "cancelled",
                    "message": "request cancelled (run stopped)",
                }
                capture.start_ns = capture.end_ns = time.perf_counter_ns()
            raise
        except Exception as exc:  # never a success with invented times: a counted error
            _client_error(capture, exc)
        finally:  # also on cancellation: the capture is marked cancelled, still recorded
            self.factory.answered(prompt, capture)  # before the completion pokes the loop
            self._record(capture)

    def _retry_delay(self, capture: RawCapture, attempt: int) -> float | None:
        """Seconds before the same request is sent again, or None when it is final: nothing
        reached the server (backoff), or a 429 (its Retry-After, capped, a few times)."""
        if self._stop_requested or not self._sending:
            return None
        if unreachable(capture):
            return backoff_delay(attempt, self._backoff_rng)
        return retry_after_s(capture) if attempt < RATE_LIMIT_RETRIES else None

    def _record_retry(self, capture: RawCapture) -> None:
        """A failure that will be retried: an error in the exports, not a finished request
        (counted before the sink, so `sent` never trails what landed). An outage past
        --max-outage stops the run."""
        now = time.time()
        if unreachable(capture):
            self.outages.down(now)
        self.retries += 1
        self.errors += 1
        # the log shows it as a retried attempt, not a request (issue 20 item 5)
        assert capture.error is not None  # a retry follows a failure
        capture.error["retried"] = True
        self.sink(capture)
        overdue = self.outages.overdue(now)
        if overdue is not None and self.fatal is None:
            self.fatal = overdue
            self.request_stop()

    def _record(self, capture: RawCapture) -> None:
        error = capture.error
        if capture.status:
            self.outages.up(time.time())  # a server answered: the outage (if any) is over
        if capture.benchmark_phase == "warmup":
            self.warmup_completed += 1
        else:
            self.completed += 1
            if error is not None and error.get("type") != "cancelled":  # a stop is not an error
                self.errors += 1
        if (error is None or error.get("type") != "cancelled") and self.fatal is None:
            self.fatal = self._first.note(capture)
            if self.fatal is not None:
                self.request_stop()
        self.sink(capture)

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()


def _client_error(capture: RawCapture, exc: Exception) -> None:
    """What a request task raised outside the client, as the capture's error (`client_error`);
    a capture never sent gets its stamps now, so it carries no latency but a real time."""
    if capture.error is None:
        capture.error = {"type": "client_error", "message": describe_exception(exc)}
    now = time.perf_counter_ns()
    capture.start_ns = capture.start_ns or now
    capture.end_ns = capture.end_ns or now
