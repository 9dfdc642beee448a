"""`specmon tune` on artifact dirs, JSONL and summary files written by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import specmon

from specmon.cli import main

# A bimodal histogram (a published SPEC-Bench-style run): 13/9/7/6/4/61 over N=100 steps, k=5.
EXAMPLE1 = {"0": 13, "1": 9, "2": 7, "3": 6, "4": 4, "5": 61}


def _summary(hist: dict | None, itl_ms: float | None = None, al: float | None = None) -> dict:
    out: dict = {"schema_version": "1.4", "request_count": {"unit": "requests", "avg": 4}}
    if hist is not None:
        out["pooled_spec_decode_acceptance_histogram"] = hist
        out["total_spec_decode_steps"] = {"unit": "count", "avg": sum(hist.values())}
    if itl_ms is not None:
        out["inter_token_latency"] = {"unit": "ms", "avg": itl_ms, "p50": itl_ms}
    if al is not None:
        out["spec_decode_token_weighted_acceptance_length"] = {"unit": "ratio", "avg": al}
    return out


def _record(hist: dict, k: int | None = 5, phase: str = "profiling") -> dict:
    steps = sum(hist.values())
    accepted = sum(int(j) * n for j, n in hist.items())
    spec = {
        "engine": "vllm",
        "mean_acceptance_length": 1 + accepted / steps if steps else 1.0,
        "draft_acceptance_rate": accepted / (steps * 5) if steps else 0.0,
        "acceptance_histogram": hist,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": steps * 5,
        "num_spec_steps": steps,
    }
    if k is not None:
        spec["num_spec_tokens"] = k
    return {
        "metadata": {"benchmark_phase": phase, "x_request_id": "r"},
        "metrics": {},
        "spec_decode_acceptance": spec,
        "error": None,
    }


# Four requests whose histograms pool to EXAMPLE1: bucket-wise sums 13 9 7 6 4 61.
RECORDS = [
    {"0": 5, "1": 4, "5": 20},
    {"0": 8, "2": 7, "5": 11},
    {"1": 5, "3": 6, "5": 30},
    {"4": 4},
]


def _write_run(path: Path, hist=EXAMPLE1, records=RECORDS, k=5, **summary_kw) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "profile_export_aiperf.json").write_text(json.dumps(_summary(hist, **summary_kw)))
    if records is not None:
        lines = [json.dumps(_record(r, k)) for r in records]
        (path / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    return path


def _run_json(capsys, *argv) -> tuple[object, str]:
    assert main(["tune", *argv, "--json"]) == 0
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def test_dir_json_matches_hand_computation(tmp_path, capsys):
    run = _write_run(tmp_path / "k5")
    rep, err = _run_json(capsys, str(run), "--draft-cost", "0.1")
    assert rep["num_spec_tokens"] == 5 and rep["steps"] == 100 and rep["draft_cost"] == 0.1
    # S = .87 .78 .71 .65 .61 ; a = 87/100, 78/87, 71/78, 65/71, 61/65
    assert [round(p["unconditional"], 2) for p in rep["positions"]] == [
        0.87,
        0.78,
        0.71,
        0.65,
        0.61,
    ]
    assert [round(p["conditional"], 2) for p in rep["positions"]] == [0.87, 0.90, 0.91, 0.92, 0.94]
    assert [p["trials"] for p in rep["positions"]] == [100, 87, 78, 71, 65]
    preds = {p["k"]: p for p in rep["predictions"]}
    assert preds[5]["acceptance_length"] == pytest.approx(4.62)  # 1 + .87+.78+.71+.65+.61
    assert preds[5]["speedup"] == pytest.approx(4.62 / 1.5)  # E(5) / (1 + 0.1*5)
    assert preds[6]["extrapolated"] and not preds[5]["extrapolated"]
    # c = 0.1: E(9)/1.9 = 6.707/1.9 = 3.530 is the largest (E(8)/1.8 = 3.463), but k=9 is
    # beyond the measured 5: the plain answer stays within it (issue 11 item 6): E(5)/1.5 =
    # 3.08 beats 4.01/1.4 = 2.86 -> 5, and 9 is the "extrapolated, measure it" hint
    assert rep["histogram_best_k"] == 9
    assert rep["recommendation"]["extrapolated_k"] == 9
    assert rep["recommendation"]["extrapolated_percent_vs_base"] == pytest.approx(
        100 * (preds[9]["speedup"] / preds[5]["speedup"] - 1)
    )
    # k=9 becomes the answer only when its band's low end, E_low(9) / 1.9, beats E(5) / 1.5
    safe = preds[9]["low"] / 1.9 >= preds[5]["speedup"]
    assert rep["recommended_k"] == (9 if safe else 5) == 5
    assert rep["recommendation"]["basis"] == "histogram only, draft cost given 0.10"
    assert err == ""  # k came from the records: nothing to say


def test_jsonl_pools_profiling_records_only(tmp_path, capsys):
    run = _write_run(tmp_path / "run")
    lines = (run / "profile_export.jsonl").read_text().splitlines()
    # a warmup record and a zero-step record must not change the pooled histogram
    lines.append(json.dumps(_record({"0": 1000}, phase="warmup")))
    lines.append(json.dumps(_record({})))
    lines.append("{not json")
    (run / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    rep, err = _run_json(capsys, str(run / "profile_export.jsonl"))
    assert rep["steps"] == 100 and rep["num_spec_tokens"] == 5
    assert rep["positions"][0]["trials"] == 100
    assert "1 warmup record(s) left out" in err and "1 unreadable line(s)" in err


def test_aiperf_summary_alone_uses_max_key_and_says_so(tmp_path, capsys):
    run = _write_run(tmp_path / "aiperf", records=None)
    rep, err = _run_json(capsys, str(run / "profile_export_aiperf.json"))
    assert rep["num_spec_tokens"] == 5 and "k not recorded" in err
    assert rep["draft_cost"] == 0.1  # the documented default
    assert rep["recommendation"]["draft_cost_assumed"] is True  # and the JSON says so
    assert main(["tune", str(run)]) == 0
    text = capsys.readouterr().out
    assert "note: k not recorded" in text and "assumed; pass --draft-cost" in text


def test_num_spec_tokens_flag_extends_positions(tmp_path, capsys):
    run = _write_run(tmp_path / "aiperf", records=None)
    rep, _ = _run_json(capsys, str(run), "--num-spec-tokens", "7")
    assert rep["num_spec_tokens"] == 7 and len(rep["positions"]) == 7
    # nobody accepted 6 drafts: S_6 = 0/100 and a_6 = 0/61 with n_6 = tail_5 = 61 trials
    assert rep["positions"][5]["unconditional"] == 0.0
    assert rep["positions"][5]["conditional"] == 0.0 and rep["positions"][5]["trials"] == 61
    assert rep["positions"][6]["conditional"] is None and rep["positions"][6]["trials"] == 0


def test_text_output_tables_and_recommendation(tmp_path, capsys):
    run = _write_run(tmp_path / "k5")
    assert main(["tune", str(run), "--draft-cost", "0.1"]) == 0
    text = capsys.readouterr().out
    assert "k = 5, 100 verify steps" in text
    assert "a_i 95% CI" in text and "[0.790, 0.922]" in text  # Wilson of 87/100
    assert "4.620" in text and "measured k" in text and "extrapolated" in text
    assert "histogram-only best k = 9" in text and "batch size" in text
    # one answer, naming its load (unknown here): the measured k=5 (no throughput in this
    # export); k=9 predicted 3.530 / 3.08 = +15% over k=5 is the model's proposal, a
    # second line with its band and the basis
    assert (
        "recommendation for this run at load unknown: measured k=5 (no throughput measured "
        "here)\n" in text
    )
    assert "next: measure k=9, predicted +15% [" in text
    assert "] over measured k=5 (a server at --num-spec-tokens 9) · histogram only, " in text
    assert "draft cost c = 0.100 (--draft-cost)" in text
    assert "\x1b[" not in text  # plain text, no colour codes


def test_draft_cost_fitted_from_runs_at_several_k(tmp_path, capsys):
    # step time = ITL x AL = 10 ms (1 + 0.1 k): k=2 -> 12 ms, k=4 -> 14, k=5 -> 15
    _write_run(
        tmp_path / "multi" / "a_k2",
        hist={"0": 50, "1": 30, "2": 20},
        records=None,
        itl_ms=12 / 1.7,
        al=1.7,
    )
    _write_run(
        tmp_path / "multi" / "b_k4", hist={"0": 40, "4": 60}, records=None, itl_ms=14 / 3.4, al=3.4
    )
    _write_run(tmp_path / "multi" / "c_k5", itl_ms=15 / 4.62, al=4.62)
    reps, err = _run_json(capsys, str(tmp_path / "multi"))
    assert [r["num_spec_tokens"] for r in reps] == [2, 4, 5]
    assert all(r["draft_cost"] == pytest.approx(0.1) for r in reps)
    # one combined answer on every report: c = 0.1 fitted, the k=5 histogram: E(5)/1.5 = 3.08
    # is the best within the measured k (k=9 beyond it only a hint)
    assert {json.dumps(r["recommendation"], sort_keys=True) for r in reps} == {
        json.dumps(reps[0]["recommendation"], sort_keys=True)
    }
    assert [r["recommended_k"] for r in reps] == [5, 5, 5]
    assert reps[0]["recommendation"]["source"] == "across_k"
    assert reps[0]["recommendation"]["extrapolated_k"] == 9
    assert main(["tune", str(tmp_path / "multi")]) == 0
    assert "fitted from step times (ITL x AL) of runs at k = 2, 4, 5" in capsys.readouterr().out


@pytest.mark.parametrize(
    "setup, argv_tail, message",
    [
        ("none", [], "no such file or directory"),
        ("nohist", [], "no pooled_spec_decode_acceptance_histogram"),
        ("run", ["--num-spec-tokens", "4"], "contradicts the records' num_spec_tokens 5"),
        ("aiperf", ["--num-spec-tokens", "3"], "accepted 5 drafts, more than k = 3"),
        ("run", ["--draft-cost", "-1"], "argument --draft-cost: '-1': give a number >= 0"),
        ("empty", [], "no profile_export_aiperf.json here"),
    ],
)
def test_user_errors_are_one_line(tmp_path, capsys, setup, argv_tail, message):
    target = tmp_path / "x"
    if setup == "nohist":
        _write_run(target, hist=None, records=None)
    elif setup == "run":
        _write_run(target)
    elif setup == "aiperf":
        _write_run(target, records=None)
    elif setup == "empty":
        target.mkdir()
    assert main(["tune", str(target), *argv_tail]) == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith("specmon: error:") and err.count("\n") == 1


@pytest.mark.e2e
def test_real_process_exit_status_and_no_traceback(tmp_path):
    proc = specmon("tune", str(tmp_path / "missing"), timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "no such file" in proc.stderr


@pytest.mark.e2e
def test_draft_cost_fitted_from_real_runs_against_the_simulator(tmp_path, capsys, sims):
    """specmon runs against `specmon sim` at k = 1, 3, 5, then `specmon tune` over the three.

    The simulator's step time is step_ms + draft_ms_per_token * k = 40 ms (1 + 0.15 k) at
    batch_slope 0, so c = 6 / 40 = 0.15 (long steps keep scheduling noise on a busy machine
    small beside the 6 ms per drafted token being measured). ITL x AL measures it with some per-step overhead
    added to t0 (which lowers c a little), hence the loose band.
    """

    for k in (1, 3, 5):
        sim = sims(
            [
                "--num-spec-tokens",
                str(k),
                "--seed",
                "1",
                "--acceptance",
                "0.75",
                "--step-ms",
                "40",
                "--draft-ms-per-token",
                "6",
                "--batch-slope",
                "0",
            ]
        )
        proc = specmon(
            "--url", sim.url, "--headless", "--request-count", "8", "--concurrency", "4",
            "--streaming", "--output-tokens-mean", "64", "--artifact-dir",
            str(tmp_path / f"k{k}"), timeout=180,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
    reps, _ = _run_json(capsys, str(tmp_path))
    assert [r["num_spec_tokens"] for r in reps] == [1, 3, 5]  # k from specmon's own records
    assert 0.10 <= reps[0]["draft_cost"] <= 0.20
    # the acceptance the simulator was given (0.75 at every position) comes back flat
    for rep in reps:
        assert rep["flat_alpha"] == pytest.approx(0.75, abs=0.08)


@pytest.mark.e2e
def test_server_url_tunes_from_its_counters(capsys, sims):
    """`specmon tune URL` on a 2-engine simulator that served only our requests."""
    import httpx

    hist = [0, 0, 0, 0]
    sim = sims(["--engines", "2", "--num-spec-tokens", "3", "--seed", "3"])
    for i in range(6):
        body = {
            "model": sim.model,
            "max_tokens": 24,
            "messages": [{"role": "user", "content": f"p{i}"}],
        }
        spec = httpx.post(sim.url + "/v1/chat/completions", json=body, timeout=10).json()[
            "metrics"
        ]["speculative_decoding"]
        hist = [a + b for a, b in zip(hist, spec["acceptance_histogram"])]
    rep, err = _run_json(capsys, sim.url)
    assert main(["tune", sim.url, "--num-spec-tokens", "5"]) == 2
    assert "contradicts the server's 3 per-position counters" in capsys.readouterr().err
    # the histogram derived from the counters equals the sum of the payloads' histograms
    steps = sum(hist)
    assert rep["num_spec_tokens"] == 3 and rep["steps"] == steps
    tail = [sum(hist[i:]) for i in range(4)]  # tail_i = sum_{j>=i} h_j
    assert [p["trials"] for p in rep["positions"]] == tail[:3]
    assert rep["positions"][0]["unconditional"] == pytest.approx(tail[1] / steps)
    assert "server-wide counters since the server started (2 engine" in err


def _segment_row(seg: int, conc: int, hist: dict, tpot: float, requests: int = 20) -> dict:
    steps = sum(hist.values())
    accepted = sum(int(j) * n for j, n in hist.items())
    return {
        "segment": seg, "settings": {"concurrency": conc}, "request_count": requests,
        "error_count": 0, "num_spec_tokens": 4, "steps": steps, "accepted": accepted,
        "histogram": hist, "acceptance_length": 1 + accepted / steps, "tpot_ms": tpot,
        "output_token_throughput": None,
    }  # fmt: skip


def test_specmons_own_concurrency_key_names_the_load(tmp_path, capsys):
    # specmon writes input_config.concurrency (AIPerf: input_config.loadgen.concurrency)
    run = _write_run(tmp_path / "k5", itl_ms=2.0, al=4.62)
    summary = json.loads((run / "profile_export_aiperf.json").read_text())
    summary["input_config"] = {"concurrency": 4}
    (run / "profile_export_aiperf.json").write_text(json.dumps(summary))
    rep, _ = _run_json(capsys, str(run))
    assert rep["recommendation"]["concurrency"] == 4
    assert [r["concurrency"] for r in rep["recommendations"]] == [4]
    summary["input_config"] = {"loadgen": {"concurrency": 8}}  # AIPerf's key still works
    (run / "profile_export_aiperf.json").write_text(json.dumps(summary))
    assert _run_json(capsys, str(run))[0]["recommendation"]["concurrency"] == 8


def test_a_segmented_run_is_answered_per_load_from_its_segments(tmp_path, capsys):
    # one run at k=4 over concurrency 1 and 64: the step time (TPOT x AL) grows steeply with
    # load (10 ms at 1, 10 + 0.2 x 63 x 5 = 73 ms at 64), so k falls with load
    hist = {"0": 20, "1": 20, "2": 20, "3": 20, "4": 20}  # AL 3.0
    run = _write_run(tmp_path / "seg", hist=hist, records=None, k=4, itl_ms=5.0, al=3.0)
    summary = json.loads((run / "profile_export_aiperf.json").read_text())
    summary["segments"] = [_segment_row(0, 1, hist, 10.0 / 3), _segment_row(1, 64, hist, 73 / 3)]
    (run / "profile_export_aiperf.json").write_text(json.dumps(summary))
    rep, _ = _run_json(capsys, str(run), "--num-spec-tokens", "4")
    by_load = {r["concurrency"]: r for r in rep["recommendations"]}
    assert sorted(by_load) == [1, 64]
    assert all(r["source"] == "segments" for r in by_load.values())
    # the answer is the measured k=4 at both loads; the model's own pick falls with load
    assert [r["recommended_k"] for r in by_load.values()] == [4, 4]
    assert by_load[64]["model_k"] < by_load[1]["model_k"]
    assert main(["tune", str(run), "--num-spec-tokens", "4"]) == 0
    text = capsys.readouterr().out
    assert "recommendation for this run at concurrency 1: measured k=4" in text
    assert "recommendation for this run at concurrency 64: measured k=4" in text
