"""Where the tests' files live, for test modules at any depth under tests/."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
BENCHMARKS = ROOT / "benchmarks"
