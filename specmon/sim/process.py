"""Start `specmon sim` as a child process (for tests and `specmon demo`).

with start_sim(["--num-spec-tokens", "4", "--seed", "1"]) as sim:
    list_models(sim.url)  # ['specmon-sim'] (server/models.py)

The process is a server/process.py ServerProcess: its own process group, `.url`, `.model`,
`stop()`, `kill_now()`.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from specmon.errors import UserError
from specmon.server.process import ServerProcess

LISTEN_PREFIX = "specmon sim listening on "
# the read end of a pipe only the parent writes to: EOF there means the parent is gone
PARENT_FD_ENV = "_SPECMON_SIM_PARENT_FD"


def _flag(args: list[str], name: str, default: str | None) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def start_sim(args: list[str], timeout: float = 30) -> ServerProcess:
    """Start `python -m specmon sim --port 0 ARGS`, wait until /v1/models lists its model.

    `args` may override --port/--host. Raises UserError if it exits or is not ready in time
    (the child's stderr is inherited, so its own error line is shown).
    """
    command = [sys.executable, "-m", "specmon", "sim", "--port", "0", *args]
    deadline = time.monotonic() + timeout
    # its own process group (server/process.py), yet it dies with the client even when the
    # client is SIGKILLed: it watches a pipe whose write end only this process holds
    sim = ServerProcess(command, parent_pipe_env=PARENT_FD_ENV)
    sim.url = sim.read_line(LISTEN_PREFIX, timeout) or ""
    model = _flag(args, "--model", "specmon-sim") or "specmon-sim"
    api_key = _flag(args, "--api-key", None)
    if sim.wait_ready(model, max(0.0, deadline - time.monotonic()), api_key) is not None:
        return sim
    code = sim.stop()
    raise UserError(f"specmon sim did not start (exit status {code}); command: {' '.join(command)}")


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
