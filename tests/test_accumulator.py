"""RunAccumulator: pooled histogram, run-level metrics, exclusions, snapshots."""

import dataclasses
import json
import math
import tracemalloc
from pathlib import Path

import orjson
import pytest
from support.metrics_helpers import (
    MS,
    SECOND,
    WORKED,
    error_capture,
    nonstream_capture,
    stream_capture,
    vllm_payload,
)

from specmon.accumulator import RunAccumulator
from specmon.export.jsonl_export import result_from_record
from specmon.pipeline import process_capture

S = 1_000_000_000


def _acc(*captures):
    acc = RunAccumulator(live=False)
    for cap in captures:
        acc.add(process_capture(cap))
    return acc


def _worked_pair(**kw):
    return (
        nonstream_capture(vllm_payload(WORKED, k=4), start_ns=0, **kw),
        nonstream_capture(vllm_payload(SECOND, k=4), start_ns=1 * S, **kw),
    )


def test_worked_example_pooled_and_derived():
    acc = _acc(*_worked_pair())
    # {0:1,1:1,2:2,3:3,4:1} + {0:1,1:2} = {0:2,1:3,2:2,3:3,4:1}
    assert acc.pooled_histogram_sorted() == {0: 2, 1: 3, 2: 2, 3: 3, 4: 1}
    s = acc.summary()
    assert s["total_spec_decode_steps"] == {"unit": "count", "avg": 11.0}  # 8 + 3
    assert s["total_accepted_draft_tokens"] == {"unit": "tokens", "avg": 20.0}  # 18 + 2
    assert s["total_draft_tokens"] == {"unit": "tokens", "avg": 44.0}  # 32 + 12
    # 1 + 20/11 and 100 * 20/44 (docs/metrics.md §6)
    assert s["spec_decode_token_weighted_acceptance_length"]["avg"] == 2.8181818181818183
    assert s["spec_decode_overall_draft_acceptance_rate"]["avg"] == 45.45454545454545
    al = s["spec_decode_acceptance_length"]
    # request means 3.25 and 1 + 2/3: avg = (3.25 + 1.6666666666666665) / 2
    assert al["avg"] == pytest.approx(2.4583333333333333, rel=1e-15)
    assert al["count"] == 2 and al["min"] == pytest.approx(5 / 3) and al["max"] == 3.25
    # population std of two values = half their distance
    assert al["std"] == pytest.approx((3.25 - 5 / 3) / 2, rel=1e-12)
    apv = s["spec_decode_accepted_per_verified"]
    assert apv["max"] == 0.65 and apv["min"] == pytest.approx(5 / 15)  # (2+3)/(12+3)
    assert sum(acc.pooled_histogram.values()) == s["total_spec_decode_steps"]["avg"]


def test_peer_run_totals_reproduce_aiperf_digits():
    # aiperf-peer.md: pooled {"0":1060,"1":512,"2":292,"3":460}, k = 3, every step drafts 3
    steps = [0] * 1060 + [1] * 512 + [2] * 292 + [3] * 460
    # split over 4 requests so pooling is exercised
    caps = [nonstream_capture(vllm_payload(steps[i::4], k=3), start_ns=i * S) for i in range(4)]
    s = _acc(*caps).summary()
    assert s["total_accepted_draft_tokens"]["avg"] == 2476.0  # 512 + 2*292 + 3*460
    assert s["total_spec_decode_steps"]["avg"] == 2324.0
    assert s["total_draft_tokens"]["avg"] == 6972.0
    # AIPerf 0.13 wrote exactly these values for that run
    assert s["spec_decode_token_weighted_acceptance_length"]["avg"] == 2.065404475043029
    assert s["spec_decode_overall_draft_acceptance_rate"]["avg"] == 35.513482501434304


def test_zero_step_requests_are_counted_and_excluded():
    zero = nonstream_capture(vllm_payload([], k=4), start_ns=2 * S, completion_tokens=1)
    acc = _acc(*_worked_pair(), zero)
    s = acc.summary()
    assert s["spec_decode_zero_step_requests"] == {"unit": "requests", "avg": 1}
    assert s["spec_decode_acceptance_length"]["count"] == 2  # not 3
    assert s["total_spec_decode_steps"]["avg"] == 11.0
    assert acc.pooled_histogram_sorted() == {0: 2, 1: 3, 2: 2, 3: 3, 4: 1}
    assert s["request_count"]["avg"] == 3  # still a valid request
    assert acc.results[-1].outcome.zero_step


