"""The sweep's schedule: vLLM's `num_speculative_tokens_per_batch_size` from the decisions
of decision/cells.py (and the step-time model of decision/stepcost.py for the gaps).

The schedule is inclusive [start, end, K] ranges starting at 1, sorted, contiguous; batch
size is proxied by client concurrency.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specmon.decision.cells import Decision, trust_of
from specmon.decision.stepcost import KModel
from specmon.export.common import atomic_write

SCHEDULE_NAME = "speculative_k_schedule.json"
BATCH_SIZE_PROXY = "client concurrency"


@dataclass
class _Range:
    start: int
    end: int
    k: int
    source: str  # "measured" | "carried" | "predicted"
    measured_at: list[int]


def _point_sources(
    anchors: dict[int, int], top: int, model: KModel | None
) -> list[tuple[int, int, str]]:
    """(batch size, K, source) for 1..top: anchors measured, gaps from the model or carried.

    A gap's model K is clamped between the anchors around it and kept monotone from one to
    the next (below the first anchor: no smaller than its K, non-increasing towards it), so
    model-filled neighbours never zig-zag against the measured anchors."""
    ordered = sorted(anchors)
    out = []
    current = anchors[ordered[0]]
    for b in range(1, top + 1):
        if b in anchors:
            current = anchors[b]
            out.append((b, current, "measured"))
        elif model is not None:
            out.append((b, _gap_k(b, anchors, ordered, model, out), "predicted"))
        else:
            # below the first anchor the first K is extended down; after, the previous K carries
            out.append((b, current, "carried"))
    return out


def _gap_k(
    b: int,
    anchors: dict[int, int],
    ordered: list[int],
    model: KModel,
    so_far: list[tuple[int, int, str]],
) -> int:
    nxt = min(c for c in ordered if c > b)
    prev_k = so_far[-1][1] if so_far else None
    want = model.best_k(b)
    if prev_k is None:  # batch 1 below the first anchor: at least its K
        return max(want, anchors[nxt])
    lo, hi = sorted((prev_k, anchors[nxt]))
    return min(max(want, lo), hi)


def zigzag_notes(anchors: dict[int, int], model: KModel | None) -> list[str]:
    """A measured K that rises and falls against both neighbours is kept (it was measured)
    and said so: 'measured k=3 at batch 16 beats the model's k=2 here'."""
    ordered = sorted(anchors)
    notes = []
    for prev, here, nxt in zip(ordered, ordered[1:], ordered[2:]):
        a, k, c = anchors[prev], anchors[here], anchors[nxt]
        if (k - a) * (k - c) > 0:  # a peak or a dip
            theirs = None if model is None else model.best_k(here)
            if theirs is not None and theirs != k:
                notes.append(f"measured k={k} at batch {here} beats the model's k={theirs} here")
            else:
                notes.append(
                    f"measured k={k} at batch {here} breaks the trend of its neighbours "
                    f"(k={a} at {prev}, k={c} at {nxt}); remeasure before deploying"
                )
    return notes


def _continues(previous: str, source: str) -> bool:
    # a carried K stays part of the measured range it continues
    return previous == source or (previous == "measured" and source == "carried")


def _ranges(points: list[tuple[int, int, str]]) -> list[_Range]:
    out: list[_Range] = []
    for b, k, src in points:
        last = out[-1] if out else None
        if last is not None and last.k == k and _continues(last.source, src):
            last.end = b
            if src == "measured":
                last.measured_at.append(b)
        else:
            out.append(_Range(b, b, k, src, [b] if src == "measured" else []))
    return out


def _merged(ranges: list[_Range]) -> list[list[int]]:
    """vLLM's list: adjacent ranges with the same K merged."""
    out: list[list[int]] = []
    for r in ranges:
        if out and out[-1][2] == r.k:
            out[-1][1] = r.end
        else:
            out.append([r.start, r.end, r.k])
    return out


