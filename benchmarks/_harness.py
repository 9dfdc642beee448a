"""Shared pieces of the benchmark scripts: free ports, child processes measured with wait4,
and markdown tables.

A child's CPU time and peak RSS come from `os.wait4`, which reports the child together with
every descendant it waited for (so `--workers` processes and AIPerf's services count too).
Peak RSS is the largest single process of that tree, not a sum.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


class BenchError(RuntimeError):
    """A benchmark could not be run (missing tool, server did not start, child failed)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, timeout_s: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise BenchError(f"server exited with status {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise BenchError(f"nothing listened on 127.0.0.1:{port} within {timeout_s:g} s")


@dataclass
class ChildUsage:
    returncode: int
    wall_s: float
    cpu_s: float  # user + system, child and its waited-for descendants
    maxrss_mb: float
    stdout: str
    stderr: str

    def tail(self, lines: int = 8) -> str:
        text = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return "\n".join(text[-lines:])


def run_measured(
    cmd: Sequence[str], *, timeout_s: float, env: dict | None = None, cwd: str | Path | None = None
) -> ChildUsage:
    """Run `cmd` to completion; return its exit status, wall time, CPU time and peak RSS.

    stdout/stderr go to temp files (no pipe can fill up and stall the child). On timeout the
    child's process group gets SIGTERM, then SIGKILL, and BenchError is raised.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(cmd),
            stdout=out,
            stderr=err,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        status, usage = _wait4(proc, start + timeout_s)
        wall = time.perf_counter() - start
        if status is None:
            raise BenchError(f"timed out after {timeout_s:g} s: {' '.join(cmd[:6])} ...")
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return ChildUsage(
            proc.returncode,
            wall,
            usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1024.0,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
        )


def _wait4(proc: subprocess.Popen, deadline: float):
    """Poll wait4 until the child ends or the deadline passes (then kill its group)."""
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            return status, usage
        if time.perf_counter() > deadline:
            stop_group(proc)
            os.wait4(proc.pid, 0)
            return None, None
        time.sleep(0.02)


def stop_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM the child's process group, SIGKILL it if it lingers (started with its own session)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return
            time.sleep(0.05)


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGTERM if this script dies (even by SIGKILL), so no server
    outlives the benchmark (Linux prctl PR_SET_PDEATHSIG; a no-op elsewhere)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def specmon_cmd() -> list[str]:
    """specmon from the interpreter running this script (the venv it is installed in)."""
    return [sys.executable, "-m", "specmon"]


def parse_int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise SystemExit(f"error: expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise SystemExit(f"error: expected positive integers, got {text!r}")
    return values


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |",
        "| " + " | ".join("-" * w for w in widths) + " |",
    ]
    for row in cells:
        lines.append(
            "| "
            + " | ".join(
                c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))
            )
            + " |"
        )
    return "\n".join(lines)


def _cell(value: object) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
