"""Acceptance alarms: per-request figures in, named alarms out (pure; no I/O, no Textual).

No engine ships these (vLLM's per-request acceptance alarm is unmerged), so specmon raises
them from what it already measures. `AlarmMonitor.observe` takes one request's
`Observation` (acceptance length, k, end time, per-request output tok/s) and returns the
alarms that start with it. The rules (docs/monitoring.md, "Acceptance alarms"):

- `garbled_drafter`: the last GARBLED_REQUESTS requests' mean acceptance length is within
  GARBLED_MARGIN of 1.0: almost no draft is accepted (a garbled or mismatched drafter);
- `degenerate_repetition`: each of the last REPETITION_REQUESTS requests accepted every
  draft (acceptance length exactly k + 1): the output is repeating itself;
- `acceptance_drift`: the mean of the last DRIFT_WINDOW requests is below the run's own
  baseline (its first DRIFT_BASELINE requests) by more than DRIFT_SIGMAS standard errors of
  the difference and by at least DRIFT_MIN_DROP;
- `speculation_not_paying`: the last PAYING_WINDOW requests' acceptance is up on the
  PAYING_WINDOW before them (by more than PAYING_SIGMAS standard errors and DRIFT_MIN_DROP)
  while their mean output tok/s is not up by more than PAYING_FLAT_TOLERANCE: more
  acceptance bought no speed.

The two window rules are looked at once per window (tumbling: drift at requests
DRIFT_BASELINE + 30, + 60, ...; not-paying at 60, 90, ...), not at every request: sliding
windows would test the same noise 30 times over (a steady run of 20,000 requests raised two
dozen false alarms that way), and it keeps `observe` cheap.

The window rules take the requests in the order they were sent, not the order they ended.
Requests in flight together end in an order set by their own acceptance (the same output
length at more tokens per step is fewer steps, an earlier end), and at a high concurrency
they end in waves: the first completions of a batch of 64 read high, the last ones low. So
a window of 30 completions was biased by where it fell in a wave, and the baseline (the
first 100) high: a steady simulator at concurrency 64 raised "acceptance_drift ... 2.12 vs
2.23 (drop 0.10, 4 s.e. = 0.10)" (a `specmon demo --sweep` cell), 10 runs in 20 in a model
of it (tests/analysis/test_alarms_startup.py), none in send order. Once requests overlap,
a request goes to the window rules when the newest end is HOLD_DURATIONS times the longest
request seen past its start (all sent before it have surely ended), in send order; a run
that never overlaps (concurrency 1) is in send order already and passes each at once. The
last requests of a run, still held, are never looked at by these two rules.

An alarm is active while its condition holds; it ends (`until_request` set) when the
condition clears and may start again later.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from specmon.records import json_record

# Enough requests that a short streak of hard prompts is not a broken drafter.
GARBLED_REQUESTS = 20
# A working drafter accepts well over 0.1 tokens per step on average; garbled ones ~0.
GARBLED_MARGIN = 0.1
# Accepting every draft on one request happens (short, easy outputs); on 20 in a row it
# means repetition (or a drafter that copies the target).
REPETITION_REQUESTS = 20
# Acceptance lengths are ratios of integers: equal to k + 1 up to float rounding.
REPETITION_EPS = 1e-9
# The baseline is every later window's reference: 100 requests, so its own luck moves the
# threshold little (with 30, a run whose first requests were easy raised false drifts all
# along); the window is 30 requests, short enough to catch a change within one minute.
DRIFT_BASELINE = 100
DRIFT_WINDOW = 30
# Four standard errors: checked once a window, three (1 false alarm in 740 windows) raised
# one false drift per ~20,000 requests of a steady run; four is ~1 in 30,000 windows.
DRIFT_SIGMAS = 4.0
# Below this a drop is real but too small to act on (tokens per step).
DRIFT_MIN_DROP = 0.1
PAYING_WINDOW = DRIFT_WINDOW  # one cadence for both window rules
# The same noise test as drift's, on two adjacent windows.
PAYING_SIGMAS = DRIFT_SIGMAS
# Output tok/s up by less than 2% counts as flat (noise in per-request speeds).
PAYING_FLAT_TOLERANCE = 0.02
# A request is surely ended this many of the longest durations seen after a later one was
# sent (durations of a steady run vary by tens of percent, not by two times).
HOLD_DURATIONS = 2.0

ALARM_NAMES = (
    "garbled_drafter",
    "degenerate_repetition",
    "acceptance_drift",
    "speculation_not_paying",
)


@dataclass(frozen=True)
class Observation:
    """One valid profiling request's figures (None: not known for this request)."""

    acceptance_length: float
    k: float | None = None  # drafts per verify step (this request's mean)
    end_ns: int | None = None  # monotonic ns the request ended
    output_tps: float | None = None  # this request's output tokens / its latency
    start_ns: int | None = None  # monotonic ns it was sent (the clock of end_ns)


