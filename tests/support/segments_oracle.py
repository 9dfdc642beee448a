"""Test oracle for the live segments table: every row recomputed from scratch.

`SegmentTable` (specmon/analysis/segments.py) folds results in incrementally; these functions
read the full result lists each time, so tests can check that both give the same rows
whatever batches the results arrive in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from specmon.analysis.segments import _recommend, _window_s, segment_of


def segment_table(
    results: Iterable[Any] | Mapping[str, Iterable[Any]],
    *,
    settings: Mapping[int, Mapping] | Mapping[str, Mapping[int, Mapping]] | None = None,
    draft_cost: float | None = None,
    across_servers: bool = True,
) -> list[dict]:
    """One row per segment (per segment and server when given {label: results}).

    `settings` is SegmentLog.settings() (or {label: ...}); `across_servers` (same load on
    every server: mirror or unsplit) lets servers at different k fit the draft cost.
    """
    if isinstance(results, Mapping):
        groups = {label: list(rs) for label, rs in results.items()}
        per_server_settings = settings or {}
    else:
        groups = {None: list(results)}
        per_server_settings = {None: settings or {}}
    rows = []
    for label, group in groups.items():
        by_segment: dict[int, list[Any]] = {}
        for result in group:
            if result.phase == "profiling":
                by_segment.setdefault(segment_of(result), []).append(result)
        seg_settings = per_server_settings.get(label) or {}
        for index in sorted(by_segment):
            row = segment_row(by_segment[index], index, seg_settings.get(index))
            row["server"] = label
            rows.append(row)
    _recommend(rows, draft_cost, across_servers)
    rows.sort(key=lambda r: (r["segment"], str(r["server"])))
    return rows


def _per(last_index: int) -> int:
    """Requests per block once request `last_index` is in: at most 80 blocks (2 x 40)."""
    per = 1
    while last_index >= 80 * per:
        per *= 2
    return per


def _timed(r: Any) -> bool:
    return r.start_ns is not None and r.end_ns is not None and r.end_ns > r.start_ns


def segment_row(results: Sequence[Any], index: int, settings: Mapping | None = None) -> dict:
    valid = [r for r in results if r.error is None]
    steps = accepted = drafted = 0
    histogram: dict[int, int] = {}
    ks: set[int] = set()
    # P(best)'s request blocks: the i-th request with verify steps goes into block i // per
    # (consecutive requests; per: the smallest power of two keeping the last index under 80)
    blocks: dict[int, dict[int, int]] = {}
    with_steps = 0
    last_spec = sum(r.spec is not None for r in valid) - 1
    for r in valid:
        rec = r.spec
        if rec is None:
            continue
        block = blocks.setdefault(with_steps // _per(last_spec), {})
        with_steps += 1
        for j, n in rec.acceptance_histogram.items():
            block[int(j)] = block.get(int(j), 0) + int(n)
        steps += rec.num_spec_steps
        accepted += rec.num_accepted_draft_tokens
        drafted += rec.num_draft_tokens
        for j, n in rec.acceptance_histogram.items():
            histogram[int(j)] = histogram.get(int(j), 0) + int(n)
        if rec.num_spec_tokens is not None:
            ks.add(int(rec.num_spec_tokens))
    # the measured answer's rate blocks: the i-th valid request into block i // per, per
    # from the last valid request that has its times
    rate: dict[int, list[float]] = {}
    timed = [i for i, r in enumerate(valid) if _timed(r)]
    for i, r in enumerate(valid):
        if _timed(r):
            cell = rate.setdefault(i // _per(timed[-1]), [0.0, 0.0])
            cell[0] += r.metrics.get("output_sequence_length", 0)
            cell[1] += (r.end_ns - r.start_ns) / 1e9
    itl = [r.metrics["inter_token_latency"] for r in valid if "inter_token_latency" in r.metrics]
    osl = sum(r.metrics.get("output_sequence_length", 0) for r in valid)
    window = _window_s(valid)
    k = max(ks) if ks else (max(histogram) if histogram else None)
    return {
        "segment": index,
        "settings": dict(settings) if settings else {},
        "request_count": len(valid),
        "error_count": len(results) - len(valid),
        "num_spec_tokens": k,
        "steps": steps,
        "accepted": accepted,
        "drafted": drafted,
        "histogram": {str(j): n for j, n in sorted(histogram.items())},
        "request_blocks": [
            {str(j): n for j, n in sorted(blocks[i].items())} for i in sorted(blocks)
        ],
        "rate_blocks": [[rate[i][0], round(rate[i][1], 6)] for i in sorted(rate)],
        "speculation_seen": any(r.spec is not None for r in valid),
        "acceptance_length": 1 + accepted / steps if steps else None,
        "tpot_ms": sum(itl) / len(itl) if itl else None,
        "output_token_throughput": osl / window if window else None,
        "request_throughput": len(valid) / window if window else None,
        "duration_s": window,
        "latency_percentiles": {},  # computed only when asked (an SLO, the export)
        "recommended_k": None,
        "draft_cost": None,
        "recommended_from": None,
        "recommendation": None,
        "basis": None,
    }
