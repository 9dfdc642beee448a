"""Load segments (specmon/analysis/segments.py) on hand-built results, and the config / MultiRun rules
for several servers and scripted segments. Expected numbers are worked by hand below."""

from __future__ import annotations

import argparse

import pytest
from support.metrics_helpers import spec_record
from support.segments_oracle import segment_table

from specmon.analysis.segments import recommended_by_segment, render_segment_table
from specmon.config import RunConfig, add_run_arguments, build_config
from specmon.errors import UserError
from specmon.pipeline import RequestResult, SpecOutcome
from specmon.run.multi import MultiRun, folder_name
from specmon.segment_plan import SegmentLog, format_segments, parse_segments, split_plan
from specmon.session import RunSession

S = 1_000_000_000


def result(
    segment,
    start_s,
    end_s,
    *,
    hist=None,
    k=2,
    itl=None,
    osl=10,
    error=None,
    phase="profiling",
    server=None,
):
    values: dict[str, float] = {"output_sequence_length": osl}
    if itl is not None:
        values["inter_token_latency"] = itl * 1e6  # stored in ns, given in ms
    return RequestResult(
        capture=None,
        outcome=SpecOutcome(record=spec_record(hist, k) if hist else None),
        values=values,
        error=error,
        phase=phase,
        segment=segment,
        server=server,
        start_ns=int(start_s * S),
        end_ns=int(end_s * S),
    )


# ------------------------------------------------------------------ parsing the script


def test_parse_segments_single_key_and_paired_keys():
    assert parse_segments("concurrency=1,4,16") == [
        {"concurrency": 1},
        {"concurrency": 4},
        {"concurrency": 16},
    ]
    plan = parse_segments("concurrency=2,8; output-tokens=64; request_rate=0.5,2")
    assert plan == [
        {"concurrency": 2, "output_tokens": 64, "request_rate": 0.5},
        {"concurrency": 8, "output_tokens": 64, "request_rate": 2.0},
    ]
    assert parse_segments(format_segments(plan)) == plan


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "empty"),
        ("speed=1,2", "is not KEY=V1,V2"),
        ("concurrency=1,x", "'x' is not a whole number"),
        ("concurrency=0,4", "must be positive"),
        ("concurrency=1,2;output_tokens=8,16,32", "different numbers of values"),
        ("concurrency=", "lists no values"),
    ],
)
def test_parse_segments_rejects_bad_specs_in_one_line(text, fragment):
    with pytest.raises(ValueError) as exc:
        parse_segments(text)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_split_plan_divides_concurrency_and_rate():
    plan = [{"concurrency": 10, "request_rate": 6.0}, {"concurrency": 2}]
    # 10 over 3 -> 4, 3, 3; 6/s over 3 -> 2/s; 2 over 3 -> 1, 1, 0 -> at least 1
    assert [split_plan(plan, 3, i)[0]["concurrency"] for i in range(3)] == [4, 3, 3]
    assert split_plan(plan, 3, 1)[0]["request_rate"] == 2.0
    assert [split_plan(plan, 3, i)[1]["concurrency"] for i in range(3)] == [1, 1, 1]


def test_segment_log_starts_a_segment_only_on_a_real_change():
    log = SegmentLog(4, None, 128)
    assert log.change(concurrency=4) is None  # same value: no new segment
    assert log.change(concurrency=16) == 1
    assert log.change(output_tokens=64) == 2
    assert log.settings() == {
        0: {"concurrency": 4, "request_rate": None, "output_tokens": 128},
        1: {"concurrency": 16, "request_rate": None, "output_tokens": 128},
        2: {"concurrency": 16, "request_rate": None, "output_tokens": 64},
    }


# ------------------------------------------------------------------ the table


