"""The load plan of a segmented run: `--segments concurrency=1,4,16` parsed, shared among
servers under --split, and the log of every segment's settings as knobs and the script
change them. Plain data, imported by the options (config.py), the load (sources/load/) and
the segments table (analysis/segments.py), so it imports nothing of specmon."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

SETTING_KEYS = ("concurrency", "request_rate", "output_tokens")
_KEY_ALIASES = {
    "concurrency": "concurrency",
    "request_rate": "request_rate",
    "rate": "request_rate",
    "output_tokens": "output_tokens",
    "output_tokens_mean": "output_tokens",
    "osl": "output_tokens",
}


def parse_segments(text: str) -> list[dict[str, Any]]:
    """'concurrency=1,4,16' -> [{'concurrency': 1}, {'concurrency': 4}, {'concurrency': 16}].

    Several keys join with ';' and pair up position by position (a single value applies
    to every segment). Raises ValueError with a one-line message on a bad spec.
    """
    columns: dict[str, list[Any]] = {}
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        key, eq, values = part.partition("=")
        name = _KEY_ALIASES.get(key.strip().replace("-", "_"))
        if not eq or name is None:
            raise ValueError(
                f"--segments: '{part}' is not KEY=V1,V2,... with KEY one of "
                f"{', '.join(SETTING_KEYS)}"
            )
        columns[name] = [_segment_value(name, v) for v in values.split(",") if v.strip()]
        if not columns[name]:
            raise ValueError(f"--segments: '{part}' lists no values")
    if not columns:
        raise ValueError("--segments: empty; e.g. --segments concurrency=1,4,16")
    lengths = {len(v) for v in columns.values() if len(v) > 1}
    if len(lengths) > 1:
        raise ValueError(
            "--segments: keys list different numbers of values; give each the "
            "same count (or one value)"
        )
    count = lengths.pop() if lengths else 1
    return [{k: (v[i] if len(v) > 1 else v[0]) for k, v in columns.items()} for i in range(count)]


def _segment_value(name: str, text: str) -> Any:
    text = text.strip()
    try:
        value = float(text) if name == "request_rate" else int(text)
    except ValueError:
        kind = "a number" if name == "request_rate" else "a whole number"
        raise ValueError(f"--segments: {name} value '{text}' is not {kind}") from None
    if value <= 0:
        raise ValueError(f"--segments: {name} value {text} must be positive")
    return value


def format_segments(plan: Sequence[Mapping[str, Any]]) -> str:
    """The inverse of parse_segments (used to hand each server its share)."""
    keys = [k for k in SETTING_KEYS if any(k in step for step in plan)]
    return ";".join(
        f"{k}="
        + ",".join(f"{step[k]:g}" if isinstance(step[k], float) else str(step[k]) for step in plan)
        for k in keys
    )


def split_plan(plan: Sequence[Mapping[str, Any]], parts: int, index: int) -> list[dict[str, Any]]:
    """Server `index`'s share of a plan under --split: concurrency and rate divided."""
    out = []
    for step in plan:
        share = dict(step)
        if "concurrency" in step:
            base, extra = divmod(step["concurrency"], parts)
            share["concurrency"] = max(1, base + (1 if index < extra else 0))
        if "request_rate" in step:
            share["request_rate"] = step["request_rate"] / parts
        out.append(share)
    return out


class SegmentLog:
    """The settings of every segment so far (thread-safe; written by the load thread or a knob)."""

    def __init__(
        self, concurrency: int | None, request_rate: float | None, output_tokens: int | None
    ) -> None:
        self._lock = threading.Lock()
        self._entries: dict[int, dict[str, Any]] = {
            0: {
                "concurrency": concurrency,
                "request_rate": request_rate,
                "output_tokens": output_tokens,
            }
        }
        self.current = 0

    def change(self, **settings: Any) -> int | None:
        """Apply changed settings; a real change starts a new segment, whose number is returned."""
        with self._lock:
            now = dict(self._entries[self.current])
            updated = {**now, **settings}
            if updated == now:
                return None
            self.current += 1
            self._entries[self.current] = updated
            return self.current

    def record(self, index: int, settings: Mapping[str, Any]) -> None:
        """A scripted segment starts with these settings."""
        with self._lock:
            self._entries[index] = dict(settings)
            self.current = index

    def settings(self) -> dict[int, dict[str, Any]]:
        with self._lock:
            return {i: dict(s) for i, s in self._entries.items()}
