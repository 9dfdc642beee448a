"""JSON encoding that never loses a line to a hostile value (docs/architecture.md, "Hostile
responses").

orjson refuses integers outside 64 bits (a sum of server-sent totals can pass 2**64) and
objects nested deeper than 255 levels (a server may send up to the 1,024 levels orjson reads);
it writes NaN and infinities as null. `dumps_safe` encodes as orjson does and, only when orjson
refuses, encodes a copy in which each offending part is replaced:

* an integer outside [-2**63, 2**64) becomes the nearest float (a float past the double
  range, or an int that has none, becomes the string marker `OUT_OF_RANGE`);
* a list or object deeper than `MAX_DEPTH` levels below the top becomes the string marker
  `TOO_DEEP` (the levels above it are kept, so a record keeps its metadata and metrics);
* a non-string object key becomes its str().

The fast path costs nothing: the copy is made only after orjson raised.
"""

from __future__ import annotations

from typing import Any

import orjson

MAX_DEPTH = 200  # below orjson's 255, leaving room for the wrapper a line adds around a body
TOO_DEEP = f"<specmon: nested deeper than {MAX_DEPTH} levels, not kept>"
OUT_OF_RANGE = "<specmon: number out of range, not kept>"
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


def dumps_safe(obj: Any, option: int | None = None) -> bytes:
    """orjson.dumps(obj, option), with the parts orjson refuses replaced by markers."""
    try:
        return orjson.dumps(obj, option=option)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return orjson.dumps(sanitize(obj), option=option)


def sanitize(obj: Any, depth: int = 0) -> Any:
    """A copy of `obj` that orjson can encode (see the module docstring)."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, str | float):
        return obj
    if isinstance(obj, int):
        return obj if _INT_MIN <= obj <= _INT_MAX else _int_as_float(obj)
    if isinstance(obj, dict | list | tuple):
        if depth >= MAX_DEPTH:
            return TOO_DEEP
        if isinstance(obj, dict):
            return {_key(k): sanitize(v, depth + 1) for k, v in obj.items()}
        return [sanitize(v, depth + 1) for v in obj]
    return obj  # anything else orjson knows (dataclasses, numpy scalars) or refuses as before


def _int_as_float(value: int) -> float | str:
    try:
        return float(value)
    except OverflowError:
        return OUT_OF_RANGE


def _key(key: Any) -> str:
    return key if isinstance(key, str) else str(key)
