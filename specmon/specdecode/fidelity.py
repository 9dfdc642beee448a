"""How much of the seed record an engine really reported: the fidelity label.

Four levels, from most to least (docs/metrics.md §10.1):

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

import re
from collections.abc import Mapping
from typing import Any, Protocol

import orjson

PER_STEP = "per-step"
HISTOGRAM = "histogram"
COUNTS = "counts"
SERVER_WIDE = "server-wide"
LEVELS: tuple[str, ...] = (PER_STEP, HISTOGRAM, COUNTS, SERVER_WIDE)  # most to least
FIDELITY_KEY = "acceptance_fidelity"  # the summary JSON's key and the JSONL metadata's

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
# The monitor's tag beside the acceptance figures (the headline's first line fits 80 columns).
SHORT: Mapping[str, str] = {
    PER_STEP: "full",
    HISTOGRAM: "hist",
    COUNTS: "counts",
    SERVER_WIDE: "server",
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


# Verification modes whose acceptance is not comparable with exact verification, and how a
# server's /server_info (vLLM's dev mode: its config, as text or JSON) says it uses them.
_SUFFIX = re.compile(r"""method['"]?\s*[:=]\s*['"]suffix['"]""")
_MRV2 = re.compile(
    r"""(VLLM_USE_V2_MODEL_RUNNER|use_v2_model_runner)['"]?\s*[:=]\s*['"]?(1|true)""", re.I
)
_FLY = re.compile(r"""rejection_sample_method['"]?\s*[:=]\s*['"]fly['"]""")
SUFFIX_PADDING = (
    "suffix decoding under Model Runner V2 pads drafts with the last sampled token: "
    "per-position counts include filler slots, acceptance not comparable"
)
SUFFIX_MAYBE = (
    "suffix decoding: under Model Runner V2 (not shown by this server) drafts are padded "
    "with filler slots, acceptance then not comparable"
)
LOSSY = "FLy verification is lossy: its acceptance is not comparable with exact verification"


def verification_notes(server_info: Any) -> tuple[str, ...]:
    """The notes for the non-comparable verification modes a /server_info body names."""
    if server_info is None:
        return ()
    try:
        text = server_info if isinstance(server_info, str) else orjson.dumps(server_info).decode()
    except TypeError:
        text = str(server_info)
    notes: list[str] = []
    if _SUFFIX.search(text):
        notes.append(SUFFIX_PADDING if _MRV2.search(text) else SUFFIX_MAYBE)
    if _FLY.search(text):
        notes.append(LOSSY)
    return tuple(notes)


def fidelity_line(
    counts: Mapping[str, int], engine: str | None, notes: tuple[str, ...] = ()
) -> str | None:
    """The console's one line: `Acceptance fidelity (vllm): histogram and counts: ...`."""
    level = weakest(level for level, n in counts.items() if n)
    if level is None:
        return None
    line = f"Acceptance fidelity ({engine or 'unknown engine'}): {LABELS[level]}"
    return line + "".join(f"; {note}" for note in notes)


def run_fidelity(counts: Mapping[str, int], notes: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """The summary's `acceptance_fidelity` block from per-level request counts."""
    level = weakest(level for level, n in counts.items() if n)
    if level is None:
        return None
    block: dict[str, Any] = {
        "level": level,
        "label": LABELS[level],
        "requests": {lv: counts[lv] for lv in LEVELS if counts.get(lv)},
    }
    if notes:
        block["not_comparable"] = list(notes)
    return block