def test_segment_row_figures_by_hand():
    results = [
        # segment 0 (None counts as 0): one request, 1 s window
        result(None, 0.0, 1.0, hist={0: 1, 1: 1, 2: 2}, itl=4.0, osl=12),
        # segment 1: two valid requests, one error, one warmup (left out)
        result(1, 1.0, 3.0, hist={0: 2, 2: 2}, itl=5.0, osl=10),
        result(1, 2.0, 5.0, hist={1: 4}, itl=7.0, osl=30),
        result(1, 2.5, 9.0, error={"type": "timeout"}),
        result(1, 0.0, 20.0, hist={2: 9}, phase="warmup"),
    ]
    rows = segment_table(results, settings={1: {"concurrency": 8}})
    assert [r["segment"] for r in rows] == [0, 1]
    seg0, seg1 = rows
    # seg 0: steps 4, accepted 0+1+4 = 5 -> AL 1 + 5/4 = 2.25; 12 tokens / 1 s
    assert seg0["acceptance_length"] == pytest.approx(2.25)
    assert seg0["output_token_throughput"] == pytest.approx(12.0)
    # seg 1: steps 4 + 4 = 8, accepted (0 + 4) + 4 = 8 -> AL 2.0; TPOT (5 + 7) / 2 = 6 ms;
    # window 1 s .. 5 s = 4 s (the error is not valid) -> 40 tokens / 4 s, 2 requests / 4 s
    assert (seg1["steps"], seg1["accepted"], seg1["drafted"]) == (8, 8, 16)
    assert seg1["acceptance_length"] == pytest.approx(2.0)
    assert seg1["tpot_ms"] == pytest.approx(6.0)
    assert seg1["duration_s"] == pytest.approx(4.0)
    assert seg1["output_token_throughput"] == pytest.approx(10.0)
    assert seg1["request_throughput"] == pytest.approx(0.5)
    assert (seg1["request_count"], seg1["error_count"]) == (2, 1)
    assert seg1["histogram"] == {"0": 2, "1": 4, "2": 2}
    assert seg1["settings"] == {"concurrency": 8}
    # health gates (issue 17): segment 1 failed 1 of 3 requests (33% > 1%): excluded and
    # named; the answer rests on segment 0 alone (S_1 = 3/4, S_2 = 2/4 -> E = 1.75, 2.25;
    # 1.75/1.1 = 1.591 < 2.25/1.2 = 1.875 -> k = 2)
    assert seg1["flags"] == ["(k=2 at concurrency 8) excluded: error rate 33.3% > 1% "
                             "(1 of 3 requests failed)"]  # fmt: skip
    assert seg1["recommended_k"] == seg0["recommended_k"] == 2
    assert seg1["predicted_gain_vs_k0"]["2"] == pytest.approx(2.25 / 1.2)
    table = render_segment_table(rows)
    assert "Segments" in table and "conc=8" in table
    assert "health: (k=2 at concurrency 8) excluded: error rate 33.3% > 1%" in table
    # without the error: no draft cost, one k, no load known: the histogram with the
    # assumed c = 0.10, said so (issue 11: never a silent default). Pooled over both
    # segments: h = 2/4/2 + seg 0's 1/1/2 = 3/5/4 -> S_1 = 9/12, S_2 = 4/12 -> E = 1.75,
    # 2.083; 1.75/1.1 = 1.591 < 2.083/1.2 = 1.736 -> k = 2
    healthy = segment_table(
        [r for r in results if r.error is None], settings={1: {"concurrency": 8}}
    )
    assert healthy[1]["recommended_k"] == 2 and not healthy[1]["flags"]
    assert healthy[1]["predicted_gain_vs_k0"]["2"] == pytest.approx((1 + 9 / 12 + 4 / 12) / 1.2)
    assert healthy[1]["basis"] == "histogram only, draft cost assumed 0.10"


def test_recommended_k_from_a_given_draft_cost():
    # k=4, h = 40/30/20/10/0 of 100 steps: S = .6 .3 .1 0 -> E(1..4) = 1.6 1.9 2.0 2.0,
    # a_4 = 0 so E stays 2.0 beyond. c = 0.2: speedups 1.6/1.2 = 1.333, 1.9/1.4 = 1.357,
    # 2.0/1.6 = 1.25, 2.0/1.8 = 1.11 -> k = 2.
    rows = segment_table(
        [result(0, 0, 1, hist={0: 40, 1: 30, 2: 20, 3: 10}, k=4, itl=9.0)], draft_cost=0.2
    )
    # the answer is the measured k=4; the model's k=2 is its proposal
    assert rows[0]["recommended_k"] == 4 and rows[0]["proposal"]["k"] == 2
    assert rows[0]["recommended_from"] == "histogram"


