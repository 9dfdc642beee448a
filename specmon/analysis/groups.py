"""One accumulator per group of requests (a category, a context-length bucket): every
run-level figure computed per group by the accumulator's own summary code, plus the
running sums behind each group's intervals (docs/metrics.md §12, §15).

Adding a result is O(1) amortised: a dict lookup, the accumulator's add, a few running sums.

The acceptance length's 95 % interval treats each request as one cluster of verify steps:
AL = 1 + A/S with A = sum a_r, S = sum s_r over requests r; the ratio estimator's variance
is n/(n-1) * sum (a_r - R s_r)^2 / S^2 with R = A/S (the delta method), computed from the
running sums of a, s, a^2, s^2 and a*s, so it needs no pass over the results. The draft
acceptance rate's is the same with drafted tokens in place of steps (A/D, no 1 +).
Per-request means (TPOT, tokens/s per user) get mean +- 1.96 standard errors.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from specmon.accumulator import RunAccumulator, SpillFile
from specmon.decision.acceptance import Z95
from specmon.pipeline import RequestResult

HISTOGRAM_KEY = "pooled_spec_decode_acceptance_histogram"
INTERVAL_KEY = "spec_decode_acceptance_length_ci95"


@dataclass
class _RatioSums:
    """Running sums of per-request accepted drafts (a) and verify steps or drafts (s)."""

    n: int = 0
    a: float = 0.0
    s: float = 0.0
    aa: float = 0.0
    ss: float = 0.0
    as_: float = 0.0

    def add(self, accepted: int, steps: int) -> None:
        self.n += 1
        self.a += accepted
        self.s += steps
        self.aa += accepted * accepted
        self.ss += steps * steps
        self.as_ += accepted * steps

    def interval(self, offset: float = 1.0, cap: float = math.inf) -> tuple[float, float] | None:
        """95 % interval of offset + A/S (None under two requests or without steps), kept
        within what the figure can be: A/S >= 0, and at most `cap` (a rate: 1)."""
        if self.n < 2 or self.s <= 0:
            return None
        r = self.a / self.s
        resid = max(self.aa - 2 * r * self.as_ + r * r * self.ss, 0.0)
        se = math.sqrt(self.n / (self.n - 1) * resid) / self.s
        low, high = max(r - Z95 * se, 0.0), min(r + Z95 * se, cap)
        return offset + low, offset + high


@dataclass
class _MeanSums:
    """Running sums of one per-request value, for its mean's 95 % interval."""

    n: int = 0
    total: float = 0.0
    squares: float = 0.0

    def add(self, value: float | None) -> None:
        if value is None or not math.isfinite(value):
            return
        self.n += 1
        self.total += value
        self.squares += value * value

    def interval(self) -> tuple[float, float] | None:
        """mean +- Z95 * s / sqrt(n) (None under two values)."""
        if self.n < 2:
            return None
        mean = self.total / self.n
        var = max(self.squares - self.n * mean * mean, 0.0) / (self.n - 1)
        half = Z95 * math.sqrt(var / self.n)
        return mean - half, mean + half


@dataclass
class GroupSums:
    """The running sums behind one group's intervals."""

    steps: _RatioSums = field(default_factory=_RatioSums)  # accepted / verify steps: AL
    drafts: _RatioSums = field(default_factory=_RatioSums)  # accepted / drafted: the rate
    tpot_ms: _MeanSums = field(default_factory=_MeanSums)
    user_tps: _MeanSums = field(default_factory=_MeanSums)  # output tokens/s per user

    def add(self, result: RequestResult) -> None:
        rec = result.outcome.record
        if result.error is not None or rec is None or result.outcome.zero_step:
            return
        if rec.num_spec_steps is not None:  # counts only: no AL to add
            self.steps.add(rec.num_accepted_draft_tokens, rec.num_spec_steps)
        self.drafts.add(rec.num_accepted_draft_tokens, rec.num_draft_tokens)
        metrics = result.metrics
        self.tpot_ms.add(metrics.get("inter_token_latency"))
        self.user_tps.add(metrics.get("output_token_throughput_per_user"))