@dataclass
class Alarm:
    """`since_request`: 1-based index of the request that started it; `since_s`: its end
    time, seconds after the first request's end (None without end times)."""

    name: str
    since_request: int
    since_s: float | None
    message: str
    until_request: int | None = None  # set when the condition cleared
    # the request's index in the session's results (the request log's row - 1; warmups and
    # errors are rows too, so it may differ from since_request): set by the AlarmSink
    log_index: int | None = None

    @property
    def active(self) -> bool:
        return self.until_request is None

    def to_dict(self) -> dict[str, object]:
        return {**json_record(self), "active": self.active}


def mean_and_se(values: Sequence[float]) -> tuple[float, float]:
    """The mean and its standard error (sample std / sqrt(n)); se 0 for fewer than 2."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


def significant_drop(
    before: Sequence[float], after: Sequence[float], sigmas: float = DRIFT_SIGMAS
) -> tuple[bool, str]:
    """Whether mean(after) is below mean(before) by more than `sigmas` standard errors of
    the difference and at least DRIFT_MIN_DROP; and the figures, as text."""
    m0, se0 = mean_and_se(before)
    m1, se1 = mean_and_se(after)
    se = math.hypot(se0, se1)
    drop = m0 - m1
    text = f"{m1:.2f} vs {m0:.2f} (drop {drop:.2f}, {sigmas:g} s.e. = {sigmas * se:.2f})"
    return drop > sigmas * se and drop >= DRIFT_MIN_DROP, text


@dataclass
class SendOrder:
    """Requests as they end in, the same requests in the order they were sent out (module
    docstring): each held until the newest end is HOLD_DURATIONS of the longest request
    seen past its start; requests without times, or before any two overlapped, at once."""

    overlapped: bool = False
    _held: list[tuple[int, int, Observation]] = field(default_factory=list)  # a heap
    _taken: int = 0  # a tie-break for equal starts: arrival order
    _newest_end: int = 0
    _longest: int = 0

    def take(self, obs: Observation) -> list[Observation]:
        """The requests that go to the window rules now, in send order."""
        start, end = obs.start_ns, obs.end_ns
        if start is None or end is None:
            return [obs]
        self.overlapped = self.overlapped or start < self._newest_end
        self._newest_end = max(self._newest_end, end)
        self._longest = max(self._longest, end - start)
        if not self.overlapped:
            return [obs]
        self._taken += 1
        heapq.heappush(self._held, (start, self._taken, obs))
        out = []
        while self._held and self._held[0][0] + HOLD_DURATIONS * self._longest <= self._newest_end:
            out.append(heapq.heappop(self._held)[2])
        return out


@dataclass
class AlarmMonitor:
    """Feed `observe` one Observation per valid profiling request, in arrival order."""

    count: int = 0
    alarms: list[Alarm] = field(default_factory=list)  # every alarm raised, in start order
    ordered: int = 0  # requests the window rules have taken, in send order
    _order: SendOrder = field(default_factory=lambda: SendOrder())
    _first_end_ns: int | None = None
    _baseline: list[float] = field(default_factory=list)
    _recent: deque[Observation] = field(
        default_factory=lambda: deque(maxlen=max(2 * PAYING_WINDOW, DRIFT_WINDOW))
    )
    _garbled: deque[float] = field(default_factory=lambda: deque(maxlen=GARBLED_REQUESTS))
    _garbled_sum: float = 0.0  # of `_garbled`, kept as requests come and go
    _streak: int = 0  # requests in a row with acceptance length exactly k + 1

    @property
    def active(self) -> list[Alarm]:
        return [a for a in self.alarms if a.active]

    def observe(self, obs: Observation) -> list[Alarm]:
        """Add one request; the alarms that start with it."""
        self.count += 1
        if self._first_end_ns is None and obs.end_ns is not None:
            self._first_end_ns = obs.end_ns
        self._count_extremes(obs)
        started: list[Alarm] = []
        self._apply(self._extremes(), obs, started)
        for sent in self._order.take(obs):  # the window rules, in send order
            self.ordered += 1
            if len(self._baseline) < DRIFT_BASELINE:
                self._baseline.append(sent.acceptance_length)
            self._recent.append(sent)
            self._apply(self._windows(), obs, started)
        return started

    def _apply(
        self, conditions: Iterable[tuple[str, str | None]], obs: Observation, started: list[Alarm]
    ) -> None:
        """Start the alarms whose condition holds (into `started`), end those that cleared."""
        for name, message in conditions:
            current = self._current(name)
            if message is not None and current is None:
                alarm = Alarm(name, self.count, self._since_s(obs), message)
                self.alarms.append(alarm)
                started.append(alarm)
            elif message is None and current is not None:
                current.until_request = self.count

    def _count_extremes(self, obs: Observation) -> None:
        if len(self._garbled) == GARBLED_REQUESTS:
            self._garbled_sum -= self._garbled[0]
        self._garbled.append(obs.acceptance_length)
        self._garbled_sum += obs.acceptance_length
        k = obs.k
        full = k is not None and k > 0 and abs(obs.acceptance_length - k - 1) <= REPETITION_EPS
        self._streak = self._streak + 1 if full else 0

    def _current(self, name: str) -> Alarm | None:
        return next((a for a in self.alarms if a.name == name and a.active), None)

    def _since_s(self, obs: Observation) -> float | None:
        if obs.end_ns is None or self._first_end_ns is None:
            return None
        return (obs.end_ns - self._first_end_ns) / 1e9

    def _last(self, n: int) -> list[Observation]:
        return list(self._recent)[-n:] if len(self._recent) >= n else []

    def _extremes(self) -> Iterable[tuple[str, str | None]]:
        """The per-request rules' names and messages (None: the condition does not hold)."""
        yield "garbled_drafter", self._garbled_rule()
        yield "degenerate_repetition", self._repetition()

    def _windows(self) -> Iterable[tuple[str, str | None]]:
        """The window rules, only at the end of each window of requests in send order
        (their state stands in between)."""
        n = self.ordered
        if n >= DRIFT_BASELINE and (n - DRIFT_BASELINE) % DRIFT_WINDOW == 0:
            yield "acceptance_drift", self._drift()
        if n % PAYING_WINDOW == 0:
            yield "speculation_not_paying", self._not_paying()

    def _garbled_rule(self) -> str | None:
        if len(self._garbled) < GARBLED_REQUESTS:
            return None
        mean = self._garbled_sum / GARBLED_REQUESTS
        if mean > 1.0 + GARBLED_MARGIN:
            return None
        return (
            f"acceptance length {mean:.2f} over the last {GARBLED_REQUESTS} requests: "
            "drafts are almost never accepted (garbled or mismatched drafter?)"
        )

    def _repetition(self) -> str | None:
        if self._streak < REPETITION_REQUESTS:
            return None
        return (
            f"acceptance length exactly k+1 on each of the last {self._streak} requests: "
            "every draft accepted (degenerate repetition?)"
        )

    def _drift(self) -> str | None:
        if self.ordered < DRIFT_BASELINE + DRIFT_WINDOW:
            return None  # the window must not overlap the baseline
        window = [o.acceptance_length for o in self._last(DRIFT_WINDOW)]
        dropped, text = significant_drop(self._baseline, window)
        if not dropped:
            return None
        return (
            f"acceptance length of the last {DRIFT_WINDOW} requests {text} below the run's baseline"
        )

    def _not_paying(self) -> str | None:
        both = self._last(2 * PAYING_WINDOW)
        if not both or any(o.output_tps is None for o in both):
            return None
        before, after = both[:PAYING_WINDOW], both[PAYING_WINDOW:]
        # acceptance up = the earlier window's acceptance is a significant drop from the later's
        up, text = significant_drop(
            [o.acceptance_length for o in after],
            [o.acceptance_length for o in before],
            PAYING_SIGMAS,
        )
        tps0 = sum(o.output_tps or 0.0 for o in before) / PAYING_WINDOW
        tps1 = sum(o.output_tps or 0.0 for o in after) / PAYING_WINDOW
        if not up or tps1 > tps0 * (1 + PAYING_FLAT_TOLERANCE):
            return None
        return (
            f"acceptance up (earlier window {text}) but output tok/s "
            f"{tps1:.1f} vs {tps0:.1f}: speculation stopped paying"
        )
