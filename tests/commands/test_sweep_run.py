"""`specmon sweep` as a real process against `specmon sim` servers it starts (or is given).

The decision code is the stand-in of tests/support/sweep_fakes.py until the real one is merged
(sweep_fakes.install() steps aside then). SIM_HAS_K0 / SIM_HAS_ROOFLINE switch on the
checks that need `specmon sim --num-spec-tokens 0` and `--latency-model roofline`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from support.sweep_fakes import NO_FIDELITY_GATE, sweep_argv
from support.waiting import poll

from specmon.sim.process import start_sim

# Flip to True once `specmon sim` serves k=0 / has the roofline model (issue 11 item 7).
SIM_HAS_K0 = True
SIM_HAS_ROOFLINE = True

WAIT_S = 120  # generous bound for any one sweep on a busy 2-core machine
OUTPUT_TOKENS = 24


def sim_template(marker: str, extra: str = "") -> str:
    """A sim per k; `--seed` carries a marker so the test can find its processes."""
    return (
        "{python} -m specmon sim --port {port} --num-spec-tokens {k} --acceptance 0.7"
        f" --step-ms 1 --ttft-ms 2 --seed {marker} {extra}"
    )


def load_flags(requests: int = 6) -> list[str]:
    return [
        "--segment-requests",
        str(requests),
        "--output-tokens-mean",
        str(OUTPUT_TOKENS),
        "--prompt-source",
        "synthetic",
        "--synthetic-input-tokens-mean",
        "32",
    ]


def run_sweep(args: list[str], timeout: float = WAIT_S) -> subprocess.CompletedProcess:
    return subprocess.run(
        sweep_argv(args), capture_output=True, text=True, timeout=timeout, env=child_env()
    )


def child_env() -> dict[str, str]:
    return dict(os.environ, PYTHONUNBUFFERED="1")


def read_doc(artifact: Path) -> dict:
    return json.loads((artifact / "sweep.json").read_text())


def processes_with(text: str) -> list[int]:
    """PIDs whose command line contains `text` (zombies have an empty one)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline and "pytest" not in cmdline:
            pids.append(int(entry.name))
    return pids


def new_marker() -> str:
    return str(int(uuid.uuid4().int % 10**9) + 10**9)


def interrupt_after_the_first_cell(args: list[str], artifact: Path) -> tuple[int, str]:
    """Start `specmon sweep ARGS`, send Ctrl-C once sweep.json holds a cell: its status and
    stdout."""
    with subprocess.Popen(
        sweep_argv(args), stdout=subprocess.PIPE, text=True, env=child_env()
    ) as proc:
        poll(
            lambda: (artifact / "sweep.json").exists() and len(read_doc(artifact)["cells"]) >= 1,
            what="the first cell",
        )
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=WAIT_S)
    return proc.returncode, out


def cells_of(doc: dict) -> dict[tuple[int, int], dict]:
    return {(c["k"], c["concurrency"]): c for c in doc["cells"]}


# --------------------------------------------------------------------------------------


