"""A stall in the time series (issue 36 item 3): columns long enough to hold several
request ends are never blank under steady load; a column in which nothing ended is marked
as a stall in every series; the last window's out tok/s drops to 0 in a stall while the
run's average would hardly move."""

from __future__ import annotations

import pytest

from specmon.tui.model.series import ENDS_PER_COLUMN, STALL, Point, SeriesBins
from specmon.tui.widgets.series import STALL_MARK, series_lines


def steady_with_a_stall() -> SeriesBins:
    """A request of 10 tokens ends every 0.25 s from 0.15 to 4.9 s (20 ends), none from 4.9
    to 8.15 s (a stall), then every 0.25 s again from 8.15 to 9.9 s; each generated its
    tokens over the 0.25 s before its end, and has 2 verify steps with 3 accepted drafts."""
    bins = SeriesBins()
    ends = [0.25 * i - 0.1 for i in range(1, 21)] + [8.0 + 0.25 * i - 0.1 for i in range(1, 9)]
    for end in ends:
        bins.add_point(Point(end, end - 0.25, True, 10, 2, 3, 20.0))
    return bins


def test_steady_column_holds_five_ends():
    """Before the stall: 20 ends over 0.25..5.0 s, 19 intervals of 0.25 s: one end per
    0.25 s, so a column of 5 ends is 1.25 s."""
    bins = SeriesBins()
    for i in range(1, 21):
        bins.add_point(Point(0.25 * i, 0.25 * (i - 1), True, 10, 2, 3, 20.0))
    assert ENDS_PER_COLUMN == 5
    assert bins.steady_column_s() == pytest.approx(1.25)


def test_stall_columns_are_marked_in_every_series():
    """1 s columns up to 10 s: columns [5, 6), [6, 7), [7, 8) had no end: stalls, marked
    in AL, TTFT and errors (out tok/s spreads tokens over generation: none there either,
    the requests' generations end at 4.9 and start at 7.9); AL 1 + 3/2 = 2.5 elsewhere."""
    bins = steady_with_a_stall()
    data = bins.series(None, 10.0, 10, min_column_s=1.0)
    assert data[STALL] == [None] * 5 + [1.0, 1.0, 1.0] + [None, None]
    assert data["al"] == [2.5] * 5 + [None] * 3 + [2.5, 2.5]
    text = series_lines(data, 19 + 10 + 16, 1, {}).plain.splitlines()
    for line in text:
        spark = line[20:30]  # name and current (19), a space, 10 columns
        if line.startswith(("AL", "TTFT", "errors")):
            assert spark[5:8] == STALL_MARK * 3, line  # nothing ended: marked, never blank
        assert " " not in spark.strip(), line


def test_last_window_drops_in_a_stall_and_current_says_so():
    """At 8.0 s, the last 3 s (5.0..8.0) hold no end: 0 tok/s (the run's average is
    200 tokens / 8 s = 25); at 10.0 s the last 2 s hold 8 ends of 10 tokens: 40 tok/s. A
    run whose last request ended at 5.0 s: 3.5 s later (more than CURRENT_S, 3 s, and a
    steady column, 1.25 s) the current out tok/s is 0 and the rest unknown; at 5.5 s it is
    the newest 3 s of complete data, 10 tokens per 0.25 s = 40."""
    bins = steady_with_a_stall()
    assert bins.recent_tok_s(8.0, 3.0) == 0.0
    assert bins.recent_tok_s(10.0, 2.0) == pytest.approx(40.0)
    stalled = SeriesBins()
    for i in range(1, 21):
        stalled.add_point(Point(0.25 * i, 0.25 * (i - 1), True, 10, 2, 3, 20.0))
    assert stalled.current(8.5) == {"al": None, "tok_s": 0.0, "ttft_p50": None, "err_pct": None}
    assert stalled.current(5.5)["tok_s"] == pytest.approx(40.0)
