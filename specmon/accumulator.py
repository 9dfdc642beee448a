"""The run accumulator: O(1) amortised per request, cheap snapshots, the export summary.

Warmup requests are only counted. Error requests feed the error summary only. A zero-step
request is counted (spec_decode_zero_step_requests) and otherwise left out of every
distribution, total and the pooled histogram (docs/metrics.md §7).
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from array import array
from bisect import bisect_right, insort
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import IO, Any, cast, overload

from specmon.constants import NS_PER_S, S_PER_NS
from specmon.pipeline import BASE_SCALE, RequestResult
from specmon.results_window import RESULTS_WINDOW, ResultWindow, Tally
from specmon.specdecode.fidelity import COUNTS, weakest
from specmon.specdecode.record import SpecDecodeAcceptanceRecord
from specmon.stats import (
    DERIVED,
    JSON_STAT_KEYS,
    METRICS,
    PCT_KEYS,
    RECORD,
    MetricRow,
    compute_stats,
    is_spec_tag,
    metric_row,
)

Block = dict[str, Any]  # one metric's export block: {"unit", "avg", ...}

# Time metrics are accumulated in ns (their stored unit, BASE_SCALE in pipeline.py) and
# their statistics converted, as AIPerf does.
# every statistic that carries the metric's unit (all but the count): the ones a unit change scales
_SCALED_KEYS = tuple(k for k in JSON_STAT_KEYS if k != "count")


class SortedValues:
    """An ascending multiset kept as sorted blocks (a minimal sorted list) of array('d'),
    8 bytes a value: a column's only copy of its values (issue 10: flat memory).

    The design is the one of the `sortedcontainers` package's SortedList: a list of sorted
    sublists, each at most 2 * LOAD long (split in two when it grows past that), with the
    maximum of each sublist kept in `_maxes` so an insert bisects twice (which sublist,
    where in it) and the positional index is built lazily from the sublist lengths. Written
    here (not a dependency) for the few operations the live view needs; measured 1.5-1.7x
    faster than re-sorting each column for this use.

    The live view needs a column's order statistics after every few hundred new values.
    Re-sorting the whole column each time costs O(n) per refresh (~30 ms for 15 columns at
    300k requests, on the GIL the load thread needs); inserting into blocks of at most
    2 * LOAD values costs O(k log n) for k new values. While the column is small next to
    the batch, one sort of everything is cheaper and is used instead.
    """

    __slots__ = ("_blocks", "_len", "_maxes", "_starts")

    LOAD = 512
    RESORT_RATIO = 32  # re-sort all when n <= RESORT_RATIO * k

    def __init__(self) -> None:
        self._blocks: list[array[float]] = []
        self._maxes: list[float] = []  # last (largest) value of each block
        self._len = 0
        self._starts: list[int] | None = None  # index of each block's first value, lazily

    def __len__(self) -> int:
        return self._len

    def update(self, values: Sequence[float]) -> None:
        """Add values (any order)."""
        if not values:
            return
        if self._len <= self.RESORT_RATIO * len(values):
            merged = self.to_list()
            merged.extend(values)
            merged.sort()
            self._rebuild(merged)
            return
        blocks, maxes, load2 = self._blocks, self._maxes, 2 * self.LOAD
        for value in values:
            i = bisect_right(maxes, value)
            if i == len(blocks):  # above every value: append to the last block
                i -= 1
                blocks[i].append(value)
                maxes[i] = value
            else:
                insort(blocks[i], value)
            if len(blocks[i]) > load2:
                block = blocks[i]
                blocks[i : i + 1] = [block[: self.LOAD], block[self.LOAD :]]
                maxes[i : i + 1] = [block[self.LOAD - 1], block[-1]]
        self._len += len(values)
        self._starts = None

    def _rebuild(self, ordered: list[float]) -> None:
        load = self.LOAD
        self._blocks = [array("d", ordered[i : i + load]) for i in range(0, len(ordered), load)]
        self._maxes = [block[-1] for block in self._blocks]
        self._len = len(ordered)
        self._starts = None

    def __getitem__(self, index: int) -> float:
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("SortedValues index out of range")
        starts = self._starts
        if starts is None:
            starts = self._starts = list(accumulate(map(len, self._blocks[:-1]), initial=0))
        i = bisect_right(starts, index) - 1
        return self._blocks[i][index - starts[i]]

    def to_list(self) -> list[float]:
        return [value for block in self._blocks for value in block]

    def to_array(self) -> array[float]:
        """Every value, ascending, in one flat array (8 bytes a value, no float objects)."""
        out = array("d")
        for block in self._blocks:
            out.extend(block)
        return out


class CountedValues(Sequence[float]):
    """An ascending multiset given as {value: count}: a column with few distinct values
    (token counts, verify steps, small ratios) keeps its values this way, a few dozen bytes
    per distinct value instead of 8 per request (issue 19 item 6). Indexing is by rank
    (bisect over the cumulative counts); `to_array()` gives every value, as SortedValues'."""

    __slots__ = ("_ends", "_values")

    def __init__(self, counts: dict[float, int]) -> None:
        items = sorted(counts.items())
        self._values = [value for value, _ in items]
        self._ends = list(accumulate(count for _, count in items))  # rank past each value

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    @overload
    def __getitem__(self, index: int) -> float: ...
    @overload
    def __getitem__(self, index: slice) -> list[float]: ...
    def __getitem__(self, index: int | slice) -> float | list[float]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("CountedValues index out of range")
        return self._values[bisect_right(self._ends, index)]

    def to_array(self) -> array[float]:
        out, start = array("d"), 0
        for value, end in zip(self._values, self._ends):
            out.extend(array("d", [value]) * (end - start))
            start = end
        return out


