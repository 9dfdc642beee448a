"""`specmon sweep` reads specmon sim's step-lag counters around each repeat: the share is in
sweep.json per repeat, and a cell whose server ran more than 2% behind its own step model
is flagged there and on its headless line (the decision excludes such cells)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sweep_fakes import sweep_argv

from specmon.analysis.sweep_types import Cell, RepeatMeasurement
from specmon.server.health import parse_health
from specmon.sources.sweep import cell_line, server_lag_share


def repeat(share: float | None) -> RepeatMeasurement:
    return RepeatMeasurement(100.0, 2.0, 10, server_lag_share=share)


def test_the_worst_repeat_flags_the_cell():
    assert Cell(2, 4, [repeat(0.01), repeat(0.02)]).server_behind is None  # 2% is the bar
    cell = Cell(2, 4, [repeat(0.01), repeat(0.034), repeat(None)])
    assert cell.server_lag_share == 0.034
    assert cell.server_behind == "server behind its own step model (+3.4%)"
    assert cell.to_dict()["server_behind"] == cell.server_behind
    assert cell_line(cell).endswith("; server behind its own step model (+3.4%)")
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
    assert cell["server_behind"] == (
        f"server behind its own step model (+{measured['server_lag_share'] * 100:.1f}%)"
    )
    assert cell["server_behind"] in proc.stdout
