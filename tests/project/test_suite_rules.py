"""The suite's own rules (tests/conftest.py): in the fast loop a test that starts a process
without the e2e mark fails with the command it ran (the full run does not check), the process fixtures mark their tests e2e, and under
pytest-xdist the slowest files are handed out first. The first two run an inner pytest with
the real conftest (pytester, as a subprocess)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import conftest
import pytest
from support.paths import ROOT, TESTS

pytestmark = pytest.mark.e2e  # an inner pytest process

INNER_OPTIONS = ("-p", "no:cacheprovider")
ROOT_CONFTEST = Path(conftest.__file__).read_text(encoding="utf-8")
INNER_TESTS = """
import subprocess

import pytest


def test_unmarked_starts_one():
    subprocess.run(["true"], check=True)


@pytest.mark.e2e
def test_marked_starts_one():
    subprocess.run(["true"], check=True)


def test_pure():
    assert sum([1, 2]) == 3


def test_uses_a_process_fixture(tmux_pane):
    assert callable(tmux_pane)
"""


@pytest.fixture(autouse=True)
def _helpers_importable(monkeypatch):
    """The inner pytest imports the conftest's helpers from tests/, as the suite does."""
    monkeypatch.setenv("PYTHONPATH", f"{TESTS}:{ROOT}")


def test_the_full_run_runs_every_test_and_checks_no_marks(pytester):
    pytester.makeconftest(ROOT_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_subprocess(*INNER_OPTIONS, "-m", "not realvllm")
    result.assert_outcomes(passed=4)


def test_the_fast_loop_leaves_out_marked_and_fixture_marked_tests(pytester):
    pytester.makeconftest(ROOT_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-m", "not e2e and not realvllm"
    )
    # test_marked_starts_one and test_uses_a_process_fixture (marked by its fixture) are out;
    # the unmarked one still runs (passes) and errors at its teardown, naming its command
    result.assert_outcomes(passed=2, errors=1, deselected=2)
    result.stdout.fnmatch_lines(["*test_unmarked_starts_one started a process (true)*e2e*"])


def test_the_slowest_files_come_first_each_files_order_kept(tmp_path, monkeypatch):
    durations = tmp_path / "durations.json"
    durations.write_text(json.dumps({"tests/a.py": 5.0, "tests/b.py": 50.0, "tests/c.py": 1.0}))
    monkeypatch.setattr(conftest, "DURATIONS", durations)
    names = ["tests/a.py::x", "tests/c.py::y", "tests/b.py::z", "tests/new.py::w", "tests/a.py::v"]
    items = [SimpleNamespace(nodeid=name) for name in names]
    ordered = [i.nodeid for i in conftest.slowest_files_first(items)]  # type: ignore[arg-type]
    # b (50 s), then a (5 s) and the unlisted file at the median (5 s) in collection order, c
    assert ordered == [
        "tests/b.py::z",
        "tests/a.py::x",
        "tests/a.py::v",
        "tests/new.py::w",
        "tests/c.py::y",
    ]
