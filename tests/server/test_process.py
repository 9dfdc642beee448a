"""server/process.py, the one manager of a server child (start_sim and the sweep): its own
process group, a stop that reaches every process of the group (also after the leader has
exited), idempotent, the log file's first line, and the parent-death pipe."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from specmon.server.process import ServerProcess, shell, shell_command

pytestmark = pytest.mark.e2e  # starts processes


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for(predicate, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_the_shell_line_is_kept_as_written():
    assert shell("a {k}; b") == ["bash", "-c", "a {k}; b"]
    assert shell_command(shell("a; b")) == "a; b"
    assert shell_command(["python", "-m", "x y"]) == "python -m 'x y'"


def test_stop_reaches_the_whole_group_even_a_child_that_outlives_the_leader(tmp_path: Path):
    log = tmp_path / "server.log"
    # the leader exits at once; its background sleep stays, in the leader's group
    server = ServerProcess(shell("sleep 300 & echo started"), log_path=log)
    assert os.getpgid(server.pid) == server.pid  # it leads its own group
    assert server.proc.wait(20) == 0 and "started" in log.read_text()
    assert log.read_text().splitlines()[0] == "$ sleep 300 & echo started"
    assert group_alive(server.pid)  # the sleep outlived the leader
    assert server.stop(grace_s=5) == 0
    assert wait_for(lambda: not group_alive(server.pid))  # the sleep went too
    assert server.stop() == 0  # idempotent


def test_kill_now_is_one_sigkill_to_the_group(tmp_path: Path):
    server = ServerProcess(shell("sleep 300 & sleep 300"), log_path=tmp_path / "log")
    server.kill_now()
    assert server.proc.wait(10) == -signal.SIGKILL  # reaped: no zombie keeps the group
    assert wait_for(lambda: not group_alive(server.pid))


def test_a_piped_child_line_and_the_parent_pipe(tmp_path: Path):
    # the child prints the fd it was given, then waits for EOF on it: the pipe's write end
    # is only the parent's, so stop() (closing it) or the parent's death ends the wait
    code = (
        "import os, sys; fd = int(os.environ['PARENT']); print('fd', fd, flush=True);"
        " sys.exit(0 if os.read(fd, 1) == b'' else 1)"
    )
    server = ServerProcess([sys.executable, "-c", code], parent_pipe_env="PARENT")
    assert (server.read_line("fd ", 20) or "").isdigit()
    assert server.alive  # still waiting: the write end is open here
    server._close_parent_fd()  # what stop() does, without a signal: EOF in the child
    assert server.proc.wait(20) == 0
    assert server.stop() == 0


def test_wait_ready_gives_up_when_the_child_exits():
    server = ServerProcess([sys.executable, "-c", "print('bye')"], url="http://127.0.0.1:9")
    assert server.wait_ready("m", timeout=20) is None and server.model is None
    assert server.stop() == 0


def test_the_watchdog_script_is_this_module():
    """The script ServerProcess runs in a server's group is server/watchdog.py itself."""
    from specmon.server import process, watchdog

    assert Path(watchdog.__file__) == process.WATCHDOG


def test_a_server_whose_starter_is_killed_dies_with_it(tmp_path: Path):
    """A sweep's server outlives no one: its starter (a Ray worker cancelled by force, a
    SIGKILLed specmon) dies by SIGKILL, cleaning nothing up; the watchdog in the server's
    group sends the group SIGTERM then, here a group whose shell ignores it, so SIGKILL
    after the grace (1 s)."""
    pid_file = tmp_path / "pgid"
    code = (
        "import sys, time; from specmon.server.process import ServerProcess, shell;"
        "s = ServerProcess(shell(\"trap '' TERM; sleep 300 & sleep 300; wait\"),"
        f" log_path=__import__('pathlib').Path({str(tmp_path / 'log')!r}), watchdog_s=1.0);"
        f"open({str(pid_file)!r}, 'w').write(str(s.group)); time.sleep(300)"
    )
    starter = ServerProcess([sys.executable, "-c", code])  # its own group, as a Ray worker
    assert wait_for(lambda: pid_file.exists() and pid_file.read_text().isdigit())
    pgid = int(pid_file.read_text())
    assert group_alive(pgid)
    os.kill(starter.pid, signal.SIGKILL)  # the starter only: the server's group is its own
    assert starter.proc.wait(10) == -signal.SIGKILL
    assert group_alive(pgid)  # the watchdog is waiting out the grace (or signalling)
    assert wait_for(lambda: not group_alive(pgid), timeout=30)


def test_a_normal_stop_ends_the_watchdog_too(tmp_path: Path):
    server = ServerProcess(shell("sleep 300"), log_path=tmp_path / "log", watchdog_s=5.0)
    assert wait_for(lambda: server._watchdog is not None and server._watchdog.poll() is None)
    members = lambda: [
        p for p in os.listdir("/proc") if p.isdigit() and _pgid(int(p)) == server.group
    ]
    assert len(members()) >= 2  # the shell's sleep and the watchdog
    server.stop(grace_s=5)
    # reaped by stop(): killed with the group (SIGTERM when it came before the watchdog had
    # set itself to ignore it, else the group's SIGKILL)
    assert server._watchdog is not None
    assert server._watchdog.returncode in (-signal.SIGTERM, -signal.SIGKILL)
    assert wait_for(lambda: not group_alive(server.group))


def test_the_watchdog_is_in_place_before_the_server_starts(tmp_path: Path):
    """A starter killed between the two spawns must not leave a server without a watchdog:
    the watchdog leads the group and starts first; the server joins its group."""
    server = ServerProcess(shell("sleep 300"), log_path=tmp_path / "log", watchdog_s=5.0)
    try:
        assert server._watchdog is not None
        assert server.group == server._watchdog.pid == _pgid(server._watchdog.pid)
        assert _pgid(server.pid) == server.group != server.pid
        # joining a group needs it to exist: the watchdog was there first (and its start
        # time, /proc/PID/stat field 22 in clock ticks, is no later)
        assert _started(server._watchdog.pid) <= _started(server.pid)
    finally:
        server.stop(grace_s=5)
    assert wait_for(lambda: not group_alive(server.group))


def _started(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[19])


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
