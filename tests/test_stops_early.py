"""Stops in the first instants (issue 19 item 1): the console script's first specmon line
(specmon/__init__.py) records SIGINT, SIGTERM and SIGHUP before any other import, and
specmon/stops.py takes the recorded signal over, so a stop that early still ends in a valid,
empty run with exit status 128 + N and no traceback.

Real processes: the console script pip writes for `specmon = "specmon.cli:main"` (written
here the same way, so the test does not depend on how the project was installed), against
a socket that accepts and never answers (a run can never get past its preflight, whatever
moment the signal lands in). When the process has its handlers is read from the kernel
(/proc/PID/status, SigCgt): before that moment the interpreter has not run a line of
specmon (docs/stopping.md, measures that window).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
TIMEOUT_S = 120
# pip's console-script template (pip/_internal/operations/install/wheel.py), as installed
CONSOLE_SCRIPT = """#!{python}
import sys
from specmon.cli import main
if __name__ == '__main__':
    sys.argv[0] = sys.argv[0].removesuffix('.exe')
    sys.exit(main())
"""


def caught(pid: int) -> int:
    """The signals the process catches (a bit mask: bit N-1 for signal N); 0 once gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    line = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return int(line.split()[1], 16)


def handled(pid: int) -> bool:
    """specmon's handlers are in: SIGTERM and SIGHUP caught (the interpreter itself only
    ever catches SIGINT, and specmon installs SIGINT's before theirs)."""
    mask = caught(pid)
    return all(mask & (1 << (s - 1)) for s in (signal.SIGTERM, signal.SIGHUP))


@pytest.fixture
def console_script(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "specmon"
    path.parent.mkdir()
    path.write_text(CONSOLE_SCRIPT.format(python=sys.executable))
    path.chmod(0o755)
    return path


@pytest.fixture
def silent_url():
    """A server that accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def start(script: Path, url: str, out: Path) -> tuple[subprocess.Popen, float]:
    args = [str(script), "run", "--headless", "--url", url, "--artifact-dir", str(out)]
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    return proc, time.monotonic()


def wait_handled(proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not handled(proc.pid):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the handlers never came"
        time.sleep(0.0005)


def check_empty_run(proc: subprocess.Popen, out: Path, signum: int) -> None:
    stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 128 + signum, (stdout, stderr)
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    assert doc["was_cancelled"] is True and "request_count" not in doc
    assert (out / "profile_export_aiperf.csv").is_file()  # empty: no metric has a value
    assert (out / "profile_export.jsonl").read_bytes() == b""
    assert f"stopped ({signal.Signals(signum).name}) before the first request" in stdout


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_a_stop_the_moment_the_first_handler_is_in_writes_an_empty_run(
    tmp_path, console_script, silent_url, signum
):
    """The signal goes the instant the kernel shows the handlers: the recording handler of
    specmon/__init__.py, before cli.py imported anything (or stops.py's, just after)."""
    out = tmp_path / "run"
    proc, _ = start(console_script, silent_url, out)
    wait_handled(proc)
    os.kill(proc.pid, signum)
    check_empty_run(proc, out, signum)


@pytest.mark.parametrize("delay_s", [0.01, 0.05, 0.3])
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_a_stop_soon_after_the_start_writes_an_empty_run(
    tmp_path, console_script, silent_url, signum, delay_s
):
    """At 0.01, 0.05 and 0.3 s after the spawn (in the imports, the option checks or the
    preflight, depending on the machine), or at the first handler if the interpreter had
    not reached specmon's first line by then (the window docs/stopping.md measures)."""
    out = tmp_path / "run"
    proc, spawned = start(console_script, silent_url, out)
    time.sleep(max(0.0, spawned + delay_s - time.monotonic()))
    wait_handled(proc)
    os.kill(proc.pid, signum)
    check_empty_run(proc, out, signum)


def test_the_early_handler_keeps_an_inherited_ignored_hangup_and_hands_over(tmp_path):
    """In-process view of the hand-over: an ignored SIGHUP stays ignored by both handlers,
    a signal the early one recorded is the run's first stop, and uninstall() restores
    what the process had before specmon (not the early handler)."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os, signal, sys\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "sys.argv = ['/opt/bin/specmon', '--version']\n"
        "import specmon\n"
        "assert specmon.early_installed\n"
        "assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN\n"
        "os.kill(os.getpid(), signal.SIGTERM)  # recorded, nothing else\n"
        "assert specmon.early_signals == [signal.SIGTERM]\n"
        "from specmon import stops\n"
        "stops.install()\n"
        "print(stops.requested() == signal.SIGTERM, stops.exit_status(0))\n"
        "stops.uninstall()\n"
        "print(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,\n"
        "      signal.getsignal(signal.SIGHUP) == signal.SIG_IGN,\n"
        "      signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
    )
    done = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "143", "True", "True", "True"]


def test_imported_as_a_library_specmon_installs_no_handler(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import signal\n"
        "import specmon, specmon.cli\n"
        "print(specmon.early_installed, signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)\n"
    )
    done = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", "True"], done.stderr