class GroupedTable:
    """One accumulator per group (`key_of(result)`; None: `missing`), fed result by result
    (`add`) or by reading an append-only results list incrementally (`catch_up`).

    A run where no request had a group has no groups at all; requests without one are
    counted under `missing` when others have one."""

    def __init__(
        self,
        key_of: Callable[[RequestResult], str | None],
        missing: str,
        keep: frozenset[str] = frozenset(),
    ) -> None:
        self._key_of = key_of
        self._missing = missing
        # the groups' values live in one temporary file, read back for the export's exact
        # statistics; only the tags in `keep` stay in memory, for the live table's
        # percentiles (issue 35 item 6: two group copies of a streamed request's time
        # metrics were 112 of its 168 bytes)
        self._spill, self._keep = SpillFile(), keep
        self._groups: dict[str, RunAccumulator] = {}
        self._sums: dict[str, GroupSums] = {}
        self._grouped = False
        self._read = 0  # how much of the list given to catch_up has been read
        self._lock = threading.Lock()  # add() on the load thread vs readers

    def add(self, result: RequestResult) -> None:
        if result.phase == "warmup":
            return
        key = self._key_of(result)
        name = key or self._missing
        with self._lock:
            if key:
                self._grouped = True
            acc = self._groups.get(name)
            if acc is None:
                # statistics only: the run's own accumulator keeps the request log, so a
                # group keeps none (10,000 results per group once cost 2.6 kB/request of
                # growth)
                acc = self._groups[name] = RunAccumulator(
                    live=False, window=0, spill=self._spill, keep=self._keep
                )
                self._sums[name] = GroupSums()
            acc.add(result)
            self._sums[name].add(result)

    def catch_up(self, results: Sequence[RequestResult]) -> int:
        """Add results[read:] (an append-only list, e.g. RunAccumulator.results); returns
        how many were added."""
        end = len(results)
        new = results[self._read : end]
        self._read = end
        for result in new:
            self.add(result)
        return len(new)

    def groups(self) -> list[str]:
        """Group names in first-seen order; [] when no request had a group."""
        with self._lock:
            return list(self._groups) if self._grouped else []

    def accumulator(self, name: str) -> RunAccumulator | None:
        return self._groups.get(name)

    def rows(self) -> Sequence[Any]:
        """The live table's rows (each table's own row type)."""
        raise NotImplementedError

    def sums(self, name: str) -> GroupSums | None:
        return self._sums.get(name)

    def interval(self, name: str) -> tuple[float, float] | None:
        """The acceptance length's 95 % interval."""
        with self._lock:
            sums = self._sums.get(name)
            return None if sums is None else sums.steps.interval()

    def group_block(self, name: str) -> dict[str, Any]:
        """{tag: block, ..., the pooled histogram, the AL interval}: the same exact
        statistics as the run-level blocks (RunAccumulator.summary)."""
        acc = self._groups[name]
        block: dict[str, Any] = dict(acc.summary())
        if acc.spec_request_count:
            block[HISTOGRAM_KEY] = {str(j): n for j, n in acc.pooled_histogram_sorted().items()}
        ci = self.interval(name)
        if ci is not None:
            block[INTERVAL_KEY] = {"unit": "ratio", "low": ci[0], "high": ci[1]}
        return block

    def export_block(self) -> dict[str, dict[str, Any]]:
        """{group: group_block} in the table's order."""
        return {name: self.group_block(name) for name in self.groups()}

    def histograms(self) -> dict[str, dict[int, int]]:
        """{group: pooled histogram} (groups with spec-decode records only)."""
        return {
            name: self._groups[name].pooled_histogram_sorted()
            for name in self.groups()
            if self._groups[name].spec_request_count
        }

    def num_spec_tokens(self) -> int | None:
        for acc in self._groups.values():
            if acc.num_spec_tokens is not None:
                return acc.num_spec_tokens
        return None


def sort_rows(rows: list[Any], column: str, descending: bool = False) -> list[Any]:
    """Rows (with a value(column) method) ordered by a column; rows without a value go
    last either way."""
    present = [r for r in rows if r.value(column) is not None]
    missing = [r for r in rows if r.value(column) is None]
    present.sort(key=lambda r: r.value(column), reverse=descending)
    return present + missing
