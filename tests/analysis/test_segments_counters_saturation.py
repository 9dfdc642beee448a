"""Issue 31 items 5 and 6 on hand-built results: a segment whose requests carried no
spec-decode record takes its server's /metrics acceptance (labelled server-wide) when the
counters counted verify steps, and is k=0 (no speculation) when they did not; a segment
the client was saturated through is left out of the advice, as the sweep leaves out a
saturated cell. Expected figures are worked by hand in each test."""

from __future__ import annotations

from specmon.analysis.segments import (
    SATURATED_ALL,
    SATURATED_SHARE,
    SERVER_WIDE,
    SegmentTable,
    ServerWide,
    measurement_of_row,
    row_k,
)
from specmon.decision.choose import NO_SPECULATION
from specmon.pipeline import RequestResult, SpecOutcome
from specmon.sinks.saturation import SaturationSink
from specmon.sources.load.loop_health import SaturationLog

S = 1_000_000_000


def plain(segment: int, start_s: float, end_s: float, osl: int = 100) -> RequestResult:
    """A request answered without any spec-decode record (payloads off, or k=0)."""
    return RequestResult(
        capture=None,
        outcome=SpecOutcome(record=None),
        values={"output_sequence_length": osl, "inter_token_latency": 2e6},
        error=None,
        phase="profiling",
        segment=segment,
        server=None,
        start_ns=int(start_s * S),
        end_ns=int(end_s * S),
    )


def table_of(results, **providers) -> list[dict]:
    table = SegmentTable()
    for name, value in providers.items():
        setattr(table, name, (lambda v=value: v))
    table.update(None, results)
    return table.rows({0: {"concurrency": 1}, 1: {"concurrency": 4}})


def test_counters_only_rows_take_the_server_wide_histogram():
    # the server's counters: k=3, 10 steps accepting 0, 20 accepting 1, 30 two, 40 three:
    # accepted = 20 + 60 + 120 = 200 over 100 steps, AL = 1 + 200/100 = 3.00
    wide = ServerWide(3, {0: 10, 1: 20, 2: 30, 3: 40})
    results = [plain(0, i, i + 1) for i in range(12)]
    (row,) = table_of(results, server_wide={None: wide})
    assert row["num_spec_tokens"] == 3 and row["steps"] == 100
    assert row["accepted"] == 200 and row["drafted"] == 300
    assert row["acceptance_length"] == 3.0
    assert row["acceptance_source"] == SERVER_WIDE
    assert row_k(row) == 3
    m = measurement_of_row(row, "")
    assert m is not None and m.k == 3 and m.steps == 100
    # advice on them, labelled server-wide, never "no verify steps yet"
    assert row["recommended_k"] is not None
    assert "acceptance server-wide" in row["recommendation"]
    assert "yet" not in row["recommendation"]


def test_without_counters_the_same_rows_are_k0_with_no_speculation():
    results = [plain(0, i, i + 1) for i in range(12)]
    (row,) = table_of(results)  # no provider: the server has no spec-decode counters
    assert row["num_spec_tokens"] is None and row["speculation_seen"] is False
    assert row_k(row) == 0
    # the answer is the one arm measured, k=0, said as no speculation (never "yet")
    assert row["recommended_k"] == 0
    assert NO_SPECULATION in row["recommendation"]
    assert NO_SPECULATION == "no speculation on this server (no verify steps)"


def test_a_segment_saturated_through_its_window_is_left_out():
    # segment 0: requests over 0..10 s; segment 1 over 10..20 s. The client was saturated
    # from 12 s to 19 s: 7 of segment 1's 10 s (0.7 >= 5%), none of segment 0's.
    log = SaturationLog(observed_s=20.0, saturated_s=7.0, worst_lag_ms=80.0)
    log.spans.append([12 * S, 19 * S])
    results = [plain(0, i, i + 1) for i in range(10)] + [plain(1, i, i + 1) for i in range(10, 20)]
    rows = table_of(results, saturation={None: log})
    by_seg = {r["segment"]: r for r in rows}
    assert by_seg[0]["client_saturated"] is False and by_seg[0]["client_saturated_share"] == 0.0
    assert by_seg[1]["client_saturated"] is True and by_seg[1]["client_saturated_share"] == 0.7
    m1 = measurement_of_row(by_seg[1], "")
    assert m1 is not None and m1.saturated and m1.health.reasons()
    # segment 1 is all of its load (concurrency 4): it answers, flagged uncertain
    assert SATURATED_ALL in by_seg[1]["flags"] and SATURATED_ALL not in by_seg[0]["flags"]


