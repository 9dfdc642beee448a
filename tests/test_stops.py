"""Stops at any moment, bad input first, earlier results kept (issue 10 items 1-3).

Real processes: `specmon run --headless` as a subprocess against `specmon sim` (or a
socket that accepts and never answers, for "before the first request"); signals are sent
at moments the test observes (a connection accepted, lines in the JSONL, a line on stdout),
never after a fixed sleep. The module's runs share one simulator (`shared_sim`: at least
20 ms per request, its time to the first token, so a signal sent on seeing a line in the
JSONL lands mid-run); none reads its absolute counters.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.cli import start_specmon

pytestmark = pytest.mark.e2e
SPECMON = [sys.executable, "-m", "specmon", "run", "--headless"]
SIGNALS = [signal.SIGHUP, signal.SIGINT, signal.SIGTERM]
SUMMARY = ("profile_export_aiperf.json", "profile_export_aiperf.csv", "profile_export.jsonl")
TIMEOUT_S = 120


class Proc:
    """A specmon subprocess whose stdout and stderr lines are read as they come."""

    def __init__(
        self, args: list[str], env: dict[str, str] | None = None, base: list[str] = SPECMON
    ) -> None:
        self.popen = subprocess.Popen(
            [*base, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        for stream in (self.popen.stdout, self.popen.stderr):
            threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:
        for line in stream:
            self.lines.put(line)

    def wait_line(self, text: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while not any(text in line for line in self.seen):
            left = deadline - time.monotonic()
            assert left > 0, f"never printed {text!r}: {self.seen}"
            try:
                self.seen.append(self.lines.get(timeout=min(left, 1.0)))
            except queue.Empty:
                assert self.popen.poll() is None or not self.lines.empty(), self.seen

    def finish(self) -> int:
        code = self.popen.wait(timeout=TIMEOUT_S)
        time.sleep(0)  # let the pumps drain what is left
        while True:
            try:
                self.seen.append(self.lines.get(timeout=1.0))
            except queue.Empty:
                break
        return code


def poll(condition, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def jsonl_lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def check_summary(out: Path) -> tuple[dict, list[dict]]:
    """The three summary files exist and parse; the JSON's counts match the JSONL."""
    for name in SUMMARY:
        assert (out / name).is_file(), f"{name} missing in {out}"
    doc = json.loads((out / SUMMARY[0]).read_text())
    list(csv.reader(io.StringIO((out / SUMMARY[1]).read_text())))
    records = [json.loads(line) for line in (out / SUMMARY[2]).read_text().splitlines()]
    ok = [r for r in records if not r.get("error")]
    assert doc.get("request_count", {}).get("avg", 0) == len(ok)
    return doc, records