def test_recommended_k_across_servers_fits_the_draft_cost_from_step_times():
    # Server b (k=4): h = 40/30/20/10/0 -> AL = 1 + 100/100 = 2.0; TPOT 9 ms -> step 18 ms.
    # Server a (k=2): h = 50/25/25 -> AL = 1 + 75/100 = 1.75; TPOT 8 ms -> step 14 ms.
    # Line through (2, 14), (4, 18): slope 2, intercept 10 -> c = 2 / 10 = 0.2; from b's
    # histogram (the widest k) the speedups above give k = 2.
    results = {
        "a": [result(0, 0, 1, hist={0: 50, 1: 25, 2: 25}, k=2, itl=8.0, server="a")],
        "b": [result(0, 0, 1, hist={0: 40, 1: 30, 2: 20, 3: 10}, k=4, itl=9.0, server="b")],
    }
    rows = segment_table(results)
    assert [r["server"] for r in rows] == ["a", "b"]
    for row in rows:
        assert row["recommended_k"] == 2
        assert row["draft_cost"] == pytest.approx(0.2)
        assert row["recommended_from"] == "across_k"
        assert row["basis"] == "measured at k=2,4, step time t0(1+c k) fitted, c=0.200"
    assert recommended_by_segment(rows) == {0: 2}
    # split load: no fit across the servers; each row is its own histogram at the assumed
    # c = 0.10 (server a, k=2: S = .5 .25 -> 1.5/1.1 = 1.364 < 1.75/1.2 = 1.458 -> k = 2)
    alone = segment_table(results, across_servers=False)
    assert alone[0]["recommended_from"] == "histogram" and alone[0]["recommended_k"] == 2


# ------------------------------------------------------------------ config and MultiRun rules


def config_from(argv: list[str]) -> RunConfig:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return build_config(parser.parse_args(argv), environ={})


@pytest.mark.e2e
@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--split", "--mirror"], "exclude each other"),
        (["--segments", "concurrency=1,4"], "exactly one of --segment-duration"),
        (
            ["--segments", "concurrency=1,4", "--segment-requests", "5", "--request-count", "9"],
            "drop --request-count",
        ),
        (["--segments", "speed=1", "--segment-requests", "5"], "is not KEY=V1,V2"),
        (["--segment-requests", "5"], "need --segments"),
        (
            ["--segments", "concurrency=1", "--segment-requests", "5", "--workers", "2"],
            "drop --workers",
        ),
    ],
)
def test_config_rejects_inconsistent_multi_and_segment_flags(argv, fragment):
    with pytest.raises(UserError) as exc:
        config_from(["--url", "http://127.0.0.1:1", *argv])
    assert fragment in str(exc.value)


def build_multi(argv: list[str], tmp_path) -> MultiRun:
    config = config_from(
        [*argv, "--artifact-dir", str(tmp_path), "--random-seed", "7", "--no-server-metrics"]
    )
    config.model = "m"
    return MultiRun(
        config,
        lambda cfg: RunSession(None, "summary", live=False),
        lambda cfg, session: cfg,
        detect=lambda *a: None,
    )


