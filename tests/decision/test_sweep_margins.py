"""The sweep's answer states its margins as intervals (issue 31 item 1): the selected cell
over the best other selectable cell (medians) and over k=0 (scores, the figure vLLM's
`vs k=0` is), each with the 90% interval of the same ratio over bootstrap draws of the
repeats. Figures below are worked by hand from the resampling distribution of a median."""

from __future__ import annotations

import json

from specmon.decision.cells import decide, decision_lines
from specmon.decision.sweep_types import Cell, RepeatMeasurement


def cell(k: int, conc: int, *tputs: float) -> Cell:
    return Cell(k, conc, [RepeatMeasurement(t, 1.0, 10) for t in tputs])


def test_a_noiseless_margin_is_its_point():
    # k=2 at 110 every repeat, k=1 at 100: every draw gives 110 / 100 - 1 = +10%
    (d,) = decide([cell(1, 4, 100, 100, 100), cell(2, 4, 110, 110, 110)])
    assert d.selected_k == 2 and d.over_runner_up is not None
    m = d.over_runner_up
    assert m.other == 1 and abs(m.value - 0.10) < 1e-12
    assert abs(m.low - 0.10) < 1e-12 and abs(m.high - 0.10) < 1e-12
    assert d.over_k0 is None  # no k=0 measured here


def test_the_interval_is_the_median_resampling_distribution():
    # k=4 repeats 100/110/120 against k=2 at 60 x 3. A median of 3 draws with replacement
    # is 100 when two or three draws are 100: 3 (1/3)^2 (2/3) + (1/3)^3 = 7/27 = 0.26, the
    # same for 120; so the 5% and 95% quantiles of 200 draws are 100 and 120 (a quantile
    # elsewhere needs fewer than 10 of 200 draws at 100: below 1e-9). Over 60 constant:
    # 100/60 - 1 = +66.7% and 120/60 - 1 = +100%; point 110/60 - 1 = +83.3%.
    (d,) = decide([cell(2, 4, 60, 60, 60), cell(4, 4, 100, 110, 120)])
    m = d.over_runner_up
    assert d.selected_k == 4 and m is not None and m.other == 2
    assert round(100 * m.value, 1) == 83.3
    assert round(100 * m.low, 1) == 66.7 and round(100 * m.high, 1) == 100.0


def test_over_k0_uses_the_score_as_selected_vs_k0_percent_does():
    # k=0 at 100 x 3 (MAD 0, score 100); k=3 repeats 150/160/170: median 160, MAD 10,
    # score 160 - 14.826 = 145.174 -> +45.2% over k=0, as selected_vs_k0_percent says
    (d,) = decide([cell(0, 8, 100, 100, 100), cell(3, 8, 150, 160, 170)])
    assert d.selected_k == 3 and d.over_k0 is not None
    assert round(100 * d.over_k0.value, 1) == round(d.selected_vs_k0_percent, 1) == 45.2
    assert d.over_k0.low <= d.over_k0.value <= d.over_k0.high
    # k=0 is also the runner-up here: by medians 160 / 100 - 1 = +60%
    assert d.over_runner_up.other == 0 and round(100 * d.over_runner_up.value, 1) == 60.0


def test_the_lines_and_sweep_json_carry_the_intervals():
    cells = [cell(0, 8, 100, 100, 100), cell(2, 8, 140, 140, 140), cell(3, 8, 150, 160, 170)]
    (d,) = decide(cells)
    text = "\n".join(decision_lines([d]))
    # the pick over the runner-up by medians: 160 / 140 - 1 = +14.3%, its band from the
    # 150/160/170 resampling: 150/140 - 1 = +7.1% .. 170/140 - 1 = +21.4%
    assert "+14.3% [+7.1..+21.4] over k=2" in text
    assert "vs k=0" in text and "[" in text.split("vs k=0")[0].split("over k=2")[1]
    doc = json.loads(json.dumps(d.to_dict()))
    assert doc["over_runner_up"]["k"] == 2
    assert round(doc["over_runner_up"]["ratio_minus_1"], 4) == round(160 / 140 - 1, 4)
    low, high = doc["over_runner_up"]["interval90"]
    assert round(low, 4) == round(150 / 140 - 1, 4) and round(high, 4) == round(170 / 140 - 1, 4)
    assert doc["over_k0"]["k"] == 0 and len(doc["over_k0"]["interval90"]) == 2


def test_few_repeats_state_no_interval():
    # two repeats: a bootstrap of two values says nothing; the point alone
    (d,) = decide([cell(1, 2, 100, 100), cell(2, 2, 120, 120)])
    assert d.over_runner_up is not None and d.over_runner_up.low is None
    assert "+20.0% over k=1" in d.head()
