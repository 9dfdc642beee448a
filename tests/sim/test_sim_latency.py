"""The two latency models as pure functions, checked against values worked out by hand."""

from __future__ import annotations

import subprocess
import sys

import pytest

from specmon.sim.model import LatencyModel, latency_step_ms

ROOF = {"step_floor_ms": 8.0, "compute_ms_per_token": 0.1, "draft_ms_per_token": 0.5}


def test_roofline_step_time_by_hand():
    # max(8, 0.1 * B * (k + 1)) + 0.5 * k
    assert latency_step_ms("roofline", 3, 1, **ROOF) == pytest.approx(9.5)  # floor 8 + 1.5
    assert latency_step_ms("roofline", 3, 32, **ROOF) == pytest.approx(14.3)  # 12.8 + 1.5
    assert latency_step_ms("roofline", 0, 16, **ROOF) == pytest.approx(8.0)  # 1.6 < floor
    assert latency_step_ms("roofline", 0, 100, **ROOF) == pytest.approx(10.0)  # compute bound
    assert latency_step_ms("roofline", 2, 0, **ROOF) == pytest.approx(9.0)  # idle = batch 1


def test_linear_step_time_by_hand_and_k0():
    params = {"step_ms": 20.0, "draft_ms_per_token": 1.0, "batch_slope": 0.02}
    # 20 * (1 + 0.02 * 63 * 4) + 3 = 20 * 6.04 + 3 = 120.8 + 3
    assert latency_step_ms("linear", 3, 64, **params) == pytest.approx(123.8)
    # k = 0: 20 * (1 + 0.02 * 9 * 1), no draft cost
    assert latency_step_ms("linear", 0, 10, **params) == pytest.approx(23.6)
    assert LatencyModel(**params).step_ms_at(0, 1) == pytest.approx(20.0)


def test_best_k_moves_with_load_under_roofline():
    # E(k) at a = 0.8: 1, 1.8, 2.44, 2.952, 3.3616, 3.68928, 3.951424.
    # B = 1: E/(8 + 0.5k) rises to k = 6 (0.3592 per ms).
    # B = 32: compute 3.2 (k+1): k=1 1.8/8.5 = .2118, k=2 2.44/10.6 = .2302, k=3 2.952/14.3 = .2064
    model = LatencyModel(kind="roofline", **ROOF)
    acceptance = [0.8] * 6
    assert model.best_k(acceptance, 1) == 6
    assert model.best_k(acceptance, 32) == 2
    assert model.tokens_per_second(acceptance, 2, 32) == pytest.approx(32 * 2.44 * 1000 / 10.6)
    assert model.tokens_per_second(acceptance, 0, 1) == pytest.approx(1000 / 8)


@pytest.mark.e2e
def test_help_documents_both_formulas():
    out = subprocess.run(
        [sys.executable, "-m", "specmon", "sim", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "step_ms * (1 + batch_slope * (B - 1) * (k + 1)) + draft_ms_per_token * k" in out
    assert "max(step_floor_ms, compute_ms_per_token * B * (k + 1))" in out
    for flag in ("--latency-model", "--step-floor-ms", "--compute-ms-per-token", "--max-num-seqs"):
        assert flag in out
