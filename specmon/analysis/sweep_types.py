"""The data a k sweep passes between its parts (shared contract; see docs/architecture.md).

The sweep runner (specmon/sources/sweep.py) measures cells and fills these; the decision
and model code (specmon/decision/cells.py, specmon/decision/stepcost.py) reads them;
`sweep.json` stores them with `to_dict()` / `from_dict()`. k = 0 is the baseline without
speculation.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# A cell whose server ran more than this behind its own step model is flagged (and the
# decision excludes it): the simulator's documented bar, 2%.
SERVER_LAG_LIMIT = 0.02


@dataclass(frozen=True)
class RepeatMeasurement:
    """One repeat of one (k, concurrency) cell: figures from that repeat's summary export."""

    output_token_throughput: float  # output tokens/s over the repeat (AIPerf's definition)
    request_throughput: float  # valid requests/s
    request_count: int  # valid profiling requests
    ttft_ms: float | None = None  # p50 time to first token
    itl_ms: float | None = None  # p50 inter-token latency
    tpot_ms: float | None = None  # p50 time per output token after the first
    request_latency_ms: float | None = None  # p50
    acceptance_length: float | None = None  # token-weighted tokens per verify step; None at k=0
    # pooled accepted-drafts histogram of the repeat (index j = steps accepting j drafts)
    histogram: dict[int, int] = field(default_factory=dict)
    error_count: int = 0
    artifact_dir: str | None = None  # the repeat's AIPerf-compatible exports
    # {"ttft_ms": {"p50": .., "p90": .., "p95": .., "p99": ..}, "tpot_ms": {...}}: what an
    # --slo percentile reads (specmon/decision/slo.py)
    latency_percentiles: dict[str, dict[str, float]] = field(default_factory=dict)
    # health (specmon/decision/gates.py): the client's loop-health warning during the repeat
    client_saturated: bool = False
    # specmon sim only: Δ specmon_sim_step_lag_seconds / Δ ..._formula_seconds over the
    # repeat, how far the server ran behind its own step model (None: not published)
    server_lag_share: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["histogram"] = {str(j): n for j, n in sorted(self.histogram.items())}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RepeatMeasurement:
        data = dict(data)
        data["histogram"] = {int(j): int(n) for j, n in (data.get("histogram") or {}).items()}
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class Cell:
    """All repeats of one (k, concurrency) point of the grid."""

    k: int
    concurrency: int
    repeats: list[RepeatMeasurement] = field(default_factory=list)
    error: str | None = None  # why the cell could not be measured (server failed, ...)

    @property
    def server_lag_share(self) -> float | None:
        """The worst repeat's server lag share (None when the server publishes none)."""
        shares = [r.server_lag_share for r in self.repeats if r.server_lag_share is not None]
        return max(shares) if shares else None

    @property
    def server_behind(self) -> str | None:
        """The flag of a cell whose server ran behind its own step model, or None."""
        share = self.server_lag_share
        if share is None or share <= SERVER_LAG_LIMIT:
            return None
        return f"server behind its own step model (+{share * 100:.1f}%)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "concurrency": self.concurrency,
            "repeats": [r.to_dict() for r in self.repeats],
            "error": self.error,
            "server_behind": self.server_behind,  # derived from the repeats; not read back
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Cell:
        return cls(
            k=int(data["k"]),
            concurrency=int(data["concurrency"]),
            repeats=[RepeatMeasurement.from_dict(r) for r in data.get("repeats") or []],
            error=data.get("error"),
        )
