"""The one number formatter family (specmon/formatting.py), preset by preset."""

from __future__ import annotations

from specmon.export.csv_export import format_number
from specmon.formatting import fmt_number, fmt_signed, format_table


def test_console_style() -> None:
    assert fmt_number(1234.5, na="N/A") == "1,234.50"
    assert fmt_number(3, na="N/A") == "3.00"
    assert fmt_number(None, na="N/A") == "N/A"
    assert fmt_number(float("inf"), na="N/A") == "N/A"
    assert fmt_number(True, na="N/A") == "N/A"


def test_csv_style_ints_plain_reals_two_decimals() -> None:
    assert format_number(1234.5) == "1234.50"
    assert format_number(30) == "30"
    assert format_number(30.0) == "30.00"
    assert format_number(None) == ""


def test_table_styles() -> None:
    assert fmt_number(0.8766, 3) == "0.877"
    assert fmt_number(None, 3) == "-"
    assert fmt_number(12345.25, 1, grouping=False) == "12345.2"  # round half to even
    assert fmt_number(4, 0, grouping=False) == "4"
    assert fmt_signed(-1234.5, "%") == "-1,234.50%"
    assert fmt_signed(0.5) == "+0.50"
    assert fmt_signed(None) == "-"


def test_format_table_alignment() -> None:
    # first column left-aligned, the others right-aligned, two spaces between
    text = format_table(["k", "value"], [["1", "2.50"], ["10", "-"]])
    assert text.splitlines() == ["k   value", "--  -----", "1    2.50", "10      -"]
