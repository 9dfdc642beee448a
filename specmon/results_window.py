"""The accumulator's request log: a bounded window of recent results plus a read-back.

A run of a million requests cannot keep a million `RequestResult` objects (~1-2 kB each).
`ResultWindow` keeps the newest `window` results in memory and answers for every index
ever appended: an index inside the window is a list lookup, an older one is read back
through the attached `ResultReader` (the session's `JsonlIndex`: a byte offset per line of
profile_export.jsonl, 8 bytes a request, docs/architecture.md "Accumulator, session and
sinks"). Without a reader (export level "summary") an evicted index reads as a stub result
whose outcome reason is `not_kept`, so the log still shows a row for it.

Appends happen under the accumulator's lock; readers on other threads take one reference
to the current (base, items) pair, so a compaction never shows them a torn state.

`tally` counts, as they are appended, the rows that are not finished requests: attempts the
load loop sent again (an error marked "retried") and requests cut by a stop ("cancelled");
the header and the request log subtract the same counts (issue 20 item 5). It is replaced
whole on each append, so a reader gets rows and counts of one moment.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, overload

import orjson

from specmon.export.jsonl_export import result_from_record
from specmon.pipeline import RequestResult, SpecOutcome

RESULTS_WINDOW = 10_000  # newest results kept in memory for the log and the drill-down
# A full window is compacted once it holds window / SLACK_DIVISOR more results: the oldest
# ones past the window are dropped in one slice (one copy of `window` references each
# window / 8 appends, amortised O(1)), so it never holds more than 1.125 x window. (It
# dropped the oldest half at 2 x window before: a run held 10,000 to 20,000 results, ~2.7 kB
# each, and its memory grew 27 MB between 10,000 and 20,000 requests: issue 35 item 6.)
SLACK_DIVISOR = 8
NOT_KEPT = "not_kept"  # outcome reason of an evicted result nobody can read back


@dataclass(frozen=True)
class Tally:
    """Rows appended so far, and among them the retried attempts and the cancelled ones."""

    rows: int = 0
    retried: int = 0
    cancelled: int = 0

    def add(self, result: RequestResult) -> Tally:
        error = result.error
        retried = bool(error and error.get("retried"))
        cancelled = not retried and result.error_kind == "cancelled"
        return Tally(self.rows + 1, self.retried + retried, self.cancelled + cancelled)


class ResultReader(Protocol):
    def read(self, index: int) -> RequestResult | None:
        """results[index] rebuilt from disk, or None when it is not there."""


class ResultWindow(Sequence[RequestResult]):
    """Append-only in meaning: `len()` counts every result appended; `self[i]` reaches any
    of them (see the module docstring). `window=None` keeps everything (replays)."""

    def __init__(self, window: int | None = RESULTS_WINDOW) -> None:
        self.window = window
        # held results never reach this: the window and its slack (None: no bound)
        self._limit = None if window is None else window + max(window // SLACK_DIVISOR, 1)
        self.reader: ResultReader | None = None
        self._state: tuple[int, list[RequestResult]] = (0, [])  # (index of items[0], items)
        self.tally = Tally()

    def append(self, result: RequestResult) -> None:
        base, items = self._state
        items.append(result)
        self.tally = self.tally.add(result)  # after the append: its rows are all readable
        if self._limit is not None and len(items) >= self._limit:
            drop = len(items) - (self.window or 0)  # the oldest past the window (0: all)
            self._state = (base + drop, items[drop:])

    def __len__(self) -> int:
        base, items = self._state
        return base + len(items)

    @property
    def first_kept(self) -> int:
        """Index of the oldest result held in memory."""
        return self._state[0]

    @overload
    def __getitem__(self, index: int) -> RequestResult: ...
    @overload
    def __getitem__(self, index: slice) -> list[RequestResult]: ...
    def __getitem__(self, index: int | slice) -> RequestResult | list[RequestResult]:
        base, items = self._state
        total = base + len(items)
        if isinstance(index, slice):
            return [self._get(i, base, items) for i in range(*index.indices(total))]
        if index < 0:
            index += total
        if not 0 <= index < total:
            raise IndexError("result index out of range")
        return self._get(index, base, items)

    def _get(self, index: int, base: int, items: list[RequestResult]) -> RequestResult:
        if index >= base:
            return items[index - base]
        result = self.reader.read(index) if self.reader is not None else None
        return result if result is not None else _not_kept()

    def __iter__(self) -> Iterator[RequestResult]:
        for i in range(len(self)):
            yield self[i]


def _not_kept() -> RequestResult:
    return RequestResult(capture=None, outcome=SpecOutcome(reason=NOT_KEPT))


class JsonlIndex:
    """Byte offsets of profile_export.jsonl lines (array('q'), 8 bytes each) and a reader
    that rebuilds line i as a RequestResult (export/jsonl_export.py result_from_record).
    `note(offset)` is called by the JSONL writer before each line, in the accumulator's
    order (both run under the session lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offsets = array("q")
        self._stream: BinaryIO | None = None  # our own read handle, opened on first use
        self._lock = threading.Lock()  # one seek + readline at a time

    def note(self, offset: int) -> None:
        self.offsets.append(offset)

    def read(self, index: int) -> RequestResult | None:
        if not 0 <= index < len(self.offsets):
            return None
        try:
            with self._lock:
                if self._stream is None:
                    self._stream = open(self.path, "rb")
                self._stream.seek(self.offsets[index])
                line = self._stream.readline()
            return result_from_record(orjson.loads(line))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # file gone or line cut short: the log shows a not-kept row

    def close(self) -> None:
        with self._lock:
            if self._stream is not None:
                self._stream.close()
                self._stream = None