def test_only_zero_step_requests_give_no_spec_distribution():
    s = _acc(nonstream_capture(vllm_payload([], k=4))).summary()
    assert s["spec_decode_zero_step_requests"]["avg"] == 1
    assert not [t for t in s if t != "spec_decode_zero_step_requests" and "spec" in t]


def test_warmup_is_counted_separately_and_excluded():
    warm = nonstream_capture(
        vllm_payload([3, 3], k=4), start_ns=0, benchmark_phase="warmup", latency_ms=5000
    )
    acc = _acc(warm, *_worked_pair())
    assert acc.warmup_count == 1 and acc.request_count == 2
    assert acc.pooled_histogram_sorted() == {0: 2, 1: 3, 2: 2, 3: 3, 4: 1}  # no extra {3: 2}
    assert all(r.phase == "profiling" for r in acc.results)
    # duration from profiling requests only: 0 .. 1 s + 50 ms
    assert acc.summary()["benchmark_duration"]["avg"] == 1.05
    assert acc.snapshot().warmup_count == 1


def test_error_summary_groups_by_type_and_status_with_a_few_examples():
    """A server that puts a request id in every error message makes 500 distinct messages:
    one group (http_error, 500), its count, its first message and two more examples."""
    captures = []
    for i in range(500):
        cap = error_capture("http_error", status=500)
        captures.append(
            dataclasses.replace(cap, error={"type": "http_error", "message": f"id {i}"})
        )
    acc = _acc(*captures, error_capture("timeout"))
    listed = acc.error_summary_list()
    assert len(listed) == 2 and len(acc.error_details) == 2
    assert listed[0] == {
        "error_details": {"code": 500, "type": "http_error", "message": "id 0"},
        "count": 500,
        "examples": ["id 0", "id 1", "id 2"],
    }
    assert listed[1] == {
        "error_details": {"type": "timeout", "message": "timeout happened"},
        "count": 1,
    }


def test_errors_are_summarised_by_kind():
    acc = _acc(
        error_capture("timeout"),
        error_capture("timeout"),
        error_capture("http_error", status=429),
        *_worked_pair(),
    )
    assert acc.error_count == 3 and dict(acc.error_summary) == {"timeout": 2, "http_error": 1}
    s = acc.summary()
    assert s["error_request_count"] == {"unit": "requests", "avg": 3}
    assert s["request_count"]["avg"] == 2
    listed = acc.error_summary_list()
    assert listed[0] == {
        "error_details": {"type": "timeout", "message": "timeout happened"},
        "count": 2,
    }
    assert listed[1]["error_details"]["code"] == 429 and listed[1]["count"] == 1
    assert len(acc.results) == 5  # errors stay in the request log


def test_no_records_means_no_spec_keys_and_no_error_key():
    acc = _acc(nonstream_capture(None), nonstream_capture(None, start_ns=S))
    s = acc.summary()
    assert not [t for t in s if "spec" in t or (t.startswith("total_") and "draft" in t)]
    assert "error_request_count" not in s
    assert acc.snapshot().spec_rows == {} and acc.snapshot().pooled_histogram == {}


def test_throughput_and_totals_by_hand():
    a = nonstream_capture(None, start_ns=0, latency_ms=50, completion_tokens=20, prompt_tokens=7)
    b = nonstream_capture(
        None, start_ns=1 * S, latency_ms=50, completion_tokens=30, prompt_tokens=9
    )
    s = _acc(a, b).summary()
    # duration = (1.05 s last response) - (0 first request) = 1.05 s
    assert s["benchmark_duration"] == {"unit": "sec", "avg": 1.05}
    assert s["request_throughput"]["avg"] == pytest.approx(2 / 1.05, rel=1e-15)
    assert s["output_token_throughput"]["avg"] == pytest.approx(50 / 1.05, rel=1e-15)
    assert s["total_osl"]["avg"] == 50.0 and s["total_output_tokens"]["avg"] == 50.0
    assert s["total_isl"]["avg"] == 16.0
    assert s["request_count"] == {"unit": "requests", "avg": 2}
    osl = s["output_sequence_length"]
    assert (osl["min"], osl["max"], osl["avg"], osl["p50"], osl["std"]) == (
        20.0,
        30.0,
        25.0,
        25.0,
        5.0,
    )


