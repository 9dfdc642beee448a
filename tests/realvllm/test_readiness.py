"""The real-vLLM readiness wait follows the server's progress (issue 19 item 7): it outlasts
the stall window while the server's log grows, gives up with the log's tail once the log is
silent for the window, and the window widens with the load per core. A fake server process
and a log written by a thread stand in for vLLM (no vLLM needed)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from realvllm import server as vllm_server


class Running:
    """A process that never exits (poll() is None) and is never signalled."""

    returncode = None

    def poll(self) -> None:
        return None


def fake_server(log: Path) -> vllm_server.VllmServer:
    log.write_text("starting\n")
    return vllm_server.VllmServer(Running(), 1, "detailed", log)  # type: ignore[arg-type]


def test_a_log_that_keeps_growing_outlasts_the_stall_window(tmp_path, monkeypatch):
    ready = threading.Event()
    monkeypatch.setattr(vllm_server, "STALL_S", 1.0)
    monkeypatch.setattr(vllm_server.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.setattr(vllm_server, "lists_our_model", lambda url: ready.is_set())
    server = fake_server(tmp_path / "vllm.log")

    def progress() -> None:  # 3 s of log lines (three stall windows), then ready
        end = time.monotonic() + 3.0
        with server.log_path.open("a") as log:
            while time.monotonic() < end:
                log.write("loading...\n")
                log.flush()
                time.sleep(0.05)
        ready.set()

    writer = threading.Thread(target=progress, daemon=True)
    start = time.monotonic()
    writer.start()
    vllm_server.wait_ready(server)
    assert ready.is_set() and time.monotonic() - start >= 3.0  # three times STALL_S
    writer.join()


def test_a_silent_log_gives_up_with_the_reason_and_the_log(tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_server, "STALL_S", 0.5)
    monkeypatch.setattr(vllm_server.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.setattr(vllm_server, "lists_our_model", lambda url: False)
    server = fake_server(tmp_path / "vllm.log")
    with pytest.raises(RuntimeError, match=r"log silent for \d+ s, limit [\d.]+ s") as raised:
        vllm_server.wait_ready(server)
    assert "starting" in str(raised.value)  # the log's tail comes with the error


@pytest.mark.parametrize(
    ("load", "cores", "limit"), [(0.5, 2, 90.0), (2.0, 2, 90.0), (8.0, 2, 360.0)]
)
def test_the_stall_window_widens_with_the_load_per_core(monkeypatch, load, cores, limit):
    monkeypatch.setattr(vllm_server.os, "getloadavg", lambda: (load, 0.0, 0.0))
    monkeypatch.setattr(vllm_server.os, "cpu_count", lambda: cores)
    assert vllm_server.stall_limit_s() == limit  # 90 s x max(1, load / cores)


@pytest.mark.parametrize(
    ("load", "cores", "timeout"), [(1.0, 2, "300"), (6.0, 2, "900"), (40.0, 2, "1800")]
)
def test_the_sweeps_ready_timeout_scales_with_the_load_too(monkeypatch, load, cores, timeout):
    monkeypatch.setattr(vllm_server.os, "getloadavg", lambda: (load, 0.0, 0.0))
    monkeypatch.setattr(vllm_server.os, "cpu_count", lambda: cores)
    assert vllm_server.sweep_ready_timeout() == timeout  # 300 s x max(1, load / cores) <= 1800
