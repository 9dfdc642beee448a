"""Start `specmon sim` as a child process (for tests and `specmon demo`).

with start_sim(["--num-spec-tokens", "4", "--seed", "1"]) as sim:
    list_models(sim.url)  # ['specmon-sim']
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from specmon.errors import UserError
from specmon.server.models import list_models

LISTEN_PREFIX = "specmon sim listening on "


class SimProcess:
    """A running simulator child process; `.url` is its base URL (no trailing slash)."""

    def __init__(self, proc: subprocess.Popen, url: str, model: str) -> None:
        self.proc = proc
        self.url = url
        self.model = model

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, timeout: float = 10.0) -> int | None:
        """Terminate (SIGTERM), wait, and kill if it does not exit in time. Idempotent."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode

    def kill_now(self) -> None:
        """SIGKILL, nothing else: for a parent about to os._exit (specmon/stops.py
        on_abandon), which would otherwise leave the simulator running."""
        try:
            os.kill(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _read_listen_line(proc: subprocess.Popen, timeout: float) -> str | None:
    """Read stdout lines until the listening line (in a thread, so the wait is bounded)."""
    found: list[str] = []

    def reader() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.startswith(LISTEN_PREFIX):
                found.append(line[len(LISTEN_PREFIX) :].strip())
                return

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    thread.join(timeout)
    return found[0] if found else None


def _flag(args: list[str], name: str, default: str | None) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def start_sim(args: list[str], timeout: float = 30) -> SimProcess:
    """Start `python -m specmon sim --port 0 ARGS`, wait until /v1/models lists its model.

    `args` may override --port/--host. Raises UserError if it exits or is not ready in time
    (the child's stderr is inherited, so its own error line is shown).
    """
    command = [sys.executable, "-m", "specmon", "sim", "--port", "0", *args]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # Its own process group: the signals a terminal sends its foreground group (Ctrl-C, the
    # SIGHUP of a closed pane or an ssh drop) reach only the client, which drains its requests
    # and then stops the simulator, as a real server would outlive the client's terminal.
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env, process_group=0)
    deadline = time.monotonic() + timeout
    url = _read_listen_line(proc, timeout)
    model = _flag(args, "--model", "specmon-sim") or "specmon-sim"
    api_key = _flag(args, "--api-key", None)
    sim = SimProcess(proc, url or "", model)
    while url and time.monotonic() < deadline and proc.poll() is None:
        if model in list_models(url, api_key):
            return sim
        time.sleep(0.05)
    sim.stop()
    raise UserError(
        f"specmon sim did not start (exit status {proc.returncode}); command: {' '.join(command)}"
    )