class SpillFile:
    """Columns' values written out in chunks to one anonymous temporary file (unlinked at
    once: the system frees it when the process ends), and read back for exact statistics.

    A group's columns (a category's, a context bucket's: analysis/groups.py) are read live
    only for running figures, so they keep their values here, not in memory: three copies
    of every streamed request's seven time metrics (the run's and two groups') cost 168
    bytes a request, the run's alone 56 (issue 35 item 6). One file per table keeps the
    open files to two, whatever the number of groups. A failed write (a full disk) turns
    spilling off for good: the columns then keep their values in memory, as the run's do.
    """

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._end = 0  # bytes written
        self.failed = False
        self._lock = threading.Lock()

    def write(self, values: array[float]) -> int | None:
        """Append `values`; their byte offset, or None when spilling failed (now or before)."""
        data = values.tobytes()
        with self._lock:
            if self.failed:
                return None
            try:
                if self._file is None:
                    self._file = tempfile.TemporaryFile(prefix="specmon-spill-")
                offset, done = self._end, 0
                while done < len(data):  # a regular file takes all at once, unless full
                    done += os.pwrite(self._file.fileno(), data[done:], offset + done)
            except OSError:
                self.failed = True
                return None
            self._end = offset + len(data)
            return offset

    def read(self, offset: int, count: int) -> array[float]:
        """`count` values written at `offset`."""
        out = array("d")
        assert self._file is not None  # only offsets write() returned are read
        out.frombytes(os.pread(self._file.fileno(), count * out.itemsize, offset))
        if len(out) != count:
            raise OSError(f"spill file cut short at {offset}: {len(out)} of {count} values")
        return out


