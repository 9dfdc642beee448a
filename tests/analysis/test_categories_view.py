"""The per-category panel fits its width: the full headers and the AL interval where they
fit, short headers next, then no interval, so no header is ever cut to an ellipsis."""

from __future__ import annotations

import io

from rich.console import Console

from specmon.analysis.categories import CategoryRow
from specmon.tui.widgets.categories import HEADERS, SHORT_HEADERS, _fitting_form, render_rows

ROWS = [CategoryRow("math_reasoning", 8, 3.33, (3.1, 3.5), 77.8, 22.0, None)]


def rendered(width: int) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False)
    console.print(render_rows(ROWS, "category", False, width))
    return console.file.getvalue()


def test_the_widest_form_that_fits_is_chosen():
    # by hand: widest cell or header per column, plus 3 between each of the 6 columns
    # full:        category ▲ 14 (the name), requests 8, "3.33 [3.10-3.50]" 16,
    #              draft acc % 11, output tok/s 12, TTFT p50 ms 11  -> 72 + 15 = 87
    # short:       14, n 1, 16, acc % 5, tok/s 5, TTFT ms 7        -> 48 + 15 = 63
    # short, no interval: the AL column is "3.33" (4)              -> 36 + 15 = 51
    def form(width):
        return _fitting_form(ROWS, "category", False, width)

    assert form(87) == (HEADERS, True, None) and form(86) == (SHORT_HEADERS, True, None)
    assert form(63) == (SHORT_HEADERS, True, None) and form(62) == (SHORT_HEADERS, False, None)
    assert form(51) == (SHORT_HEADERS, False, None)
    # narrower still: the other columns keep 1 + 4 + 5 + 5 + 7 + 15 = 37, the names get the
    # rest (50 - 37 = 13), never less than their own header "category ▲" (10)
    assert form(50) == (SHORT_HEADERS, False, 13)
    assert form(47) == form(20) == (SHORT_HEADERS, False, 10)
    assert form(None) == (HEADERS, True, None)  # before the first layout


def test_a_narrow_panel_shows_whole_headers():
    text = rendered(51)
    for header in ("category ▲", "n", "AL", "acc %", "tok/s", "TTFT ms"):
        assert header in text
    assert "…" not in text and "[" not in text
    assert "math_reasoning" in text and "3.33" in text and "77.8" in text
    cut = rendered(47)  # the name is cut, every header and figure is whole
    for header in ("n", "AL", "acc %", "tok/s", "TTFT ms"):
        assert header in cut
    assert "math_reas…" in cut and "3.33" in cut and "77.8" in cut
    wide = rendered(87)
    assert "3.33 [3.10-3.50]" in wide and "output tok/s" in wide and "…" not in wide
