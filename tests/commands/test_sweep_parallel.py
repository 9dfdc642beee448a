"""Arms side by side (docs/scale-out.md): `specmon sweep --gpus 0,1 ...` on the local pool
and `--executor ray` on a real local Ray cluster with logical GPUs, against `specmon sim`
servers slowed at start-up (`--startup-delay`, a model load) so arms overlap in time.

The simulators use slow steps and concurrency 1 so the 2-core machine is not the
bottleneck; the decisions are the stand-in's or the real code's, compared between a
sequential and a parallel sweep of the same grid only where both are clean."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.sweep_fakes import NO_FIDELITY_GATE, sweep_argv

from commands.test_sweep_run import (
    child_env,
    interrupt_after_the_first_cell,
    new_marker,
    poll,
    processes_with,
    read_doc,
    run_sweep,
)
from specmon.config import RunConfig
from specmon.run.sweep.arm import ArmHooks, ArmJob, ArmOutcome, ArmRun, ArmSpec
from specmon.run.sweep.pool import LocalPool
from specmon.run.sweep.settings import Placement, SweepSettings

WAIT_S = 300


def sim(marker: str, k: str = "{k}", delay: float = 2.0) -> str:
    return (
        f"{{python}} -m specmon sim --port {{port}} --num-spec-tokens {k} --acceptance 0.7"
        f" --step-ms 20 --ttft-ms 5 --startup-delay {delay} --seed {marker}"
    )


def grid_args(marker: str, out: Path, *extra: str) -> list[str]:
    args = ["--serve", sim(marker), "--baseline-serve", sim(marker, "0"), "--headless"]
    args += ["--num-spec-tokens", "1,3", "--concurrency", "1", "--repeats", "1"]
    args += ["--segment-requests", "6", "--output-tokens-mean", "12"]
    args += ["--prompt-source", "synthetic", "--synthetic-input-tokens-mean", "16"]
    return args + ["--artifact-dir", str(out), *extra]


def overlapping(runs: list[dict]) -> list[tuple[dict, dict]]:
    return [
        (a, b)
        for a, b in itertools.combinations(runs, 2)
        if a["started"] < b["ended"] and b["started"] < a["ended"]
    ]


def picks(doc: dict) -> dict[int, int | None]:
    return {d["concurrency"]: d.get("selected_k") for d in doc.get("decisions") or []}


def clean(doc: dict) -> bool:
    return all(cell["error"] is None for cell in doc["cells"])


# the local pool, without a process: slots, disjoint slices, the one retry ---------------


class FlakyArms:
    """run_arm stand-in: records which slot (GPU slice) each attempt got; the arm named in
    `faulty` fails on its first attempt."""

    def __init__(self, faulty: int | None = None, always: bool = False) -> None:
        self.faulty = faulty
        self.always = always  # every attempt fails, not only the first
        self.calls: list[tuple[int | str, list[str], int]] = []
        self.lock = threading.Lock()

    def __call__(self, job, spec, gpus, stopping, *, attempt=1, hooks=None, measurers=None):
        with self.lock:
            self.calls.append((spec.row, gpus, attempt))
        run = ArmRun(spec.row, "local", "here", gpus, 1.0, 2.0, attempt)
        if spec.row == self.faulty and (attempt == 1 or self.always):
            run.fault = "RuntimeError: worker died"
        return ArmOutcome(spec, run)


def pool(monkeypatch, slices: list[list[str]], arms: FlakyArms) -> LocalPool:
    monkeypatch.setattr("specmon.run.sweep.pool.run_arm", arms)
    settings = SweepSettings(ks=[1], concurrencies=[1], serve="x {k} {port}", segment_requests=1)
    job = ArmJob(settings, RunConfig(), "/nonexistent", lambda config: None)  # type: ignore[arg-type,return-value]
    return LocalPool(job, slices, threading.Event(), ArmHooks(say=lambda line: None))


def test_gpus_are_cut_into_disjoint_slices():
    assert Placement(gpus=["0", "1", "2", "3"], gpus_per_server=2).local_slices() == [
        ["0", "1"],
        ["2", "3"],
    ]
    assert Placement(gpus=["0", "1", "2"], gpus_per_server=2).local_slices() == [["0", "1"]]
    assert Placement().local_slices() == [[]]  # no --gpus: one slot, one arm at a time


def test_an_arm_that_fails_is_retried_once_on_another_slot(monkeypatch):
    arms = FlakyArms(faulty=2)
    local = pool(monkeypatch, [["0"], ["1"]], arms)
    outcomes: list[ArmOutcome] = []
    specs = [ArmSpec(k, "x", (1, 4)) for k in (1, 2)]
    local.run(specs, outcomes.append, lambda: True, lambda spec: spec)
    tries = [(gpus, attempt) for row, gpus, attempt in arms.calls if row == 2]
    assert len(tries) == 2 and tries[0][1] == 1 and tries[1][1] == 2
    assert tries[0][0] != tries[1][0]  # the retry got the other slot's GPU
    assert [o.run.fault is None for o in outcomes if o.spec.row == 2] == [False, True]


def test_an_arm_that_fails_twice_is_failed_cells_not_missing(monkeypatch):
    local = pool(monkeypatch, [["0"]], FlakyArms(faulty=2, always=True))
    outcomes: list[ArmOutcome] = []
    local.run([ArmSpec(2, "x", (1, 4))], outcomes.append, lambda: True, lambda spec: spec)
    failed = outcomes[-1]
    assert [t.cell.concurrency for t in failed.cells] == [1, 4]
    for timed in failed.cells:
        assert timed.cell.error == (
            "k=2: the arm failed twice, last on here: RuntimeError: worker died"
        )
        assert not timed.cell.measured  # the health gate never reads it


# the local pool, end to end --------------------------------------------------------------


@pytest.mark.e2e
def test_local_pool_runs_arms_side_by_side_on_disjoint_gpus(tmp_path: Path) -> None:
    marker = new_marker()
    proc = run_sweep(
        grid_args(marker, tmp_path, "--gpus", "0,1,2", "--gpus-per-server", "1"), timeout=WAIT_S
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    doc = read_doc(tmp_path)
    runs = doc["arm_runs"]
    assert sorted(r["row"] for r in runs) == [0, 1, 3]
    pairs = overlapping(runs)
    assert pairs  # three 2 s start-ups on three slots: they overlap
    for a, b in pairs:
        assert not set(a["gpus"]) & set(b["gpus"])
    assert {cell["arms_at_once"] for cell in doc["cells"]} <= {1, 2, 3}
    assert max(cell["arms_at_once"] for cell in doc["cells"]) >= 2
    # the server saw its slice: the {gpus} placeholder and CUDA_VISIBLE_DEVICES agree
    for run in runs:
        assert len(run["gpus"]) == 1 and run["executor"] == "local"
    assert "wall time" in proc.stdout and "took" in proc.stdout
    assert processes_with(f"--seed {marker}") == []


@pytest.mark.e2e
def test_interrupted_parallel_sweep_resumes_with_only_the_missing_arms(tmp_path: Path) -> None:
    """Three arms on two slots (--gpus 0,1), Ctrl-C once the first cell is recorded: the
    resumed sweep (--resume DIR --gpus 0,1) runs only the arms whose cells are missing."""
    marker = new_marker()
    args = grid_args(marker, tmp_path, "--gpus", "0,1", "--gpus-per-server", "1")
    code, out = interrupt_after_the_first_cell(args, tmp_path)
    assert code == 130, out
    first = read_doc(tmp_path)
    assert first["complete"] is False
    kept = {(c["k"], c["concurrency"]): c for c in first["cells"] if c["error"] is None}
    assert 1 <= len(kept) < 3, first["cells"]  # k = 0, 1, 3 at concurrency 1
    assert processes_with(f"--seed {marker}") == []
    resumed = run_sweep(["--resume", str(tmp_path), "--gpus", "0,1"], timeout=WAIT_S)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"resuming: {len(kept)} cell(s) already measured" in resumed.stdout
    assert resumed.stdout.count("cell k=") == 3 - len(kept)  # only the missing arms ran
    final = read_doc(tmp_path)
    assert final["complete"] is True
    cells = {(c["k"], c["concurrency"]): c for c in final["cells"]}
    assert sorted(cells) == [(0, 1), (1, 1), (3, 1)]
    for key, cell in kept.items():
        assert cells[key] == cell  # the kept cells are the same measurement, untouched
    # the resumed run's arms: only the missing rows, on the two slots
    later = [
        r for r in final["arm_runs"] if r["started"] > max(x["ended"] for x in first["arm_runs"])
    ]
    assert sorted(r["row"] for r in later) == sorted({0, 1, 3} - {k for k, _ in kept})
    assert all(r["gpus"] in (["0"], ["1"]) for r in later)
    assert processes_with(f"--seed {marker}") == []


@pytest.mark.e2e
def test_gpus_placeholder_and_environment(tmp_path: Path) -> None:
    """{gpus} in --serve is the slice, and the server's CUDA_VISIBLE_DEVICES is the same."""
    serve = (
        "echo gpus={gpus} env=$CUDA_VISIBLE_DEVICES; "
        "exec {python} -m specmon sim --port {port} --num-spec-tokens {k} --step-ms 20"
    )
    args = ["--serve", serve, "--num-spec-tokens", "2", "--concurrency", "1", "--repeats", "1"]
    args += ["--segment-requests", "3", "--output-tokens-mean", "8", "--headless"]
    args += ["--gpus", "4,5", "--gpus-per-server", "2", "--artifact-dir", str(tmp_path)]
    proc = run_sweep(args, timeout=WAIT_S)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "gpus=4,5 env=4,5" in (tmp_path / "server-k2.log").read_text()


