"""The height fitter over measured rows (specmon/tui/fit.py): which FIT_STEPS a screen needs,
counted by hand from the rows given; no terminal."""

from __future__ import annotations

from specmon.tui.fit import Flex, Measured, fit_level, savings

# the series row (min 9, floor 6) and the log (min 6, floor 5): fit-1 frees 3 + 1 rows
FLEX = (Flex(9, 6), Flex(6, 5))


def measured(height: int, **kw: object) -> Measured:
    base: dict[str, object] = dict(
        fixed=30, flex=FLEX, tune=10, top=13, top_without_slots=8, multi=False
    )
    return Measured(height=height, **{**base, **kw})  # type: ignore[arg-type]


def test_rows_needed_are_the_fixed_rows_and_the_flex_minimums():
    assert measured(50).needed == 30 + 9 + 6


def test_savings_per_step():
    # flex 3 + 1; the tuning row; the slots (13 - 8); the top row only with several servers
    assert savings(measured(40)) == (4, 10, 5, 0)
    assert savings(measured(40, multi=True)) == (4, 10, 5, 8)


def test_a_screen_that_fits_takes_no_step():
    assert fit_level(measured(45), 0) == 0
    assert fit_level(measured(60), 0) == 0


def test_steps_are_taken_until_the_excess_is_gone():
    assert fit_level(measured(44), 0) == 1  # 1 over: fit-1 frees 4
    assert fit_level(measured(41), 0) == 1  # 4 over: exactly fit-1
    assert fit_level(measured(40), 0) == 2  # 5 over: 4, then the tuning row
    assert fit_level(measured(31), 0) == 2  # 14 over: 4 + 10 = 14
    assert fit_level(measured(30), 0) == 3  # 15 over: 4 + 10 + 5


def test_every_step_is_taken_when_the_rows_never_fit():
    # 20 over: 4 + 10 + 5 = 19 is not enough, and step 4 frees nothing with one server
    assert fit_level(measured(25), 0) == 4


def test_steps_already_taken_are_not_counted_again():
    # fit-1 taken: the flex rows are at their floor now (their savings are spent)
    after = measured(40, flex=(Flex(6, 6), Flex(5, 5)))
    assert after.needed == 41
    assert fit_level(after, 1) == 2  # 1 over: the tuning row
    assert fit_level(measured(45), 2) == 2  # never fewer steps than taken
