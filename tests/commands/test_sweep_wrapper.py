"""`specmon sweep --verify-schedule` through a wrapper script (`serve.sh {k} {port} {schedule}`,
the usual way a GPU box starts vLLM): the sweep writes each row's speculative-config
fragment to a JSON file and `{schedule}` names it; the wrapper reads it and starts a real
`specmon sim`. One drafter profile longer than k serves every k (the simulator takes its
first k values)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specmon.errors import UserError
from specmon.run.sweep.settings import SweepSettings
from tests.commands.test_sweep_run import (
    cells_of,
    load_flags,
    new_marker,
    processes_with,
    read_doc,
    run_sweep,
)

SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"
PROFILE = "0.95,0.9,0.9,0.85"  # four positions: longer than any k swept here

# what a vLLM wrapper does with --speculative-config "$(cat "$3")", with the simulator:
# k from the file, and the schedule (when the file holds one) as --spec-schedule FILE
WRAPPER = """#!/bin/sh
k="$1"; port="$2"; config="$3"; python="$4"; seed="$5"
echo "wrapper: k=$k config=$(cat "$config")"
spec_k=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["num_speculative_tokens"])' "$config")
set --
if grep -q num_speculative_tokens_per_batch_size "$config"; then
    set -- --spec-schedule "$config"
fi
exec "$python" -m specmon sim --port "$port" --num-spec-tokens "$spec_k" \\
    --acceptance {profile} --step-ms 10 --ttft-ms 2 --seed "$seed" "$@"
"""


def _wrapper(tmp_path: Path) -> Path:
    script = tmp_path / "serve.sh"
    script.write_text(WRAPPER.replace("{profile}", PROFILE))
    script.chmod(0o755)
    return script


def _read_by_wrapper(path: Path) -> dict:
    """The fragment the wrapper read, from its line in the server's log (after the command)."""
    line = next(x for x in path.read_text().splitlines() if x.startswith("wrapper: "))
    return json.loads(line.split(" config=", 1)[1])


@pytest.mark.e2e
def test_verify_schedule_through_a_wrapper_script(tmp_path: Path) -> None:
    marker = new_marker()
    script = _wrapper(tmp_path)
    serve = f"sh {script} {{k}} {{port}} {{schedule}} {{python}} {marker}"
    baseline = f"sh {script} 0 {{port}} {{schedule}} {{python}} {marker}"
    out = tmp_path / "sweep"
    args = ["--serve", serve, "--baseline-serve", baseline, "--num-spec-tokens", "1,2"]
    args += ["--concurrency", "1,2", "--repeats", "3", "--verify-schedule"]
    proc = run_sweep(args + ["--artifact-dir", str(out)] + load_flags())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # each fixed k's server read its own k from its file; the profile's first k positions
    for k in (0, 1, 2):
        assert _read_by_wrapper(out / f"server-k{k}.log") == {"num_speculative_tokens": k}
    doc = read_doc(out)
    for (k, _c), cell in cells_of(doc).items():
        assert cell["error"] is None and len(cell["repeats"]) == 3
        assert all(max(map(int, r["histogram"] or {0: 0})) <= k for r in cell["repeats"])
    path = out / "speculative_k_schedule.json"
    schedule = json.loads(path.read_text()) if path.exists() else None
    fragment = None if schedule is None else schedule["speculative_config_fragment"]
    if fragment is None:  # a busy machine gated every k > 0: the sweep says it measured none
        assert "specmon sweep: arm schedule not measured: " in proc.stdout
        return
    # the schedule arm's server read the fragment the schedule file holds, and ran it
    assert _read_by_wrapper(out / "server-arm-schedule.log") == fragment
    assert fragment[SCHEDULE_KEY] == schedule[SCHEDULE_KEY]
    assert fragment["num_speculative_tokens"] == max(e[2] for e in schedule[SCHEDULE_KEY])
    arm = [a for a in doc["arm_cells"] if a["arm"] == "schedule"]
    assert [a["concurrency"] for a in arm] == [1, 2]
    for cell in arm:
        assert cell["error"] is None and len(cell["repeats"]) == 3
    assert processes_with(f"--seed {marker}") == []  # every server, the wrapper's too, stopped


def test_schedule_placeholder_rules() -> None:
    base = {"ks": [1], "concurrencies": [1], "segment_requests": 5}
    wrapper = "serve.sh {k} {port} {schedule}"
    SweepSettings(serve=wrapper, verify_schedule=True, **base)  # accepted as is
    with pytest.raises(UserError, match="no \\{schedule\\} placeholder"):
        SweepSettings(serve="serve.sh {k} {port}", verify_schedule=True, **base)
    with pytest.raises(UserError, match="--schedule-serve needs the \\{schedule\\} placeholder"):
        SweepSettings(
            serve="serve.sh {k} {port}",
            verify_schedule=True,
            schedule_serve="serve.sh {port}",
            **base,
        )
    with pytest.raises(UserError, match="--schedule-serve is the command of --verify-schedule"):
        SweepSettings(serve="serve.sh {k} {port}", schedule_serve=wrapper, **base)
    with pytest.raises(UserError, match="--variant v: \\{schedule\\} is for --serve"):
        SweepSettings(serve=wrapper, variants={"v": "x {port} {schedule}"}, **base)
