"""A sweep arm's server: its command from a template (placeholders {k} {port} {gpus}
{python}), started as its own process group with a watchdog (server/process.py), ready
once /v1/models lists the model, and the failure that names its log's last lines."""

from __future__ import annotations

import json
import shlex
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from specmon.export.common import atomic_write
from specmon.run.sweep.settings import (
    PLACEHOLDERS,
    SCHEDULE_ARM,
    SCHEDULE_PLACEHOLDER,
    VLLM_K,
    row_label,
    schedule_placement,
)
from specmon.server.process import ServerProcess, shell

STOP_GRACE_S = 15.0  # SIGTERM -> SIGKILL; vLLM ends its engine tree in a few seconds
LOG_TAIL_LINES = 12


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def schedule_command(
    template: str, schedule: dict[str, Any], path: Path, port: int, gpus: list[str] | None = None
) -> str:
    """The --serve command with the schedule: k is the schedule's largest K (vLLM's and the
    simulator's num_speculative_tokens is the schedule's maximum). With {schedule} the
    fragment is written to a file beside `path` and the placeholder names it."""
    entries = schedule["num_speculative_tokens_per_batch_size"]
    max_k = max(int(entry[2]) for entry in entries)
    placement = schedule_placement(template)
    if placement == "file":
        fragment = write_fragment(
            path.parent, SCHEDULE_ARM, schedule["speculative_config_fragment"]
        )
        return substitute(template, max_k, port, gpus, fragment)
    if placement == "vllm":
        extra = ', "num_speculative_tokens_per_batch_size": ' + json.dumps(entries)
        template = VLLM_K.sub(lambda m: m.group(0) + extra, template, count=1)
    else:
        template = f"{template} --spec-schedule {shlex.quote(str(path))}"
    return substitute(template, max_k, port, gpus)


def write_fragment(directory: Path, row: int | str, fragment: dict[str, Any]) -> Path:
    """The speculative-config fragment a {schedule} placeholder names, written atomically:
    `{"num_speculative_tokens": k}` for a fixed k, the schedule's fragment (with
    `num_speculative_tokens_per_batch_size`) for the schedule arm."""
    name = (
        f"speculative-config-k{row}.json"
        if isinstance(row, int)
        else f"speculative-config-{row}.json"
    )
    return atomic_write(directory / name, (json.dumps(fragment) + "\n").encode("utf-8"))


def substitute(
    template: str,
    k: int,
    port: int,
    gpus: list[str] | None = None,
    schedule: Path | None = None,
) -> str:
    """Fill {k} {port} {gpus} {python} {schedule} (shell-quoted); any other brace (JSON) is
    left alone. {gpus}: the arm's GPU ids, comma-separated ("" without a slice); {schedule}
    needs the fragment file's path."""
    values = {
        "{k}": str(k),
        "{port}": str(port),
        "{gpus}": ",".join(gpus or []),
        "{python}": sys.executable,
    }
    if schedule is not None:
        values[SCHEDULE_PLACEHOLDER] = str(schedule)
    elif SCHEDULE_PLACEHOLDER in template:
        raise ValueError("substitute: {schedule} in the template and no fragment file")
    out = template
    for placeholder in PLACEHOLDERS:
        if placeholder in values:
            out = out.replace(placeholder, shlex.quote(values[placeholder]))
    return out


class ServerFailed(Exception):
    """The server for one k could not be started or died; the message names k and log."""


def start_server(command: str, port: int, log_path: Path, gpus: list[str]) -> ServerProcess:
    """An arm's server command, logging to `log_path` (server/process.py), its GPU slice as
    CUDA_VISIBLE_DEVICES (none given: the environment's, e.g. the one Ray set), with a
    watchdog in its group: whatever ends this process (a Ray worker killed by force, a
    SIGKILL), the server's group follows it within STOP_GRACE_S."""
    env = {"CUDA_VISIBLE_DEVICES": ",".join(gpus)} if gpus else {}
    return ServerProcess(
        shell(command), f"http://127.0.0.1:{port}", log_path, env=env, watchdog_s=STOP_GRACE_S
    )


def server_failure(server: ServerProcess, k: int | str, what: str) -> ServerFailed:
    """The failure with its log's last line on the first line (a cell's error shows only
    that line: `command not found` must be there), then the log's last lines."""
    tail = server.log_tail(LOG_TAIL_LINES)
    said = [line.strip() for line in tail.splitlines() if line.strip()]
    last = said[-1] if said and not said[-1].startswith("$ ") else "(nothing after its command)"
    return ServerFailed(
        f"server for {row_label(k)} {what}; {server.log_path} ends: {last}\n{tail}".rstrip()
    )


def wait_ready(
    server: ServerProcess,
    k: int | str,
    model: str | None,
    timeout: float,
    api_key: str | None,
    stopping: threading.Event,
) -> str:
    """Until /v1/models lists `model` (or any model when None); the model, or ServerFailed."""
    ready = server.wait_ready(model, timeout, api_key, stopping, poll_s=0.25)
    if ready is not None:
        return ready
    if stopping.is_set():
        raise ServerFailed(f"server for {row_label(k)}: stopped before it was ready")
    if not server.alive:
        code = server.proc.returncode
        raise server_failure(server, k, f"exited with status {code} before it was ready")
    listed = f" (never listed model '{model}')" if model else ""
    raise server_failure(server, k, f"was not ready within {timeout:g} s{listed}")
