"""The batch-aware step-time model recovers known parameters; LOO errors by hand."""

from __future__ import annotations

import pytest

from specmon.decision import stepcost as kmodel
from specmon.decision.sweep_types import Cell, RepeatMeasurement

# pooled k=4 histogram: tails 100, 80, 60, 40, 20 -> S = .8 .6 .4 .2; E(k') = 1.8 2.4 2.8 3.0
HIST4 = {0: 20, 1: 20, 2: 20, 3: 20, 4: 20}
E = {0: 1.0, 1: 1.8, 2: 2.4, 3: 2.8, 4: 3.0}


def synth(step, ks=(0, 1, 2, 4), concs=(1, 4, 16, 64)) -> list[Cell]:
    cells = []
    for k in ks:
        for b in concs:
            t = step(k, b)  # ms per verify step
            rep = RepeatMeasurement(
                output_token_throughput=b * E[k] * 1000.0 / t,
                request_throughput=1.0,
                request_count=10,
                tpot_ms=t / E[k],
                acceptance_length=None if k == 0 else E[k],
                histogram=HIST4 if k == 4 else {},
            )
            cells.append(Cell(k, b, [rep]))
    return cells


def test_linear_cells_recover_linear_parameters():
    m = kmodel.fit(synth(lambda k, b: 10 + 0.05 * b * (k + 1) + 0.8 * k))
    assert m.form == "linear"
    assert (m.params.a, m.params.b, m.params.c) == pytest.approx((10, 0.05, 0.8), rel=1e-6)
    assert m.efficiency == pytest.approx(1.0)
    assert m.loo_mean_abs == pytest.approx(0.0, abs=1e-9)
    # E(3) was not measured as a cell: truncation of the k=4 histogram gives 2.8
    assert m.acceptance_length(3) == pytest.approx(2.8)
    assert m.predict_throughput(3, 8) == pytest.approx(8 * 2.8 * 1000 / (10 + 0.05 * 32 + 2.4))
    assert m.basis.startswith("measured over 16 cells, model error 0%")


def test_roofline_cells_recover_roofline_parameters():
    m = kmodel.fit(synth(lambda k, b: max(12.0, 0.2 * b * (k + 1)) + 0.5 * k))
    assert m.form == "roofline"
    assert (m.params.a, m.params.b, m.params.c) == pytest.approx((12, 0.2, 0.5), rel=0.03)
    # knee at B (k+1) = 60: concurrency 16 at k=4 (80 tokens) is compute bound
    assert m.predict_step_ms(4, 16) == pytest.approx(0.2 * 80 + 2.0, rel=0.03)
    # k=4 wins at concurrency 1 (floor), k=0 at 64 (compute bound: E/(k+1) falls)
    assert m.best_k(1) == 4 and m.best_k(64) == 0


def test_loo_errors_by_hand():
    # k in {0, 1}, B in {1, 2}; k=1 histogram {0: 1, 1: 1} -> E(1) = 1.5.
    # measured step ms: (0,1) 10, (0,2) 12, (1,1) 13, (1,2) 19; throughput = B E 1000 / T.
    steps = {(0, 1): 10.0, (0, 2): 12.0, (1, 1): 13.0, (1, 2): 19.0}
    cells = []
    for (k, b), t in steps.items():
        e = 1.0 if k == 0 else 1.5
        rep = RepeatMeasurement(
            b * e * 1000 / t, 1.0, 5, tpot_ms=t / e,
            acceptance_length=None if k == 0 else e,
            histogram={0: 1, 1: 1} if k == 1 else {},
        )  # fmt: skip
        cells.append(Cell(k, b, [rep]))
    m = kmodel.fit(cells, form="linear")
    # leave out (1,2): a+b=10, a+2b=12, a+2b+c=13 -> b=2 a=8 c=1 -> T=8+4*2+1=17; err 19/17-1
    # leave out (0,1): a+2b=12, a+2b+c=13, a+4b+c=19 -> c=1 b=3 a=6 -> T=9; err 10/9-1
    # leave out (0,2): a+b=10, a+2b+c=13, a+4b+c=19 -> b=3 a=7 c=0 -> T=13; err 12/13-1
    # leave out (1,1): a+b=10, a+2b=12, a+4b+c=19 -> b=2 a=8 c=3 -> T=15; err 13/15-1
    want = {(1, 2): 19 / 17 - 1, (0, 1): 10 / 9 - 1, (0, 2): 12 / 13 - 1, (1, 1): 13 / 15 - 1}
    assert m.loo_errors == pytest.approx(want)
    assert m.loo_mean_abs == pytest.approx(sum(abs(v) for v in want.values()) / 4)
    d = m.to_dict()
    assert d["form"] == "linear" and len(d["cells"]) == 4


def test_too_few_cells_or_one_k_is_refused():
    with pytest.raises(kmodel.NotEnoughData, match="at least 3"):
        kmodel.fit(synth(lambda k, b: 10.0, ks=(0,), concs=(1, 2)))
    with pytest.raises(kmodel.NotEnoughData, match="one k"):
        kmodel.fit(synth(lambda k, b: 10.0 + b, ks=(4,)))


def test_tables_with_the_model_print_loo_and_predicted_schedule():
    from specmon.analysis.sweep import render_sweep_tables
    from specmon.decision.cells import decide
    from specmon.decision.schedule import build_schedule, validate_schedule

    cells = synth(lambda k, b: max(12.0, 0.2 * b * (k + 1)) + 0.5 * k)
    m = kmodel.fit(cells)
    decisions = decide(cells)
    sched = build_schedule(decisions, m)
    text = render_sweep_tables(cells, decisions, sched, m)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "leave-one-out error" in text and m.basis in text
    assert any(r["predicted"] for r in sched["ranges"])  # 2, 3, 5..15, 17..63 from the model
    validate_schedule(sched["num_speculative_tokens_per_batch_size"])


def test_step_time_that_falls_with_k_is_bounded_not_believed():
    # under CPU contention the k=6 cells ran faster than k=2's: least squares alone gives
    # c < 0 and a speedup above E(k'); bounded, c = 0 and every step is at least k=0's
    e = {2: 2.4, 4: 3.0, 6: 3.2}
    steps = {(2, 1): 12.0, (4, 1): 11.0, (6, 1): 10.0, (2, 8): 20.0, (4, 8): 19.0, (6, 8): 18.0}
    cells = [
        Cell(k, b, [RepeatMeasurement(b * e[k] * 1000 / t, 1.0, 10, tpot_ms=t / e[k],
                                      acceptance_length=e[k])])
        for (k, b), t in steps.items()
    ]  # fmt: skip
    m = kmodel.fit(cells, form="linear")
    assert m.params.b >= 0 and m.params.c >= 0 and m.params.a > 0
    for b in (1, 8):
        assert m.predict_step_ms(6, b) >= m.predict_step_ms(0, b)


def test_flat_step_time_without_k0_is_refused_with_what_to_measure():
    # the same step time at every k and load: no contrast, the model cannot tell k apart
    e = {2: 2.4, 4: 3.0, 6: 3.2}
    cells = [
        Cell(k, b, [RepeatMeasurement(b * e[k] * 100, 1.0, 10, tpot_ms=10 / e[k],
                                      acceptance_length=e[k])])
        for k in (2, 4, 6) for b in (1, 8)
    ]  # fmt: skip
    with pytest.raises(kmodel.NotEnoughData, match="no contrast in step time across k=2,4,6"):
        kmodel.fit(cells, form="linear")