def test_streaming_ttft_distribution():
    caps = [
        stream_capture(None, [t, t + 10], start_ns=i * S, completion_tokens=5)
        for i, t in enumerate([10, 20, 30, 40])
    ]
    s = _acc(*caps).summary()
    ttft = s["time_to_first_token"]
    assert (ttft["avg"], ttft["min"], ttft["max"], ttft["p50"]) == (25.0, 10.0, 40.0, 25.0)
    assert ttft["std"] == math.sqrt(125.0)  # deviations 15, 5, 5, 15 -> 500 / 4
    assert s["inter_token_latency"]["avg"] == 2.5  # every request: (10 ms) / (5 - 1)


def test_snapshot_is_cached_until_a_request_lands():
    acc = RunAccumulator(live=True)
    acc.add(process_capture(_worked_pair()[0]))
    first = acc.snapshot()
    assert acc.snapshot() is first  # nothing landed: same object, no recomputation
    acc.add(process_capture(_worked_pair()[1]))
    second = acc.snapshot()
    assert second is not first and second.version > first.version
    assert second.request_count == 2 and second.engine == "vllm" and second.num_spec_tokens == 4
    # the snapshot's rows are the export's blocks (std from fsum, equal to ~1 ulp)
    summary = acc.summary()
    for tag, row in second.spec_rows.items():
        block = row.block()
        assert block.keys() == summary[tag].keys()
        for key, value in block.items():
            assert value == pytest.approx(summary[tag][key], rel=1e-12)
    assert "request_latency" in second.std_rows and "request_latency" not in second.spec_rows
    assert second.pooled_histogram == {0: 2, 1: 3, 2: 2, 3: 3, 4: 1}
    assert second.elapsed_s >= 0


def test_spec_reasons_are_counted():
    cap = nonstream_capture(vllm_payload(WORKED, k=4))
    cap.request["n"] = 3
    acc = _acc(cap, nonstream_capture(None), nonstream_capture(None))
    assert acc.snapshot().spec_reasons == {"n_gt_1": 1, "absent": 2}


def test_alike_requests_cost_the_accumulator_no_memory_per_request():
    """Issue 19 item 6 (flat memory): per spec-decode request the accumulator keeps only
    what its statistics need. Values of a few distinct kinds are counted (MetricColumn),
    and the results window holds none at window 0, so a run of alike requests grows by
    nothing a request. The acceptance timeline (three 8-byte values per spec-decode
    request, which nothing read) took 24 bytes a request. One result is fed 20,000 times,
    after 2,000 that build the columns and counters."""
    result = process_capture(nonstream_capture(vllm_payload(WORKED, k=4)))
    assert result.spec is not None and result.spec.num_spec_steps
    acc = RunAccumulator(live=False, window=0)
    for _ in range(2_000):
        acc.add(result)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(20_000):
        acc.add(result)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    # 0.06 bytes a request measured, the timeline 27; the bar leaves room for what another
    # thread of the process allocates meanwhile (tracemalloc counts it too)
    assert grown < 20_000 * 8
    assert acc.request_count == 22_000 and acc.spec_request_count == 22_000


def test_many_requests_keep_exact_totals():
    acc = RunAccumulator(live=True)
    for i in range(2000):
        acc.add(process_capture(nonstream_capture(vllm_payload([i % 5, 1], k=4), start_ns=i * MS)))
        if i % 500 == 0:
            acc.snapshot()
    s = acc.summary()
    # accepted per request = (i % 5) + 1; over 2000 requests: 400 * (1+2+3+4+5) = 6000
    assert s["total_accepted_draft_tokens"]["avg"] == 6000.0
    assert s["total_spec_decode_steps"]["avg"] == 4000.0
    assert s["spec_decode_steps"]["count"] == 2000
    # histogram: j = i%5 once per request (400 each) plus j = 1 once per request (2000)
    assert acc.pooled_histogram_sorted() == {0: 400, 1: 2400, 2: 400, 3: 400, 4: 400}


PEER = Path(__file__).parent / "fixtures" / "aiperf013_peer"