class MetricColumn:
    """Values of one record metric.

    New values land in `_pending` (under the accumulator's lock); `freeze()`, called under
    that lock by the one statistics reader at a time (the accumulator's stats lock), hands
    the pending values over to `_staged`, and `stats()` merges them into the sorted copy
    outside the ingestion lock, so a 4 Hz snapshot never holds up the thread that adds
    requests. The sorted copy (array('d') blocks) is the only place a value is kept: 8
    bytes a value, whatever the run length (issue 10: flat memory). Exact statistics only
    need the sorted order: percentiles, min and max read it, the two-pass std walks it, and
    avg/sum come from the running total in arrival order, as AIPerf's.

    While a column has at most DISTINCT_MAX distinct values it keeps them counted instead
    ({value: count}, updated as they are added; freeze() hands a copy to the reader), so a
    million requests of a few token counts cost no per-request memory; past that it moves
    every value to the sorted copy for good. The statistics are the same either way.

    A column given a SpillFile (a group's) writes its values there in chunks of SPILL_CHUNK
    instead of sorting them: its live statistics are the running ones (count, avg, std;
    percentiles, min and max None), its exact ones read every value back (the summary's).
    """

    DISTINCT_MAX = 1024
    SPILL_CHUNK = 4096  # values a spilled column holds before writing them out (32 kB)

    __slots__ = (
        "_cache",
        "_cache_key",
        "_chunks",
        "_count",
        "_counts",
        "_frozen_counts",
        "_frozen_n",
        "_frozen_tail",
        "_pending",
        "_s1",
        "_s2",
        "_shift",
        "_sorted",
        "_spill",
        "_staged",
        "scale",
        "total",
    )

    def __init__(self, scale: float = 1.0, spill: SpillFile | None = None) -> None:
        self.scale = scale  # stored unit -> display unit
        self._spill = spill
        # spilled: (byte offset, count) of each chunk written, in arrival order; the values
        # are these chunks then _pending. None: the column sorts its values in memory.
        self._chunks: list[tuple[int, int]] | None = None if spill is None else []
        self._frozen_tail: tuple[int, array[float], int] = (0, array("d"), 0)
        self.total = 0.0  # running sum in arrival order: avg = total / n, as AIPerf
        self._count = 0
        # Typed too: a headless run may never ask for statistics until it finishes.
        self._pending = array("d")  # added since the last freeze()
        self._staged = array("d")  # frozen, not merged into _sorted yet
        # Shifted running sums for an O(1) live std (shift = first value keeps it stable).
        self._shift: float | None = None
        self._s1 = 0.0
        self._s2 = 0.0
        self._sorted = SortedValues()
        self._counts: dict[float, int] | None = {}  # None once past DISTINCT_MAX values
        self._frozen_counts: dict[float, int] | None = None  # the reader's copy (freeze)
        self._frozen_n = 0  # the count at the last freeze
        self._cache: Block | None = None
        self._cache_key: tuple[int, bool] | None = None

    def add(self, value: float) -> None:
        counts = self._counts
        if counts is None:
            self._pending.append(value)
        else:
            counts[value] = counts.get(value, 0) + 1
            if len(counts) > self.DISTINCT_MAX:  # not a few values: sorted from now on
                self._pending.extend(CountedValues(counts).to_array())
                self._counts = None
        if self._chunks is not None and len(self._pending) >= self.SPILL_CHUNK:
            self._write_out()
        self._count += 1
        self.total += value
        if self._shift is None:
            self._shift = value
        d = value - self._shift
        self._s1 += d
        self._s2 += d * d

    def _write_out(self) -> None:
        """_pending to the spill file as one more chunk (kept when spilling failed)."""
        assert self._spill is not None and self._chunks is not None
        if self._spill.failed:
            return  # a full disk: the values stay in memory from now on
        offset = self._spill.write(self._pending)
        if offset is not None:
            self._chunks.append((offset, len(self._pending)))
            self._pending = array("d")

    def __len__(self) -> int:
        return self._count

    def freeze(self) -> tuple[int, float, float]:
        """(n, running total, running std) of the current prefix. Call under the
        accumulator's lock, with its stats lock held (one reader at a time)."""
        n = self._count
        if self._chunks is not None:  # spilled: where the values end now (no copy)
            self._frozen_tail = (len(self._chunks), self._pending, len(self._pending))
        elif self._pending:
            self._staged.extend(self._pending)
            self._pending = array("d")
        counts = self._counts
        if counts is None:
            self._frozen_counts = None
        elif self._frozen_counts is None or self._frozen_n != n:  # copied only when it moved
            self._frozen_counts = dict(counts)
        self._frozen_n = n
        var = (self._s2 - self._s1 * self._s1 / n) / n if n else 0.0
        return n, self.total, var**0.5 if var > 0 else 0.0

    def stats(self, frozen: tuple[int, float, float], exact: bool = True) -> Block:
        """Statistics of the frozen prefix. exact=False (live view) takes the running std
        instead of the two-pass one; every other number is identical. Callers serialise
        calls (the accumulator's stats lock)."""
        n, total, running_std = frozen
        key = (n, exact)
        if self._cache is not None and self._cache_key == key:
            return self._cache
        stats: Block
        if self._chunks is not None and self._frozen_counts is None and not exact:
            stats = _running_stats(n, total, running_std)  # spilled: nothing sorted live
        else:
            xs = self._ordered(exact)
            std = None if exact else running_std
            stats = compute_stats(xs, total=total, presorted=True, std=std)
        if self.scale != 1.0:
            for k in _SCALED_KEYS:
                if stats[k] is not None:
                    stats[k] = stats[k] * self.scale
        self._cache, self._cache_key = stats, key
        return stats

    def _ordered(self, exact: bool) -> Sequence[float]:
        """The frozen values in ascending order: counted, or the sorted copy brought up to
        date. The exact (two-pass) std walks every value: a flat array is faster to index;
        compute_stats only indexes and takes len(), which the others offer too."""
        if self._frozen_counts is not None:
            counted = CountedValues(self._frozen_counts)
            return counted.to_array() if exact else counted
        if self._chunks is not None:
            return self._read_back()
        if self._staged:
            self._sorted.update(self._staged)
            self._staged = array("d")
        return self._sorted.to_array() if exact else cast(Sequence[float], self._sorted)

    def _read_back(self) -> array[float]:
        """A spilled column's frozen values, ascending: its chunks read back, then the tail
        it held in memory at the freeze."""
        assert self._spill is not None and self._chunks is not None
        chunks, tail, held = self._frozen_tail
        values = array("d")
        for offset, count in self._chunks[:chunks]:
            values.extend(self._spill.read(offset, count))
        values.extend(tail[:held])
        return array("d", sorted(values))


