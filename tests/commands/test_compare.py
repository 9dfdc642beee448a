"""`specmon compare` on artifact dirs written by hand; the multi-server summary table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specmon.analysis.compare import render_server_comparison
from specmon.cli import main


def _stats(unit: str, **values) -> dict:
    return {"unit": unit, **values}


SUMMARY_A = {
    "spec_decode_acceptance_length": _stats("ratio", avg=3.0, p50=3.0),
    "spec_decode_token_weighted_acceptance_length": _stats("ratio", avg=3.2),
    "spec_decode_draft_acceptance_rate": _stats("%", avg=50.0),
    "total_spec_decode_steps": _stats("count", avg=100),
    "time_to_first_token": _stats("ms", avg=110.0, p50=100.0, p90=150.0, p99=200.0),
    "inter_token_latency": _stats("ms", avg=10.0, p50=10.0, p90=12.0, p99=15.0),
    "request_latency": _stats("ms", avg=1000.0, p50=1000.0, p90=1200.0, p99=1500.0),
    "output_token_throughput": _stats("tokens/sec", avg=500.0),
    "request_throughput": _stats("requests/sec", avg=2.0),
    "request_count": _stats("requests", avg=100),
    "pooled_spec_decode_acceptance_histogram": {"0": 20, "1": 30, "2": 50},
}
SUMMARY_B = {
    "spec_decode_acceptance_length": _stats("ratio", avg=3.6, p50=3.5),
    "spec_decode_token_weighted_acceptance_length": _stats("ratio", avg=3.5),
    "spec_decode_draft_acceptance_rate": _stats("%", avg=40.0),
    "total_spec_decode_steps": _stats("count", avg=100),
    "time_to_first_token": _stats("ms", avg=130.0, p50=120.0, p90=150.0, p99=260.0),
    "inter_token_latency": _stats("ms", avg=8.0, p50=8.0, p90=9.0, p99=12.0),
    "request_latency": _stats("ms", avg=900.0, p50=900.0, p90=1100.0, p99=1400.0),
    "output_token_throughput": _stats("tokens/sec", avg=600.0),
    "request_throughput": _stats("requests/sec", avg=2.4),
    "request_count": _stats("requests", avg=100),
    "pooled_spec_decode_acceptance_histogram": {"0": 10, "1": 20, "2": 30, "3": 40},
}
# An AIPerf run without spec decode: no spec keys at all, no JSONL.
SUMMARY_PLAIN = {
    "time_to_first_token": _stats("ms", avg=90.0, p50=80.0, p90=100.0, p99=120.0),
    "output_token_throughput": _stats("tokens/sec", avg=250.0),
}


def _write(path: Path, summary: dict, k: int | None = None) -> Path:
    path.mkdir(parents=True)
    (path / "profile_export_aiperf.json").write_text(json.dumps(summary))
    if k is not None:
        rec = {
            "metadata": {"benchmark_phase": "profiling"},
            "metrics": {},
            "spec_decode_acceptance": {
                "acceptance_histogram": {"0": 1},
                "num_spec_steps": 1,
                "num_spec_tokens": k,
            },
        }
        (path / "profile_export.jsonl").write_text(json.dumps(rec) + "\n")
    return path


@pytest.fixture
def runs(tmp_path):
    return (
        _write(tmp_path / "k2", SUMMARY_A, k=2),
        _write(tmp_path / "k3", SUMMARY_B, k=3),
        _write(tmp_path / "plain", SUMMARY_PLAIN),
    )


def _metric(report: dict, tag: str, stat: str) -> dict:
    return next(m for m in report["metrics"] if m["tag"] == tag and m["stat"] == stat)


def test_json_values_and_deltas_against_first(runs, capsys):
    assert main(["compare", *map(str, runs), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert [r["label"] for r in rep["runs"]] == ["k2", "k3", "plain"]
    assert [r["num_spec_tokens"] for r in rep["runs"]] == [2, 3, None]
    al = _metric(rep, "spec_decode_acceptance_length", "avg")
    # 3.6 - 3.0 = +0.6 ; 0.6 / 3.0 = +20 %
    assert al["values"] == [3.0, 3.6, None]
    assert al["deltas"][1] == pytest.approx(0.6) and al["delta_pct"][1] == pytest.approx(20.0)
    assert al["deltas"][2] is None
    ttft = _metric(rep, "time_to_first_token", "p99")
    # 260 - 200 = +60 ms (+30 %) ; 120 - 200 = -80 ms (-40 %)
    assert ttft["deltas"][1:] == [pytest.approx(60.0), pytest.approx(-80.0)]
    assert ttft["delta_pct"][1:] == [pytest.approx(30.0), pytest.approx(-40.0)]
    thr = _metric(rep, "output_token_throughput", "avg")
    assert thr["values"] == [500.0, 600.0, 250.0] and thr["delta_pct"][2] == pytest.approx(-50.0)
    # histogram shares: A = 20/30/50 %, B = 10/20/30/40 % ; deltas in percentage points
    h0 = _metric(rep, "pooled_spec_decode_acceptance_histogram", "0")
    h3 = _metric(rep, "pooled_spec_decode_acceptance_histogram", "3")
    assert h0["values"] == [20.0, 10.0, None] and h0["deltas"][1] == pytest.approx(-10.0)
    assert h3["values"] == [0.0, 40.0, None] and h3["deltas"][1] == pytest.approx(40.0)
    assert h0["delta_unit"] == "pp" and h0["delta_pct"] is None
    k = _metric(rep, "num_spec_tokens", "")
    assert k["values"] == [2.0, 3.0, None]


def test_text_table_is_plain_and_shows_sections(runs, capsys):
    assert main(["compare", str(runs[0]), str(runs[1])]) == 0
    text = capsys.readouterr().out
    assert "\x1b[" not in text
    for section in ("[spec decode]", "[latency]", "[throughput]", "[histogram]"):
        assert section in text
    al_line = next(line for line in text.splitlines() if line.startswith("Acceptance Length"))
    assert "3.00" in al_line and "3.60" in al_line and "+0.60" in al_line and "+20.00%" in al_line
    h0_line = next(line for line in text.splitlines() if line.startswith("accepted 0"))
    assert "-10.00 pp" in h0_line
    assert "baseline: k2" in text


def test_parent_dir_expands_to_per_server_subfolders(tmp_path, capsys):
    _write(tmp_path / "run" / "a", SUMMARY_A, k=2)
    _write(tmp_path / "run" / "b", SUMMARY_B, k=3)
    assert main(["compare", str(tmp_path / "run"), "--json"]) == 0
    assert [r["label"] for r in json.loads(capsys.readouterr().out)["runs"]] == ["a", "b"]


def test_duplicate_names_get_distinct_labels(tmp_path, capsys):
    _write(tmp_path / "x" / "run", SUMMARY_A)
    _write(tmp_path / "y" / "run", SUMMARY_B)
    assert (
        main(["compare", str(tmp_path / "x" / "run"), str(tmp_path / "y" / "run"), "--json"]) == 0
    )
    labels = [r["label"] for r in json.loads(capsys.readouterr().out)["runs"]]
    assert len(set(labels)) == 2


@pytest.mark.parametrize(
    "case, message",
    [
        ("one", "at least two runs"),
        ("missing", "no such file or directory"),
        ("nosummary", "no profile_export_aiperf.json here"),
        ("badjson", "not a readable JSON file"),
        ("mixedk", "records mix num_spec_tokens 2, 5"),
    ],
)
def test_user_errors(tmp_path, capsys, case, message):
    good = _write(tmp_path / "good", SUMMARY_A)
    other = tmp_path / "other"
    if case == "nosummary":
        other.mkdir()
    elif case == "badjson":
        other.mkdir()
        (other / "profile_export_aiperf.json").write_text("{oops")
    elif case == "mixedk":
        _write(other, SUMMARY_B, k=2)
        rec = {"spec_decode_acceptance": {"acceptance_histogram": {}, "num_spec_tokens": 5}}
        with (other / "profile_export.jsonl").open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
    argv = ["compare", str(good)] + ([] if case == "one" else [str(other)])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_render_server_comparison_for_multi_server_runs():
    text = render_server_comparison({"k2": SUMMARY_A, "k3": SUMMARY_B}, {"k2": 2, "k3": 3})
    header = text.splitlines()[0]
    assert "k2" in header and "k3" in header
    k_line = next(line for line in text.splitlines() if line.startswith("k (num_spec_tokens)"))
    assert k_line.split()[2:6] == ["2", "3", "+1", "+50.00%"]  # whole numbers; 1/2 = +50 %
    assert render_server_comparison({}) == "no servers to compare"