@pytest.mark.e2e
def test_every_cell_is_measured_and_exported(tmp_path: Path) -> None:
    marker = new_marker()
    args = ["--serve", sim_template(marker), "--num-spec-tokens", "1,3", "--concurrency", "1,2"]
    args += ["--repeats", "2", "--warmup-request-count", "2", "--artifact-dir", str(tmp_path)]
    proc = run_sweep(args + load_flags())
    assert proc.returncode == 0, proc.stderr + proc.stdout
    doc = read_doc(tmp_path)
    cells = cells_of(doc)
    assert sorted(cells) == [(1, 1), (1, 2), (3, 1), (3, 2)]
    for (k, c), cell in cells.items():
        assert cell["error"] is None
        assert len(cell["repeats"]) == 2
        for rep, repeat in enumerate(cell["repeats"], start=1):
            assert repeat["request_count"] == 6
            assert repeat["artifact_dir"] == str(tmp_path / f"k{k}" / f"c{c}" / f"r{rep}")
            export = json.loads(
                Path(repeat["artifact_dir"], "profile_export_aiperf.json").read_text()
            )
            # throughput x duration = every output token: 6 requests x OUTPUT_TOKENS (ignore_eos)
            duration = export["benchmark_duration"]["avg"]
            assert repeat["output_token_throughput"] * duration == pytest.approx(6 * OUTPUT_TOKENS)
            # 6 records in the JSONL: the 2 warmup requests ran before, in a run of their own
            lines = Path(repeat["artifact_dir"], "profile_export.jsonl").read_text().splitlines()
            assert len(lines) == 6
            # the sim's /metrics between the repeat's scrapes timed those 6 requests and no
            # warm-up request: its formula ITL is of the requests the client measured
            assert repeat["server_requests"] == 6
            # a k-draft step accepts 0..k drafts; acceptance length = 1 + accepted / steps
            hist = {int(j): n for j, n in repeat["histogram"].items()}
            assert max(hist) <= k
            steps = sum(hist.values())
            accepted = sum(j * n for j, n in hist.items())
            assert repeat["acceptance_length"] == pytest.approx(1 + accepted / steps)
    for k in (1, 3):  # each k warmed up once, in its own run: 2 requests at c=1
        warm = (tmp_path / f"k{k}" / "warmup" / "profile_export.jsonl").read_text()
        assert len(warm.splitlines()) == 2
    # one line per finished cell, the stand-in's (or real) tables, the schedule file
    assert proc.stdout.count("cell k=") == 4
    assert (tmp_path / "speculative_k_schedule.json").exists()
    assert {d["concurrency"] for d in doc["decisions"]} == {1, 2}
    assert doc["complete"] is True
    assert (tmp_path / "server-k1.log").read_text().startswith("$ ")
    assert processes_with(f"--seed {marker}") == []  # every server was stopped


@pytest.mark.e2e
def test_server_that_exits_at_start_is_reported_and_the_sweep_goes_on(tmp_path: Path) -> None:
    args = ["--serve", "echo boom-{k} on {port}; exit 3", "--num-spec-tokens", "1,2"]
    args += ["--concurrency", "1,4", "--repeats", "1", "--artifact-dir", str(tmp_path)]
    proc = run_sweep(args + load_flags())
    assert proc.returncode == 1
    cells = cells_of(read_doc(tmp_path))
    assert sorted(cells) == [(1, 1), (1, 4), (2, 1), (2, 4)]  # k=2 was tried after k=1 failed
    for (k, _), cell in cells.items():
        assert f"server for k={k} exited with status 3 before it was ready" in cell["error"]
        assert f"boom-{k} on " in cell["error"]  # the log's last lines
        assert cell["repeats"] == []


@pytest.mark.e2e
def test_stop_on_error_stops_at_the_first_failed_server(tmp_path: Path) -> None:
    args = ["--serve", "exit 1 # {k} {port}", "--num-spec-tokens", "1,2", "--stop-on-error"]
    args += ["--concurrency", "1", "--repeats", "1", "--artifact-dir", str(tmp_path)]
    proc = run_sweep(args + load_flags())
    assert proc.returncode == 1
    assert sorted(cells_of(read_doc(tmp_path))) == [(1, 1)]
    assert "--stop-on-error" in proc.stdout


@pytest.mark.e2e
def test_server_that_never_becomes_ready_is_killed_with_its_group(tmp_path: Path) -> None:
    marker = new_marker()
    # a background child and a foreground one: only a signal to the group reaches both
    template = f"sleep 1000 {marker} & sleep 1000 {marker}; # {{k}} {{port}}"
    args = ["--serve", template, "--num-spec-tokens", "2", "--concurrency", "1"]
    args += ["--repeats", "1", "--ready-timeout", "1.5", "--artifact-dir", str(tmp_path)]
    proc = run_sweep(args + load_flags())
    assert proc.returncode == 1
    cell = cells_of(read_doc(tmp_path))[(2, 1)]
    assert "server for k=2 was not ready within 1.5 s" in cell["error"]
    poll(lambda: processes_with(f"sleep 1000 {marker}") == [], 30, "the sleeps to be gone")