def _running_stats(n: int, total: float, std: float) -> Block:
    """A spilled column's live statistics: what running sums give (no order statistics)."""
    out: Block = {"avg": total / n}
    out.update(dict.fromkeys(PCT_KEYS))
    out.update({"min": None, "max": None, "std": std, "count": n, "sum": total})
    return out


@dataclass
class RunSnapshot:
    elapsed_s: float
    request_count: int
    error_count: int
    warmup_count: int
    error_summary: dict[str, int]
    pooled_histogram: dict[int, int]
    zero_step_requests: int
    spec_reasons: dict[str, int]
    engine: str | None
    num_spec_tokens: int | None
    version: int = 0  # bumps on every add; lets a view skip redraws
    cancelled_count: int = 0  # in flight when the user stopped the run: not server errors
    # errors whose request was sent again (error "retried": true): attempts, not requests
    retried_count: int = 0
    # The spec-decode totals as integers (the export's total_* blocks are floats, as
    # AIPerf's sums; the /metrics reconciliation compares these exact counts).
    total_steps: int = 0
    total_accepted: int = 0
    total_drafted: int = 0
    # The run's fidelity level (its weakest record's, specmon/specdecode/fidelity.py);
    # None before any record. The screen shows it beside the acceptance figures.
    fidelity: str | None = None
    # The same statistics typed, one MetricRow per tag (what the live view reads; the
    # blocks above are written from these rows, as the export's are).
    spec_rows: dict[str, MetricRow] = field(default_factory=dict)
    std_rows: dict[str, MetricRow] = field(default_factory=dict)


# the snapshot's fields that are the accumulator's attribute of the same name, as it is
# (counts and names: immutable, so no copy is taken)
SNAPSHOT_COPIES = (
    "request_count",
    "error_count",
    "cancelled_count",
    "retried_count",
    "warmup_count",
    "zero_step_requests",
    "engine",
    "num_spec_tokens",
    "total_steps",
    "total_accepted",
    "total_drafted",
)
ERROR_EXAMPLES = 3  # distinct messages kept per error group (type, status code)

# Only record metrics get a column: a column is kept for its statistics (docs/metrics.md).
_RECORD_TAGS = frozenset(tag for tag, mdef in METRICS.items() if mdef.kind == RECORD)


