"""`specmon watch` against a hostile /metrics (issue 19 item 2), as a real process against a
real loopback server (tests/support/hostile_server.py): the exit status says what happened (2: never
reached the server, 1: scrapes failed or series were rejected after a start, 128 + N after
signal N; docs/monitoring.md, "specmon watch"), stderr says why, and the time series file is written."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

import pytest
from support.cli import specmon, start_specmon
from support.hostile_server import (
    GOOD,
    HostileServer,
    counters_page,
    hostile_metrics,
    metrics_page,
    metrics_trickle,
)

from specmon.run.watch.runner import CSV_NAME
from specmon.server.scrape import MAX_LINE_BYTES, SCRAPE_TIMEOUT_S

HANG_GUARD_S = 120  # only against a hang: the watch's own bounds are what is tested


def _watch(url: str, out: Path, *extra: str) -> list[str]:
    """The arguments of `specmon watch` against `url`, a scrape every 0.3 s."""
    return [
        "watch",
        "--url",
        url,
        "--headless",
        "--interval",
        "0.3",
        "--artifact-dir",
        str(out),
        *extra,
    ]


def _nan_after_two(n: int) -> bytes:
    return counters_page(10 * n, 5 * n) if n <= 2 else counters_page("NaN", "NaN")


HOSTILE = hostile_metrics(SCRAPE_TIMEOUT_S)
CASES = {
    # name: (mode, exit status, what stderr says)
    "good": (metrics_page(lambda n: counters_page(10 * n, 5 * n)), 0, ""),
    "slow": (HOSTILE["slow"], 2, "never reached"),
    "trickle": (HOSTILE["trickle"], 2, "no answer before the watch ended"),
    "endless": (HOSTILE["endless"], 2, "page larger than 16 MiB"),
    "nan_late": (metrics_page(_nan_after_two), 1, "NaN values"),
    "huge_position": (HOSTILE["huge_position"], 1, "rejected series: "),
    # one 10,000-label line beside good counters: that line rejected, the watch goes on
    "ten_thousand_labels": (HOSTILE["ten_thousand_labels"], 1, f"lines over {MAX_LINE_BYTES} bytes"),
}  # fmt: skip


@pytest.mark.e2e
@pytest.mark.parametrize("case", sorted(CASES))
def test_watch_exit_status_says_what_metrics_did(tmp_path, case):
    mode, status, said = CASES[case]
    out = tmp_path / "watch"
    with HostileServer({"good": GOOD}, metrics=mode) as server:
        proc = specmon(*_watch(server.url, out, "--duration", "2"), timeout=HANG_GUARD_S)
    assert proc.returncode == status, proc.stderr
    assert said in proc.stderr
    assert "Traceback" not in proc.stderr
    assert (out / CSV_NAME).exists() and "written to" in proc.stdout


@pytest.mark.e2e
def test_watch_of_a_server_that_is_not_there_exits_2_and_says_so(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    proc = specmon(
        *_watch(f"http://127.0.0.1:{port}", tmp_path / "w", "--duration", "1"), timeout=HANG_GUARD_S
    )
    assert proc.returncode == 2
    assert f"never reached http://127.0.0.1:{port}: ConnectError" in proc.stderr


@pytest.mark.e2e
def test_a_trickled_page_is_cut_at_the_scrape_time_limit(tmp_path):
    with HostileServer({"good": GOOD}, metrics=metrics_trickle(0.2)) as server:
        proc = specmon(
            *_watch(server.url, tmp_path / "w", "--duration", str(SCRAPE_TIMEOUT_S + 1.5)),
            timeout=HANG_GUARD_S,
        )
    assert proc.returncode == 2
    assert f"no complete page within {SCRAPE_TIMEOUT_S:g} s" in proc.stderr


@pytest.mark.e2e
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_a_trickled_page_ends_the_watch_with_128_plus_n(tmp_path, sig):
    out = tmp_path / "watch"
    with HostileServer({"good": GOOD}, metrics=metrics_trickle(0.2)) as server:
        proc = start_specmon(*_watch(server.url, out))
        while server.scrapes == 0 and proc.poll() is None:  # the first page is trickling
            time.sleep(0.05)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 128 + sig, stderr
    assert "Traceback" not in stderr and "written to" in stdout
    assert (out / CSV_NAME).exists()
