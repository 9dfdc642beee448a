"""Property test of the wire path (issue 10 item 5): generated JSON text -> SSE parse ->
adapters -> record -> every export -> `specmon report`, with hypothesis choosing the seeds of
benchmarks/bench_wire_fuzz.py's generator (which runs 100,000 cases outside the suite)."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_wire_fuzz import run_batch


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), cases=st.integers(1, 12))
def test_no_generated_case_crashes_or_is_lost(tmp_path_factory, seed, cases):
    counts = run_batch(cases, seed, tmp_path_factory.mktemp("fuzz"))
    assert sum(counts.values()) == cases  # each case has exactly one outcome
    assert not [k for k in counts if k.startswith(("crash", "lost"))], counts
