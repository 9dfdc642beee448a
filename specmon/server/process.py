"""A server run as a child process: the one manager for `specmon sim` (sim/process.py
start_sim, for `specmon demo` and the tests) and a sweep arm's server
(run/sweep/servers.py).

The child gets its own process group, so the signals a terminal sends its foreground
group (Ctrl-C, the SIGHUP of a closed pane or an ssh drop) reach only the client, which
drains its requests and then stops the server, as a real server outlives the client's
terminal. `stop()` sends SIGTERM to the whole group, waits, then SIGKILL to the group (a
server's children may outlive its leader: `bash -c 'a; b'`, vLLM's engine processes);
`kill_now()` is one SIGKILL for a parent about to `os._exit` (specmon/stops.py on_abandon).
Ready means /v1/models lists the model (server/models.py). With `watchdog_s` the group
also holds server/watchdog.py, which ends the group when this process dies by any means.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from specmon.server.models import list_models
from specmon.text_guard import mask_secrets, mask_values, secret_values

WATCHDOG = Path(__file__).with_name("watchdog.py")


class ServerProcess:
    """One server child. With `log_path` its output (stdout and stderr) goes to that file,
    after a first line `$ COMMAND`; without, stdout is a text pipe (read it with
    `read_line`) and stderr is inherited, so the child's own error line reaches the
    terminal.

    `parent_pipe_env`: the child also gets the read end of a pipe whose write end only this
    process holds (closed by `stop()`), its number in that environment variable: EOF there
    means the parent is gone, however it ended, SIGKILL included (the simulator's
    `exit_with_parent` watches it, so it dies with its client)."""

    def __init__(
        self,
        argv: list[str],
        url: str = "",
        log_path: Path | None = None,
        parent_pipe_env: str | None = None,
        env: dict[str, str] | None = None,
        watchdog_s: float | None = None,
    ) -> None:
        self.url = url  # base URL, no trailing slash ("" until known)
        self.model: str | None = None  # the model it serves, once ready
        self.log_path = log_path
        self._stopped = False
        self._parent_fd: int | None = None  # the pipe's write end: held for the child's life
        self._copier: threading.Thread | None = None  # masks the log (secrets in argv)
        self._watchdog_fd: int | None = None  # the watchdog's pipe's write end
        self._watchdog: subprocess.Popen[bytes] | None = None
        env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
        read_fd = None
        if parent_pipe_env is not None:
            read_fd, self._parent_fd = os.pipe()
            env[parent_pipe_env] = str(read_fd)
        # the watchdog first, the server then joins its group: a parent killed between the
        # two spawns leaves no server without a watchdog (seen: a Ray worker SIGKILLed right
        # after the server started, before its watchdog did; the server lived on)
        self._group: int | None = None  # the process group; None: the server's own
        try:
            if watchdog_s is not None:
                self._start_watchdog(watchdog_s)
            self.proc: subprocess.Popen[str] = self._spawn(argv, env, read_fd)
        except BaseException:
            self._close_parent_fd()  # the watchdog sees EOF and ends its (empty) group
            raise
        finally:
            if read_fd is not None:
                os.close(read_fd)

    def _spawn(self, argv: list[str], env: dict[str, str], fd: int | None) -> subprocess.Popen[str]:
        fds = () if fd is None else (fd,)
        group = self._group or 0  # the watchdog's group, else a new one led by the server
        if self.log_path is None:
            return subprocess.Popen(
                argv, stdout=subprocess.PIPE, text=True, env=env, process_group=group, pass_fds=fds
            )
        command = shell_command(argv)
        secrets = secret_values(command)
        with open(self.log_path, "ab") as log:
            log.write(f"$ {mask_secrets(command)}\n".encode())  # keys: ***
            log.flush()
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE if secrets else log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                process_group=group,
                pass_fds=fds,
                text=True,  # no pipe to read: the same type as the piped one
            )
        if secrets:  # the server may print its own arguments: its log gets them masked
            pipe, proc.stdout = proc.stdout, None
            self._copier = threading.Thread(
                target=_copy_masked, args=(pipe, self.log_path, secrets), daemon=True
            )
            self._copier.start()
        return proc

    def _start_watchdog(self, grace_s: float) -> None:
        """server/watchdog.py leading a new group, which the server then joins: the group
        dies with this process."""
        read_fd, self._watchdog_fd = os.pipe()
        argv = [sys.executable, "-I", "-S", str(WATCHDOG), str(read_fd), "0", str(grace_s)]
        try:
            self._watchdog = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                process_group=0,
                pass_fds=(read_fd,),
            )
        finally:
            os.close(read_fd)
        self._group = self._watchdog.pid

    @property
    def group(self) -> int:
        """The process group the server runs in (its own, or its watchdog's)."""
        return self._group if self._group is not None else self.proc.pid

    def _close_parent_fd(self) -> None:
        for name in ("_parent_fd", "_watchdog_fd"):
            fd = getattr(self, name)
            if fd is not None:
                os.close(fd)
                setattr(self, name, None)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def read_line(self, prefix: str, timeout: float) -> str | None:
        """The rest of the first stdout line starting with `prefix`, or None when none came
        within `timeout` seconds (read on a thread, so the wait is bounded)."""
        found: list[str] = []
        stdout = self.proc.stdout

        def reader() -> None:
            for line in stdout or ():
                if line.startswith(prefix):
                    found.append(line[len(prefix) :].strip())
                    return

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        thread.join(timeout)
        return found[0] if found else None

    def wait_ready(
        self,
        model: str | None,
        timeout: float,
        api_key: str | None = None,
        stopping: threading.Event | None = None,
        poll_s: float = 0.05,
    ) -> str | None:
        """Poll /v1/models until it lists `model` (any model when None) and return that
        model; None when the child exited, `stopping` was set or `timeout` passed."""
        deadline = time.monotonic() + timeout
        stop = stopping or threading.Event()
        while self.url and time.monotonic() < deadline and not stop.is_set() and self.alive:
            ids = list_models(self.url, api_key)
            if ids and (model is None or model in ids):
                self.model = model or ids[0]
                return self.model
            stop.wait(poll_s)
        return None

    def log_tail(self, lines: int) -> str:
        if self.log_path is None:
            return ""
        if self._copier is not None and not self.alive:
            self._copier.join(2)  # what the server printed before it exited, copied first
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace_s: float = 10.0) -> int | None:
        """SIGTERM the group, SIGKILL it after `grace_s`; waits for the leader. Idempotent;
        returns the leader's exit status."""
        if not self._stopped:  # also when the leader has exited: its children may not have
            self._stopped = True
            _signal_group(self.group, signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
            # children may outlive the leader: the group gets SIGKILL either way
            _signal_group(self.group, signal.SIGKILL)
            self.proc.wait(grace_s)
            if self._watchdog is not None:  # killed with the group: reap it
                self._watchdog.wait(grace_s)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._close_parent_fd()
        return self.proc.returncode

    def kill_now(self) -> None:
        """SIGKILL to the group, nothing else: safe in a signal handler (one syscall)."""
        _signal_group(self.group, signal.SIGKILL)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def shell(command: str) -> list[str]:
    """The argv that runs a shell command line (a sweep's --serve template, filled in)."""
    return ["bash", "-c", command]


def shell_command(argv: list[str]) -> str:
    """The command line as the user wrote it: the shell line itself for `shell(...)`."""
    return argv[2] if argv[:2] == ["bash", "-c"] and len(argv) == 3 else shlex.join(argv)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _copy_masked(pipe: IO[str] | None, log_path: Path, secrets: list[str]) -> None:
    """The server's output into its log, line by line, each secret of its command masked."""
    if pipe is None:
        return
    with pipe, open(log_path, "a", encoding="utf-8", errors="replace") as log:
        for line in pipe:
            log.write(mask_values(line, secrets))
            log.flush()
