"""Trust travels with the artifact: a sweep with a failing cell writes its exclusions and the
verdict "flagged" into speculative_k_schedule.json and sweep.json, and `specmon tune` /
`specmon compare` on its directory print them. Real `specmon sim` servers over loopback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.sweep_fakes import NO_FIDELITY_GATE, sweep_argv

from specmon.sim.process import start_sim
from tests.commands.test_sweep_run import WAIT_S, cells_of, child_env, load_flags, read_doc

SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"


def _child(command: str, args: list[str]) -> subprocess.CompletedProcess:
    """`specmon COMMAND ARGS` with the simulator-fidelity bar lifted (sweep_fakes): the test
    is about the failing server, not about a busy machine's lag."""
    argv = sweep_argv(args, command=command, prelude=NO_FIDELITY_GATE.rstrip("; "))
    return subprocess.run(argv, capture_output=True, text=True, timeout=WAIT_S, env=child_env())


def _error_reason(cell: dict) -> str:
    """The error gate's words for a cell, from its repeats' counts (decision/gates.py)."""
    errors = sum(r["error_count"] for r in cell["repeats"])
    decided = errors + sum(r["request_count"] for r in cell["repeats"])
    return f"error rate {100 * errors / decided:.1f}% > 1% ({errors} of {decided} requests failed)"


@pytest.mark.e2e
def test_a_failing_cell_is_in_the_schedule_file_and_tune_shows_it(tmp_path: Path) -> None:
    common = ["--acceptance", "0.8", "--step-ms", "2", "--seed", "7"]
    with (
        start_sim(["--num-spec-tokens", "0", *common]) as k0,
        start_sim(["--num-spec-tokens", "1", *common]) as k1,
        start_sim(["--num-spec-tokens", "2", "--error-rate", "0.3", *common]) as k2,
    ):
        args = ["--url", f"k0={k0.url}", "--url", f"k1={k1.url}", "--url", f"k2={k2.url}"]
        args += ["--concurrency", "1", "--repeats", "3", "--artifact-dir", str(tmp_path)]
        proc = _child("sweep", args + load_flags(10))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = read_doc(tmp_path)
    failing = cells_of(doc)[(2, 1)]
    reason = _error_reason(failing)
    assert sum(r["error_count"] for r in failing["repeats"]) > 0  # 30% of 30 requests
    schedule = json.loads((tmp_path / "speculative_k_schedule.json").read_text())
    expected = f"concurrency 1: k=2 excluded: {reason}"
    for artifact in (schedule, doc):  # both files carry the verdict and the exclusion
        assert artifact["trust"] == "flagged"
        assert artifact["excluded_cells"] == {"1": {"2": [reason]}}
        assert expected in artifact["trust_reasons"]
    # the schedule stays vLLM's: k=2 was never picked, only k=0 or k=1 anchor it
    assert schedule[SCHEDULE_KEY][0][:2] == [1, 1] and schedule[SCHEDULE_KEY][0][2] in (0, 1)
    assert "trust: flagged" in proc.stdout and f"  {expected}" in proc.stdout
    said = _child("tune", [str(tmp_path)])
    assert said.returncode == 0, said.stderr
    lines = said.stdout.splitlines()
    flagged = next(i for i, line in enumerate(lines) if line.startswith("trust: flagged ("))
    assert f"  {expected}" in lines[flagged + 1 :]
    compared = _child("compare", [str(tmp_path)])
    assert compared.returncode == 0 and compared.stdout == said.stdout, compared.stderr
    as_json = json.loads(_child("tune", [str(tmp_path), "--json"]).stdout)
    assert as_json["trust"] == "flagged" and as_json["excluded_cells"] == {"1": {"2": [reason]}}
