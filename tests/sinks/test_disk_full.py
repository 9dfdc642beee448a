"""Disk full (issue 19 item 4): the first failed write stops the run cleanly. The line
writer cut by hand (a write that lands half a line, then ENOSPC), then `specmon run` as a
real process writing into a 1 MiB tmpfs: exit 1, one line naming the file and the count,
every JSONL line whole, the summary in the artifact dir or as one JSON line on stderr, no
traceback."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from support.cli import specmon

from specmon.sinks import files


def test_a_failed_write_cuts_the_file_back_to_whole_lines_and_reports_once(tmp_path, monkeypatch):
    failures: list[str] = []
    sink = files._LineFile(tmp_path / "profile_export.jsonl", failures.append)
    sink._write(b'{"a":1}\n')
    sink._write(b'{"b":2}\n')
    real_write = os.write

    def half_then_full(fd: int, data) -> int:
        if len(data) > 4:
            return real_write(fd, bytes(data[:4]))  # a partial write, then no room
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "write", half_then_full)
    sink._write(b'{"c":3, "long": "line"}\n')
    sink._write(b'{"d":4}\n')  # after the failure: not attempted
    assert failures == ["disk full writing profile_export.jsonl: stopped at 2 requests"]
    assert (tmp_path / "profile_export.jsonl").read_bytes() == b'{"a":1}\n{"b":2}\n'


@pytest.fixture
def tiny_disk():
    """A 1 MiB tmpfs (needs root; without it the unit test above covers the writer)."""
    where = Path("/tmp") / f"specmon-full-{uuid.uuid4().hex[:8]}"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        where.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)
        where.rmdir()


@pytest.mark.e2e
@pytest.mark.parametrize("level", ["raw", "records"])
def test_a_full_disk_stops_the_run_with_whole_lines_and_exit_1(tiny_disk, level, sims):
    out = tiny_disk / "run"
    sim = sims(["--seed", "5"])
    proc = specmon("run", "--headless", "--url", sim.url, "--artifact-dir", str(out), "--export-level", level, "--request-count", "20000", "--concurrency", "8", timeout=300)  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "never retrieved" not in proc.stderr
    failed = [
        line
        for line in proc.stderr.splitlines()
        if "requests" in line and "disk full writing" in line
    ]
    assert failed, proc.stderr[-2000:]
    name, count = failed[0].split("disk full writing ")[1].split(": stopped at ")
    jsonl = (out / name).read_bytes()
    assert jsonl.endswith(b"\n") and len(jsonl.splitlines()) == int(count.split()[0])
    assert all(json.loads(line) for line in jsonl.splitlines())
    summary = out / "profile_export_aiperf.json"
    if summary.exists():
        doc = json.loads(summary.read_text())
    else:  # no room: the summary is the line after the one that says so
        lines = proc.stderr.splitlines()
        at = next(i for i, line in enumerate(lines) if "the summary is the next line" in line)
        doc = json.loads(lines[at + 1])
    assert doc["request_count"]["avg"] >= int(count.split()[0]) - 8  # all it measured
    assert doc["request_count"]["avg"] < 20000  # stopped early


@pytest.mark.e2e
def test_the_last_line_never_says_written_when_the_summary_is_not(
    tmp_path, monkeypatch, capsys, shared_sim
):
    """Issue 35: with no room for the summary the last stdout line said "exports written to
    DIR" though neither the JSON nor the CSV was there. The writers raise ENOSPC here, as a
    full disk makes them (a tmpfs needs root: the e2e test above)."""
    from specmon import session as session_module
    from specmon.cli import main

    def no_room(path, *_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(session_module, "write_json", no_room)
    monkeypatch.setattr(session_module, "write_csv", no_room)
    out = tmp_path / "run"
    argv = ["run", "--headless", "--url", shared_sim.url, "--artifact-dir", str(out)]
    assert main([*argv, "--request-count", "4", "--concurrency", "2"]) == 1
    printed = capsys.readouterr()
    assert "exports written" not in printed.out
    assert printed.out.strip().splitlines()[-1] == (
        f"specmon: exports incomplete in {out}: profile_export_aiperf.csv, "
        f"profile_export_aiperf.json not written; the summary is on stderr"
    )
    assert not (out / "profile_export_aiperf.json").exists()
    lines = printed.err.splitlines()
    at = next(i for i, line in enumerate(lines) if "the summary is the next line" in line)
    assert json.loads(lines[at + 1])["request_count"]["avg"] == 4  # nothing measured lost
