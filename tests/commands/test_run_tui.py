"""`specmon demo` with a terminal: the monitor runs over the load; SIGTERM still writes exports.

A real pseudo-terminal (80x24) stands in for the user's ssh session.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest

pytestmark = pytest.mark.e2e


def test_monitor_over_live_load_then_sigterm_writes_exports(tmp_path):
    out = tmp_path / "demo"
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = dict(os.environ, TERM="xterm-256color")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "specmon",
            "demo",
            "--artifact-dir",
            str(out),
            "--concurrency",
            "2",
            "--output-tokens-mean",
            "16",
        ],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    screen = b""
    try:
        jsonl = out / "profile_export.jsonl"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and (
            not jsonl.exists() or len(jsonl.read_bytes().splitlines()) < 10
        ):
            screen += _read_available(master, 0.2)
        proc.send_signal(signal.SIGTERM)
        end = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < end:
            screen += _read_available(master, 0.2)
        screen += _read_available(master, 0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        os.close(master)
    text = screen.decode("utf-8", "replace")
    assert proc.returncode == 128 + signal.SIGTERM, text[-2000:]
    assert "\x1b[?1049h" in text and "\x1b[?1049l" in text  # full-screen app entered and left
    assert f"exports written to {out}" in text
    assert "Traceback" not in text, text[text.find("Traceback") - 300 :]
    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    assert doc["was_cancelled"] is True  # unbounded run stopped by the signal
    assert doc["request_count"]["avg"] >= 10


def _read_available(fd: int, timeout: float) -> bytes:
    ready, _, _ = select.select([fd], [], [], timeout)
    if not ready:
        return b""
    try:
        return os.read(fd, 65536)
    except OSError:  # the child closed the terminal
        return b""
