"""Timing fidelity: how much delay the client adds to the times it records (issue 10).

`specmon sim --log` writes, per request, `chunk_ns`: the CLOCK_MONOTONIC ns right before
each body part (an SSE round, or the whole JSON body) was handed to the server's
transport (specmon/sim/server.py RawResponse). specmon stamps each response with
time.perf_counter_ns(), which is CLOCK_MONOTONIC on Linux, so on one machine the two are
on one clock. For each request (matched by X-Request-ID) the client-added delay is
  first: response_ns[0] - chunk_ns[0]   (first part received - first part written)
  last:  response_ns[-1] - chunk_ns[-1]  (last part: the usage chunk with [DONE], or the body)
For AIPerf 0.13 (the cached venv from .ci/setup_aiperf.sh; skipped when absent) the same
is read from its raw export (start_perf_ns + each response's perf_ns), converted with
specmon/interop/aiperf.py. Prints p50/p99 of both delays per tool and concurrency, and
whether specmon's headless run printed its client-saturation warning.

Examples:
  nice python benchmarks/bench_timing.py                     # 1,16,64,256 x 2,000 requests
  python benchmarks/bench_timing.py --concurrency 1,64 --requests 500 --no-aiperf
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from specmon.interop.aiperf import read_raw_export
from specmon.sim.process import start_sim
from specmon.stats import percentile

LAG_WARNING = "client saturated"  # formatting.saturation_text, via run/headless.py _warn_lag
US = 1000.0  # ns per microsecond


def sim_chunks(log: Path) -> dict[str, list[int]]:
    """x_request_id -> chunk_ns of every answered request in the simulator's log."""
    out: dict[str, list[int]] = {}
    for line in log.read_bytes().splitlines():
        entry = orjson.loads(line)
        if entry.get("x_request_id") and entry.get("chunk_ns"):
            out[entry["x_request_id"]] = entry["chunk_ns"]
    return out


def delays(captures: list[dict], chunks: dict[str, list[int]]) -> tuple[list[float], list[float]]:
    """(first, last) client-added delays in us over the requests found in both."""
    first, last = [], []
    for cap in captures:
        sent, got = chunks.get(str(cap.get("x_request_id"))), cap.get("response_ns")
        if sent and got and not cap.get("error"):
            first.append((got[0] - sent[0]) / US)
            last.append((got[-1] - sent[-1]) / US)
    return first, last


def sim_gap_p99_ms(chunks: dict[str, list[int]]) -> float:
    """p99 of the simulator's own gap between consecutive writes of one request, in ms.

    With --step-ms 2 a gap far above 2 ms means the simulator's loop (on the same cores as
    specmon) was saturated: then its late writes, not specmon, shape the tail."""
    gaps = sorted((b - a) / 1e6 for c in chunks.values() for a, b in zip(c, c[1:]))
    return percentile(gaps, 99) if gaps else 0.0


def run_specmon(url: str, out: Path, concurrency: int, args: argparse.Namespace) -> str:
    command = [
        sys.executable, "-m", "specmon", "run", "--url", url, "--headless", "--streaming",
        "--request-count", str(args.requests), "--concurrency", str(concurrency),
        "--output-tokens-mean", str(args.osl), "--prompt-source", "synthetic",
        "--synthetic-input-tokens-mean", "64",
        "--export-level", "raw", "--artifact-dir", str(out), "--no-server-metrics",
        "--random-seed", "1",
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"specmon run failed ({proc.returncode}): {proc.stderr[-600:]}")
    return proc.stderr + proc.stdout


def specmon_captures(out: Path) -> list[dict]:
    lines = (out / "profile_export_raw.jsonl").read_bytes().splitlines()
    return [orjson.loads(line) for line in lines]


def aiperf_captures(url: str, out: Path, concurrency: int, args: argparse.Namespace) -> list[dict]:
    from peer.aiperf_peer import run_aiperf  # tests/peer: the one place AIPerf is launched

    proc = run_aiperf(
        url, "specmon-sim", out, streaming=True, requests=args.requests, osl=args.osl,
        concurrency=concurrency,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"aiperf failed ({proc.returncode}): {proc.stderr[-600:]}")
    return read_raw_export(out).captures


def row(tool: str, c: int, first: list[float], last: list[float], note: str = "") -> str:
    if not first:
        return f"{tool:<8} {c:>5} {'no matched requests':>50}"
    f1, l1 = sorted(first), sorted(last)
    cells = [percentile(f1, 50), percentile(f1, 99), percentile(l1, 50), percentile(l1, 99)]
    return f"{tool:<8} {c:>5} {len(first):>7} " + " ".join(f"{v:>10.0f}" for v in cells) + note


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--concurrency", default="1,16,64,256")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--osl", type=int, default=32, help="output tokens per request")
    ap.add_argument("--no-aiperf", action="store_true")
    args = ap.parse_args(argv)
    aiperf = not args.no_aiperf and Path.home().joinpath(".cache/specmon/aiperf-venv").exists()
    print("client-added delay, us (receive - simulator write, CLOCK_MONOTONIC)")
    print(f"{'tool':<8} {'conc':>5} {'matched':>7} {'first p50':>10} {'first p99':>10} "
          f"{'last p50':>10} {'last p99':>10}")  # fmt: skip
    for c in [int(x) for x in args.concurrency.split(",")]:
        with tempfile.TemporaryDirectory(prefix="specmon-bench-timing-") as tmp:
            log = Path(tmp) / "sim.jsonl"
            with start_sim(["--seed", "1", "--step-ms", "2", "--log", str(log)]) as sim:
                text = run_specmon(sim.url, Path(tmp) / "specmon", c, args)
                chunks = sim_chunks(log)
                warned = " saturation warning printed" if LAG_WARNING in text else ""
                warned += f"  sim write-gap p99 {sim_gap_p99_ms(chunks):.1f} ms"
                first, last = delays(specmon_captures(Path(tmp) / "specmon"), chunks)
                print(row("specmon", c, first, last, warned), flush=True)
                if aiperf:
                    caps = aiperf_captures(sim.url, Path(tmp) / "aiperf", c, args)
                    first, last = delays(caps, sim_chunks(log))
                    print(row("aiperf", c, first, last), flush=True)
    if not aiperf:
        print("(AIPerf not run: --no-aiperf, or no venv from .ci/setup_aiperf.sh)")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
