"""A server group's watchdog, run as a script (`python -I -S watchdog.py FD PGID GRACE_S`,
no specmon import, so it starts in milliseconds). It leads the group the server then joins
(PGID 0: its own group), so no server runs without it.

It blocks on the read end FD of a pipe whose write end only the process that started the
server holds. EOF there means that process is gone however it ended (a Ray worker
cancelled by force, a SIGKILL, a crash): the watchdog then sends SIGTERM to the group,
waits up to GRACE_S for it to empty and sends SIGKILL (itself included). It ignores the
group's SIGTERM, so a normal stop (server/process.py `stop()`) ends it with the group's
SIGKILL."""

import os
import signal
import sys
import time


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    # the group holds at least this process: alive means another member is left
    return any(_member(pid, pgid) for pid in _pids() if pid != os.getpid())


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _member(pid: int, pgid: int) -> bool:
    try:
        return os.getpgid(pid) == pgid
    except OSError:
        return False


def main(fd: int, pgid: int, grace_s: float) -> None:
    pgid = pgid or os.getpgrp()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        while os.read(fd, 1):
            pass
    except OSError:
        pass
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(0.1)
    os.killpg(pgid, signal.SIGKILL)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