def run_args(url: str, out: Path, *extra: str) -> list[str]:
    return ["--url", url, "--artifact-dir", str(out), "--output-tokens-mean", "8", *extra]


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_signal_before_the_first_request_writes_an_empty_run(tmp_path, signum):
    """A server that accepts and never answers holds specmon in preflight: the stop still
    ends at once with an empty, complete summary and exit status 128 + signal."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        out = tmp_path / "run"
        proc = Proc(run_args(url, out, "--model", "m"))
        listener.settimeout(TIMEOUT_S)
        conn, _ = listener.accept()  # preflight is waiting for /v1/models
        with conn:
            proc.popen.send_signal(signum)
            code = proc.finish()
    assert code == 128 + signum, proc.seen
    doc, records = check_summary(out)
    assert records == [] and doc["was_cancelled"] is True
    assert any("before the first request" in line for line in proc.seen)


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_signal_mid_run_drains_and_writes_complete_exports(tmp_path, signum, shared_sim):
    out = tmp_path / "run"
    proc = Proc(run_args(shared_sim.url, out, "--concurrency", "4"))
    poll(lambda: jsonl_lines(out / SUMMARY[2]) >= 8, "8 requests in the JSONL")
    proc.popen.send_signal(signum)
    code = proc.finish()
    assert code == 128 + signum, proc.seen
    doc, records = check_summary(out)
    assert doc["was_cancelled"] is True and len(records) >= 8
    # the drain (5 s by default) lets the 4 in-flight requests of a 20 ms server finish
    assert not [r for r in records if r.get("error")], "a request was cancelled or failed"
    assert any(f"stopping ({signum.name})" in line for line in proc.seen)


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM], ids=lambda s: s.name)
def test_signal_during_warmup_writes_an_empty_profiling_run(tmp_path, signum, shared_sim):
    out = tmp_path / "run"
    raw = out / "profile_export_raw.jsonl"
    args = ["--warmup-request-count", "100000", "--export-level", "raw"]
    proc = Proc(run_args(shared_sim.url, out, "--concurrency", "2", *args))
    poll(lambda: jsonl_lines(raw) >= 4, "4 warmup captures")
    proc.popen.send_signal(signum)
    code = proc.finish()
    assert code == 128 + signum, proc.seen
    doc, records = check_summary(out)
    assert records == [] and doc["was_cancelled"] is True  # warmup is left out, as AIPerf
    phases = {json.loads(line)["benchmark_phase"] for line in raw.read_text().splitlines()}
    assert phases == {"warmup"}


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_signals_during_the_export_never_interrupt_it(tmp_path, signum, shared_sim):
    out = tmp_path / "run"
    release = tmp_path / "release"  # the export is held until both signals have been seen
    proc = Proc(
        run_args(shared_sim.url, out, "--request-count", "6"),
        env={"SPECMON_TEST_EXPORT_DELAY_S": "60", "SPECMON_TEST_EXPORT_RELEASE": str(release)},
    )
    proc.wait_line("writing exports to")
    proc.popen.send_signal(signum)
    proc.wait_line("stop signal during the export")
    proc.popen.send_signal(signum)
    # a second Ctrl-C warns; a repeated hangup or terminate changes nothing
    again = "press Ctrl-C again to abandon" if signum == signal.SIGINT else "already stopping"
    proc.wait_line(again)
    release.touch()
    code = proc.finish()
    assert code == 128 + signum, proc.seen
    doc, records = check_summary(out)
    assert len(records) == 6 and doc["request_count"]["avg"] == 6


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM], ids=lambda s: s.name)
def test_repeated_hangups_are_one_stop_and_never_abandon_the_exports(tmp_path, signum, shared_sim):
    """A dropped ssh connection can deliver several SIGHUPs: three 0.05 s apart during the
    export still end in complete exports (only an interactive third Ctrl-C abandons)."""
    out = tmp_path / "run"
    proc = Proc(
        run_args(shared_sim.url, out, "--request-count", "4"),
        env={"SPECMON_TEST_EXPORT_DELAY_S": "3"},
    )
    proc.wait_line("writing exports to")
    for _ in range(3):
        proc.popen.send_signal(signum)
        time.sleep(0.05)
    code = proc.finish()
    assert code == 128 + signum, proc.seen
    assert not any("abandoned" in line for line in proc.seen)
    doc, records = check_summary(out)
    assert len(records) == 4 and doc["request_count"]["avg"] == 4


def test_nohup_keeps_the_hangup_ignored(tmp_path, shared_sim):
    """`nohup specmon run ...`: the inherited SIG_IGN for SIGHUP stays, so a hangup mid-run
    changes nothing and the run ends by its own bound with exit 0."""
    out = tmp_path / "run"
    proc = Proc(run_args(shared_sim.url, out, "--request-count", "30"), base=["nohup", *SPECMON])
    poll(lambda: jsonl_lines(out / SUMMARY[2]) >= 2, "two requests in the JSONL")
    proc.popen.send_signal(signal.SIGHUP)
    code = proc.finish()
    assert code == 0, proc.seen
    doc, records = check_summary(out)
    assert len(records) == 30 and doc["was_cancelled"] is False


def test_the_console_script_installs_the_handlers_before_any_other_import(tmp_path):
    """`specmon` (the console script) imports specmon.cli first: the stop handlers must be
    in place before cli.py imports anything else, so a signal that early is still a stop."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import signal, sys\n"
        "seen = []\n"
        "class Watch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name in ('argparse', 'importlib', 'specmon.errors') and not seen:\n"
        "            seen.append(signal.getsignal(signal.SIGTERM))\n"
        "        return None\n"
        "sys.argv = ['/usr/local/bin/specmon', '--version']\n"
        "sys.modules.pop('argparse', None)\n"
        "sys.meta_path.insert(0, Watch())\n"
        "import specmon.cli\n"
        "from specmon import stops\n"
        "print(seen[0] is stops._handler if seen else 'no import seen')\n"
    )
    done = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True", done.stderr


