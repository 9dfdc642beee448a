"""The per-request log: a Line API widget that renders only the visible rows.

It reads the accumulator's append-only results list by index (no copy), keeps a list of
indices that pass the filter, follows the tail until the user scrolls up, and then counts
pending rows instead of jumping (the toolong model).

Notes (an acceptance alarm, issue 20 item 7) are lines of their own, each right after the
row of the request it started with; they are not requests and not counted as rows. They
are few, so they are kept apart (`_marks`) and the rows stay a range (or, filtered, an
array). Its `counts` say how many rows are retried attempts or requests cut by a stop (the
source's `Tally`, results_window.py), so the title counts requests as the header does
(tui/requests.py LogCounts). What it shows is the screen model's `RequestRows`
(tui/model/screen.py): the results, their tally and the notes.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.segment import Segment
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from specmon.results_window import Tally
from specmon.tui.model.screen import RequestRows
from specmon.tui.requests import LOG_HEADER, LogCounts, Note, log_row


class RequestLog(ScrollView, can_focus=True):
    """Rows of `results` (newest at the bottom); Enter or a second click opens one."""

    ALLOW_MAXIMIZE = True
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "requestlog--error",
        "requestlog--warmup",
        "requestlog--note",
        "requestlog--cursor",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "cursor(-10)", show=False),
        Binding("pagedown", "cursor(10)", show=False),
        Binding("home", "first", show=False),
        Binding("end,f,F", "follow", "Follow", show=False),
        Binding("enter", "open", "Open"),
    ]
    DEFAULT_CSS = """
    RequestLog { overflow-y: scroll; overflow-x: hidden; }
    RequestLog > .requestlog--error { color: $error; text-style: bold; }
    RequestLog > .requestlog--warmup { color: $text-muted; }
    RequestLog > .requestlog--note { color: $warning; text-style: bold; }
    RequestLog > .requestlog--cursor { background: $accent 40%; }
    """

    cursor: reactive[int] = reactive(-1)  # position in the filtered rows; -1 = none
    pending: reactive[int] = reactive(0)  # rows that arrived while scrolled up

    @dataclass
    class Open(Message):
        """The user asked for the details of results[index]."""

        index: int

    @dataclass
    class PendingChanged(Message):
        pending: int
        shown: int
        total: int

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._source: Sequence[Any] = ()
        # indices into _source that pass the filter: every index (a range, no memory) or,
        # filtered, the matching ones (8 bytes each): a million-request log keeps no list
        self._rows: range | array[int] = range(0)
        # the lines are the rows with the notes between them: (position in _rows the note
        # follows, -1 before the first; index in _notes), in display order
        self._notes: list[Note] = []
        self._marks: list[tuple[int, int]] = []
        self._placed = 0  # _notes[:_placed] were looked at (placed, or filtered out)
        self._tally = Tally()  # of _source[:_seen]: rows, retried attempts, cancelled
        self._seen = 0  # how much of _source has been looked at
        self._filter = ""
        self._text_cache: LRUCache[int, tuple[str, str]] = LRUCache(4096)
        self._following = True  # at the end when last scrolled (kept across resizes)

    # -- data -------------------------------------------------------------------------
    def show(self, rows: RequestRows) -> None:
        """The model's slice: another server's results start the log afresh; then the rows
        that arrived and the new notes."""
        if rows.results is not self._source:
            self.set_source(rows.results)
        self.sync(rows.tally)
        self.set_notes(rows.notes)

    def set_source(self, source: Sequence[Any]) -> None:
        self._source = source
        self._rows, self._seen = (array("q") if self._filter else range(0)), 0
        self._notes, self._marks, self._placed, self._tally = [], [], 0, Tally()
        self._text_cache.clear()
        self.sync()

    def set_notes(self, notes: Sequence[Note]) -> None:
        """Every note so far (the first ones as before, in order): the new ones are placed
        after their request's row once it is in the log."""
        self._notes.extend(notes[len(self._notes) :])
        if self._place_notes():
            self._set_row_count()
            if self._following:
                self.scroll_end(animate=False, immediate=True, x_axis=False)
            self.refresh()

    def row_text(self, index: int) -> tuple[str, str]:
        """(line, kind) of results[index], cached (a row never changes once written)."""
        cached = self._text_cache.get(index)
        if cached is None:
            cached = log_row(self._source[index], index)
            self._text_cache[index] = cached
        return cached

    def sync(self, tally: Tally | None = None) -> int:
        """Take in results that arrived since the last call; returns how many passed the
        filter. `tally`: the source's own counts (rows, retried, cancelled at once); None,
        a plain list, counted here."""
        total = len(self._source) if tally is None else tally.rows
        if total == self._seen:
            return 0
        at_end = self._following  # a selection or a scroll up holds the rows in place
        before = self.line_count
        if isinstance(self._rows, array):
            self._rows.extend(i for i in range(self._seen, total) if self._matches(i))
        else:
            self._rows = range(total)
        if tally is None:  # a plain list: count its new rows here
            for i in range(self._seen, total):
                self._tally = self._tally.add(self._source[i])
        else:  # its own counts: a log that starts late reads no evicted row back to count it
            self._tally = tally
        self._seen = total
        self._place_notes()
        added = self.line_count - before
        if added:
            self._set_row_count()
            if at_end:
                self.scroll_end(animate=False, immediate=True, x_axis=False)
            else:
                self.pending += added
            self.refresh()
        self._post_counts()
        return added

    def _set_row_count(self) -> None:
        """Grow the scrollable height without a screen relayout.

        Assigning virtual_size re-lays out (and repaints) the whole screen; at 4 Hz that was
        the monitor's main CPU cost. The vertical scrollbar is always shown (overflow-y:
        scroll), so only its window sizes and the scroll limits need updating.
        """
        size = Size(self.size.width, self.line_count)
        if size == self.virtual_size:
            return
        self.set_reactive(RequestLog.virtual_size, size)
        self._scroll_update(size)
        self.refresh()

    def set_filter(self, text: str) -> None:
        self._filter = text.strip().lower()
        if self._filter:
            self._rows = array("q", (i for i in range(self._seen) if self._matches(i)))
        else:
            self._rows = range(self._seen)
        self._marks, self._placed = [], 0
        self._place_notes()
        self.cursor = -1
        self._following = True
        self.pending = 0
        self._set_row_count()
        self.scroll_end(animate=False, immediate=True, x_axis=False)
        self.refresh()
        self._post_counts()

    @property
    def following(self) -> bool:
        return self._following

    @property
    def filter_text(self) -> str:
        return self._filter

    @property
    def shown_count(self) -> int:
        """Result rows that pass the filter (notes are not rows)."""
        return len(self._rows)

    @property
    def line_count(self) -> int:
        """Rows and notes: the log's height."""
        return len(self._rows) + len(self._marks)

    @property
    def counts(self) -> LogCounts:
        return LogCounts(
            rows=self._seen,
            retried=self._tally.retried,
            cancelled=self._tally.cancelled,
            shown=len(self._rows) if self._filter else None,
            pending=self.pending,
        )

    # -- notes ------------------------------------------------------------------------
    def _place_notes(self) -> int:
        """Put the notes whose request is in the log after its row (after the last shown
        row up to it when it is filtered out); returns how many were placed."""
        placed = 0
        while self._placed < len(self._notes) and self._notes[self._placed].at < self._seen:
            n = self._placed
            self._placed += 1
            note = self._notes[n]
            if self._filter and not (
                self._filter in note.text.lower() or self._filter == note.kind
            ):
                continue
            after = bisect.bisect_right(self._rows, note.at) - 1
            line = after + 1 + sum(1 for pos, _ in self._marks if pos <= after)
            bisect.insort(self._marks, (after, n))
            if 0 <= line <= self.cursor:  # a late note above the cursor: keep its row
                self.set_reactive(RequestLog.cursor, self.cursor + 1)
            placed += 1
        return placed

    def _entry(self, line: int) -> int | Note:
        """What line `line` shows: a results index, or a note."""
        shift = 0
        for pos, n in self._marks:
            at = pos + 1 + shift  # the note's line: after its row, below earlier notes
            if line < at:
                break
            if line == at:
                return self._notes[n]
            shift += 1
        return self._rows[line - shift]

    def _result_at(self, line: int) -> int:
        """The results index of a line (a note's: its request's)."""
        entry = self._entry(line)
        return entry.at if isinstance(entry, Note) else entry

    def _matches(self, index: int) -> bool:
        if not self._filter:
            return True
        line, kind = self.row_text(index)
        if self._filter in line.lower() or self._filter == kind:
            return True
        # the line shows 8 characters of the category: match the whole name too
        category = self._source[index].category  # a RequestResult
        return bool(category) and self._filter == str(category).lower()

    def _at_end(self) -> bool:
        return self.scroll_y >= self.max_scroll_y - 0.5

    def _post_counts(self) -> None:
        self.post_message(self.PendingChanged(self.pending, len(self._rows), self._seen))

    # -- rendering ----------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        row = int(self.scroll_y) + y
        width = self.size.width
        base = self.rich_style
        if row >= self.line_count:
            return Strip.blank(width, base)
        entry = self._entry(row)
        line, kind = (entry.text, entry.kind) if isinstance(entry, Note) else self.row_text(entry)
        style = base
        if kind == "error":
            style += self.get_component_rich_style("requestlog--error")
        elif kind in ("warmup", "retry", "cancelled"):  # not a finished request
            style += self.get_component_rich_style("requestlog--warmup")
        elif kind == "alarm":
            style += self.get_component_rich_style("requestlog--note")
        if row == self.cursor:
            style += self.get_component_rich_style("requestlog--cursor")
        return Strip([Segment(line[:width].ljust(width), style)], width)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self._following = self.cursor < 0 and self._at_end()
        if self.pending and self._following:
            self.pending = 0
            self._post_counts()

    def watch_cursor(self) -> None:
        self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        self.virtual_size = Size(event.size.width, self.line_count)
        # Following: re-anchor, or the wheel starts from a stale target. A shrinking panel
        # (another panel grew) leaves scroll_y short of the new end, hence the flag.
        if self._following:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    # -- interaction --------------------------------------------------------------------
    def action_cursor(self, delta: int) -> None:
        if not self.line_count:
            return
        self._following = False  # a selection stops following at once (a log viewer's way)
        start = self.cursor if self.cursor >= 0 else self.line_count
        self.cursor = min(max(start + delta, 0), self.line_count - 1)
        self._keep_cursor_visible()

    def action_first(self) -> None:
        if self._rows:
            self._following = False
            self.cursor = 0
            self.scroll_home(animate=False, immediate=True)

    def action_follow(self) -> None:
        self.cursor = -1
        self._following = True
        self.scroll_end(animate=False, immediate=True, x_axis=False)

    def action_open(self) -> None:
        if not self.line_count:
            return
        row = self.cursor if self.cursor >= 0 else self.line_count - 1
        self.post_message(self.Open(self._result_at(row)))

    def selected_index(self) -> int | None:
        """The results index under the cursor, if any (on a note: its request's)."""
        return self._result_at(self.cursor) if 0 <= self.cursor < self.line_count else None

    def _keep_cursor_visible(self) -> None:
        top = int(self.scroll_y)
        height = self.scrollable_content_region.height
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False, immediate=True)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        row = int(self.scroll_y) + offset.y
        if row >= self.line_count:
            return
        self._following = False
        if row == self.cursor or event.chain >= 2:
            self.post_message(self.Open(self._result_at(row)))
        self.cursor = row


__all__ = ["LOG_HEADER", "Note", "RequestLog"]
