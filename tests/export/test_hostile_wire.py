"""Property test of the wire path (issue 10 item 5): generated JSON text -> SSE parse ->
adapters -> record -> every export -> `specmon report`, with hypothesis choosing the seeds of
benchmarks/bench_wire_fuzz.py's generator (which runs 100,000 cases outside the suite)."""

from __future__ import annotations

import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.paths import BENCHMARKS

sys.path.insert(0, str(BENCHMARKS))
from bench_wire_fuzz import BAD, run_batch


# About as many generated cases as 200 batches of 1-12, in 50 batches of 1-48: a batch's
# finish, exports and report are most of its cost, and the cases are what the fuzz varies
# (the 400-case batch below is the long one)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), cases=st.integers(1, 48))
def test_no_generated_case_crashes_or_is_lost(tmp_path_factory, seed, cases):
    counts = run_batch(cases, seed, tmp_path_factory.mktemp("fuzz"))
    assert sum(counts.values()) == cases  # each case has exactly one outcome
    assert not [k for k in counts if k.startswith(BAD)], counts


def test_a_batch_forms_records_whose_totals_survive_every_export(tmp_path):
    # 400 cases: about half are valid streams (VALID_SHARE + BENIGN_SHARE = 0.5), so far
    # more than 30% must form records; run_batch counts any total that an export or the
    # report changes as wrong:*, and every valid case whose record differs from its plan.
    counts = run_batch(400, 7, tmp_path)
    assert not [k for k in counts if k.startswith(BAD)], counts
    formed = sum(n for k, n in counts.items() if k.endswith("/record"))
    assert formed >= 0.3 * 400, counts
    assert counts["valid/record"] > 0 and counts["benign/record"] > 0, counts


def test_a_changed_total_is_caught(tmp_path, monkeypatch):
    # The round-trip check itself can fail: one step more than the records carry is wrong
    # in the summary JSON, the CSV, the JSONL and the report.
    import bench_wire_fuzz

    check = bench_wire_fuzz._check_exports

    def off_by_one(workdir, cases, sums, counts):
        check(workdir, cases, [sums[0] + 1, *sums[1:]], counts)

    monkeypatch.setattr(bench_wire_fuzz, "_check_exports", off_by_one)
    counts = run_batch(40, 3, tmp_path)
    wrong = {k for k in counts if k.startswith("wrong:")}
    assert {f"wrong:{w}:{f}:total_spec_decode_steps" for w in ("run", "report")
            for f in ("json", "csv", "jsonl")} <= wrong, counts  # fmt: skip
    assert "wrong:report:accumulator_totals" in wrong
