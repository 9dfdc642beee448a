"""A sweep's wall time on 1, 2 and 4 slots, local pool and Ray, over the same grid
(docs/scale-out.md): 4 simulator arms (k = 0, 1, 2, 3) at concurrency 1, one repeat each,
every server slowed at start-up by --startup-delay (a model load), slow steps so the
machine's cores are not the bottleneck. Prints one row per run and the ratio to the
one-slot local sweep.

Ray is measured twice: `--ray-num-gpus N` (each sweep starts its own local cluster, as the
Done-when of issue 33 runs it: Ray's start is in the wall time) and against a cluster
already up (`ray up`: a child of this script that ran ray.init with 4 logical GPUs, as
`ray start --head` would; its slots are 4 / --gpus-per-server), the way a cluster is used.

    python benchmarks/bench_sweep_parallel.py [--startup-delay 10] [--no-ray] [--no-ray-up]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def sim(k: str, delay: float) -> str:
    return (
        f"{{python}} -m specmon sim --port {{port}} --num-spec-tokens {k} --acceptance 0.7"
        f" --step-ms 20 --ttft-ms 5 --startup-delay {delay} --seed 1"
    )


def sweep(out: Path, delay: float, placement: list[str]) -> tuple[float, dict]:
    args = [sys.executable, "-m", "specmon", "sweep", "--headless", "--artifact-dir", str(out)]
    args += ["--serve", sim("{k}", delay), "--baseline-serve", sim("0", delay)]
    args += ["--num-spec-tokens", "1,2,3", "--concurrency", "1", "--repeats", "1"]
    args += ["--segment-requests", "8", "--output-tokens-mean", "16"]
    args += ["--prompt-source", "synthetic", "--synthetic-input-tokens-mean", "16", *placement]
    started = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"sweep failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return wall, json.loads((out / "sweep.json").read_text())


class RayHead:
    """A local Ray cluster with 4 logical GPUs, up for the `ray up` rows: a child that ran
    ray.init and waits on its stdin (only this script's processes end with it)."""

    CODE = (
        "import ray, sys; ray.init(num_cpus=2, num_gpus=4, include_dashboard=False,"
        " object_store_memory=200*1024*1024, log_to_driver=False);"
        "print('ADDRESS', ray.get_runtime_context().gcs_address, flush=True); sys.stdin.read()"
    )

    def __enter__(self) -> str:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", self.CODE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("ADDRESS "):
                return line.split()[1]
        raise SystemExit("ray did not start")

    def __exit__(self, *exc: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # the driver exits, its local cluster with it
        self.proc.wait(60)


def disjoint(doc: dict) -> bool:
    runs = doc["arm_runs"]
    return all(
        not (set(a["gpus"]) & set(b["gpus"]))
        for i, a in enumerate(runs)
        for b in runs[i + 1 :]
        if a["started"] < b["ended"] and b["started"] < a["ended"]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--startup-delay", type=float, default=10.0)
    parser.add_argument("--no-ray", action="store_true", help="no --ray-num-gpus rows")
    parser.add_argument("--no-ray-up", action="store_true", help="no rows on a running cluster")
    opts = parser.parse_args()
    runs = [("local", 1, []), ("local", 2, ["--gpus", "0,1"]), ("local", 4, ["--gpus", "0,1,2,3"])]
    if not opts.no_ray:
        ray = ["--executor", "ray", "--ray-num-gpus"]
        runs += [("ray", n, [*ray, str(n), "--gpus-per-server", "1"]) for n in (1, 2, 4)]
    print(f"4 arms, start-up delay {opts.startup_delay:g} s; wall time of the whole command")
    print(f"{'executor':<8} {'slots':>5} {'wall s':>8} {'sweep s':>8} {'arms s':>8} "
          f"{'x 1 slot':>8} {'disjoint':>8} decisions")  # fmt: skip
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a loopback cluster: no token
    with tempfile.TemporaryDirectory() as tmp:
        base = measure(runs, Path(tmp), opts.startup_delay, None)
        if not opts.no_ray_up:
            with RayHead() as address:
                ray = ["--executor", "ray", "--ray-address", address, "--gpus-per-server"]
                up = [("ray up", 4 // n, [*ray, str(n)]) for n in (4, 2, 1)]
                measure(up, Path(tmp) / "up", opts.startup_delay, base)


def measure(
    runs: list[tuple[str, int, list[str]]], tmp: Path, delay: float, base: float | None
) -> float | None:
    """One sweep per row, printed as it ends; the first row's wall time is the base."""
    for i, (executor, slots, placement) in enumerate(runs):
        wall, doc = sweep(tmp / str(i), delay, placement)
        base = base or wall
        picks = {d["concurrency"]: d.get("selected_k") for d in doc.get("decisions") or []}
        print(
            f"{executor:<8} {slots:>5} {wall:>8.1f} {doc['wall_s']:>8.1f} "
            f"{doc['arm_time_s']:>8.1f} {wall / base:>8.2f} {disjoint(doc)!s:>8} {picks}",
            flush=True,
        )
    return base


if __name__ == "__main__":
    main()
