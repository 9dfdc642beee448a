"""Memory benchmark: RSS of `specmon run` over a long run (issues 10 and 19: flat memory).

Starts `specmon sim` with zero latency (`--preset zero`) and one `specmon run` against it,
headless or (`--tui`) with the monitor in a detached tmux pane (100x30, the same process
drawing at 4 Hz), with specmon's default options unless `--profile synthetic`; while the
run goes on it counts the lines of profile_export.jsonl and prints the run's RSS
(/proc/PID/status VmRSS) every `--every` requests, with the growth per request since the
first sample (start-up cost and the bounded windows, which fill early, cancel out of that
figure). At the end it checks that the summary is still exact: the request count and the
request latency's and output length's statistics recomputed from the JSONL.

What bounds the run time is the simulator, one process on one core: `--output-tokens 1`
(one verify step a request) and the default concurrency keep it near its best rate;
`--workers N` spreads specmon's own load over N processes when the client is the limit.

Examples:
  nice python benchmarks/bench_memory.py                      # 1,000,000 requests, headless
  nice python benchmarks/bench_memory.py --tui
  python benchmarks/bench_memory.py --requests 100000 --every 10000
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from specmon.sim.process import start_sim
from specmon.stats import compute_stats

TMUX_SOCKET = "specmon-bench-mem"  # a private tmux server: never anyone else's
CHECKED = ("request_latency", "output_sequence_length")  # recomputed from the JSONL at the end

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
    args = _parse(argv)
    # a SIGTERM to this script still stops its run, its tmux server and its simulator
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sim = start_sim(["--preset", "zero", "--seed", "1", *shlex.split(args.sim_args)])
    with tempfile.TemporaryDirectory(prefix="specmon-bench-mem-") as tmp:
        out = Path(tmp) / "run"
        command = [
            sys.executable, "-m", "specmon", "run", "--url", sim.url,
            "--request-count", str(args.requests), "--concurrency", str(args.concurrency),
            "--output-tokens-mean", str(args.output_tokens), "--artifact-dir", str(out),
            "--random-seed", "1", *(["--streaming"] if args.streaming else ["--no-streaming"]),
            *(["--workers", str(args.workers)] if args.workers > 1 else []),
            *PROFILES[args.profile],
        ]  # fmt: skip
        run = TuiRun(command) if args.tui else HeadlessRun(command)
        print(f"{'TUI' if args.tui else 'headless'}, profile {args.profile}: {shlex.join(command)}")
        try:
            code = _sample(run, LineCounter(out / "profile_export.jsonl"), args)
            return code or _check_summary(out)
        finally:
            run.close()
            sim.stop()


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--every", type=int, default=50_000, help="print RSS every N requests")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument("--streaming", action="store_true", help="SSE (slower per request)")
    ap.add_argument("--tui", action="store_true", help="the monitor in a tmux pane, not --headless")
    ap.add_argument("--workers", type=int, default=1, help="specmon run --workers N")
    ap.add_argument("--sim-args", default="", help="more `specmon sim` options, one string")
    ap.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="defaults",
        help="defaults: the options a user gets (first); synthetic: no categories, no /metrics",
    )
    return ap.parse_args(argv)


class HeadlessRun:
    """`specmon run --headless` as a child process."""

    def __init__(self, command: list[str]) -> None:
        # stderr to a file: a pipe nobody reads until the end fills up (alarm lines,
        # warnings) and blocks the run
        self._stderr = tempfile.TemporaryFile()
        self.popen = subprocess.Popen(
            [*command, "--headless"], stdout=subprocess.DEVNULL, stderr=self._stderr
        )
        self.pid = self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def done(self) -> None:
        """The run reached its count: a headless run ends by itself."""

    def errors(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def close(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            self.popen.wait(timeout=30)


class TuiRun:
    """The monitor in a detached 100x30 tmux pane on a private socket; `exec` makes the
    pane's process specmon itself, so its PID is the one to sample. It stays open after
    the run (q closes it), so done() presses q."""

    def __init__(self, command: list[str]) -> None:
        if shutil.which("tmux") is None:
            raise SystemExit("--tui needs tmux")
        self._status = Path(tempfile.mkdtemp(prefix="specmon-bench-tui-")) / "status"
        # Textual draws on stderr: it stays the pane's; the exit status goes to a file
        line = f"unset COLUMNS LINES; {shlex.join(command)}; echo $? >{self._status}"
        self._tmux("new-session", "-d", "-s", "mem", "-x", "100", "-y", "30", line)
        self.pid = self._specmon_pid()

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", TMUX_SOCKET, *args], capture_output=True, text=True)
        return done.stdout

    def _specmon_pid(self) -> int:
        shell = int(self._tmux("list-panes", "-t", "mem", "-F", "#{pane_pid}").split()[0])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the shell's child running python -m specmon
            for child in Path(f"/proc/{shell}/task/{shell}/children").read_text().split():
                if b"specmon" in Path(f"/proc/{child}/cmdline").read_bytes():
                    return int(child)
            time.sleep(0.05)
        raise SystemExit("specmon never started in the tmux pane")

    def poll(self) -> int | None:
        return int(self._status.read_text()) if self._status.exists() else None

    def done(self) -> None:
        self._tmux("send-keys", "-t", "mem", "q")

    def errors(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "mem")

    def close(self) -> None:
        self._tmux("kill-server")
        shutil.rmtree(self._status.parent, ignore_errors=True)


def _sample(run: HeadlessRun | TuiRun, lines: LineCounter, args: argparse.Namespace) -> int:
    print(f"{'requests':>10} {'RSS MB':>8} {'bytes/request since first':>26} {'req/s':>8}")
    first: tuple[int, float] | None = None
    next_at, t0, asked = args.every, time.monotonic(), False
    samples: list[tuple[int, float]] = []
    while run.poll() is None:
        n = lines.poll()
        if n >= next_at:
            rss = rss_mb(run.pid)
            if rss is not None:
                samples.append((n, rss))
                first = first or (n, rss)
                growth = (rss - first[1]) * 1024 * 1024 / (n - first[0]) if n > first[0] else 0.0
                rate = n / (time.monotonic() - t0)
                print(f"{n:>10,} {rss:>8.1f} {growth:>26.0f} {rate:>8.0f}", flush=True)
            next_at = (n // args.every + 1) * args.every
        if n >= args.requests and not asked:
            asked = True
            run.done()
        time.sleep(0.2)
    if run.poll() != 0:
        print(f"specmon run exited {run.poll()}: {run.errors().strip()[-800:]}", file=sys.stderr)
        return 1
    print(f"finished: {lines.poll():,} requests in {time.monotonic() - t0:.0f} s")
    # the samples of the run going on: one taken once every line is written can land
    # while the exports are computed (a transient, +2.6 MB at 30,000 requests)
    print(second_half([s for s in samples if s[0] < args.requests] or samples))
    return 0


def second_half(samples: list[tuple[int, float]]) -> str:
    """Growth over the second half of the run alone (the sample nearest the middle to the
    last one): what a long session adds once every bounded window is full, without the
    start-up and the filling of the windows (issue 35 item 6)."""
    if len(samples) < 3:
        return "second half: too few samples (lower --every)"
    last = samples[-1]
    mid = min(samples[:-1], key=lambda s: abs(s[0] - last[0] / 2))
    growth = (last[1] - mid[1]) * 1024 * 1024 / (last[0] - mid[0])
    return (
        f"second half: {mid[0]:,} -> {last[0]:,} requests, RSS {mid[1]:.1f} -> {last[1]:.1f} "
        f"MB, {growth:.0f} bytes/request"
    )


def _check_summary(out: Path) -> int:
    """The summary against the JSONL: the request count, and the statistics of CHECKED
    computed from every line (AIPerf's definitions, specmon/stats.py)."""
    doc = orjson.loads((out / "profile_export_aiperf.json").read_bytes())
    values: dict[str, list[float]] = {tag: [] for tag in CHECKED}
    valid = 0
    with open(out / "profile_export.jsonl", "rb") as f:
        for line in f:
            record = orjson.loads(line)
            if record.get("error") or record["metadata"].get("benchmark_phase") != "profiling":
                continue
            valid += 1
            for tag in CHECKED:
                values[tag].append(record["metrics"][tag]["value"])
    bad = [] if doc["request_count"]["avg"] == valid else [f"request_count {valid}"]
    for tag in CHECKED:
        want = compute_stats(sorted(values[tag]), presorted=True)
        got = doc[tag]
        for key in ("p50", "p99", "min", "max"):
            if abs(got[key] - want[key]) > 1e-9 * max(1.0, abs(want[key])):
                bad.append(f"{tag}.{key} {got[key]} != {want[key]}")
    print("summary exact against the JSONL" if not bad else f"summary differs: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
