"""Simulator benchmark: the tokens/s `specmon sim` serves while it keeps its step formula.

For each concurrency C and k, `specmon sim` runs pinned to one CPU core (the client, this
script's aiohttp loop, on another when there is one) with a step time from a ladder
(--step-ms, coarse to fine: each step is cheaper, so tokens/s grow until the simulator can
no longer keep its formula). C closed-loop clients stream chat completions of
--max-tokens tokens (ignore_eos, acceptance 0.7 at k > 0). Each rung is measured from the
simulator's own /metrics over --duration seconds after a short warm-up:

  tok/s      tokens the clients received over the window / its wall time (a token is one
             " word" of the simulator's text: spaces in the stream, less one per "data: ")
  lag        Δ specmon_sim_step_lag_seconds / Δ specmon_sim_step_formula_seconds (how far
             its steps ran over the formula for the batch that ran, sim/engine.py)
  batch      mean decode batch = tokens received / Δ steps / E(k) (close to C when the
             client keeps up)
  busy       Δ formula seconds / wall time: the share of the window the engine stepped
             (below 1: it idled, waiting for the client's next request, e.g. at C = 1)

The table gives, per (C, k), the last rung whose lag held within 2% ("at formula": its
step time and tok/s) and the first rung that did not (its lag), so the row reads "serves
N tok/s at its formula, falls behind past that". The client may saturate first at high C;
the batch column shows it (a batch well below C).

Examples:
  python benchmarks/bench_sim.py                           # C 1,16,64,256 x k 0,3,8
  python benchmarks/bench_sim.py --concurrency 16 --k 3 --step-ms 4,2,1 --duration 2
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (
    BenchError,
    die_with_parent,
    free_port,
    markdown_table,
    parse_int_list,
    specmon_cmd,
    stop_group,
    wait_for_port,
)

ACCEPTANCE = 0.7
LAG_LIMIT = 0.02  # docs/simulator.md's bar
SERIES = {
    "specmon_sim_steps_total": "steps",
    "specmon_sim_step_formula_seconds_total": "formula_s",
    "specmon_sim_step_lag_seconds_total": "lag_s",
}
HEADERS = [
    "C", "k", "at formula: step ms", "tok/s", "lag", "batch", "busy", "next rung", "its lag"
]  # fmt: skip


@dataclass
class Rung:
    step_ms: float
    tokens_per_s: float
    lag_share: float
    batch: float
    busy: float

    @property
    def holds(self) -> bool:
        return self.lag_share <= LAG_LIMIT


def expected_tokens(k: int) -> float:
    """E(k) = 1 + a + a^2 + ... + a^k at a constant acceptance a."""
    return sum(ACCEPTANCE**i for i in range(k + 1))


def parse_k_list(text: str) -> list[int]:
    """k values, 0 (no speculation) included."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise SystemExit(f"not a list of integers: {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise SystemExit(f"k must be >= 0: {text!r}")
    return values


def parse_float_list(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise SystemExit(f"not a list of numbers: {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise SystemExit(f"step times must be positive: {text!r}")
    return values


def pin(cores: set[int]) -> None:
    """This process on `cores` (no-op where affinity is not supported)."""
    try:
        os.sched_setaffinity(0, cores)
    except (AttributeError, OSError):
        pass


def sim_core_split() -> tuple[set[int], set[int]]:
    """(the simulator's core, the client's cores): one core each when there are two."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except AttributeError:
        return set(), set()
    if len(cores) < 2:
        return set(cores), set(cores)
    return {cores[0]}, set(cores[1:])


def start_sim(k: int, step_ms: float, sim_core: set[int]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    argv = specmon_cmd() + ["sim", "--port", str(port), "--num-spec-tokens", str(k)]
    argv += ["--step-ms", f"{step_ms:g}", "--ttft-ms", "0", "--seed", "1"]
    if k:
        argv += ["--acceptance", str(ACCEPTANCE)]
    if sim_core:
        argv = ["taskset", "-c", ",".join(map(str, sorted(sim_core)))] + argv
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=die_with_parent,
    )
    wait_for_port(port, 30, proc)
    return proc, f"http://127.0.0.1:{port}"


async def scrape(session, url: str) -> dict[str, float]:
    async with session.get(url + "/metrics") as response:
        text = await response.text()
    out = dict.fromkeys(SERIES.values(), 0.0)
    for line in text.splitlines():
        name, _, rest = line.partition("{")
        if name in SERIES:
            out[SERIES[name]] += float(rest.rsplit(" ", 1)[1])
    return out


async def drive(url: str, concurrency: int, max_tokens: int, warmup_s: float, duration_s: float):
    """C closed-loop streaming clients; the /metrics figures over the measured window."""
    import aiohttp

    body = {
        "model": "specmon-sim",
        "messages": [{"role": "user", "content": "bench"}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
    }
    stop_at = time.monotonic() + warmup_s + duration_s
    connector = aiohttp.TCPConnector(limit=concurrency + 1)  # + 1: the /metrics scrapes
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        received = [0]

        async def client() -> None:
            while time.monotonic() < stop_at:
                async with session.post(url + "/v1/chat/completions", json=body) as response:
                    async for part in response.content.iter_any():
                        received[0] += part.count(b" ") - part.count(b"data: ")

        tasks = [asyncio.create_task(client()) for _ in range(concurrency)]
        await asyncio.sleep(warmup_s)
        before, t0, got0 = await scrape(session, url), time.monotonic(), received[0]
        await asyncio.sleep(duration_s)
        after, t1, got1 = await scrape(session, url), time.monotonic(), received[0]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    delta = {name: after[name] - before[name] for name in after}
    delta["tokens"] = got1 - got0
    return delta, t1 - t0


def measure(k: int, c: int, step_ms: float, args: argparse.Namespace, cores) -> Rung:
    sim_core, client_cores = cores
    proc, url = start_sim(k, step_ms, sim_core)
    try:
        if client_cores:
            pin(client_cores)
        delta, wall = asyncio.run(drive(url, c, args.max_tokens, args.warmup, args.duration))
    finally:
        stop_group(proc)
    if delta["steps"] <= 0 or delta["formula_s"] <= 0:
        err = (proc.stderr.read() if proc.stderr else b"").decode().strip()
        raise BenchError(f"no step ran at C={c} k={k} step {step_ms} ms: {err[-300:]}")
    batch = delta["tokens"] / delta["steps"] / expected_tokens(k)
    share = delta["lag_s"] / delta["formula_s"]
    return Rung(step_ms, delta["tokens"] / wall, share, batch, delta["formula_s"] / wall)


def ladder(k: int, c: int, args: argparse.Namespace, cores) -> tuple[Rung | None, Rung | None]:
    """(the last rung that held its formula, the first that did not); None when none."""
    held = None
    for step_ms in args.step_ms:
        rung = measure(k, c, step_ms, args, cores)
        print(
            f"  C={c} k={k} step {step_ms:g} ms: {rung.tokens_per_s:,.0f} tok/s, "
            f"lag {rung.lag_share * 100:.1f}%, batch {rung.batch:.1f}, busy {rung.busy:.2f}",
            file=sys.stderr,
            flush=True,
        )
        if not rung.holds:
            return held, rung
        held = rung
    return held, None


def _pct(rung: Rung | None) -> str:
    return "-" if rung is None else f"{rung.lag_share * 100:.1f}%"


def row(c: int, k: int, held: Rung | None, behind: Rung | None) -> list[object]:
    """One table row: the last rung that held (or "none held") and the first that did not."""
    tail = [f"{behind.step_ms:g} ms" if behind else "-", _pct(behind)]
    if held is None:
        return [c, k, "none held", "-", "-", "-", "-", *tail]
    figures = [f"{held.step_ms:g}", f"{held.tokens_per_s:,.0f}", _pct(held), f"{held.batch:.1f}"]
    figures.append(f"{held.busy:.2f}")
    return [c, k, *figures, *tail]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=parse_int_list, default=[1, 16, 64, 256])
    parser.add_argument("--k", type=parse_k_list, default=[0, 3, 8])
    parser.add_argument("--step-ms", type=parse_float_list, default=[32, 16, 8, 4, 2, 1, 0.5, 0.25])
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--duration", type=float, default=3.0, help="measured s per rung")
    parser.add_argument("--warmup", type=float, default=1.0, help="s before measuring")
    args = parser.parse_args(argv)
    cores = sim_core_split()
    load = os.getloadavg()
    print(
        f"specmon sim on core(s) {sorted(cores[0]) or '?'}, client on {sorted(cores[1]) or '?'}; "
        f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        f"{args.max_tokens}-token streams, acceptance {ACCEPTANCE}, lag limit 2%"
    )
    rows = []
    try:
        for c in args.concurrency:
            for k in args.k:
                rows.append(row(c, k, *ladder(k, c, args, cores)))
    except BenchError as exc:
        print(f"bench_sim: {exc}", file=sys.stderr)
        return 1
    print(markdown_table(HEADERS, rows))
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
