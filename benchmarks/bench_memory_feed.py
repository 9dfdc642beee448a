"""Memory per request at a million requests in minutes: what specmon keeps, without HTTP.

bench_memory.py measures a real `specmon run` against `specmon sim`, whose rate the machine
bounds (a few hundred requests a second on a shared 2-core machine: hours to 1,000,000).
This script keeps everything that run keeps per request and drops only the wire:

1. a real `specmon run --headless --export-level raw` against `specmon sim` (specmon's
   default options: built-in prompts with categories, non-streamed) records `--seed-requests`
   real captures (what the client hands the session: the server's bodies and times);
2. the run's own session and sinks, built as `specmon run` builds them
   (run/assemble.make_session inside a MultiRun: JSONL, categories, alarms, segments,
   server counters), are fed those captures in a loop at CPU speed, each one shifted in time,
   its latency jittered (so time metrics stay distinct, as in a real run) and given a fresh
   request id; with `--tui` the monitor (SpecmonApp, headless Textual at 100x30, refreshing at
   4 Hz) reads the session while it is fed.

RSS of this process (/proc/self/status) every `--every` requests, with the growth per
request since the first sample; at the end the summary's request count and request latency
statistics are checked against the JSONL, as in bench_memory.py.

Examples:
  python benchmarks/bench_memory_feed.py                    # 1,000,000 requests, headless
  python benchmarks/bench_memory_feed.py --tui
"""

from __future__ import annotations

import argparse
import asyncio
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench_memory import _check_summary

from specmon.capture import RawCapture
from specmon.config import RunConfig
from specmon.run.assemble import make_runner, make_session
from specmon.run.multi import MultiRun
from specmon.sim.process import start_sim


def record_captures(count: int, output_tokens: int, tmp: Path) -> tuple[str, list[dict]]:
    """(the sim's URL, `count` raw captures of a real run against it)."""
    out = tmp / "seed"
    with start_sim(["--preset", "zero", "--seed", "1"]) as sim:
        subprocess.run(
            [sys.executable, "-m", "specmon", "run", "--url", sim.url, "--headless",
             "--request-count", str(count), "--concurrency", "64", "--no-streaming",
             "--output-tokens-mean", str(output_tokens), "--export-level", "raw",
             "--artifact-dir", str(out), "--random-seed", "1"],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        url = sim.url
    lines = (out / "profile_export_raw.jsonl").read_bytes().splitlines()
    return url, [orjson.loads(line) for line in lines]


class Feeder:
    """Captures into the session in a loop, each shifted past the previous one."""

    def __init__(self, session, captures: list[dict], total: int, every: int) -> None:
        self.session, self.captures, self.total, self.every = session, captures, total, every
        self.done = 0
        self.rng = random.Random(1)
        self.samples: list[tuple[int, float]] = []
        self.t0 = time.monotonic()

    def run(self) -> None:
        span = max(c["end_ns"] for c in self.captures) - min(c["start_ns"] for c in self.captures)
        for i in range(self.total):
            base = self.captures[i % len(self.captures)]
            self.session.add(self._shifted(base, (i // len(self.captures)) * span))
            self.done = i + 1
            if self.done % self.every == 0:
                self._sample()

    def _shifted(self, c: dict, offset: int) -> RawCapture:
        jitter = self.rng.randrange(0, 50_000)  # up to 50 us: distinct latencies
        return RawCapture(**{
            **c,
            "start_ns": c["start_ns"] + offset,
            "end_ns": c["end_ns"] + offset + jitter,
            "response_ns": [t + offset + jitter for t in c.get("response_ns") or []],
            "wall_start_ns": (c.get("wall_start_ns") or 0) + offset,
            "x_request_id": uuid.uuid4().hex,
            "responses": list(c["responses"]),
        })  # fmt: skip

    def _sample(self) -> None:
        rss = _self_rss()
        self.samples.append((self.done, rss))
        first = self.samples[0]
        n = self.done - first[0]
        growth = (rss - first[1]) * 1024 * 1024 / n if n else 0.0
        rate = self.done / (time.monotonic() - self.t0)
        print(f"{self.done:>10,} {rss:>8.1f} {growth:>26.0f} {rate:>8.0f}", flush=True)


def _self_rss() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def run_with_tui(multi: MultiRun, config: RunConfig, feeder: Feeder) -> None:
    from specmon.interfaces import MonitorConfig
    from specmon.tui.app import SpecmonApp

    async def drive() -> None:
        app = SpecmonApp(multi.primary.session, multi, MonitorConfig.of_run(config))
        async with app.run_test(size=(100, 30)) as pilot:
            thread = threading.Thread(target=feeder.run, daemon=True)
            thread.start()
            while thread.is_alive():
                await pilot.pause(0.25)  # the app's own 4 Hz refresh runs meanwhile
            await pilot.pause(0.5)

    asyncio.run(drive())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--every", type=int, default=50_000)
    ap.add_argument("--seed-requests", type=int, default=4_000)
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument(
        "--tui", action="store_true", help="the monitor reads the session (headless Textual)"
    )
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="specmon-bench-feed-") as tmp:
        url, captures = record_captures(args.seed_requests, args.output_tokens, Path(tmp))
        config = RunConfig(
            url=[url], artifact_dir=str(Path(tmp) / "run"), random_seed=1,
            request_count=args.requests, output_tokens_mean=args.output_tokens, headless=not args.tui,
        )  # fmt: skip
        multi = MultiRun(
            config, make_session, make_runner, detect=lambda *_: None, note=lambda *_: None
        )
        feeder = Feeder(multi.primary.session, captures, args.requests, args.every)
        mode = "TUI (headless Textual 100x30)" if args.tui else "headless"
        print(f"{mode}: {len(captures):,} recorded captures fed {args.requests:,} times")
        print(f"{'requests':>10} {'RSS MB':>8} {'bytes/request since first':>26} {'req/s':>8}")
        if args.tui:
            run_with_tui(multi, config, feeder)
        else:
            feeder.run()
        multi.primary.session.finish(was_cancelled=False)
        print(f"finished: {feeder.done:,} requests in {time.monotonic() - feeder.t0:.0f} s")
        return _check_summary(Path(config.artifact_dir))


if __name__ == "__main__":
    raise SystemExit(main())
