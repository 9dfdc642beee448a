"""Issue 35 item 8: every duration flag refuses nan, inf, zero, a negative and an absurd value
in one line with exit status 2, before anything starts (sweep's --ready-timeout and
--segment-duration, watch's --interval and --duration); replay's --speed takes 0 (no
pacing) but nothing negative or infinite. The first bad value of each flag goes to a real
`specmon` process, the others to `specmon.cli.main` in this process (the same parse, without
a 0.4 CPU-s interpreter start each). The sweep's options are declared fields
(run/sweep/options.py): their one line names the option and the field, as every declared
option's does; watch's are argparse types."""

from __future__ import annotations

import subprocess
import sys

import pytest

from specmon.cli import main

pytestmark = pytest.mark.e2e  # real processes (the fast loop leaves them out)
SPECMON = [sys.executable, "-m", "specmon"]
BAD = ["nan", "inf", "-inf", "0", "-1", "1e99"]
COMMANDS = {
    "--ready-timeout": ["sweep", "--serve", "x {k} {port}", "--num-spec-tokens", "1"],
    "--segment-duration": ["sweep", "--serve", "x {k} {port}", "--num-spec-tokens", "1"],
    "--interval": ["watch", "--url", "http://127.0.0.1:9", "--headless"],
    "--duration": ["watch", "--url", "http://127.0.0.1:9", "--headless"],
}


def status_and_stderr(argv: list[str], in_process: bool, capsys) -> tuple[int, str]:
    if not in_process:
        proc = subprocess.run([*SPECMON, *argv], capture_output=True, text=True, timeout=120)
        return proc.returncode, proc.stderr
    capsys.readouterr()
    code = main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("flag", COMMANDS)
def test_a_meaningless_duration_is_one_line_and_status_2(flag, tmp_path, capsys):
    for i, value in enumerate(BAD):
        argv = [*COMMANDS[flag], f"{flag}={value}", "--artifact-dir", str(tmp_path / "x")]
        code, stderr = status_and_stderr(argv, i > 0, capsys)
        assert code == 2, (value, stderr)
        said = f"option {flag}: bad value '{value}'" if COMMANDS[flag][0] == "sweep" else None
        said = said or f"argument {flag}: '{value}'"
        assert stderr.count("\n") == 1 and said in stderr, (value, stderr)
        assert not (tmp_path / "x").exists()  # nothing started


def test_replay_speed_refuses_negative_and_infinite(tmp_path):
    for value in ("-1", "inf", "nan"):
        proc = subprocess.run(
            [*SPECMON, "replay", str(tmp_path), f"--speed={value}"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 2
        assert f"argument --speed: '{value}': give a number >= 0" in proc.stderr
