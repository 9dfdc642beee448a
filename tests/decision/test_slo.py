"""--slo: per load the best k among the cells that meet the objective, and a clear 'none
does' (issue 17 item 8)."""

from __future__ import annotations

import pytest

from specmon.analysis.sweep import decide, render_sweep_tables
from specmon.analysis.sweep_types import Cell, RepeatMeasurement
from specmon.decision.slo import Slo, parse_slo


def cell(k: int, tput: float, ttft_p90: float, tpot_p90: float) -> Cell:
    lat = {"ttft_ms": {"p50": ttft_p90 / 2, "p90": ttft_p90},
           "tpot_ms": {"p50": tpot_p90 / 2, "p90": tpot_p90}}  # fmt: skip
    return Cell(k, 16, [RepeatMeasurement(tput, 1.0, 10, latency_percentiles=lat)] * 3)


def test_parse_slo_units_and_errors():
    assert parse_slo("ttft=1,tpot=50") == Slo(1000.0, 50.0, "p90")
    assert parse_slo("tpot=20,p=99") == Slo(None, 20.0, "p99")
    for bad, words in (("ttft", "not ttft=S"), ("p=90", "give ttft"), ("ttft=x", "numbers"),
                       ("ttft=1,p=80", "choose one of"), ("tpot=-1", "positive")):  # fmt: skip
        with pytest.raises(ValueError, match=words):
            parse_slo(bad)


def test_the_best_k_that_meets_the_slo_wins_and_none_is_said():
    # k=4 is fastest but its TPOT p90 (60 ms) misses 50 ms; k=2 meets both: selected
    cells = [cell(0, 100, 200, 20), cell(2, 180, 300, 40), cell(4, 250, 300, 60)]
    (free,) = decide(cells)
    assert free.selected_k == 4
    (held,) = decide(cells, parse_slo("ttft=1,tpot=50"))
    assert held.selected_k == 2
    assert held.excluded == {4: ["misses the SLO: TPOT p90 60.0 ms > 50 ms"]}
    # at p50 (half the p90 figures here) every k meets it again
    assert decide(cells, parse_slo("ttft=1,tpot=50,p=50"))[0].selected_k == 4
    # nothing meets TTFT p90 <= 0.1 s: no selection, and why
    (none,) = decide(cells, parse_slo("ttft=0.1"))
    assert none.selected_k is None and none.reason == "no k meets the SLO"
    text = render_sweep_tables(cells, [none], None, None)
    assert "concurrency 16: nothing selected, no k meets the SLO" in text
    assert "k=2 excluded: misses the SLO: TTFT p90 300.0 ms > 100 ms" in text
