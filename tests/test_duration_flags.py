"""Issue 35 item 8: every duration flag refuses nan, inf, zero, a negative and an absurd value
in one line with exit status 2, before anything starts (sweep's --ready-timeout and
--segment-duration, watch's --interval and --duration); replay's --speed takes 0 (no
pacing) but nothing negative or infinite. Real `specmon` processes. The sweep's options are
declared fields (run/sweep/options.py): their one line names the option and the field, as
every declared option's does; watch's are argparse types."""

from __future__ import annotations

import subprocess
import sys

import pytest

SPECMON = [sys.executable, "-m", "specmon"]
BAD = ["nan", "inf", "-inf", "0", "-1", "1e99"]
COMMANDS = {
    "--ready-timeout": ["sweep", "--serve", "x {k} {port}", "--num-spec-tokens", "1"],
    "--segment-duration": ["sweep", "--serve", "x {k} {port}", "--num-spec-tokens", "1"],
    "--interval": ["watch", "--url", "http://127.0.0.1:9", "--headless"],
    "--duration": ["watch", "--url", "http://127.0.0.1:9", "--headless"],
}


@pytest.mark.parametrize("flag", COMMANDS)
def test_a_meaningless_duration_is_one_line_and_status_2(flag, tmp_path):
    for value in BAD:
        proc = subprocess.run(
            [*SPECMON, *COMMANDS[flag], f"{flag}={value}", "--artifact-dir", str(tmp_path / "x")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 2, (value, proc.stderr)
        said = f"option {flag}: bad value '{value}'" if COMMANDS[flag][0] == "sweep" else None
        said = said or f"argument {flag}: '{value}'"
        assert proc.stderr.count("\n") == 1 and said in proc.stderr
        assert not (tmp_path / "x").exists()  # nothing started


def test_replay_speed_refuses_negative_and_infinite(tmp_path):
    for value in ("-1", "inf", "nan"):
        proc = subprocess.run(
            [*SPECMON, "replay", str(tmp_path), f"--speed={value}"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 2
        assert f"argument --speed: '{value}': give a number >= 0" in proc.stderr
