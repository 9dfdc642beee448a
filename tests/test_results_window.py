"""The bounded request log (specmon/results_window.py): the newest results in memory, older
ones read back from profile_export.jsonl through the offset index, a stub without one."""

from support.metrics_helpers import WORKED, error_capture, nonstream_capture, vllm_payload

from specmon.pipeline import RequestResult, SpecOutcome
from specmon.results_window import NOT_KEPT, ResultWindow
from specmon.session import RunSession

MS = 1_000_000


def _result(i: int) -> RequestResult:
    return RequestResult(capture=None, outcome=SpecOutcome(), x_request_id=f"r{i}")


def test_window_holds_at_most_an_eighth_over_the_window_and_counts_all():
    """window 16: slack 16 // 8 = 2, so 18 held results compact to the newest 16; it holds
    16 or 17 from then on, never 2 x window (issue 35 item 6: the old 2 x window let a run's
    memory grow 27 MB between 10,000 and 20,000 requests)."""
    w = ResultWindow(window=16)
    held = []
    for i in range(100):
        w.append(_result(i))
        held.append(len(w._state[1]))
    assert held[:17] == list(range(1, 18))  # filling: nothing dropped up to 17
    assert held[17] == 16  # the 18th append: compacted to the window
    assert max(held) == 17 and set(held[17:]) == {16, 17}
    assert len(w) == 100
    # appends 18, 20, ..., 100 compact: at 100, indices 84..99 are held
    assert w.first_kept == 84
    assert [r.x_request_id for r in w[84:]] == [f"r{i}" for i in range(84, 100)]
    assert w[-1].x_request_id == "r99"
    # No reader: an evicted index reads as a stub that says so.
    assert w[0].outcome.reason == NOT_KEPT and w[0].x_request_id is None


def test_a_small_window_compacts_at_every_append_past_it():
    """window 4: slack max(4 // 8, 1) = 1, so each append past the window drops one."""
    w = ResultWindow(window=4)
    for i in range(11):
        w.append(_result(i))
        assert len(w._state[1]) == min(i + 1, 4)
    assert w.first_kept == 7 and [r.x_request_id for r in w[7:]] == ["r7", "r8", "r9", "r10"]


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
    # window 3, slack 1: from the 4th append on each append evicts one, so 7 are evicted
    assert len(results) == 10 and results.first_kept == 7
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
