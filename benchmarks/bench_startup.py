"""Start-up benchmark: how long after exec a `specmon` process has its stop handlers (issue 19
item 1: a signal before them gets the default action; docs/stopping.md).

Spawns the installed console script (`specmon run --headless` against a socket that never
answers, so the run waits in its preflight) `--repeats` times and reads the kernel's view of
the process (/proc/PID/status, SigCgt) in a tight loop from the moment the spawn returns:

* "interpreter": SIGINT caught: CPython's own handler, installed while the interpreter
  initialises, before `site` and any .pth file run;
* "specmon": SIGTERM and SIGHUP caught too: the first lines of specmon/__init__.py ran.

The window in which a signal still kills specmon without exports is the second figure.
Linux only (/proc). Example:
  python benchmarks/bench_startup.py --repeats 50
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIGINT_BIT = 1 << (signal.SIGINT - 1)
# under nohup the child inherits an ignored SIGHUP, which specmon keeps ignored
_HUP_IGNORED = signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
SPECMON_BITS = (1 << (signal.SIGTERM - 1)) | (0 if _HUP_IGNORED else 1 << (signal.SIGHUP - 1))
POLL_LIMIT_S = 30.0
POLL_S = 0.0005  # the figures' resolution


def caught(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def one_start(command: list[str]) -> tuple[float, float]:
    """(ms to the interpreter's SIGINT handler, ms to specmon's handlers) after the spawn."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    interpreter = None
    try:
        while time.perf_counter() - t0 < POLL_LIMIT_S:
            mask = caught(proc.pid)
            now = time.perf_counter()
            if interpreter is None and mask & SIGINT_BIT:
                interpreter = now
            if mask & SPECMON_BITS == SPECMON_BITS:
                return ((interpreter or now) - t0) * 1e3, (now - t0) * 1e3
            time.sleep(POLL_S)  # a spinning reader would take a core from the child
        raise RuntimeError(f"no handlers after {POLL_LIMIT_S} s: {' '.join(command)}")
    finally:
        proc.kill()
        proc.wait()


def describe(name: str, values: list[float]) -> str:
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return (
        f"{name:<12} median {statistics.median(values):6.1f} ms  p90 {p90:6.1f} ms  "
        f"min {values[0]:6.1f}  max {values[-1]:6.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--script", default=shutil.which("specmon"), help="the console script")
    args = ap.parse_args(argv)
    if not args.script:
        print("no `specmon` console script on PATH (pip install -e .)", file=sys.stderr)
        return 2
    with socket.socket() as listener, tempfile.TemporaryDirectory() as tmp:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        command = [args.script, "run", "--headless", "--url", url, "--artifact-dir", tmp]
        starts = [one_start(command) for _ in range(args.repeats)]
    print(f"{args.repeats} starts of {args.script}; load average {os.getloadavg()[0]:.1f}")
    print(describe("interpreter", [a for a, _ in starts]))
    print(describe("specmon", [b for _, b in starts]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
