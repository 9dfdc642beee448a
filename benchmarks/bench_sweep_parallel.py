"""A sweep's wall time on 1, 2 and 4 slots, local pool and Ray, over the same grid
(docs/scale-out.md): 4 simulator arms (k = 0, 1, 2, 3) at concurrency 1, one repeat each,
every server slowed at start-up by --startup-delay (a model load), slow steps so the
machine's cores are not the bottleneck. Prints one row per run and the ratio to the
one-slot sweep.

    python benchmarks/bench_sweep_parallel.py [--startup-delay 10] [--no-ray]
"""

from __future__ import annotations

import argparse
import json
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
    parser.add_argument("--no-ray", action="store_true")
    opts = parser.parse_args()
    runs = [("local", 1, []), ("local", 2, ["--gpus", "0,1"]), ("local", 4, ["--gpus", "0,1,2,3"])]
    if not opts.no_ray:
        ray = ["--executor", "ray", "--ray-num-gpus"]
        runs += [("ray", n, [*ray, str(n), "--gpus-per-server", "1"]) for n in (1, 2, 4)]
    print(f"4 arms, start-up delay {opts.startup_delay:g} s; wall time of the whole command")
    print(f"{'executor':<8} {'slots':>5} {'wall s':>8} {'sweep s':>8} {'arms s':>8} "
          f"{'x 1 slot':>8} {'disjoint':>8} decisions")  # fmt: skip
    base = None
    with tempfile.TemporaryDirectory() as tmp:
        for i, (executor, slots, placement) in enumerate(runs):
            wall, doc = sweep(Path(tmp) / str(i), opts.startup_delay, placement)
            base = base or wall
            picks = {d["concurrency"]: d.get("selected_k") for d in doc.get("decisions") or []}
            print(
                f"{executor:<8} {slots:>5} {wall:>8.1f} {doc['wall_s']:>8.1f} "
                f"{doc['arm_time_s']:>8.1f} {wall / base:>8.2f} {disjoint(doc)!s:>8} {picks}",
                flush=True,
            )


if __name__ == "__main__":
    main()
