"""Panel 3's bins stay bounded over a long run (issue 35 item 6): fine bins only for the
newest FINE_KEEP_S, older ones folded into at most FOLDED_MAX wider bins, each keeping at
most 2 x TTFT_KEEP TTFT values; the run window's figures are still the data's."""

from __future__ import annotations

import pytest

from specmon.tui.model.series import (
    BIN_S,
    FINE_KEEP_S,
    FOLD_EVERY_S,
    FOLDED_MAX,
    STALL,
    TTFT_KEEP,
    Point,
    SeriesBins,
    _weighted_median,
)

HOURS = 3


def steady_run(hours: float, gap: tuple[float, float] | None = None) -> SeriesBins:
    """A request ending every 0.5 s: 10 tokens over its last 0.25 s, 4 steps with 6
    accepted drafts (AL 2.5), TTFT 100 ms; none end inside `gap` (seconds)."""
    bins = SeriesBins()
    for i in range(1, int(hours * 3600 / 0.5) + 1):
        end = i * 0.5
        if gap is not None and gap[0] <= end < gap[1]:
            continue
        bins.add_point(Point(end, end - 0.25, True, 10, 4, 6, 100.0))
    return bins


def test_bins_stay_bounded_after_hours_and_the_run_window_reads_the_data():
    bins = steady_run(HOURS)
    # fine bins: at most FINE_KEEP_S + one FOLD_EVERY_S of them (plus the current one)
    assert len(bins._bins) <= (FINE_KEEP_S + FOLD_EVERY_S) / BIN_S + 1
    assert len(bins._tokens) <= (FINE_KEEP_S + FOLD_EVERY_S) / BIN_S + 1
    assert 0 < len(bins._folded) <= FOLDED_MAX
    assert all(len(cell.ttfts) <= 2 * TTFT_KEEP for cell in bins._folded.values())
    # 10,800 s of 0.25 s bins (43,200) folded into at most 1,024: 64 fine bins each
    assert bins._fold == 64
    now = HOURS * 3600.0
    data = bins.series(None, now, 100)
    # every complete column: AL 1 + 6/4, 10 tokens / 0.5 s = 20 tok/s, TTFT 100 ms
    assert data["al"] == pytest.approx([2.5] * 100)
    assert data["ttft_p50"] == pytest.approx([100.0] * 100)
    assert data["err_pct"] == [0.0] * 100
    assert data["tok_s"][:-1] == pytest.approx([20.0] * 99)  # the newest: not all complete
    # the 10 s and 60 s windows are the fine bins': the same figures
    assert bins.series(60.0, now, 60)["tok_s"][:-1] == pytest.approx([20.0] * 59)


def test_an_old_stall_still_shows_in_the_run_window():
    """No request ends from 1 h to 1 h 20 min: the run window's columns inside the gap
    (folded long ago) are stalls, the ones outside are not."""
    bins = steady_run(HOURS, gap=(3600.0, 4800.0))
    data = bins.series(None, HOURS * 3600.0, 90)  # 120 s columns
    stalled = [c for c, mark in enumerate(data[STALL]) if mark]
    # columns [3600, 3720) .. [4680, 4800): 30 .. 39
    assert stalled == list(range(30, 40))
    assert data["al"][30] is None and data["al"][29] == pytest.approx(2.5)


def test_weighted_median_is_the_median_with_weights_one():
    assert _weighted_median([3.0, 1.0, 2.0], [1.0, 1.0, 1.0]) == 2.0
    assert _weighted_median([4.0, 1.0, 3.0, 2.0], [1.0] * 4) == 2.5
    # a value weighing more than the others together is the median
    assert _weighted_median([1.0, 50.0, 2.0], [1.0, 5.0, 1.0]) == 50.0


def test_folded_ttft_median_within_one_summary_rank():
    """TTFTs 0..99 ms cycling, one request a fine bin (request i in bin i): each folded
    bin's median (of a summary merged over several widenings) has at most a share
    1/TTFT_KEEP of that bin's exact values off its side of the middle."""
    bins = SeriesBins()
    for i in range(1, 40_000):
        end = i * 0.25
        bins.add_point(Point(end, end - 0.1, True, 1, 1, 1, float(i % 100)))
    fold, fine_start = bins._fold, bins._fine_start
    assert fold > 1 and bins._folded
    for key, cell in bins._folded.items():
        exact = [b % 100 for b in range(max(1, key * fold), min((key + 1) * fold, fine_start))]
        median = cell.ttft_median()
        assert median is not None
        below = sum(x < median for x in exact) / len(exact)
        up_to = sum(x <= median for x in exact) / len(exact)
        assert below <= 0.5 + 1 / TTFT_KEEP and up_to >= 0.5 - 1 / TTFT_KEEP
