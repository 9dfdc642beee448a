"""Fitting the main screen's height: which optional rows to shed, from measured heights.

A size's panels can need more rows than the terminal has (a filled health slot, a long
what-if, several servers); the screen would then scroll and the focused log pull the header
and headline out of view. The classes FIT_STEPS (specmon.tcss "Fit") shed rows in order:
1: the 1fr rows (series, log) down to FLEX_FLOORS; 2: the what-if / segments row; 3: the
top row's slots; 4: with several servers, the selected server's top row. This module only
counts rows (no Textual): tui/layout.py measures the screen and applies the classes.
"""

from __future__ import annotations

from dataclasses import dataclass

FIT_STEPS = ("fit-1", "fit-2", "fit-3", "fit-4")
# the rows laid out at their own height (the header, the headline, the servers, rows 1-2)
FIXED_ROWS = ("#header", "#panel-head", "#panel-servers", "#row-top", "#row-tune", "Footer")
# the 1fr rows: they take what is left, down to their min-height, which fit-1 lowers to these
# (the series at one row each, the log at four rows under its header)
FLEX_FLOORS = {"#row-mid": 6, "#panel-log": 5}


@dataclass(frozen=True)
class Flex:
    """A shown 1fr row: its min-height now and the floor fit-1 lowers it to."""

    min_rows: int
    floor: int


@dataclass(frozen=True)
class Measured:
    """The main screen's rows as the last layout left them (hidden rows count 0)."""

    height: int  # the screen's own rows
    fixed: int  # the fixed rows, summed
    flex: tuple[Flex, ...]
    tune: int  # the what-if / segments row
    top: int  # the top row (percentile table, histogram and its slots)
    top_without_slots: int  # the top row with its slots empty
    multi: bool  # several servers (only then may step 4 hide the top row)

    @property
    def needed(self) -> int:
        """Rows the shown panels need: the fixed ones as laid out, the 1fr at min-height."""
        return self.fixed + sum(f.min_rows for f in self.flex)


def savings(m: Measured) -> tuple[int, int, int, int]:
    """Rows each of FIT_STEPS frees."""
    flex = sum(max(0, f.min_rows - f.floor) for f in m.flex)
    without_slots = min(m.top, m.top_without_slots)
    # with the slots gone the top row is `without_slots` tall: that is what hiding it frees
    whole_top = without_slots if m.multi else 0
    return flex, m.tune, m.top - without_slots, whole_top


def fit_level(m: Measured, level: int) -> int:
    """How many FIT_STEPS the screen needs, at least `level` (the steps already taken,
    whose rows `m` no longer counts)."""
    over = m.needed - m.height
    for saving in savings(m)[level:]:
        if over <= 0:
            break
        over -= saving
        level += 1
    return level
