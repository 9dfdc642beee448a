"""One k for the same data on every surface (issue 11 item 4, issue 17 item 1): the TUI's
what-if panel (its view function), the live segments table, the advice printed at the end
of the headless run, `specmon tune` (text and --json) and `specmon compare` over the
exported run all answer through specmon.decision: the same k, basis words and numbers
(the whole answer text, P(best) and gains included).

The data is a real run: `specmon demo` with two simulators (k=2 and k=4) under the same load,
whose step time grows with k (--draft-ms-per-token), so the answer rests on the across-k
fit of the draft cost (docs/tuning.md "Choosing k"), not on an assumed one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from specmon.analysis.segments import SegmentTable
from specmon.export.jsonl_export import result_from_record
from specmon.tui.tuning_view import what_if

LABELS = ("k2", "k4")


def _run_demo(out: Path, ks: str = "2,4") -> str:
    cmd = [
        sys.executable, "-m", "specmon", "demo", "--num-spec-tokens", ks, "--headless",
        "--request-count", "16", "--concurrency", "2", "--streaming", "--step-ms", "5",
        "--draft-ms-per-token", "1", "--acceptance", "0.8", "--output-tokens-mean", "48",
        "--artifact-dir", str(out),
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _results(run_dir: Path) -> list:
    lines = (run_dir / "profile_export.jsonl").read_bytes().splitlines()
    return [result_from_record(orjson.loads(line)) for line in lines if line.strip()]


def _pooled(results: list) -> dict[int, int]:
    hist: dict[int, int] = {}
    for r in results:
        if r.spec is not None and r.phase == "profiling":
            for j, n in r.spec.acceptance_histogram.items():
                hist[int(j)] = hist.get(int(j), 0) + int(n)
    return hist


@pytest.mark.e2e
def test_whatif_segments_and_tune_give_one_k(tmp_path):
    out = tmp_path / "run"
    printed = _run_demo(out)
    by_label = {label: _results(out / label) for label in LABELS}
    # the segment settings as the run recorded them (one segment: concurrency 2 per server)
    settings = {}
    for label in LABELS:
        summary = json.loads((out / label / "profile_export_aiperf.json").read_text())
        settings[label] = {row["segment"]: row["settings"] for row in summary["segments"]}
        assert settings[label][0]["concurrency"] == 2

    # 1. the live segments table (the table MultiRun keeps), no --draft-cost
    table = SegmentTable(draft_cost=None)
    for label, results in by_label.items():
        table.update(label, results)
    rows = table.rows(settings)
    assert len(rows) == 2 and len({r["recommended_k"] for r in rows}) == 1
    seg_k, seg_basis = rows[0]["recommended_k"], rows[0]["basis"]

    # 2. the what-if panel's view function for each server, over the same rows
    whatifs = {
        label: what_if(_pooled(rs), int(label[1:]), None, rows, label)
        for label, rs in by_label.items()
    }

    # 3. `specmon tune --json` over the exported run (both per-server folders)
    done = subprocess.run(
        [sys.executable, "-m", "specmon", "tune", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    reports = json.loads(done.stdout)
    tune_ks = {r["recommended_k"] for r in reports}
    tune_bases = {r["recommendation"]["basis"] for r in reports}

    # the step time grows with k here, so the basis is the across-k fit, said in words
    assert seg_basis.startswith("measured at k=2,4, step time t0(1+c k) fitted, c=")
    assert seg_k is not None and 0 <= seg_k <= 4
    assert tune_ks == {seg_k} and tune_bases == {seg_basis}
    for label, w in whatifs.items():
        assert w is not None, label
        assert w.k == seg_k, label
        assert seg_basis in w.text, label

    # the whole answer, word for word and number for number, on every surface
    answer = rows[0]["recommendation"]
    assert rows[1]["recommendation"] == answer and "P(best)=" in answer
    assert all(w is not None and w.text == answer for w in whatifs.values())
    # the end of the headless run (settings text: conc=2 osl=48)
    assert "advice (segment 0, conc=2" in printed and f"): {answer}\n" in printed
    assert {r["recommendation"]["text"] for r in reports} == {answer}
    assert {r["recommendation"]["concurrency"] for r in reports} == {2}
    said = f"over 2 runs at concurrency 2: {answer}"
    text = subprocess.run(
        [sys.executable, "-m", "specmon", "tune", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert text.returncode == 0 and said in text.stdout, text.stdout[-1500:]
    compared = subprocess.run(
        [sys.executable, "-m", "specmon", "compare", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert compared.returncode == 0 and said in compared.stdout, compared.stdout[-1500:]


@pytest.mark.e2e
def test_one_server_gives_one_k_with_its_stated_assumption(tmp_path):
    """One run at one k and one load: the histogram-only answer, the draft cost assumed and
    said so, on every surface; the what-if reads the one-server row (server None)."""
    out = tmp_path / "run"
    _run_demo(out, "4")
    results = _results(out)
    summary = json.loads((out / "profile_export_aiperf.json").read_text())
    settings = {row["segment"]: row["settings"] for row in summary["segments"]}
    table = SegmentTable(draft_cost=None)
    table.update(None, results)
    rows = table.rows(settings)
    assert len(rows) == 1
    w = what_if(_pooled(results), 4, None, rows, "run")
    done = subprocess.run(
        [sys.executable, "-m", "specmon", "tune", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    basis = "histogram only, draft cost assumed 0.10"
    assert rows[0]["basis"] == basis and report["recommendation"]["basis"] == basis
    assert w is not None and basis in w.text
    assert w.k == rows[0]["recommended_k"] == report["recommended_k"]
    assert w.k is not None and 0 <= w.k <= 4