def test_a_saturated_arm_beside_a_clean_one_at_its_load_is_left_out():
    # two servers at one load (concurrency 1), both without spec-decode records: "a" was
    # saturated through its whole 0..10 s window, "b" never
    log = SaturationLog(observed_s=10.0, saturated_s=10.0)
    log.spans.append([0, 10 * S])
    table = SegmentTable()
    table.saturation = lambda: {"a": log}
    table.update("a", [plain(0, i, i + 1) for i in range(10)])
    table.update("b", [plain(0, i, i + 1) for i in range(10)])
    rows = table.rows({"a": {0: {"concurrency": 1}}, "b": {0: {"concurrency": 1}}})
    by_server = {r["server"]: r for r in rows}
    assert by_server["a"]["client_saturated"] is True
    assert "client_saturated" not in by_server["b"]  # its runner watched no loop here
    flagged = [f for f in by_server["b"]["flags"] if "client saturated" in f]
    assert len(flagged) == 1 and flagged[0].startswith("a (k=0 at concurrency 1) excluded")
    assert SATURATED_ALL not in by_server["b"]["flags"]


def spec(segment: int, start_s: float, end_s: float) -> RequestResult:
    """A request whose record holds 4 verify steps at k=2: h = [1, 1, 2] (AL 2.25)."""
    from specmon.specdecode.record import SpecDecodeAcceptanceRecord

    rec = SpecDecodeAcceptanceRecord(
        engine="vllm",
        mean_acceptance_length=2.25,
        draft_acceptance_rate=5 / 8,
        acceptance_histogram={0: 1, 1: 1, 2: 2},
        num_accepted_draft_tokens=5,
        num_draft_tokens=8,
        num_spec_steps=4,
        num_spec_tokens=2,
    )
    r = plain(segment, start_s, end_s, osl=9)
    return RequestResult(
        capture=None,
        outcome=SpecOutcome(record=rec),
        values=r.values,
        error=None,
        phase="profiling",
        segment=segment,
        server=None,
        start_ns=r.start_ns,
        end_ns=r.end_ns,
    )


def test_when_every_measurement_at_a_load_is_saturated_they_answer_flagged():
    # one segment, k=2, saturated through all of its 0..10 s window: left out, nothing
    # would remain, so it answers after all, flagged uncertain
    log = SaturationLog(observed_s=10.0, saturated_s=10.0)
    log.spans.append([0, 10 * S])
    (row,) = table_of([spec(0, i, i + 1) for i in range(12)], saturation={None: log})
    assert row["client_saturated"] is True
    assert row["recommended_k"] is not None
    assert SATURATED_ALL in row["flags"] and SATURATED_ALL in row["recommendation"]
    # unsaturated, the same rows answer the same k without the flag
    (clean,) = table_of([spec(0, i, i + 1) for i in range(12)])
    assert clean["recommended_k"] == row["recommended_k"]
    assert SATURATED_ALL not in clean["flags"]


def test_a_short_spell_under_the_share_keeps_the_segment():
    # 0.4 s of a 10 s segment is 4%, under SATURATED_SHARE (5%)
    assert SATURATED_SHARE == 0.05
    log = SaturationLog(observed_s=10.0, saturated_s=0.4)
    log.spans.append([int(3.0 * S), int(3.4 * S)])
    results = [plain(0, i, i + 1) for i in range(10)]
    (row,) = table_of(results, saturation={None: log})
    assert row["client_saturated_share"] == 0.04 and row["client_saturated"] is False


def test_the_summary_key_is_the_log_and_says_when_unknown():
    log = SaturationLog(observed_s=8.0, saturated_s=2.0, worst_lag_ms=120.456, max_busy=0.97)
    log.spans.append([1, 2])
    out = SaturationSink(lambda: log).export_extras()
    assert out == {
        "client_saturation": {
            "available": True,
            "saturated_share": 0.25,  # 2.0 / 8.0
            "saturated_s": 2.0,
            "observed_s": 8.0,
            "worst_loop_lag_ms": 120.46,
            "max_loop_busy": 0.97,
            "spells": 1,
        }
    }
    assert SaturationSink(lambda: None).export_extras() == {
        "client_saturation": {"available": False}
    }
