"""Where the tests' files live, for test modules at any depth under tests/."""

import shutil
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
BENCHMARKS = ROOT / "benchmarks"


def shared_file(*parts: str, missing: str) -> Path:
    """A file of the shared folder beside the checkout (../shared/PARTS), found from the
    checkout or any folder above it; the test fails with `missing` when there is none."""
    for base in (ROOT, *ROOT.parents):
        candidate = base.parent.joinpath("shared", *parts)
        if candidate.is_file():
            return candidate
    raise AssertionError(missing)


def debian_binary(name: str, path: str, package: str) -> str:
    """An installed Debian tool (on PATH or at `path`); the test FAILS, never skips, naming
    the install command (.ci/run installs it)."""
    found = shutil.which(name) or (path if Path(path).exists() else None)
    if found is None:
        install = f"apt-get install --no-install-recommends {package}"
        pytest.fail(f"Debian's {package} package is missing: {install} (.ci/run does this)")
    return found
