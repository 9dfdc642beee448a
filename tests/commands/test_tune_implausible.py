"""One bad record never disqualifies a run from `tune` or `compare` (issue 35 item 7), and
a line nested past the parser's stack is one unreadable line, not a RecursionError."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specmon.cli import main

RUN_RECORDS = 500
HIST = {"0": 4, "1": 3, "3": 3}  # 10 steps, 3 + 9 = 12 accepted, k 3: 30 drafts


def _record(k: int, drafted: int = 30) -> dict:
    return {
        "metadata": {"benchmark_phase": "profiling", "x_request_id": "r"},
        "metrics": {},
        "spec_decode_acceptance": {
            "engine": "vllm",
            "mean_acceptance_length": 1 + 12 / 10,
            "draft_acceptance_rate": 12 / drafted,
            "acceptance_histogram": HIST,
            "num_accepted_draft_tokens": 12,
            "num_draft_tokens": drafted,
            "num_spec_steps": 10,
            "num_spec_tokens": k,
        },
        "error": None,
    }


def _run_dir(path: Path, extra: list[str]) -> Path:
    path.mkdir(parents=True)
    lines = [json.dumps(_record(3)) for _ in range(RUN_RECORDS)] + extra
    (path / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    return path


def test_tune_leaves_out_a_record_claiming_k_2_63_minus_1_and_says_so(tmp_path, capsys):
    hostile = json.dumps(_record(2**63 - 1))  # its own counts are a k=3 request's
    too_many = json.dumps(_record(3, drafted=31))  # 31 drafts in 10 steps at k 3 (max 30)
    run = _run_dir(tmp_path / "run", [hostile, too_many])
    assert main(["tune", str(run / "profile_export.jsonl"), "--json"]) == 0
    out = capsys.readouterr()
    rep = json.loads(out.out)
    assert rep["num_spec_tokens"] == 3
    # 500 good records pooled: 10 steps each; the two bad ones add nothing
    assert rep["steps"] == RUN_RECORDS * 10
    assert "2 record(s) with an implausible num_spec_tokens left out" in out.err
    assert "exceeds the maximum" in out.err


@pytest.mark.e2e
def test_tune_on_a_100000_deep_line_is_one_line(tmp_path):
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "specmon", "tune", str(deep)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("specmon: error:")


def test_a_deep_line_inside_a_run_is_one_unreadable_line(tmp_path, capsys):
    run = _run_dir(tmp_path / "run", ["[" * 100_000 + "]" * 100_000])
    assert main(["tune", str(run / "profile_export.jsonl"), "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["steps"] == RUN_RECORDS * 10
    assert "1 unreadable line(s)" in out.err


def test_compare_takes_a_run_with_one_implausible_record(tmp_path, capsys):
    summary = {
        "spec_decode_acceptance_length": {"unit": "ratio", "avg": 2.2},
        "request_count": {"unit": "requests", "avg": RUN_RECORDS},
    }
    runs = []
    for name, extra in (("a", [json.dumps(_record(2**63 - 1))]), ("b", [])):
        run = _run_dir(tmp_path / name, extra)
        (run / "profile_export_aiperf.json").write_text(json.dumps(summary))
        runs.append(str(run))
    assert main(["compare", *runs, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["num_spec_tokens"] for r in doc["runs"]] == [3, 3]
