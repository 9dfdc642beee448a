"""Memory benchmark: RSS of `specmon run --headless` over a long run (issue 10: flat memory).

Starts `specmon sim` with zero latency (its defaults) and one `specmon run --headless`
against it, with specmon's default options unless `--profile synthetic`, then, while the run goes on, counts the lines of its
profile_export.jsonl and prints the run's RSS (/proc/PID/status VmRSS) every `--every`
requests, with the growth per request since the first sample (start-up cost and the
bounded windows, which fill early, cancel out of that figure).

Examples:
  nice python benchmarks/bench_memory.py                      # 1,000,000 requests
  python benchmarks/bench_memory.py --requests 100000 --every 10000
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from specmon.sim.process import start_sim

# What differs from specmon's defaults. "defaults" leaves every option that shapes memory
# as a user gets it: built-in prompts (which carry categories: the per-category tables),
# server metrics polled, export level records.
PROFILES = {
    "defaults": [],
    "synthetic": [
        "--prompt-source", "synthetic", "--synthetic-input-tokens-mean", "64",
        "--no-server-metrics",
    ],
}  # fmt: skip


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


class LineCounter:
    """Counts the newlines of a growing file, reading only what was appended."""

    def __init__(self, path: Path) -> None:
        self.path, self.count, self._pos = path, 0, 0

    def poll(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._pos)
                chunk = f.read()
        except OSError:
            return self.count
        self._pos += len(chunk)
        self.count += chunk.count(b"\n")
        return self.count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--every", type=int, default=50_000, help="print RSS every N requests")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument("--streaming", action="store_true", help="SSE (slower per request)")
    ap.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="defaults",
        help="defaults: the options a user gets (first); synthetic: no categories, no /metrics",
    )
    args = ap.parse_args(argv)
    sim = start_sim(["--seed", "1"])
    with tempfile.TemporaryDirectory(prefix="specmon-bench-mem-") as tmp:
        out = Path(tmp) / "run"
        command = [
            sys.executable, "-m", "specmon", "run", "--url", sim.url, "--headless",
            "--request-count", str(args.requests), "--concurrency", str(args.concurrency),
            "--output-tokens-mean", str(args.output_tokens), "--artifact-dir", str(out),
            "--random-seed", "1", *(["--streaming"] if args.streaming else ["--no-streaming"]),
            *PROFILES[args.profile],
        ]  # fmt: skip
        run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            return _sample(run, LineCounter(out / "profile_export.jsonl"), args)
        finally:
            if run.poll() is None:
                run.terminate()
                run.wait(timeout=30)
            sim.stop()


def _sample(run: subprocess.Popen, lines: LineCounter, args: argparse.Namespace) -> int:
    print(f"{'requests':>10} {'RSS MB':>8} {'bytes/request since first':>26} {'req/s':>8}")
    first: tuple[int, float] | None = None
    next_at, t0 = args.every, time.monotonic()
    while run.poll() is None:
        n = lines.poll()
        if n >= next_at:
            rss = rss_mb(run.pid)
            if rss is not None:
                first = first or (n, rss)
                growth = (rss - first[1]) * 1024 * 1024 / (n - first[0]) if n > first[0] else 0.0
                rate = n / (time.monotonic() - t0)
                print(f"{n:>10,} {rss:>8.1f} {growth:>26.0f} {rate:>8.0f}", flush=True)
            next_at = (n // args.every + 1) * args.every
        time.sleep(0.2)
    err = run.stderr.read().decode(errors="replace") if run.stderr else ""
    if run.returncode != 0:
        print(f"specmon run exited {run.returncode}: {err.strip()[-800:]}", file=sys.stderr)
        return 1
    print(f"finished: {lines.poll():,} requests in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