def test_aiperf_013_records_give_aiperf_013_aggregates():
    """AIPerf 0.13's own per-request records -> specmon's accumulator -> AIPerf's numbers."""
    peer = json.loads((PEER / "profile_export_aiperf.json").read_text())
    acc = RunAccumulator(live=False)
    for line in (PEER / "profile_export.jsonl").read_bytes().splitlines():
        acc.add(result_from_record(orjson.loads(line)))
    mine = acc.summary()
    # Run-level throughputs and the duration are left out: AIPerf 0.13 divides by its
    # phase window and takes the duration from its wall clock, neither of which is in the
    # per-request records (specmon uses max response - min request, docs/metrics.md §4).
    window = {
        "benchmark_duration",
        "request_throughput",
        "output_token_throughput",
        "input_token_throughput",
        "total_token_throughput",
    }
    ingest_order = {
        "inter_token_latency",
        "output_token_throughput_per_user",
        "e2e_output_token_throughput",
    }
    exact_tags = [t for t in mine if t not in window | ingest_order]
    assert len([t for t in exact_tags if t.startswith("spec_decode")]) == 8
    assert {
        "time_to_first_token",
        "request_latency",
        "decode_duration",
        "request_count",
        "request_error_rate",
        "total_osl",
    } <= set(exact_tags)
    for tag in exact_tags:
        assert mine[tag] == peer[tag], tag  # every statistic, to the last digit
    # ITL and per-user throughput: identical values, percentiles and std; the running sum
    # follows AIPerf's ingestion order, which its JSONL does not record, so avg/sum may
    # differ in the last bit.
    for tag in ingest_order:
        for key, value in peer[tag].items():
            if key in ("avg", "sum"):
                assert mine[tag][key] == pytest.approx(value, rel=1e-14), (tag, key)
            else:
                assert mine[tag][key] == value, (tag, key)
    assert {str(k): v for k, v in acc.pooled_histogram_sorted().items()} == peer[
        "pooled_spec_decode_acceptance_histogram"
    ]


def test_snapshots_while_another_thread_adds():
    import threading

    acc = RunAccumulator(live=True)
    caps = [nonstream_capture(vllm_payload([i % 4, 1], k=4), start_ns=i * MS) for i in range(3000)]
    results = [process_capture(c) for c in caps]
    errors: list[BaseException] = []

    def adder():
        try:
            for r in results:
                acc.add(r)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=adder)
    thread.start()
    seen = []
    while thread.is_alive():
        snap = acc.snapshot()
        seen.append(snap.request_count)
        if snap.spec_rows:
            # a snapshot is internally consistent: the histogram sums to the step total
            assert (
                sum(snap.pooled_histogram.values()) == snap.spec_rows["total_spec_decode_steps"].avg
            )
            assert snap.spec_rows["spec_decode_steps"].count == snap.request_count
    thread.join()
    assert not errors
    assert seen == sorted(seen)  # never goes backwards
    final = acc.snapshot()
    assert final.request_count == 3000
    # accepted per request = (i % 4) + 1 -> 750 * (1+2+3+4) = 7500
    assert acc.summary()["total_accepted_draft_tokens"]["avg"] == 7500.0
    assert final.spec_rows["spec_decode_steps"].count == 3000


def test_requests_cut_short_by_a_stop_are_not_errors(tmp_path):
    """q / Ctrl-C / SIGTERM cancel what is in flight: those requests stay in the JSONL
    (was_cancelled) and the log, but the server did not fail them, so they are counted
    apart from error_request_count and the error summary."""
    from support.metrics_helpers import error_capture, nonstream_capture

    from specmon.session import RunSession

    session = RunSession(tmp_path, "records")
    session.add(nonstream_capture(WORKED, start_ns=0))
    session.add(error_capture("timeout", start_ns=10))
    session.add(error_capture("cancelled", start_ns=20))
    session.add(error_capture("cancelled", start_ns=30))
    snap = session.accumulator.snapshot()
    assert (snap.request_count, snap.error_count, snap.cancelled_count) == (1, 1, 2)
    assert snap.error_summary == {"timeout": 1}
    session.finish(was_cancelled=True)
    doc = json.loads((tmp_path / "profile_export_aiperf.json").read_text())
    assert doc["error_request_count"]["avg"] == 1 and doc["cancelled_request_count"] == 2
    assert [e["error_details"]["type"] for e in doc["error_summary"]] == ["timeout"]
    lines = (tmp_path / "profile_export.jsonl").read_text().splitlines()
    assert len(lines) == 4
    assert sum(json.loads(line)["metadata"]["was_cancelled"] for line in lines) == 2