# Ray ---------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    """One local Ray cluster with 4 logical GPUs for the session (~13 s to start): a child
    that runs ray.init and waits; its address is given to each sweep (--ray-address)."""
    pytest.importorskip("ray", reason="the ray extra: pip install 'specmon[ray]'")
    # Ray 2.60 turns on token authentication: the sweeps, other drivers, would need the
    # token of this session's cluster; a loopback test cluster runs without it
    os.environ["RAY_AUTH_MODE"] = "disabled"
    code = (
        "import ray, sys; ray.init(num_cpus=2, num_gpus=4, include_dashboard=False,"
        " object_store_memory=200*1024*1024, log_to_driver=False);"
        "print('ADDRESS', ray.get_runtime_context().gcs_address, flush=True); sys.stdin.read()"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, env=child_env(),
    )  # fmt: skip
    address = None
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("ADDRESS "):
            address = line.split()[1]
            break
    assert address, "ray did not start"
    yield address
    assert proc.stdin is not None
    proc.stdin.close()  # the driver exits, its local cluster with it
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.mark.acceptance
@pytest.mark.e2e
def test_ray_arms_overlap_on_disjoint_gpus_and_decide_as_the_sequential_sweep(
    tmp_path: Path, ray_cluster: str
) -> None:
    marker = new_marker()
    ray_dir, seq_dir = tmp_path / "ray", tmp_path / "seq"
    ray_args = ["--executor", "ray", "--ray-address", ray_cluster, "--gpus-per-server", "1"]
    proc = subprocess.run(
        sweep_argv(grid_args(marker, ray_dir, *ray_args), prelude=NO_FIDELITY_GATE + "pass"),
        capture_output=True, text=True, timeout=WAIT_S, env=child_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr + proc.stdout
    doc = read_doc(ray_dir)
    runs = doc["arm_runs"]
    assert sorted(r["row"] for r in runs) == [0, 1, 3]
    assert all(r["executor"] == "ray" and len(r["gpus"]) == 1 for r in runs)
    assert all(g in {"0", "1", "2", "3"} for r in runs for g in r["gpus"])
    pairs = overlapping(runs)
    assert pairs
    for a, b in pairs:
        assert not set(a["gpus"]) & set(b["gpus"])
    # the exports are the driver's, as a local sweep's
    assert (ray_dir / "k1" / "c1" / "r1" / "profile_export_aiperf.json").exists()
    seq = subprocess.run(
        sweep_argv(grid_args(marker, seq_dir), prelude=NO_FIDELITY_GATE + "pass"),
        capture_output=True, text=True, timeout=WAIT_S, env=child_env(),
    )  # fmt: skip
    assert seq.returncode == 0, seq.stderr + seq.stdout
    seq_doc = read_doc(seq_dir)
    if clean(doc) and clean(seq_doc):
        assert picks(doc) == picks(seq_doc)
    assert processes_with(f"--seed {marker}") == []


@pytest.mark.acceptance
@pytest.mark.e2e
def test_ray_local_cluster_started_by_the_sweep(tmp_path: Path) -> None:
    """--ray-num-gpus: the sweep starts its own local cluster (on a side thread, while it
    sets up) and it lives as long as the sweep: every arm ran as a Ray task on its GPU."""
    pytest.importorskip("ray", reason="the ray extra: pip install 'specmon[ray]'")
    marker = new_marker()
    args = ["--executor", "ray", "--ray-num-gpus", "2", "--gpus-per-server", "1"]
    proc = subprocess.run(
        sweep_argv(grid_args(marker, tmp_path, *args), prelude=NO_FIDELITY_GATE + "pass"),
        capture_output=True, text=True, timeout=WAIT_S, env=child_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr + proc.stdout
    runs = read_doc(tmp_path)["arm_runs"]
    assert sorted(r["row"] for r in runs) == [0, 1, 3]
    assert all(r["executor"] == "ray" and r["gpus"] in (["0"], ["1"]) for r in runs)
    assert "GCS" not in proc.stderr  # the cluster was not lost mid-sweep
    assert processes_with(f"--seed {marker}") == []


@pytest.mark.acceptance
@pytest.mark.e2e
def test_ray_sigterm_mid_sweep_leaves_no_server(tmp_path: Path, ray_cluster: str) -> None:
    marker = new_marker()
    args = grid_args(marker, tmp_path, "--executor", "ray", "--ray-address", ray_cluster)
    args[args.index("--segment-requests") + 1] = "400"  # long enough to be stopped
    proc = subprocess.Popen(
        sweep_argv(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=child_env(),
    )  # fmt: skip
    try:
        poll(lambda: len(processes_with(f"--seed {marker}")) >= 2, WAIT_S, "servers")
        poll(lambda: "ready at" in _arm_logs(tmp_path), WAIT_S, "a ready server")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, out
    poll(lambda: processes_with(f"--seed {marker}") == [], 60, "no server left")


@pytest.mark.acceptance
@pytest.mark.e2e
def test_ray_arm_whose_worker_is_killed_is_retried(tmp_path: Path, ray_cluster: str) -> None:
    marker = new_marker()
    args = grid_args(marker, tmp_path, "--executor", "ray", "--ray-address", ray_cluster)
    args[args.index("--num-spec-tokens") + 1] = "2"
    proc = subprocess.Popen(
        sweep_argv(args, prelude=NO_FIDELITY_GATE + "pass"), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=child_env(),
    )  # fmt: skip
    log = tmp_path / "arm-k2.log"
    try:
        text = poll(lambda: log.exists() and "(pid " in log.read_text() and log.read_text(), 120)
        worker = int(text.split("(pid ")[1].split(")")[0])
        os.kill(worker, signal.SIGKILL)  # the Ray worker running arm k=2
        out, _ = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    doc = read_doc(tmp_path)
    k2 = [r for r in doc["arm_runs"] if r["row"] == 2]
    assert [r["attempt"] for r in k2] == [1, 2], out
    assert k2[0]["fault"] and k2[1]["fault"] is None
    assert "retrying once" in out
    cell = next(c for c in doc["cells"] if c["k"] == 2)
    assert cell["error"] is None and len(cell["repeats"]) == 1
    poll(lambda: processes_with(f"--seed {marker}") == [], 60, "no server left")


def _arm_logs(directory: Path) -> str:
    return "".join(p.read_text() for p in directory.glob("arm-*.log"))