def build_schedule(
    decisions: Sequence[Decision], model: KModel | None = None, complete: bool = True
) -> dict[str, Any]:
    """The `speculative_k_schedule.json` document from the decisions.

    Only concurrencies where every k was measured anchor the schedule (an interrupted sweep
    leaves the rest out, and says so; `complete` False is written into the file).
    Concurrencies between (and below) the anchors take the model's best k (marked
    predicted, kept monotone between anchors) when a model is given, otherwise the previous
    measured K carries (below the first, the first K extends down to 1). The last range ends
    at the largest anchor; vLLM carries that K to any larger batch. Decisions without a
    selection are gaps. Raises ValueError (why) when no concurrency can anchor it.
    """
    partial = [d.concurrency for d in decisions if d.selected_k is not None and d.missing_ks]
    anchors = {
        d.concurrency: d.selected_k
        for d in decisions
        if d.selected_k is not None and not d.missing_ks
    }
    if not anchors:
        why = "no concurrency has every k measured" if partial else "no concurrency selected a k"
        raise ValueError(f"{why}: nothing to schedule")
    top = max(anchors)
    ranges = _ranges(_point_sources(anchors, top, model))
    merged = _merged(ranges)
    by_conc = {d.concurrency: d for d in decisions if d.selected_k is not None}
    max_k = max(r[2] for r in merged)
    fragment: dict[str, Any] | None = (
        {"num_speculative_tokens": max_k, "num_speculative_tokens_per_batch_size": merged}
        if max_k > 0
        else None
    )
    notes = _schedule_notes(anchors, top, model, fragment) + zigzag_notes(anchors, model)
    if partial:
        notes.append(
            "left out (not every k measured there): concurrency "
            + ", ".join(map(str, sorted(partial)))
        )
    if not complete:
        notes.append("the sweep was interrupted: this schedule is incomplete, measure the rest")
    return {
        "complete": complete and not partial,
        "num_speculative_tokens_per_batch_size": merged,
        "batch_size_proxy": BATCH_SIZE_PROXY,
        "max_batch_size": top,
        "ranges": [_range_entry(r) for r in ranges],
        "selected_vs_best_percent": {
            str(c): d.selected_vs_best_percent for c, d in sorted(by_conc.items())
        },
        "selected_vs_k0_percent": {
            str(c): d.selected_vs_k0_percent for c, d in sorted(by_conc.items())
        },
        "speculative_config_fragment": fragment,
        "model_basis": None if model is None else model.basis,
        "left_out_concurrencies": sorted(partial),
        "notes": notes,
        # the verdict and the cells left out per load: outside the fragment vLLM reads
        **trust_of(decisions, complete),
    }


def _range_entry(r: _Range) -> dict[str, Any]:
    """One range of the schedule document: where its k comes from, and measured where."""
    return {
        "start": r.start,
        "end": r.end,
        "k": r.k,
        "source": r.source,
        "measured": r.source == "measured",
        "predicted": r.source == "predicted",
        "measured_at": r.measured_at,
    }


def _schedule_notes(
    anchors: dict[int, int], top: int, model: KModel | None, fragment: dict[str, Any] | None
) -> list[str]:
    notes = [
        f"batch size is proxied by client concurrency; the last range ends at {top}, the "
        "largest measured concurrency, and vLLM keeps its K for larger batches"
    ]
    if model is None and min(anchors) > 1:
        notes.append(f"batch sizes below {min(anchors)} take the K measured at {min(anchors)}")
    if model is not None:
        notes.append(f"unmeasured batch sizes predicted by the model ({model.basis})")
    if fragment is None:
        notes.append("k=0 everywhere: run without --speculative-config")
    else:
        notes.append("merge speculative_config_fragment into your --speculative-config JSON")
    return notes


def validate_schedule(entries: Any) -> None:
    """Raise ValueError unless entries are vLLM-valid [start, end, K] ranges from 1, contiguous."""
    if not isinstance(entries, list) or not entries:
        raise ValueError("schedule must be a non-empty list of [start, end, K]")
    expected = 1
    for e in entries:
        if not (isinstance(e, list) and len(e) == 3 and all(type(v) is int for v in e)):
            raise ValueError(f"bad entry {e!r}: expected [start, end, K] integers")
        start, end, k = e
        if start != expected or end < start or k < 0:
            raise ValueError(f"bad entry {e!r}: ranges must start at {expected}, end >= start")
        expected = end + 1


def write_schedule(path: str | Path, schedule: dict[str, Any]) -> Path:
    """Write the schedule document atomically (a reader never sees half a file)."""
    validate_schedule(schedule["num_speculative_tokens_per_batch_size"])
    text = json.dumps(schedule, indent=2, allow_nan=False) + "\n"
    return atomic_write(path, text.encode("utf-8"))
