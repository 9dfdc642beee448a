"""Start `specmon sim` as a child process (for tests and `specmon demo`).

with start_sim(["--num-spec-tokens", "4", "--seed", "1"]) as sim:
    list_models(sim.url)  # ['specmon-sim'] (server/models.py)

The process is a server/process.py ServerProcess: its own process group, `.url`, `.model`,
`stop()`, `kill_now()`.
"""

from __future__ import annotations

import sys
import time

from specmon.errors import UserError
from specmon.server.process import ServerProcess

LISTEN_PREFIX = "specmon sim listening on "


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
    sim = ServerProcess(command)  # its own process group (server/process.py)
    sim.url = sim.read_line(LISTEN_PREFIX, timeout) or ""
    model = _flag(args, "--model", "specmon-sim") or "specmon-sim"
    api_key = _flag(args, "--api-key", None)
    if sim.wait_ready(model, max(0.0, deadline - time.monotonic()), api_key) is not None:
        return sim
    code = sim.stop()
    raise UserError(f"specmon sim did not start (exit status {code}); command: {' '.join(command)}")