def test_third_signal_during_the_export_abandons_it(tmp_path, shared_sim):
    out = tmp_path / "run"
    proc = Proc(
        run_args(shared_sim.url, out, "--request-count", "2"),
        env={"SPECMON_TEST_EXPORT_DELAY_S": "60"},
    )
    proc.wait_line("writing exports to")
    for expect in ("stop signal during the export", "press Ctrl-C again", "abandoned"):
        proc.popen.send_signal(signal.SIGINT)
        proc.wait_line(expect)
    code = proc.finish()
    assert code == 128 + signal.SIGINT
    assert not (out / SUMMARY[0]).exists()  # abandoned before the summary was written


def test_a_demo_abandoned_leaves_no_simulator_running(tmp_path):
    """The demo's simulator has its own process group (a terminal's signals reach only the
    client), so a force-quit must kill it itself: the third signal's on_abandon hook."""
    seed = 700000 + os.getpid() % 100000  # the simulator's --seed names it among processes
    proc = Proc(
        ["--headless", "--request-count", "2", "--random-seed", str(seed),
         "--artifact-dir", str(tmp_path / "run")],
        env={"SPECMON_TEST_EXPORT_DELAY_S": "60"},
        base=[sys.executable, "-m", "specmon", "demo"],
    )  # fmt: skip
    proc.wait_line("writing exports to")
    (sim,) = simulators_with(f"--seed {seed}")
    for expect in ("stop signal during the export", "press Ctrl-C again", "abandoned"):
        proc.popen.send_signal(signal.SIGINT)
        proc.wait_line(expect)
    assert proc.finish() == 128 + signal.SIGINT
    poll(lambda: not Path(f"/proc/{sim}").exists() or sim not in simulators_with(str(seed)),
         "the simulator gone")  # fmt: skip


def test_a_demo_killed_by_sigkill_takes_its_simulator_with_it(tmp_path):
    """SIGKILL runs no handler at all: the simulator (its own process group) notices its
    parent is gone from the pipe start_sim gave it, and stops itself."""
    seed = 800000 + os.getpid() % 100000
    proc = Proc(
        ["--headless", "--request-count", "100000", "--random-seed", str(seed),
         "--artifact-dir", str(tmp_path / "run")],
        base=[sys.executable, "-m", "specmon", "demo"],
    )  # fmt: skip
    poll(lambda: jsonl_lines(tmp_path / "run" / SUMMARY[2]) >= 1, "the demo's first request")
    (sim,) = simulators_with(f"--seed {seed}")
    proc.popen.kill()
    assert proc.finish() == -signal.SIGKILL
    poll(lambda: sim not in simulators_with(str(seed)), "the simulator gone")