@pytest.mark.e2e
def test_server_that_dies_mid_cell(tmp_path: Path) -> None:
    marker = new_marker()
    # k=1 steps slowly, so its 100-request cell (~0.3 s a request: 30 s) is still running
    # when its server is killed on its second record; k=2 steps fast, so its two cells finish
    # in seconds (the shell runs the --serve line)
    slow_k1 = "--step-ms $(( {k} == 1 ? 20 : 1 ))"
    args = ["--serve", sim_template(marker, slow_k1), "--num-spec-tokens", "1,2"]
    args += ["--concurrency", "1,2", "--repeats", "1", "--artifact-dir", str(tmp_path)]
    with subprocess.Popen(
        sweep_argv(args + load_flags(requests=100)),
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    ) as proc:
        first = tmp_path / "k1" / "c1" / "r1" / "profile_export.jsonl"
        poll(
            lambda: first.exists() and len(first.read_text().splitlines()) >= 2, WAIT_S, "requests"
        )
        sims = processes_with(
            f"--num-spec-tokens 1 --acceptance 0.7 --step-ms 1 --ttft-ms 2 --seed {marker}"
        )
        assert len(sims) == 1
        os.kill(sims[0], signal.SIGKILL)
        out, _ = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 1, out
    cells = cells_of(read_doc(tmp_path))
    for c in (1, 2):  # the cell that was running and the one the dead server never ran
        assert "server for k=1 exited with status" in cells[(1, c)]["error"]
        assert "during concurrency 1" in cells[(1, c)]["error"]
    # the sweep went on to k=2 and measured both of its cells
    assert cells[(2, 1)]["error"] is None and cells[(2, 2)]["error"] is None
    assert len(cells[(2, 1)]["repeats"]) == 1


@pytest.mark.e2e
def test_interrupted_sweep_resumes_with_only_the_missing_cells(tmp_path: Path) -> None:
    marker = new_marker()
    args = ["--serve", sim_template(marker, "--step-ms 3"), "--num-spec-tokens", "1,2"]
    args += ["--concurrency", "1,2", "--repeats", "1", "--artifact-dir", str(tmp_path)]
    args += load_flags(requests=20)
    code, out = interrupt_after_the_first_cell(args, tmp_path)
    assert code == 130, out
    assert "stopping (Ctrl-C)" in out
    first = read_doc(tmp_path)
    assert first["complete"] is False
    kept = cells_of(first)
    assert 1 <= len(kept) < 4
    assert all(cell["error"] is None for cell in kept.values())
    assert processes_with(f"--seed {marker}") == []
    mtimes = {
        key: Path(c["repeats"][0]["artifact_dir"], "profile_export.jsonl").stat().st_mtime_ns
        for key, c in kept.items()
    }

    resumed = run_sweep(["--resume", str(tmp_path)])  # alone: the settings in sweep.json
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"resuming: {len(kept)} cell(s) already measured" in resumed.stdout
    assert resumed.stdout.count("cell k=") == 4 - len(kept)  # only the missing ones ran
    final = cells_of(read_doc(tmp_path))
    assert sorted(final) == [(1, 1), (1, 2), (2, 1), (2, 2)]
    for key, cell in kept.items():
        assert final[key] == cell  # the kept cells are the same measurement, untouched
        path = Path(cell["repeats"][0]["artifact_dir"], "profile_export.jsonl")
        assert path.stat().st_mtime_ns == mtimes[key]
    assert read_doc(tmp_path)["complete"] is True
    # the same flags again with --resume: the same settings hash, so nothing is left to run
    again = run_sweep(args + ["--resume", str(tmp_path)])
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resuming: 4 cell(s) already measured" in again.stdout
    assert again.stdout.count("cell k=") == 0
    assert "starting" not in again.stdout  # no server was started


@pytest.mark.e2e
def test_url_form_runs_one_concurrency_at_a_time_across_servers(tmp_path: Path) -> None:
    common = ["--acceptance", "0.7", "--step-ms", "1", "--seed", "5"]
    with (
        start_sim(["--num-spec-tokens", "1", *common]) as k1,
        start_sim(["--num-spec-tokens", "3", *common]) as k3,
    ):
        args = ["--url", f"k1={k1.url}", "--url", f"k3={k3.url}", "--concurrency", "1,2"]
        args += ["--repeats", "1", "--artifact-dir", str(tmp_path)]
        proc = run_sweep(args + load_flags())
        assert proc.returncode == 0, proc.stdout + proc.stderr
        order = [
            line.split(":")[0] for line in proc.stdout.splitlines() if line.startswith("cell ")
        ]
        assert order == [
            "cell k=1 concurrency=1",
            "cell k=3 concurrency=1",
            "cell k=1 concurrency=2",
            "cell k=3 concurrency=2",
        ]
        cells = cells_of(read_doc(tmp_path))
        assert all(cell["error"] is None for cell in cells.values())
        hist3 = {int(j) for j in cells[(3, 1)]["repeats"][0]["histogram"]}
        assert max(hist3) <= 3

        wrong = tmp_path / "wrong"
        proc = run_sweep(
            ["--url", f"k2={k3.url}", "--concurrency", "1", "--repeats", "1"]
            + ["--artifact-dir", str(wrong)]
            + load_flags()
        )
        assert proc.returncode == 1
        assert (
            "the server for k=2 reports num_spec_tokens 3"
            in cells_of(read_doc(wrong))[(2, 1)]["error"]
        )


