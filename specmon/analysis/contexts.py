"""Per-context-length aggregation: every run-level figure per bucket of the requests'
context (docs/metrics.md §15).

A request's context is its prompt tokens plus its output tokens, both from the usage the
server reported (`input_sequence_length` + `output_sequence_length`): the context the
request held at its end. Buckets are fixed, in tokens with 1k = 1024: <1k, 1-4k, 4-16k,
16-64k and >64k (lower bound included). A `ContextTable` is a GroupedTable
(analysis/groups.py) keyed by the bucket, so each bucket's export blocks are the
accumulator's own summary code run on its results, as the per-category table's are.

Requests without a prompt token count (no usage) are counted under `UNKNOWN` when others
have one; a run where no request reported its prompt has no per-context figures.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from specmon.analysis.groups import GroupedTable, sort_rows
from specmon.decision.acceptance import per_position
from specmon.pipeline import RequestResult
from specmon.stats import row_value

UNKNOWN = "(unknown)"
KTOKENS = 1024
# (label, lowest context in the bucket), ascending; a bucket ends where the next starts
BUCKETS: tuple[tuple[str, int], ...] = (
    ("<1k", 0),
    ("1-4k", 1 * KTOKENS),
    ("4-16k", 4 * KTOKENS),
    ("16-64k", 16 * KTOKENS),
    (">64k", 64 * KTOKENS),
)
ORDER = {label: i for i, (label, _) in enumerate(BUCKETS)} | {UNKNOWN: len(BUCKETS)}
# the summary's extras beside each bucket's AIPerf blocks
RATE_INTERVAL_KEY = "spec_decode_draft_acceptance_rate_ci95"
TPOT_INTERVAL_KEY = "inter_token_latency_ci95"
USER_TPS_INTERVAL_KEY = "output_token_throughput_per_user_ci95"
POSITIONS_KEY = "spec_decode_acceptance_by_position"
RANGE_KEY = "context_tokens"


def bucket_of(tokens: int) -> str:
    """The bucket label of a context length."""
    label = BUCKETS[0][0]
    for name, low in BUCKETS:
        if tokens >= low:
            label = name
    return label


def context_bucket(result: RequestResult) -> str | None:
    tokens = result.context_tokens
    return None if tokens is None else bucket_of(tokens)


Interval = tuple[float, float] | None


@dataclass(frozen=True)
class ContextRow:
    """One line of the live per-context table (None: no value yet)."""

    bucket: str
    requests: int
    acceptance_length: float | None  # token-weighted: 1 + accepted / steps
    acceptance_length_ci95: Interval
    draft_acceptance_rate: float | None  # overall, %
    draft_acceptance_rate_ci95: Interval  # %
    # conditional acceptance a_i per position i = 1..k (None: no trials there)
    per_position: tuple[float | None, ...]
    tpot_ms: float | None  # mean inter-token latency over the bucket's requests
    tpot_ms_ci95: Interval
    output_token_throughput: float | None  # the bucket's output tokens / its duration
    user_tps: float | None  # mean output tokens/s per user
    user_tps_ci95: Interval
    errors: int = 0

    def value(self, column: str) -> Any:
        """The figure of one of ROW_FIELDS (the bucket sorts by its order, not its text)."""
        if column not in ROW_FIELDS:
            raise ValueError(f"unknown column {column!r}; one of {', '.join(ROW_FIELDS)}")
        if column == "bucket":
            return ORDER[self.bucket]
        value = asdict(self)[column]
        return value[0] if column == "per_position" and value else value


ROW_FIELDS = (
    "bucket",
    "requests",
    "acceptance_length",
    "draft_acceptance_rate",
    "per_position",
    "tpot_ms",
    "output_token_throughput",
)


class ContextTable(GroupedTable):
    """One accumulator per context bucket (analysis/groups.py GroupedTable)."""

    def __init__(self) -> None:
        super().__init__(context_bucket, UNKNOWN)

    def buckets(self) -> list[str]:
        """Bucket labels, shortest context first; [] when no request had a prompt count."""
        return sorted(self.groups(), key=ORDER.__getitem__)

    def rows(self) -> list[ContextRow]:
        """The live table's rows, shortest context first."""
        return [self._row(name) for name in self.buckets()]

    def _row(self, name: str) -> ContextRow:
        acc, sums = self.accumulator(name), self.sums(name)
        assert acc is not None and sums is not None
        snap = acc.snapshot()
        spec, std = snap.spec_rows, snap.std_rows
        rate_ci = sums.drafts.interval(offset=0.0, cap=1.0)
        positions = per_position(acc.pooled_histogram_sorted(), acc.num_spec_tokens)
        return ContextRow(
            bucket=name,
            requests=snap.request_count,
            acceptance_length=row_value(spec, "spec_decode_token_weighted_acceptance_length"),
            acceptance_length_ci95=sums.steps.interval(),
            draft_acceptance_rate=row_value(spec, "spec_decode_overall_draft_acceptance_rate"),
            draft_acceptance_rate_ci95=None
            if rate_ci is None
            else (rate_ci[0] * 100, rate_ci[1] * 100),
            per_position=tuple(p.conditional for p in positions),
            tpot_ms=row_value(std, "inter_token_latency"),
            tpot_ms_ci95=sums.tpot_ms.interval(),
            output_token_throughput=row_value(std, "output_token_throughput"),
            user_tps=row_value(std, "output_token_throughput_per_user"),
            user_tps_ci95=sums.user_tps.interval(),
            errors=snap.error_count,
        )

    def export_block(self) -> dict[str, dict[str, Any]]:
        """{bucket: the per-category block's keys (analysis/groups.py group_block), the
        draft rate's, TPOT's and per-user tokens/s' intervals, per-position acceptance with
        Wilson intervals and the bucket's context range}, shortest context first."""
        out: dict[str, dict[str, Any]] = {}
        for name in self.buckets():
            acc, sums = self.accumulator(name), self.sums(name)
            assert acc is not None and sums is not None
            block = self.group_block(name)
            for key, ci, unit in (
                (RATE_INTERVAL_KEY, sums.drafts.interval(offset=0.0, cap=1.0), "ratio"),
                (TPOT_INTERVAL_KEY, sums.tpot_ms.interval(), "ms"),
                (USER_TPS_INTERVAL_KEY, sums.user_tps.interval(), "tokens/sec/user"),
            ):
                if ci is not None:
                    block[key] = {"unit": unit, "low": ci[0], "high": ci[1]}
            if acc.spec_request_count:
                hist = acc.pooled_histogram_sorted()
                block[POSITIONS_KEY] = [
                    {
                        "position": p.position,
                        "conditional": p.conditional,
                        "low": None if p.ci95 is None else p.ci95[0],
                        "high": None if p.ci95 is None else p.ci95[1],
                        "trials": p.trials,
                    }
                    for p in per_position(hist, acc.num_spec_tokens)
                ]
            block[RANGE_KEY] = bucket_range(name)
            out[name] = block
        return out


def bucket_range(name: str) -> dict[str, int | None]:
    """{"low", "high"}: the bucket's context tokens, low included, high excluded (None:
    open)."""
    labels = [label for label, _ in BUCKETS]
    if name not in labels:
        return {"low": None, "high": None}
    i = labels.index(name)
    high = BUCKETS[i + 1][1] if i + 1 < len(BUCKETS) else None
    return {"low": BUCKETS[i][1], "high": high}


__all__ = ["BUCKETS", "UNKNOWN", "ContextRow", "ContextTable", "sort_rows"]
