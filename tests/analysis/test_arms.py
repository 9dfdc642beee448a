"""analysis/arms.py: an arm against the best fixed k and k=0, numbers by hand."""

from __future__ import annotations

import pytest

from specmon.analysis.arms import arm_reports, render_arms
from specmon.decision.cells import decide
from specmon.decision.sweep_types import Cell, RepeatMeasurement
from specmon.errors import UserError
from specmon.run.sweep.servers import schedule_command
from specmon.run.sweep.settings import SweepSettings


def cell(k: int, c: int, *tputs: float) -> Cell:
    reps = [RepeatMeasurement(t, 1.0, 100) for t in tputs]
    return Cell(k, c, reps)


def test_arm_percentages_against_best_fixed_k_and_k0() -> None:
    fixed = [cell(0, 1, 100, 100, 100), cell(2, 1, 150, 160, 155), cell(4, 1, 140, 140, 140)]
    fixed += [cell(0, 4, 200, 200, 200), cell(2, 4, 300, 300, 300)]
    arms = {"schedule": [cell(-1, 1, 154, 155, 156)], "adaptive": [cell(-1, 4, 282, 282, 282)]}
    reports = {r.name: r for r in arm_reports(arms, fixed)}
    s1, s4 = reports["schedule"].points
    assert s1.best_k == 2 and s1.best_k_throughput == 155
    assert s1.vs_best_percent == pytest.approx(0.0)  # median 155 vs 155
    assert s1.vs_k0_percent == pytest.approx(55.0)  # 155 / 100
    assert s4.output_token_throughput is None and s4.flags == ("not measured",)
    a1, a4 = reports["adaptive"].points
    assert a4.vs_best_percent == pytest.approx(-6.0)  # 282 / 300
    assert a4.vs_k0_percent == pytest.approx(41.0)  # 282 / 200
    text = "\n".join(render_arms(list(reports.values())))
    assert "adaptive: vs the best fixed k -6.0% at 4; vs k=0 +41.0% at 4" in text
    assert "-6.0% (k=2)" in text


def test_an_unhealthy_fixed_cell_is_not_the_best_k() -> None:
    erroring = Cell(4, 1, [RepeatMeasurement(999, 1.0, 50,
                                             error_count=50)])  # fmt: skip
    fixed = [cell(2, 1, 100, 100, 100), erroring]
    (report,) = arm_reports({"v": [cell(-1, 1, 90, 90, 90)]}, fixed)
    assert report.points[0].best_k == 2
    assert report.points[0].vs_best_percent == pytest.approx(-10.0)
    assert report.points[0].vs_k0_percent is None  # no k=0 cell


def test_the_best_fixed_k_is_the_decisions_when_every_cell_is_flagged() -> None:
    """Every fixed cell on a saturated client (a machine-wide gate): the decision decides
    among them anyway, and the arm is held against that same best k (150 at k=2), flagged,
    not left with "no best fixed k"."""

    def saturated(k: int, *tputs: float) -> Cell:
        return Cell(k, 1, [RepeatMeasurement(t, 1.0, 100, client_saturated=True) for t in tputs])

    fixed = [saturated(0, 100, 100, 100), saturated(2, 150, 150, 150), saturated(4, 140, 140, 140)]
    (decision,) = decide(fixed)
    (report,) = arm_reports({"v": [cell(-1, 1, 120, 120, 120)]}, fixed)
    point = report.points[0]
    assert decision.best_k == point.best_k == 2 and point.best_k_throughput == 150
    assert point.vs_best_percent == pytest.approx(-20.0)  # 120 / 150
    assert point.vs_k0_percent == pytest.approx(20.0)  # k=0 is one of the cells decided among
    assert point.flags == (
        "every fixed-k cell here flagged, compared anyway: client saturated (the load loop's "
        "health warning)",
    )


def test_no_speedup_over_a_gated_k0() -> None:
    gated_k0 = Cell(0, 1, [RepeatMeasurement(50, 1.0, 50, error_count=50)])
    (report,) = arm_reports({"v": [cell(-1, 1, 90, 90, 90)]}, [gated_k0, cell(2, 1, 100)])
    point = report.points[0]
    assert point.vs_k0_percent is None and point.vs_best_percent == pytest.approx(-10.0)
    assert any(flag.startswith("k=0 excluded: ") for flag in point.flags)


def test_schedule_goes_into_the_vllm_speculative_config() -> None:
    serve = """vllm serve m --port {port} --speculative-config '{"method": "ngram", "num_speculative_tokens": {k}}'"""
    doc = {"num_speculative_tokens_per_batch_size": [[1, 3, 4], [4, 64, 2]]}
    command = schedule_command(serve, doc, "/x/s.json", 8000)  # type: ignore[arg-type]
    assert command == (
        'vllm serve m --port 8000 --speculative-config \'{"method": "ngram", '
        '"num_speculative_tokens": 4, "num_speculative_tokens_per_batch_size": '
        "[[1, 3, 4], [4, 64, 2]]}'"
    )


def test_arm_settings_are_checked() -> None:
    base = dict(ks=[2], concurrencies=[1], serve="x --port {port} k={k}", segment_requests=4)
    with pytest.raises(UserError, match="cannot add the schedule"):
        SweepSettings(**base, verify_schedule=True)  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"needs the \{port\}"):
        SweepSettings(**base, variants={"a": "serve"})  # type: ignore[arg-type]
    with pytest.raises(UserError, match="not 'schedule'"):
        SweepSettings(**base, variants={"schedule": "s {port}"})  # type: ignore[arg-type]
    plain = SweepSettings(**base)  # type: ignore[arg-type]
    with_arm = SweepSettings(**base, variants={"a": "s {port}"})  # type: ignore[arg-type]
    assert plain.settings_hash() == with_arm.settings_hash()  # arms never void k cells