def baseline_template(marker: str) -> str:
    """Without SIM_HAS_K0, a sim at k=1 that sends no spec payload stands in for k=0."""
    no_spec = "--num-spec-tokens 0" if SIM_HAS_K0 else "--num-spec-tokens 1 --shape none"
    return f"{{python}} -m specmon sim --port {{port}} {no_spec} --step-ms 1 --seed {marker}"


@pytest.mark.e2e
def test_baseline_runs_first_without_speculation(tmp_path: Path) -> None:
    marker = new_marker()
    args = ["--serve", sim_template(marker), "--baseline-serve", baseline_template(marker)]
    args += ["--num-spec-tokens", "2", "--concurrency", "1", "--repeats", "1"]
    proc = run_sweep(args + ["--artifact-dir", str(tmp_path)] + load_flags())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("cell ")]
    assert [line.split(":")[0] for line in lines] == [
        "cell k=0 concurrency=1",
        "cell k=2 concurrency=1",
    ]
    cells = cells_of(read_doc(tmp_path))
    base = cells[(0, 1)]
    assert base["error"] is None
    assert base["repeats"][0]["acceptance_length"] is None
    assert base["repeats"][0]["histogram"] == {}
    assert cells[(2, 1)]["repeats"][0]["acceptance_length"] > 1.0


@pytest.mark.e2e
def test_a_speculating_baseline_is_an_error(tmp_path: Path) -> None:
    marker = new_marker()
    speculating = "{python} -m specmon sim --port {port} --num-spec-tokens 2 --seed " + marker
    args = ["--serve", sim_template(marker), "--baseline-serve", speculating]
    args += ["--num-spec-tokens", "1", "--concurrency", "1", "--repeats", "1"]
    proc = run_sweep(args + ["--artifact-dir", str(tmp_path)] + load_flags())
    assert proc.returncode == 1
    cells = cells_of(read_doc(tmp_path))
    assert "baseline (k=0) server reports speculation" in cells[(0, 1)]["error"]
    assert cells[(1, 1)]["error"] is None  # the sweep went on


# Until `specmon sim` has the roofline model and k=0, the demo's template is swapped in the
# child for today's linear model and a no-payload k=1 baseline (same grid, same counts).
DEMO_PRELUDE = NO_FIDELITY_GATE + (
    "import specmon.commands.demo as s; "
    # the whole grid's wiring is under test, not the measurement: 84 segments of 0.25 s
    # (each still ends its in-flight requests) instead of the demo's 1 s
    "s.DEMO_SEGMENT_DURATION_S = 0.25; "
    "s.DEMO_SIM = '{python} -m specmon sim --port {port} --step-ms 4 --batch-slope 0.004 "
    "--draft-ms-per-token 0.2 --ttft-ms 5' if not ROOFLINE else s.DEMO_SIM; "
    "t = s.demo_templates; "
    "s.demo_templates = t if K0 else "
    "(lambda a, seed: (t(a, seed)[0], t(a, seed)[1].replace('--num-spec-tokens 0', "
    "'--num-spec-tokens 1 --shape none')))"
)


