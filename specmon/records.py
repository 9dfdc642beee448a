"""JSON objects: a dataclass as the object a file stores it as (sweep.json, the summary's
alarms), and one object read from a user's text (`json_object`).

One rule for every such record, so a field added to the dataclass is written without a
second edit: each field under its name, in declaration order (a field declared with
`field(metadata=stored_as(NAME))` under NAME, with `stored_as(None)` not at all); tuples
and lists as lists; a dict whose keys are ints with str keys, in key order (JSON keys are
strings); a nested record by its own `to_dict()` when it has one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import Any

import orjson

_STORED_AS = "specmon_stored_as"


def stored_as(name: str | None) -> dict[str, str | None]:
    """A field's metadata: the JSON object names it `name` (None: it is not stored)."""
    return {_STORED_AS: name}


def json_record(obj: Any) -> dict[str, Any]:
    """`obj`'s fields as a JSON object (see the module docstring)."""
    if not is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"json_record wants a dataclass instance, got {type(obj).__name__}")
    out: dict[str, Any] = {}
    for f in fields(obj):
        name = f.metadata.get(_STORED_AS, f.name)
        if name is not None:
            out[name] = _plain(getattr(obj, f.name))
    return out


def same_named(cls: type, source: Any, names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Keyword arguments for dataclass `cls` copied from `source`'s attributes of the same
    name: the fields in `names`, or (None) every field of `cls` that `source` has. One
    declaration of a field then carries it across (a field added to both is copied)."""
    wanted = names if names is not None else tuple(f.name for f in fields(cls))
    return {name: getattr(source, name) for name in wanted if hasattr(source, name)}


def _plain(value: Any) -> Any:
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and not isinstance(value, type):
        return to_dict()
    if is_dataclass(value) and not isinstance(value, type):
        return json_record(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        if value and all(isinstance(k, int) and not isinstance(k, bool) for k in value):
            return {str(k): _plain(v) for k, v in sorted(value.items())}
        return {k: _plain(v) for k, v in value.items()}
    return value


def int_keys(data: Mapping[str, Any] | None) -> dict[int, Any]:
    """A stored dict with int keys read back ({"2": x} -> {2: x}); None reads as {}."""
    return {int(k): v for k, v in (data or {}).items()}


def json_object(text: str | bytes) -> dict[str, Any]:
    """The JSON object `text` holds; ValueError with the reason otherwise, for the caller
    to prefix with where the text came from."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value
