"""The value checks every parser shares: JSON `true` must never pass as the integer 1."""

from __future__ import annotations

from typing import Any, TypeGuard


def is_int(v: Any) -> TypeGuard[int]:
    """An int that is not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_count(v: Any) -> TypeGuard[int]:
    """A non-negative int that is not a bool (steps, tokens, histogram buckets)."""
    return is_int(v) and v >= 0