@pytest.mark.acceptance  # a whole demo sweep: every (k, c) cell of real-time load
@pytest.mark.e2e
def test_demo_sweep_measures_the_whole_grid(tmp_path: Path) -> None:
    from specmon.commands.demo import DEMO_CONCURRENCY, DEMO_KS

    prelude = f"ROOFLINE = {SIM_HAS_ROOFLINE}; K0 = {SIM_HAS_K0}; " + DEMO_PRELUDE
    proc = subprocess.run(
        sweep_argv(["--sweep", "--artifact-dir", str(tmp_path)], "demo", prelude),
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cells = cells_of(read_doc(tmp_path))
    assert sorted(cells) == sorted((k, c) for k in [0, *DEMO_KS] for c in DEMO_CONCURRENCY)
    assert all(cell["error"] is None and len(cell["repeats"]) == 3 for cell in cells.values())
    assert proc.stdout.count("cell k=") == len(cells)
    assert (tmp_path / "speculative_k_schedule.json").exists()
    # --verify-schedule is on in the demo: the schedule it wrote, measured at every load
    (arm,) = read_doc(tmp_path)["arms"]
    assert arm["name"] == "schedule"
    assert [p["concurrency"] for p in arm["points"]] == DEMO_CONCURRENCY
    assert all(p["output_token_throughput"] > 0 for p in arm["points"])
    assert "schedule: vs the best fixed k" in proc.stdout


@pytest.mark.e2e
def test_a_third_signal_abandons_the_sweep_and_leaves_no_server_behind(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The stop signals go through specmon/stops.py as for `specmon run`: the first stops the
    sweep (here its server ignores SIGTERM, so stopping it waits out the 15 s grace), the
    second warns, the third force-quits with 128 + the FIRST signal, and the server it
    started is killed first, its whole process group."""
    marker = new_marker()
    # never ready, deaf to TERM; `deaf` is written once the trap is set: a SIGTERM sent while the
    # shell is still starting would kill it at once (seen under a busy core) and test nothing
    # (not under tmp_path: processes_with() passes over command lines that say "pytest")
    deaf = Path(tempfile.gettempdir()) / f"specmon-deaf-{marker}"
    stubborn = f"trap '' TERM; : > {deaf}; sleep 600; echo {{port}} {{k}} {marker}"
    request.addfinalizer(lambda: deaf.unlink(missing_ok=True))  # a failed run leaves none either
    args = ["--serve", stubborn, "--num-spec-tokens", "2", "--concurrency", "1"]
    args += ["--repeats", "1", "--ready-timeout", "300", "--artifact-dir", str(tmp_path)]
    args += load_flags()
    with subprocess.Popen(
        sweep_argv(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=child_env(),
    ) as proc:  # fmt: skip
        (group,) = poll(
            lambda: [p for p in processes_with(marker) if p != proc.pid], what="the server"
        )
        poll(deaf.exists, what="the server's TERM trap")
        proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)  # the sweep now waits for its server to die (SIGTERM is ignored)
        assert proc.poll() is None
        for _ in range(2):  # apart: a signal arriving while one is pending is merged with it
            proc.send_signal(signal.SIGINT)
            time.sleep(0.5)
        out, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 128 + signal.SIGTERM, (out, err)
    assert "stopping (SIGTERM)" in out and "abandoned" in err

    def group_gone() -> bool:
        try:
            os.killpg(group, 0)  # the server leads its own group: bash and its sleep
        except ProcessLookupError:
            return True
        return False

    poll(group_gone, timeout=10, what="the server's process group gone")


# issue 35 item 8: a key in the server command reaches the server, and no artifact --------
SECRETS = ("sk-SECRET-one", "sk-SECRET-two", "hf_SECRET_three")


@pytest.mark.e2e
def test_keys_in_the_serve_template_are_masked_in_every_artifact(tmp_path: Path) -> None:
    # the server prints what it got (as vLLM prints its arguments), then fails to start
    template = (
        "echo \"server got: 'api_key': '$KEY' $AUTH\"; exit 3 "
        "# {k} {port} --api-key sk-SECRET-one -H 'Authorization: Bearer sk-SECRET-two' "
        "HF_TOKEN=hf_SECRET_three"
    )
    template = "KEY=sk-SECRET-one AUTH=sk-SECRET-two; " + template
    args = ["--serve", template, "--num-spec-tokens", "1", "--concurrency", "1"]
    args += ["--repeats", "1", "--artifact-dir", str(tmp_path)]
    proc = run_sweep(args + load_flags())
    assert proc.returncode == 1
    log = (tmp_path / "server-k1.log").read_text()
    assert "server got: 'api_key': '***' ***" in log  # the server had the real ones
    shown = proc.stdout + proc.stderr
    assert "--api-key *** -H 'Authorization: Bearer ***' HF_TOKEN=***" in shown
    for path in tmp_path.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert not [s for s in SECRETS if s in text], path
    assert not [s for s in SECRETS if s in shown]
    resumed = run_sweep(["--resume", str(tmp_path)])  # sweep.json alone cannot restart it
    assert resumed.returncode == 2
    assert "give --serve (and --baseline-serve, --variant) again" in resumed.stderr
