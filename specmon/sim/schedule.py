"""`--spec-schedule`: vLLM's `num_speculative_tokens_per_batch_size`, k chosen per step.

The schedule is a list of inclusive batch-size ranges `[[start, end, K], ...]`, checked as
vLLM 0.32's validator does (vllm/v1/spec_decode/dynamic/utils.py): a non-empty list of
3-item entries, positive starts and ends, start <= end, K >= 0, sorted non-overlapping
ranges, the first starting at 1. As vLLM's dense lookup: a gap between ranges carries the
previous K forward, batch sizes past the last range keep the last K, and every K is capped
at `--num-spec-tokens`, which stays the maximum (and sizes the per-request histogram, as
vLLM's RequestSpecDecodeMetrics uses num_speculative_tokens).

The engine loop (specmon/sim/engine.py) looks k up with the batch size B at each step's
start; a step drafts min(k, remaining - 1) per request, so per_step_drafted follows the
schedule, and a step at K = 0 drafts nothing: a non-spec step (not counted in the spec
counters), as in the simulator's k = 0.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specmon.errors import UserError

Schedule = list[tuple[int, int, int]]
FLAG = "--spec-schedule"


def load_schedule(value: Any) -> Schedule:
    """JSON text, a file holding it, or an already parsed list -> a validated schedule."""
    if isinstance(value, str):
        text = value.strip()
        if not text.startswith("["):
            path = Path(text)
            try:
                text = path.read_text()
            except OSError as exc:
                raise UserError(
                    f"{FLAG}: '{value}' is neither JSON ([[start, end, K], ...]) nor a "
                    f"readable file ({exc.strerror})"
                ) from None
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise UserError(f"{FLAG}: not valid JSON: {exc}") from None
    if isinstance(value, dict):  # a schedule file written by `specmon sweep`, or a config
        value = value.get("num_speculative_tokens_per_batch_size")
    return validate(value)


def validate(entries: Any) -> Schedule:
    """vLLM's rules (module docstring); a one-line UserError naming the rule broken."""
    if not isinstance(entries, list) or not entries:
        raise UserError(f"{FLAG}: must be a non-empty list of [start, end, K] entries")
    parsed: Schedule = []
    for entry in entries:
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise UserError(f"{FLAG}: entry {entry!r} is not [start, end, K]")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in entry):
            raise UserError(f"{FLAG}: entry {entry!r} must hold integers")
        start, end, k = entry
        if start <= 0 or end <= 0:
            raise UserError(f"{FLAG}: batch-size range ({start}, {end}) must be positive")
        if start > end:
            raise UserError(f"{FLAG}: range start must be <= end in {list(entry)}")
        if k < 0:
            raise UserError(f"{FLAG}: K must be >= 0 in {list(entry)}")
        parsed.append((start, end, k))
    parsed.sort(key=lambda e: e[0])
    previous_end = 0
    for start, end, _ in parsed:
        if start <= previous_end:
            raise UserError(f"{FLAG}: batch-size ranges must be non-overlapping")
        previous_end = end
    if parsed[0][0] != 1:
        raise UserError(f"{FLAG}: the first batch-size range must start at 1")
    return parsed


def k_for_batch(schedule: Schedule, batch: int, max_k: int) -> int:
    """K for a running batch of `batch` requests (B < 1 counts as 1), capped at max_k."""
    batch = max(batch, 1)
    k = schedule[0][2]
    for start, _end, value in schedule:
        if start > batch:
            break
        k = value  # this range, or the gap / tail after it (carried forward)
    return min(k, max_k)


def lookup(schedule: Schedule | None, max_k: int) -> Callable[[int], int]:
    """batch size -> k: the schedule's, or max_k at every batch size without one."""
    if not schedule:
        return lambda _batch: max_k
    cache: dict[int, int] = {}

    def k_of(batch: int) -> int:
        k = cache.get(batch)
        if k is None:
            k = cache[batch] = k_for_batch(schedule, batch, max_k)
        return k

    return k_of
