"""Issue 31 items 4-6 on real runs (`specmon demo`: real `specmon sim` processes over
loopback HTTP): a run directory holding a k=0 server is the baseline arm of `tune` and
`compare` (never exit 2); a simulator that sends no per-request stats (`--shape none`, the
common vLLM set-up) gets advice from its /metrics counters, labelled server-wide; a
simulator at k=0 alone gets "no speculation on this server (no verify steps)"; every run's
summary JSON carries `client_saturation` beside AIPerf's keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

DEMO = ["--headless", "--request-count", "40", "--concurrency", "2", "--overwrite"]


def specmon(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "specmon", *args], capture_output=True, text=True, timeout=240
    )


def demo_process(*args: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "specmon", "demo", *DEMO, *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    """Three demo runs, once for the module: k=0 beside k=2, counters only at k=3, and k=0
    alone. They run side by side (each its own simulators on free ports): the tests read
    what each run measured, not its speed, and one after the other they idled 80 s."""
    root = tmp_path_factory.mktemp("k0")
    variants = {
        "k02": ["--num-spec-tokens", "0,2"],
        "wide": ["--num-spec-tokens", "3", "--shape", "none"],
        "nospec": ["--num-spec-tokens", "0"],
    }
    procs = {name: demo_process(*extra, "--artifact-dir", str(root / name))
             for name, extra in variants.items()}  # fmt: skip
    out = {}
    try:
        for name, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=240)
            assert proc.returncode == 0, stderr + stdout[-2000:]
            out[name] = (root / name, stdout)
    finally:  # a run that failed or hung leaves no process behind
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return out


def test_tune_takes_a_k0_directory_as_the_baseline(runs):
    path, _ = runs["k02"]
    proc = specmon("tune", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "k0: k=0 (no speculation)" in proc.stdout
    assert "k2: k = 2" in proc.stdout
    # the figure shown is the k=0 run's own output tok/s, as its summary has it
    summary = json.loads((path / "k0" / "profile_export_aiperf.json").read_text())
    shown = f"{summary['output_token_throughput']['avg']:,.1f} output tok/s"
    assert shown in proc.stdout
    js = specmon("tune", str(path), "--json")
    assert js.returncode == 0, js.stderr
    reports = json.loads(js.stdout)
    base = next(r for r in reports if r.get("num_spec_tokens") == 0)
    assert base["speculation"] is False
    assert base["output_token_throughput"] == pytest.approx(
        summary["output_token_throughput"]["avg"]
    )


def test_tune_measures_over_k0_with_the_answer(runs):
    """The k=0 run is a measured arm: the measured answer over both runs reads its speedup
    over k=0 as k2 / k0 - 1 of the two summaries' throughputs."""
    from specmon.analysis.tune import gather_inputs
    from specmon.decision.answer import advise

    path, _ = runs["k02"]
    inputs = gather_inputs([str(path)], None)
    assert sorted(i.k for i in inputs) == [0, 2]
    tput = {
        d: json.loads((path / d / "profile_export_aiperf.json").read_text())[
            "output_token_throughput"
        ]["avg"]
        for d in ("k0", "k2")
    }
    choice = advise([m for i in inputs for m in i.measurements()])
    assert choice.measured is not None
    best = max(tput, key=lambda d: tput[d])
    other = "k0" if best == "k2" else "k2"
    assert choice.measured.k == int(best[1])
    assert choice.measured.runner_up is not None
    assert choice.measured.runner_up.value == pytest.approx(tput[best] / tput[other] - 1)


def test_compare_takes_a_k0_directory(runs):
    path, _ = runs["k02"]
    proc = specmon("compare", str(path / "k0"), str(path / "k2"))
    assert proc.returncode == 0, proc.stderr
    row = next(x for x in proc.stdout.splitlines() if x.startswith("k (num_spec_tokens)"))
    assert row.split()[2:4] == ["0", "2"]  # the baseline's k is 0, not '-'


def test_the_side_by_side_table_names_k0(runs):
    _, stdout = runs["k02"]
    row = next(x for x in stdout.splitlines() if x.startswith("k (num_spec_tokens)"))
    assert row.split()[2:4] == ["0", "2"]


def test_counters_only_runs_get_server_wide_advice(runs):
    path, stdout = runs["wide"]
    advice = next(x for x in stdout.splitlines() if x.startswith("advice (segment 0"))
    assert "acceptance server-wide" in advice and "no verify steps" not in advice
    summary = json.loads((path / "profile_export_aiperf.json").read_text())
    (row,) = summary["segments"]
    sm = summary["server_metrics"]
    # the row's figures are the server's counters: k from its 3 per-position counters,
    # the histogram /metrics derived, AL = 1 + accepted / drafts
    assert row["num_spec_tokens"] == 3 == sm["num_spec_tokens"]
    assert row["acceptance_source"] == "server-wide"
    assert row["histogram"] == sm["histogram"]
    assert row["steps"] == sm["drafts"]
    assert row["acceptance_length"] == pytest.approx(1 + sm["accepted"] / sm["drafts"])
    tune = specmon("tune", str(path))
    assert tune.returncode == 0, tune.stderr
    assert "server-wide" in tune.stdout and "k = 3" in tune.stdout


def test_a_server_without_speculation_says_so_never_yet(runs):
    path, stdout = runs["nospec"]
    advice = next(x for x in stdout.splitlines() if x.startswith("advice (segment 0"))
    assert "no speculation on this server (no verify steps)" in advice
    assert "yet" not in advice
    tune = specmon("tune", str(path))
    assert tune.returncode == 0, tune.stderr
    assert "k=0 (no speculation)" in tune.stdout
    assert "no speculation on this server (no verify steps)" in tune.stdout


def test_every_summary_carries_client_saturation_beside_aiperf(runs):
    path, _ = runs["nospec"]
    summary = json.loads((path / "profile_export_aiperf.json").read_text())
    sat = summary["client_saturation"]
    assert sat["available"] is True
    assert 0.0 <= sat["saturated_share"] <= 1.0 and sat["observed_s"] > 0
    assert sat["saturated_s"] <= sat["observed_s"] + 1e-9
    # the ratio the share states, from the two figures written beside it
    assert sat["saturated_share"] == pytest.approx(sat["saturated_s"] / sat["observed_s"], abs=1e-3)
    # AIPerf's keys come first, untouched: the specmon keys follow them
    keys = list(summary)
    assert keys.index("client_saturation") > keys.index("output_token_throughput")
