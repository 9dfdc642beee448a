"""The sweep's end-of-run tables whole at 80, 100 and 160 columns (issue 20 item 3): the
k x concurrency grid, the decision rows, the model's leave-one-out grid and the arms table
fit the width (concurrencies in blocks that fit, legends wrapped at spaces) and every
figure they show is printed whole, checked against values worked out by hand."""

from __future__ import annotations

import re

import pytest

from specmon.analysis.arms import arm_reports, render_arms
from specmon.analysis.sweep import render_sweep_tables
from specmon.decision.cells import decide
from specmon.decision.schedule import build_schedule
from specmon.decision.sweep_types import Cell, RepeatMeasurement
from specmon.formatting import grid_lines

WIDTHS = (80, 100, 160)
CONCS = (1, 2, 4, 8, 16, 32, 64)


def cell(k: int, c: int, *tputs: float) -> Cell:
    return Cell(k, c, [RepeatMeasurement(t, 1.0, 100) for t in tputs])


def grid_cells() -> list[Cell]:
    """k = 0, 2, 4 at seven loads; throughput 10,000 + 1,000 k + 100 c (four-digit and
    five-digit figures), repeats at -50, 0, +50: median that, MAD 50."""
    cells = []
    for k in (0, 2, 4):
        for c in CONCS:
            mid = 10_000.0 + 1_000 * k + 100 * c
            cells.append(cell(k, c, mid - 50, mid, mid + 50))
    return cells


def assert_fits(text: str, width: int) -> list[str]:
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width, "\n".join(lines)
    assert "…" not in text
    return lines


def values_of(lines: list[str], label: str) -> list[str]:
    """Every value on the rows starting with `label`, over all blocks, in order."""
    out = []
    for line in lines:
        parts = line.split()
        if line.startswith(label) and parts[0] == label.split()[0]:
            out += parts[len(label.split()) :]
    return out


@pytest.mark.parametrize("width", WIDTHS)
def test_the_grid_and_decisions_fit_and_keep_every_figure(width):
    cells = grid_cells()
    decisions = decide(cells, bootstrap=False)
    text = render_sweep_tables(cells, decisions, build_schedule(decisions), None, width)
    lines = assert_fits(text, width)
    # k=4 has the top score everywhere: 14,000 + 100 c, MAD 50, marked selected
    assert values_of(lines, "k=4") == [f"{14_000 + 100 * c}±50.0*" for c in CONCS]
    assert values_of(lines, "k=0") == [f"{10_000 + 100 * c}±50.0" for c in CONCS]
    # vs k=0 on scores: (14,000 + 100c - 74.13) / (10,000 + 100c - 74.13); at c=1: +39.9%
    assert values_of(lines, "vs k=0")[0] == "+39.9%"
    assert values_of(lines, "selected") == ["4"] * len(CONCS)
    # every load's header is there once per block it is in
    headers = [v for line in lines if line.startswith("k \\ conc") for v in line.split()[3:]]
    assert headers == [str(c) for c in CONCS]


def test_at_80_columns_the_loads_split_into_blocks_and_wide_keeps_one():
    cells = grid_cells()
    decisions = decide(cells, bootstrap=False)
    narrow = render_sweep_tables(cells, decisions, None, None, 80).splitlines()
    # label 9 ("best med."), cells up to 11 ("20400±50.0*") + 2: 9 + 5 x 13 = 74 fits,
    # six would be 87: loads 1..16 in the first block, 32 and 64 in the second
    blocks = [line.split()[3:] for line in narrow if line.startswith("k \\ conc")]
    assert blocks == [["1", "2", "4", "8", "16"], ["32", "64"]]
    wide = render_sweep_tables(cells, decisions, None, None, 160).splitlines()
    assert [line for line in wide if line.startswith("k \\ conc")] == [
        "k \\ conc".ljust(9) + "".join(f"  {c:>11}" for c in CONCS)
    ]


@pytest.mark.parametrize("width", WIDTHS)
def test_the_arms_table_fits_and_keeps_every_figure(width):
    fixed = grid_cells()
    arms = {
        "schedule": [cell(-1, c, 14_000.0 + 100 * c) for c in CONCS],
        "adaptive-verification": [cell(-1, c, 12_345.6) for c in CONCS],
    }
    lines = render_arms(arm_reports(arms, fixed), width)
    text = "\n".join(lines)
    assert_fits(text, width)
    assert values_of(lines, "schedule") == [f"{14_000 + 100 * c}.0" for c in CONCS]
    # adaptive at c=64: 12,345.6 / (14,000 + 6,400) = 0.60518 -> -39.5% vs k=4;
    # vs k=0 12,345.6 / 16,400 = 0.75278 -> -24.7%
    adaptive = [line for line in lines if "-39.5% (k=4)" in line]
    assert adaptive, text
    assert "-24.7%" in text
    # the summary line is wrapped at its spaces, not cut: every figure is still in it
    summary = text[text.index("adaptive-verification: vs the best fixed k") :]
    assert re.sub(r"\s+", " ", summary).count("% at ") == 2 * len(CONCS)


def test_a_column_wider_than_the_terminal_stacks_whole():
    lines = grid_lines("k", ["c=1", "c=2"], [("k=0", ["123,456,789.00", "1.0"])], 12)
    assert lines == ["k=0", "  c=1 123,456,789.00", "  c=2 1.0"]
    assert grid_lines("k", ["1"], [("k=0", ["5"])], 80) == ["k    1", "k=0  5"]
