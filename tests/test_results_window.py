"""The bounded request log (specmon/results_window.py): the newest results in memory, older
ones read back from profile_export.jsonl through the offset index, a stub without one."""

from support.metrics_helpers import WORKED, error_capture, nonstream_capture, vllm_payload

from specmon.pipeline import RequestResult, SpecOutcome
from specmon.results_window import NOT_KEPT, ResultWindow
from specmon.session import RunSession

MS = 1_000_000


def _result(i: int) -> RequestResult:
    return RequestResult(capture=None, outcome=SpecOutcome(), x_request_id=f"r{i}")


def test_window_holds_between_window_and_twice_window_and_counts_all():
    w = ResultWindow(window=4)
    for i in range(11):
        w.append(_result(i))
        assert 0 < len(w._state[1]) < 8  # never more than 2 * window held
    assert len(w) == 11
    # 8 appended -> compacted to the last 4 (indices 4..7); then 8, 9, 10 appended.
    assert w.first_kept == 4
    assert [r.x_request_id for r in w[4:]] == [f"r{i}" for i in range(4, 11)]
    assert w[-1].x_request_id == "r10"
    # No reader: an evicted index reads as a stub that says so.
    assert w[0].outcome.reason == NOT_KEPT and w[0].x_request_id is None


def test_a_zero_window_keeps_nothing_and_still_counts():
    """window=0 (a statistics-only accumulator): `items[-0:]` would have kept everything."""
    w = ResultWindow(window=0)
    for i in range(25):
        w.append(_result(i))
        assert w._state[1] == []
    assert len(w) == 25 and w.first_kept == 25


def test_unbounded_window_keeps_everything():
    w = ResultWindow(window=None)
    for i in range(50):
        w.append(_result(i))
    assert w.first_kept == 0 and [r.x_request_id for r in w] == [f"r{i}" for i in range(50)]


def test_evicted_results_are_read_back_from_the_jsonl(tmp_path):
    session = RunSession(tmp_path / "out", "records", {}, window=3)
    captures = []
    for i in range(10):
        if i == 4:
            cap = error_capture("timeout", start_ns=i * 100 * MS)
        else:
            cap = nonstream_capture(
                vllm_payload(WORKED, k=4), start_ns=i * 100 * MS, latency_ms=10 + i
            )
        cap.x_request_id = f"q{i}"
        captures.append(cap)
        session.add(cap)
    results = session.accumulator.results
    assert len(results) == 10 and results.first_kept == 6  # 6 evicted at the 6th append
    for i in range(10):
        got = results[i]
        assert got.x_request_id == f"q{i}"
        if i == 4:
            assert got.error is not None and got.error["type"] == "timeout"
        else:
            # request_latency stored in ns: latency_ms given to the capture, by hand
            assert got.values["request_latency"] == (10 + i) * MS
            assert got.spec is not None and got.spec.num_spec_steps == len(WORKED)
    session.finish()
    assert results[0].x_request_id == "q0"  # still readable after the writer closed