class RunAccumulator:
    def __init__(
        self,
        live: bool = True,
        window: int | None = RESULTS_WINDOW,
        spill: SpillFile | None = None,
        keep: frozenset[str] = frozenset(),
    ) -> None:
        # Profiling requests (ok + error), append-only in meaning: the newest `window` are
        # held, older ones are read back from the JSONL when a reader is attached
        # (specmon/results_window.py); window=None holds all.
        self.results = ResultWindow(window)
        # A group's accumulator writes its columns' values to `spill` (all but the tags in
        # `keep`, whose live percentiles a table shows): see SpillFile.
        self._spill, self._keep = spill, keep
        self.request_count = 0
        self.error_count = 0
        self.warmup_count = 0
        self.error_summary: Counter[str] = Counter()
        # (status code, type) -> [count, the first few distinct messages]: bounded by the
        # kinds of failure, not by how many different messages a server can make up
        self.error_details: dict[tuple[Any, str], list[Any]] = {}
        self.spec_reasons: Counter[str] = Counter()
        self.zero_step_requests = 0
        self.spec_request_count = 0
        self.pooled_histogram: dict[int, int] = {}
        self.total_steps = 0
        self.total_accepted = 0
        self.total_drafted = 0
        # accepted drafts of the records with verify steps: AL's numerator (a counts-only
        # record has no steps, so its accepted drafts cannot enter 1 + accepted / steps)
        self.stepped_accepted = 0
        self.fidelity_counts: Counter[str] = Counter()  # requests per fidelity level
        self.verification_notes: dict[str, None] = {}  # the records' notes, in order
        self.engine: str | None = None
        self.num_spec_tokens: int | None = None
        self.columns: dict[str, MetricColumn] = {}
        self.min_start_ns: int | None = None
        self.max_end_ns: int | None = None
        self._version = 0
        self._live = live
        self._created_ns = time.perf_counter_ns()
        self._finished_ns: int | None = None
        self._snap: RunSnapshot | None = None
        self._lock = threading.RLock()  # ingestion state
        self._stats_lock = threading.Lock()  # serialises statistics (sorted copies, caches)

    # ------------------------------------------------------------------ adding

    def add(self, result: RequestResult) -> None:
        with self._lock:
            self._version += 1
            if result.phase == "warmup":
                self.warmup_count += 1
                return
            self.results.append(result)  # its tally counts cancelled and retried rows
            if result.error_kind == "cancelled":
                # Cut short because the user stopped the run (q, Ctrl-C, SIGTERM): the server
                # did not fail, so it is kept in the log and the JSONL but not in the errors.
                return
            if result.error is not None:
                self._add_error(result)
                return
            self._add_valid(result)

    def _add_error(self, result: RequestResult) -> None:
        self.error_count += 1
        err = result.error or {}
        kind = result.error_kind or "unknown"
        self.error_summary[kind] += 1
        group = self.error_details.setdefault((err.get("code"), kind), [0, []])
        group[0] += 1
        message = str(err.get("message", ""))[:200]
        if len(group[1]) < ERROR_EXAMPLES and message not in group[1]:
            group[1].append(message)

    def _add_valid(self, result: RequestResult) -> None:
        self.request_count += 1
        if result.start_ns is not None:
            if self.min_start_ns is None or result.start_ns < self.min_start_ns:
                self.min_start_ns = result.start_ns
        if result.end_ns is not None:
            if self.max_end_ns is None or result.end_ns > self.max_end_ns:
                self.max_end_ns = result.end_ns
        columns = self.columns
        for tag, value in result.values.items():
            if tag not in _RECORD_TAGS:
                continue
            column = columns.get(tag)
            if column is None:
                spill = None if tag in self._keep else self._spill
                column = columns[tag] = MetricColumn(BASE_SCALE.get(tag, 1.0), spill)
            column.add(value)
        outcome = result.outcome
        if outcome.reason:
            self.spec_reasons[outcome.reason] += 1
        if outcome.zero_step:
            self.zero_step_requests += 1
            self._note_engine(outcome.trace)
        elif outcome.record is not None:
            self._add_spec(outcome.record)

    def _add_spec(self, rec: SpecDecodeAcceptanceRecord) -> None:
        self.spec_request_count += 1
        self.fidelity_counts[rec.fidelity] += 1
        if rec.verification_note is not None:
            self.verification_notes.setdefault(rec.verification_note)
        self.total_accepted += rec.num_accepted_draft_tokens
        self.total_drafted += rec.num_draft_tokens
        self._note_engine(rec)
        steps, hist = rec.num_spec_steps, rec.acceptance_histogram
        if steps is None or hist is None:
            return  # counts only: in the pooled rate, not in AL or the histogram
        pooled = self.pooled_histogram
        for j, n in hist.items():
            pooled[j] = pooled.get(j, 0) + n
        self.total_steps += steps
        self.stepped_accepted += rec.num_accepted_draft_tokens

    def _note_engine(self, rec: SpecDecodeAcceptanceRecord | None) -> None:
        if rec is None:
            return
        self.engine = rec.engine
        if rec.num_spec_tokens is not None:
            self.num_spec_tokens = rec.num_spec_tokens

    def mark_finished(self) -> None:
        self._finished_ns = time.perf_counter_ns()

    # ------------------------------------------------------------------ reading

    @property
    def version(self) -> int:
        return self._version

    @property
    def tally(self) -> Tally:
        return self.results.tally

    @property
    def cancelled_count(self) -> int:
        """Requests in flight when the user stopped the run: rows, not server errors."""
        return self.results.tally.cancelled

    @property
    def retried_count(self) -> int:
        """Errors whose request the load loop sent again: attempts, not requests."""
        return self.results.tally.retried

    @property
    def benchmark_duration_s(self) -> float | None:
        """Max response ts - min request ts over valid profiling requests (docs/metrics.md §4)."""
        if self.min_start_ns is None or self.max_end_ns is None:
            return None
        return (self.max_end_ns - self.min_start_ns) * S_PER_NS

    @property
    def request_throughput(self) -> float | None:
        """Valid profiling requests per second of benchmark duration (AIPerf's figure), in
        O(1): the headless progress line reads it every 2 s without a snapshot."""
        duration = self.benchmark_duration_s
        return self.request_count / duration if duration and self.request_count else None

    def elapsed_s(self) -> float:
        if not self._live:
            return self.benchmark_duration_s or 0.0
        end = self._finished_ns if self._finished_ns is not None else time.perf_counter_ns()
        return (end - self._created_ns) / NS_PER_S

    def derived_values(self) -> dict[str, float | int]:
        """Every run-level metric that has a value (absent tags have none)."""
        out: dict[str, float | int] = {}
        duration = self.benchmark_duration_s
        osl = self.columns.get("output_sequence_length")
        isl = self.columns.get("input_sequence_length")
        # Counts are floats, as AIPerf 0.13 sums them (its CSV shows "Request Count,30.00").
        if self.request_count:
            out["request_count"] = float(self.request_count)
        if self.error_count:
            out["error_request_count"] = float(self.error_count)
        if duration is not None:
            out["benchmark_duration"] = duration
        if osl is not None:
            out["total_output_tokens"] = osl.total
            out["total_osl"] = osl.total
        if isl is not None:
            out["total_isl"] = isl.total
        if self.request_count or self.error_count:
            out["request_error_rate"] = (
                100.0 * self.error_count / (self.request_count + self.error_count)
            )
        if (rate := self.request_throughput) is not None:
            out["request_throughput"] = rate
        if duration:
            if osl is not None:
                out["output_token_throughput"] = osl.total / duration
            if isl is not None:
                out["input_token_throughput"] = isl.total / duration
            if osl is not None and isl is not None:
                out["total_token_throughput"] = (isl.total + osl.total) / duration
        out.update(self._spec_derived())
        return out

    def _spec_derived(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {}
        if self.zero_step_requests:
            out["spec_decode_zero_step_requests"] = float(self.zero_step_requests)
        if not self.spec_request_count:
            return out
        # Sums of the per-request values, as AIPerf's derived sums (floats).
        steps, acc, drafted = (
            float(self.total_steps),
            float(self.total_accepted),
            float(self.total_drafted),
        )
        if self.fidelity_counts[COUNTS] < self.spec_request_count:  # some record had steps
            out["total_spec_decode_steps"] = steps
        out["total_accepted_draft_tokens"] = acc
        out["total_draft_tokens"] = drafted
        if steps:
            out["spec_decode_token_weighted_acceptance_length"] = (
                1.0 + self.stepped_accepted / steps
            )
        if drafted:
            out["spec_decode_overall_draft_acceptance_rate"] = (acc / drafted) * 100.0
        return out

    def _frozen_columns(self) -> dict[str, tuple[MetricColumn, tuple[int, float, float]]]:
        return {tag: (col, col.freeze()) for tag, col in self.columns.items() if len(col)}

    @staticmethod
    def _rows(
        frozen: dict[str, tuple[MetricColumn, tuple[int, float, float]]],
        derived: dict[str, float | int],
        exact: bool,
    ) -> dict[str, MetricRow]:
        rows: dict[str, MetricRow] = {}
        for tag, mdef in METRICS.items():
            if mdef.kind == RECORD and tag in frozen:
                column, state = frozen[tag]
                rows[tag] = metric_row(tag, column.stats(state, exact=exact))
            elif mdef.kind == DERIVED and tag in derived:
                rows[tag] = metric_row(tag, value=derived[tag])
        return rows

    def metric_blocks(self, exact: bool = True) -> dict[str, Block]:
        """{tag: export block} for every metric with a value, in METRICS order."""
        with self._stats_lock:
            with self._lock:
                frozen, derived = self._frozen_columns(), self.derived_values()
            return {tag: row.block() for tag, row in self._rows(frozen, derived, exact).items()}

    def pooled_histogram_sorted(self) -> dict[int, int]:
        with self._lock:
            return dict(sorted(self.pooled_histogram.items()))

    def snapshot(self) -> RunSnapshot:
        """A cheap view for the TUI (4 Hz): the ingestion lock is held only to copy counters;
        distributions are computed outside it, and only when a request landed."""
        with self._stats_lock:
            with self._lock:
                snap = self._snap
                if snap is not None and snap.version == self._version:
                    snap.elapsed_s = self.elapsed_s()
                    return snap
                frozen, derived = self._frozen_columns(), self.derived_values()
                snap = RunSnapshot(
                    elapsed_s=self.elapsed_s(),
                    error_summary=dict(self.error_summary),
                    pooled_histogram=dict(sorted(self.pooled_histogram.items())),
                    spec_reasons=dict(self.spec_reasons),
                    version=self._version,
                    fidelity=weakest(self.fidelity_counts),
                    **{name: getattr(self, name) for name in SNAPSHOT_COPIES},
                )
            # Running std here (O(1)); summary() computes it exactly in two passes.
            for tag, row in self._rows(frozen, derived, exact=False).items():
                spec = is_spec_tag(tag)
                (snap.spec_rows if spec else snap.std_rows)[tag] = row
            self._snap = snap
            return snap

    def summary(self) -> dict[str, Block]:
        """Every metric tag's export block (exact statistics), in METRICS order."""
        return self.metric_blocks(exact=True)

    def error_summary_list(self) -> list[dict[str, Any]]:
        """AIPerf's error_summary: [{"error_details": {code, type, message}, "count"}], one
        entry per (type, status code), its first message, and up to ERROR_EXAMPLES distinct
        ones under "examples" when they differ."""
        out = []
        with self._lock:
            counted = [
                (key, n, list(examples)) for key, (n, examples) in self.error_details.items()
            ]
        counted.sort(key=lambda item: -item[1])  # most common first (stable: first seen)
        for (code, kind), count, examples in counted:
            details: dict[str, Any] = {}
            if code is not None:
                details["code"] = code
            details["type"] = kind
            details["message"] = examples[0]
            entry: dict[str, Any] = {"error_details": details, "count": count}
            if len(examples) > 1:  # specmon's extra: a few of the group's other messages
                entry["examples"] = examples
            out.append(entry)
        return out
