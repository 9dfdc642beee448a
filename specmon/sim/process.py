"""Start `specmon sim` as a child process (for tests and `specmon demo`).

with start_sim(["--num-spec-tokens", "4", "--seed", "1"]) as sim:
    httpx.get(sim.url + "/v1/models")
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import orjson

from specmon.errors import UserError

LISTEN_PREFIX = "specmon sim listening on "
# the read end of a pipe only the parent writes to: EOF there means the parent is gone
PARENT_FD_ENV = "_SPECMON_SIM_PARENT_FD"


class SimProcess:
    """A running simulator child process; `.url` is its base URL (no trailing slash)."""

    def __init__(
        self, proc: subprocess.Popen, url: str, model: str, parent_fd: int | None = None
    ) -> None:
        self.proc = proc
        self.url = url
        self.model = model
        self._parent_fd = parent_fd  # the pipe's write end: held for the child's lifetime

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
        if self._parent_fd is not None:
            os.close(self._parent_fd)
            self._parent_fd = None
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


def _model_listed(url: str, model: str, api_key: str | None) -> bool:
    request = urllib.request.Request(url + "/v1/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            ids = [m.get("id") for m in orjson.loads(response.read()).get("data", [])]
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return model in ids


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
    # ...yet it dies with the client even when the client is SIGKILLed: it watches a pipe
    # whose write end only this process holds (exit_with_parent)
    read_fd, write_fd = os.pipe()
    env[PARENT_FD_ENV] = str(read_fd)
    try:
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            process_group=0,
            pass_fds=(read_fd,),
        )
    except BaseException:
        os.close(write_fd)
        raise
    finally:
        os.close(read_fd)
    deadline = time.monotonic() + timeout
    url = _read_listen_line(proc, timeout)
    model = _flag(args, "--model", "specmon-sim") or "specmon-sim"
    api_key = _flag(args, "--api-key", None)
    sim = SimProcess(proc, url or "", model, write_fd)
    while url and time.monotonic() < deadline and proc.poll() is None:
        if _model_listed(url, model, api_key):
            return sim
        time.sleep(0.05)
    sim.stop()
    raise UserError(
        f"specmon sim did not start (exit status {proc.returncode}); command: {' '.join(command)}"
    )


def exit_with_parent() -> None:
    """In the simulator (`specmon sim` started by start_sim): SIGTERM itself, a graceful
    stop, once the process that started it is gone, however it ended (SIGKILL included: the
    kernel closes its end of the pipe). A no-op for a simulator started by hand."""
    fd = os.environ.pop(PARENT_FD_ENV, None)
    if fd is None or not fd.isdigit():
        return

    def wait() -> None:
        try:
            while os.read(int(fd), 1):
                pass
        except OSError:
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait, name="specmon-parent-watch", daemon=True).start()
