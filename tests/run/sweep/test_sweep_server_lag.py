"""`specmon sweep` reads specmon sim's step-lag counters around each repeat: the share is in
sweep.json per repeat, and a cell whose server ran more than 2% behind its own step model
is flagged there and on its headless line (the decision excludes such cells)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from support.sweep_fakes import sweep_argv

from specmon.decision.cells import cell_health
from specmon.decision.gates import machine_wide
from specmon.decision.sweep_types import Cell, RepeatMeasurement
from specmon.run.sweep.measure import server_lag_share, with_sim_fidelity
from specmon.run.sweep.runner import cell_line
from specmon.server.health import parse_health


def repeat(share: float | None) -> RepeatMeasurement:
    return RepeatMeasurement(100.0, 2.0, 10, server_lag_share=share)


def test_the_worst_repeat_flags_the_cell():
    assert Cell(2, 4, [repeat(0.01), repeat(0.02)]).server_behind is None  # 2% is the bar
    cell = Cell(2, 4, [repeat(0.01), repeat(0.034), repeat(None)])
    assert cell.server_lag_share == 0.034
    assert cell.server_behind == "server behind its step model (+3.4% of its formula's time > 2%)"
    assert cell.to_dict()["server_behind"] == cell.server_behind
    assert cell_line(cell).endswith(
        "; server behind its step model (+3.4% of its formula's time > 2%)"
    )
    assert Cell(2, 4, [repeat(None)]).server_behind is None  # another server: no flag
    again = RepeatMeasurement.from_dict(json.loads(json.dumps(cell.repeats[1].to_dict())))
    assert again.server_lag_share == 0.034


PAGE = """# TYPE specmon_sim_step_lag_seconds counter
specmon_sim_step_lag_seconds_total{{engine="0",model_name="m"}} {lag}
# TYPE specmon_sim_step_formula_seconds counter
specmon_sim_step_formula_seconds_total{{engine="0",model_name="m"}} {formula}
"""


def test_share_is_lag_over_formula_between_the_scrapes():
    before = parse_health(PAGE.format(lag=0.5, formula=10.0), taken_s=0.0)
    after = parse_health(PAGE.format(lag=0.62, formula=14.0), taken_s=5.0)
    assert server_lag_share(before, after) == pytest.approx(0.12 / 4.0)  # 3%
    vllm = parse_health('vllm:num_requests_running{engine="0"} 1\n', taken_s=0.0)
    assert server_lag_share(vllm, vllm) is None
    assert server_lag_share(None, after) is None


ITL_PAGE = """# TYPE specmon_sim_requests_timed counter
specmon_sim_requests_timed_total{{engine="0",model_name="m"}} {timed}
# TYPE specmon_sim_request_itl_formula_seconds counter
specmon_sim_request_itl_formula_seconds_total{{engine="0",model_name="m"}} {formula}
# TYPE specmon_sim_request_itl_written_seconds counter
specmon_sim_request_itl_written_seconds_total{{engine="0",model_name="m"}} {written}
# TYPE specmon_sim_steps counter
specmon_sim_steps_total{{engine="0",model_name="m"}} {steps}
# TYPE specmon_sim_step_batch counter
specmon_sim_step_batch_total{{engine="0",model_name="m"}} {batch}
"""


def test_the_repeat_gets_the_formula_itl_of_the_requests_between_the_scrapes():
    before = parse_health(
        ITL_PAGE.format(timed=5, formula=0.05, written=0.051, steps=100, batch=300)
    )
    # 20 requests more, their formula ITLs summing to 0.2 s: 10 ms each on average; their
    # writes 0.204 s (+2%); 400 steps more, with 6,000 batch slots: a mean batch of 15
    after = parse_health(
        ITL_PAGE.format(timed=25, formula=0.25, written=0.255, steps=500, batch=6300)
    )
    measured = RepeatMeasurement(100.0, 2.0, 20, itl_mean_ms=10.25)
    got = with_sim_fidelity(measured, before, after)
    assert got.formula_itl_ms == pytest.approx(10.0)
    assert got.written_itl_share == pytest.approx(0.02)
    assert got.server_mean_batch == pytest.approx(15.0)
    assert got.per_token_off_share == pytest.approx(0.025)
    assert with_sim_fidelity(measured, None, after) == measured  # no scrape: nothing made up


def test_the_arrival_delay_is_the_clients_ttft_beyond_the_simulators_over_the_latency():
    # client TTFT 30 ms, the simulator's arrival-to-first-write 24 ms: 6 ms between the two,
    # of a 300 ms request: 2% of each request's time that no step formula has
    got = RepeatMeasurement(
        100.0, 2.0, 20, ttft_mean_ms=30.0, server_ttft_ms=24.0, request_latency_mean_ms=300.0
    )
    assert got.arrival_delay_share == pytest.approx(0.02)
    assert got.to_dict()["arrival_delay_share"] == pytest.approx(0.02)
    assert RepeatMeasurement(100.0, 2.0, 20, ttft_mean_ms=30.0).arrival_delay_share is None


def test_a_per_token_time_off_the_formula_flags_the_cell_and_gates_it():
    def rep(itl: float) -> RepeatMeasurement:
        return RepeatMeasurement(100.0, 2.0, 10, itl_mean_ms=itl, formula_itl_ms=10.0)

    assert Cell(2, 4, [rep(10.19), rep(9.81)]).server_behind is None  # within 2% either way
    # the cell's figure is the median of its repeats (+1%, +3.1%, +2.5%: +2.5%), the worst
    # repeat is kept beside it
    cell = Cell(2, 4, [rep(10.1), rep(10.31), rep(10.25)])
    assert cell.per_token_off_share == pytest.approx(0.025)
    assert cell.per_token_off_worst == pytest.approx(0.031)
    assert cell.server_behind == "off the simulator's formula (per-token time +2.5%, beyond 2%)"
    assert cell.to_dict()["per_token_off_share"] == pytest.approx(0.025)
    assert cell.to_dict()["per_token_off_worst"] == pytest.approx(0.031)
    # one repeat of three off (a client stall in a short repeat): the median holds
    one_off = Cell(2, 4, [rep(10.1), rep(10.34), rep(9.95)])
    assert one_off.per_token_off_share == pytest.approx(0.01)  # +1%, +3.4%, -0.5%
    assert one_off.server_behind is None
    assert one_off.per_token_off_worst == pytest.approx(0.034)
    assert (
        Cell(2, 4, [rep(9.65)]).server_behind
        == "off the simulator's formula (per-token time -3.5%, beyond 2%)"
    )
    # both: the lag and the per-token time
    both = Cell(2, 4, [replace(rep(10.5), server_lag_share=0.04)])
    assert both.server_behind == (
        "server behind its step model (+4.0% of its formula's time > 2%); "
        "off the simulator's formula (per-token time +5.0%, beyond 2%)"
    )
    reasons = cell_health(cell).reasons()
    assert reasons == [cell.server_behind]  # the flag and the gate: one wording
    assert machine_wide(reasons)  # a busy machine slows every arm alike


@pytest.mark.e2e
def test_a_sim_behind_its_model_is_flagged_in_sweep_json(tmp_path: Path):
    # 0.02 ms steps for 16 running requests: no Python loop does a step's work (16 chunks)
    # in 20 us, so the sim runs far behind its model and must say so; a 0.02 ms step is
    # the only one it is asked to keep here, so the flag cannot come from anything else.
    serve = (
        "{python} -m specmon sim --port {port} --num-spec-tokens {k} --acceptance 0.7"
        " --step-ms 0.02 --ttft-ms 0"
    )
    args = ["--serve", serve, "--num-spec-tokens", "2", "--concurrency", "16"]
    args += ["--repeats", "1", "--warmup-request-count", "0", "--artifact-dir", str(tmp_path)]
    args += ["--segment-requests", "64", "--output-tokens-mean", "512"]
    args += ["--prompt-source", "synthetic", "--synthetic-input-tokens-mean", "16"]
    import subprocess

    proc = subprocess.run(sweep_argv(args), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "sweep.json").read_text())
    (cell,) = doc["cells"]
    (measured,) = cell["repeats"]
    assert isinstance(measured["server_lag_share"], float)
    assert measured["server_lag_share"] > 0.02
    # ... and the client measured its per-token time far off the formula's (0.02 ms a token)
    off = measured["per_token_off_share"]
    assert off > 0.02
    assert cell["server_behind"] == (
        f"server behind its step model (+{measured['server_lag_share'] * 100:.1f}% of its "
        f"formula's time > 2%); off the simulator's formula (per-token time {off * 100:+.1f}%, "
        "beyond 2%)"
    )
    assert cell["server_behind"] in proc.stdout
