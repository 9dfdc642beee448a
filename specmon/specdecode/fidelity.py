"""How much of the seed record an engine really reported: the fidelity label.

Four levels, from most to least (docs/metrics.md "Engines"):

per-step     per-step arrays, histogram and counts (vLLM `detailed`)
histogram    histogram and counts, no per-step arrays (vLLM `summary`, SGLang, TensorRT-LLM)
counts       accepted and proposed drafts only: no verify steps, so no acceptance length
             and no histogram (the OpenAI-standard usage counts, llama.cpp timings)
server-wide  no per-request record at all, only the server's /metrics (`specmon watch`,
             released TensorRT-LLM)

A label is derived from which fields a record carries, never declared by an adapter, so a
record and its label cannot disagree. A run's label is its weakest record's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

PER_STEP = "per-step"
HISTOGRAM = "histogram"
COUNTS = "counts"
SERVER_WIDE = "server-wide"
LEVELS: tuple[str, ...] = (PER_STEP, HISTOGRAM, COUNTS, SERVER_WIDE)  # most to least

# What each level reports, and what is therefore not available (one line each).
LABELS: Mapping[str, str] = {
    PER_STEP: "full: per-step arrays, histogram and counts",
    HISTOGRAM: "histogram and counts: no per-step arrays",
    COUNTS: (
        "counts only: no acceptance length per step, no histogram; "
        "AL from 1 + accepted / verify steps unavailable"
    ),
    SERVER_WIDE: "server-wide only: no per-request record, no per-request distributions",
}
SHORT: Mapping[str, str] = {
    PER_STEP: "full",
    HISTOGRAM: "histogram",
    COUNTS: "counts only",
    SERVER_WIDE: "server-wide",
}


class _Fields(Protocol):
    @property
    def num_spec_steps(self) -> int | None: ...
    @property
    def acceptance_histogram(self) -> dict[int, int] | None: ...
    @property
    def per_step_accepted(self) -> list[int] | None: ...


def fidelity_of(record: _Fields) -> str:
    """The level a record's present fields give."""
    if record.num_spec_steps is None or record.acceptance_histogram is None:
        return COUNTS
    if record.per_step_accepted is not None:
        return PER_STEP
    return HISTOGRAM


def weakest(levels: Any) -> str | None:
    """The least detailed of the given levels (None for none)."""
    present = [level for level in levels if level in LEVELS]
    return max(present, key=LEVELS.index) if present else None


def run_fidelity(counts: Mapping[str, int]) -> dict[str, Any] | None:
    """The summary's `acceptance_fidelity` block from per-level request counts."""
    level = weakest(level for level, n in counts.items() if n)
    if level is None:
        return None
    return {
        "level": level,
        "label": LABELS[level],
        "requests": {lv: counts[lv] for lv in LEVELS if counts.get(lv)},
    }
