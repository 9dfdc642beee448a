"""`--alert EXPR` (specmon/analysis/alerts.py): the grammar, its one-line errors, and the
streak rule on hand-made scrape sequences."""

from __future__ import annotations

import pytest

from specmon.analysis.alerts import AlertRule, AlertTracker, parse_alert
from specmon.errors import UserError


def test_parse_the_forms() -> None:
    assert parse_alert("al<1.5 for 60s") == AlertRule("al", "<", 1.5, 60.0, "al<1.5 for 60s")
    assert parse_alert(" tps > 100 for 5 ") == AlertRule("tps", ">", 100.0, 5.0, "tps > 100 for 5")
    assert parse_alert("acc<.4").for_s == 0.0  # no `for`: the first scrape that meets it


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("al<=1.5", "give METRIC <|> NUMBER"),
        ("al<1.5 for", "give METRIC <|> NUMBER"),
        ("ttft<1", "unknown metric 'ttft'"),
        ("acc<50", "acc is a fraction 0..1"),
    ],
)
def test_bad_expressions_are_one_line_errors(text: str, says: str) -> None:
    with pytest.raises(UserError) as err:
        parse_alert(text)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_fires_once_the_condition_held_for_the_duration() -> None:
    tracker = AlertTracker(parse_alert("al<1.5 for 2s"))
    assert tracker.update("a", 0.0, 1.2) is None  # held since 0
    assert tracker.update("a", 1.0, 1.4) is None  # 1 s
    line = tracker.update("a", 2.0, 1.1)  # 2 s: fires
    assert line is not None
    assert line.startswith("specmon watch: ALERT 'al<1.5 for 2s' on a: acceptance length 1.1 < 1.5")
    assert "for 2.0 s (since 0.0 s)" in line


def test_a_miss_restarts_the_streak_a_missing_figure_does_not() -> None:
    tracker = AlertTracker(parse_alert("al<1.5 for 2s"))
    for t, value in [(0.0, 1.2), (1.0, 1.6), (2.0, 1.2), (3.0, None)]:
        assert tracker.update("a", t, value) is None  # 1.6 breaks at 1: held since 2
    assert tracker.update("a", 4.0, None) is None  # 2 s, but no reading confirms it
    line = tracker.update("a", 5.0, 1.2)  # the gap did not break it: since 2, 3 s
    assert line is not None and "for 3.0 s (since 2.0 s)" in line
    # per server: b's streak is its own
    assert tracker.update("b", 6.0, 1.2) is None


def test_greater_than_and_a_zero_duration() -> None:
    tracker = AlertTracker(parse_alert("tps>100"))
    assert tracker.update("a", 0.0, 100.0) is None  # not > 100
    assert tracker.update("a", 1.0, 100.5) is not None
