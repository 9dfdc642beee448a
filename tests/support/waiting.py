"""Waiting on a condition a test cannot be told about: poll it, with a bound that only guards
against a hang (never a performance check)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(predicate: Callable[[], T], timeout: float = 120, what: str = "condition") -> T:
    """The first truthy value of `predicate()`, tried every 0.1 s for up to `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