def simulators_with(text: str) -> list[int]:
    """PIDs of `specmon sim` processes whose command line holds `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if entry.name.isdigit() and "specmon sim" in cmdline and text in cmdline:
            found.append(int(entry.name))
    return found


def tree_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_bad_input_leaves_an_earlier_run_byte_for_byte_and_a_new_run_goes_beside_it(
    tmp_path, shared_sim
):
    out = tmp_path / "run"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\nnot json\n')
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    first = Proc(run_args(shared_sim.url, out, "--request-count", "3"))
    assert first.finish() == 0, first.seen
    before = tree_hashes(tmp_path)
    for source, message in (
        (bad, "line 2: invalid JSON"),
        (tmp_path / "missing.jsonl", "not found"),
        (fifo, "not a regular file"),
        (Path("/dev/zero"), "not a regular file"),
    ):
        proc = Proc(
            run_args(shared_sim.url, out, "--request-count", "3", "--input-file", str(source))
        )
        assert proc.finish() == 2, proc.seen
        assert any(message in line for line in proc.seen), proc.seen
        assert tree_hashes(tmp_path) == before
    again = Proc(run_args(shared_sim.url, out, "--request-count", "2"))
    assert again.finish() == 0, again.seen
    assert tree_hashes(out) == {
        k[len("run/") :]: v for k, v in before.items() if k.startswith("run/")
    }
    assert any(f"writing to {out}-2" in line for line in again.seen), again.seen
    _, records = check_summary(tmp_path / "run-2")
    assert len(records) == 2


def test_a_symlink_in_the_artifact_dir_is_replaced_not_followed(tmp_path, shared_sim):
    out = tmp_path / "run"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    for name in (*SUMMARY, "profile_export_raw.jsonl"):
        (out / name).symlink_to(victim)
    proc = Proc(run_args(shared_sim.url, out, "--request-count", "2", "--overwrite"))
    assert proc.finish() == 0, proc.seen
    assert victim.read_text() == "keep me\n"
    for name in SUMMARY:
        assert not (out / name).is_symlink()
    # --overwrite replaces the earlier run whole: no stale raw capture beside the new one
    assert not (out / "profile_export_raw.jsonl").exists()
    assert not (out / "profile_export_raw.jsonl").is_symlink()
    _, records = check_summary(out)
    assert len(records) == 2


def test_sighup_to_the_process_group_with_workers_drains_every_worker(tmp_path, shared_sim):
    """A closed terminal sends SIGHUP to the whole process group, the workers included:
    they leave the stop to the parent, which drains them and writes every request."""
    out = tmp_path / "run"
    proc = start_specmon(
        "run", "--headless",
        *run_args(shared_sim.url, out, "--concurrency", "4", "--workers", "2"),
        start_new_session=True,
    )  # fmt: skip
    poll(lambda: jsonl_lines(out / SUMMARY[2]) >= 8, "8 requests in the JSONL")
    os.killpg(proc.pid, signal.SIGHUP)
    stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 128 + signal.SIGHUP, stderr
    doc, records = check_summary(out)
    assert doc["was_cancelled"] is True and len(records) >= 8
    assert {r["metadata"].get("worker_id") for r in records} == {"worker-0", "worker-1"}


def test_a_mistyped_model_is_refused_before_the_artifact_dir_is_made(tmp_path, sims):
    out = tmp_path / "run"
    sim = sims(["--seed", "2", "--model", "served-name"])
    proc = Proc(run_args(sim.url, out, "--model", "served-nmae", "--request-count", "2"))
    code = proc.finish()
    assert code == 2, proc.seen
    assert any(
        "--model served-nmae: server" in line and "lists served-name" in line for line in proc.seen
    ), proc.seen
    assert not out.exists()


def test_sighup_to_the_process_group_while_workers_start_kills_none_of_them(tmp_path, shared_sim):
    """The workers are spawned with SIGHUP blocked, so one sent while they still import
    (before they can ignore it) stays pending in them instead of killing them."""
    out = tmp_path / "run"
    proc = start_specmon(
        "run", "--headless",
        *run_args(shared_sim.url, out, "--request-count", "20", "--workers", "2"),
        start_new_session=True,
    )  # fmt: skip

    def workers_spawned() -> bool:
        found = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True)
        return len(found.stdout.split()) >= 2  # two workers (and the resource tracker)

    poll(workers_spawned, "the workers to be spawned")
    os.killpg(proc.pid, signal.SIGHUP)
    stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 128 + signal.SIGHUP, stderr
    assert "Traceback" not in stderr and "worker" not in stderr.lower(), stderr
    check_summary(out)


def test_a_failed_write_stops_like_a_signal_and_exits_1():
    """stops.fail (the first failed write, from the load thread): the on_stop callbacks get
    0, one that raises never reaches the writer, and the exit status is 1."""
    from specmon import stops

    seen: list[int] = []

    def broken(signum: int) -> None:
        raise ValueError(signum)

    stops.reset()
    try:
        stops.stage("load")
        stops.on_stop(broken)
        stops.on_stop(seen.append)
        stops.fail("disk full writing profile_export.jsonl: stopped at 3 requests")
        stops.fail("a second failure is not the news")
        assert seen == [0]
        assert stops.failure() == "disk full writing profile_export.jsonl: stopped at 3 requests"
        assert stops.requested() is None and stops.exit_status(0) == 1
    finally:
        stops.reset()