def test_multirun_shares_labels_folders_and_seeds(tmp_path):
    urls = ["--url", "a=http://127.0.0.1:1", "--url", "http://127.0.0.1:2/"]
    split = build_multi([*urls, "--split", "--concurrency", "5", "--request-count", "9"], tmp_path)
    assert list(split.servers) == ["a", "127.0.0.1:2"]
    configs = [run.config for run in split.runs]
    assert [c.concurrency for c in configs] == [3, 2]  # 5 over 2
    assert [c.request_count for c in configs] == [5, 4]  # 9 over 2
    assert [c.random_seed for c in configs] == [7, 8]  # own prompt streams
    assert configs[1].artifact_dir == str(tmp_path / "127.0.0.1:2")
    mirror = build_multi([*urls, "--mirror", "--concurrency", "5"], tmp_path)
    assert [run.config.random_seed for run in mirror.runs] == [7, 7]  # same prompts
    assert [run.config.concurrency for run in mirror.runs] == [5, 5]
    single = build_multi(["--url", "http://127.0.0.1:1"], tmp_path)
    assert single.mode == "single" and single.runs[0].config.artifact_dir == str(tmp_path)
    assert folder_name("gpu 0/b") == "gpu_0_b"


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--url", "http://127.0.0.1:1", "--url", "http://127.0.0.1:1"], "share the label"),
        (
            [
                "--url",
                "http://127.0.0.1:1",
                "--url",
                "http://127.0.0.1:2",
                "--url",
                "http://127.0.0.1:3",
                "--split",
                "--concurrency",
                "2",
            ],
            "concurrency 2 is less than the 3 servers",
        ),
        (
            [
                "--url",
                "http://127.0.0.1:1",
                "--url",
                "http://127.0.0.1:2",
                "--split",
                "--concurrency",
                "2",
                "--request-count",
                "1",
            ],
            "1 requests cannot be shared",
        ),
    ],
)
def test_multirun_user_errors(argv, fragment, tmp_path):
    with pytest.raises(UserError) as exc:
        build_multi(argv, tmp_path)
    assert fragment in str(exc.value)


def test_a_segment_decides_under_the_slo_with_its_own_percentiles():
    from specmon.analysis.segments import SegmentTable
    from specmon.decision.slo import parse_slo

    # 5 requests at k=2, each {0: 1, 1: 1, 2: 2}: pooled S_1 = 15/20, S_2 = 10/20 -> E(1) =
    # 1.75, E(2) = 2.25, a_2 = 2/3 carried: E(3) = 2.5833, E(4) = 2.8056. With c = 0.3:
    # E/(1 + 0.3 k') = 1, 1.346, 1.406, 1.360, 1.275: k=2
    results = [
        result(0, i, i + 1, hist={0: 1, 1: 1, 2: 2}, k=2, itl=itl)
        for i, itl in enumerate((10.0, 20.0, 30.0, 40.0, 50.0))
    ]
    settings = {0: {"concurrency": 4}}

    def row(slo: str) -> dict:
        table = SegmentTable(draft_cost=0.3, slo=parse_slo(slo))
        table.update(None, results)
        (only,) = table.rows(settings)
        return only

    # TPOT percentiles by linear interpolation over 10..50: p90 at 0.9 x 4 = 3.6 -> 46,
    # p50 -> 30, p95 (3.8) -> 48, p99 (3.96) -> 49.6; no TTFT in these results
    met = row("tpot=50")
    assert met["latency_percentiles"] == {
        "tpot_ms": {"p50": 30.0, "p90": pytest.approx(46.0), "p95": pytest.approx(48.0),
                    "p99": pytest.approx(49.6)}
    }  # fmt: skip
    assert met["recommended_k"] == 2
    # five requests, fewer than the 40 blocks: each its own block (P(best) resamples them)
    assert met["request_blocks"] == [{"0": 1, "1": 1, "2": 2}] * 5
    assert met["basis"] == (
        "histogram only, draft cost given 0.30 · SLO TPOT p90 <= 50 ms "
        "(TPOT p90 46.0 ms predicted at k=2)"
    )
    # 45 ms: k=2 (the fastest k', so the lowest TPOT) measured 46: none, and why
    missed = row("tpot=45")
    assert missed["recommended_k"] is None
    assert missed["recommendation"] == (
        "no recommendation: no k meets the SLO (TPOT p90 <= 45 ms): measured at k=2: "
        "TPOT p90 46.0 ms > 45 ms"
    )
    # without an SLO the live rows skip the sort: no percentiles
    plain = SegmentTable(draft_cost=0.3)
    plain.update(None, results)
    assert plain.rows(settings)[0]["latency_percentiles"] == {}
