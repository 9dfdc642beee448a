"""--fail-on-errors: a run whose measurements the health gate excludes (more than 1% of its
requests failed) exits 1 and says so; without it the run exits 0 (docs/stopping.md says why)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def _run(url: str, out, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "specmon", "--url", url, "--headless", "--request-count", "40"]
        + ["--concurrency", "4", "--artifact-dir", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.sim("--seed", "9", "--error-rate", "0.3")
def test_fail_on_errors_exits_1_when_errors_exclude_the_run(tmp_path, sim):
    plain = _run(sim.url, tmp_path / "plain")
    strict = _run(sim.url, tmp_path / "strict", "--fail-on-errors")
    assert plain.returncode == 0, plain.stderr
    assert strict.returncode == 1, strict.stderr
    doc = json.loads((tmp_path / "strict" / "profile_export_aiperf.json").read_text())
    errors = int(doc["error_request_count"]["avg"])
    valid = int(doc["request_count"]["avg"])
    assert errors / (valid + errors) > 0.01  # the share the message reports, from the export
    share = 100 * errors / (valid + errors)
    assert (
        f"specmon: error: {errors} of {valid + errors} requests failed ({share:.1f}% > 1%): "
        "measurements excluded, exit 1 (--fail-on-errors)"
    ) in strict.stdout + strict.stderr


@pytest.mark.sim("--seed", "9")
def test_fail_on_errors_keeps_0_for_a_clean_run(tmp_path, sim):
    strict = _run(sim.url, tmp_path / "strict", "--fail-on-errors")
    assert strict.returncode == 0, strict.stderr
