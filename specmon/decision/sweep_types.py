"""The data a k sweep passes between its parts (shared contract; see docs/architecture.md).

The sweep runner (specmon/run/sweep/runner.py) measures cells and fills these; the decision
and model code (specmon/decision/cells.py, specmon/decision/stepcost.py) reads them;
`sweep.json` stores them with `to_dict()` / `from_dict()`. k = 0 is the baseline without
speculation.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from specmon.records import int_keys, json_record

# A cell whose server ran more than this behind its own step model, or whose measured
# per-token time is more than this off the simulator's formula, is flagged (and the
# decision excludes it): the simulator's documented bar, 2%.
SERVER_LAG_LIMIT = 0.02
# the sweep's own document in its artifact dir: its settings and cells (run/sweep/runner.py)
SWEEP_JSON = "sweep.json"


def fidelity_reasons(lag_share: float | None, off_share: float | None) -> list[str]:
    """Why a simulator's figures are not its configuration's, worded once for the sweep's
    flag (`Cell.server_behind`) and the health gate (decision/gates.py `Health.reasons`):
    its steps ran behind its own step model (lag / formula seconds), or the per-token time
    the client measured is off the formula's for the same requests (either way)."""
    out = []
    if lag_share is not None and lag_share > SERVER_LAG_LIMIT:
        out.append(
            f"server behind its step model (+{100 * lag_share:.1f}% of its formula's time "
            f"> {SERVER_LAG_LIMIT:.0%})"
        )
    if off_share is not None and abs(off_share) > SERVER_LAG_LIMIT:
        out.append(
            f"off the simulator's formula (per-token time {100 * off_share:+.1f}%, "
            f"beyond {SERVER_LAG_LIMIT:.0%})"
        )
    return out


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
    # specmon sim only: what the per-token time should have been. The client's mean ITL
    # (AIPerf's inter_token_latency avg) against the simulator's formula ITL of the requests
    # that finished over the repeat (Δ specmon_sim_request_itl_formula_seconds / Δ
    # ..._requests_timed), whatever made them differ: the step loop, the write path, the
    # client. Also the mean running batch its steps ran with, and how far its own writes
    # were off the formula (written / formula ITL - 1). None: not published.
    itl_mean_ms: float | None = None
    formula_itl_ms: float | None = None
    written_itl_share: float | None = None
    server_mean_batch: float | None = None
    # the client's mean TTFT and the simulator's mean time from a request's arrival to its
    # first token's write: the difference is the time requests and first tokens spent
    # between the two (the client's send, the HTTP path), which no step formula has
    ttft_mean_ms: float | None = None
    server_ttft_ms: float | None = None
    request_latency_mean_ms: float | None = None  # the client's mean request latency
    # specmon sim only: the streamed requests it timed between the repeat's two scrapes,
    # the ones its formula figures above are of (equal to request_count when they are the
    # client's own requests)
    server_requests: int | None = None

    @property
    def per_token_off_share(self) -> float | None:
        """Measured mean ITL / the formula's - 1 (None without both)."""
        if self.itl_mean_ms is None or not self.formula_itl_ms:
            return None
        return self.itl_mean_ms / self.formula_itl_ms - 1.0

    @property
    def arrival_delay_share(self) -> float | None:
        """(client mean TTFT - the simulator's mean arrival-to-first-write) / mean request
        latency: the share of each request's time spent between the client and the
        simulator, which the step formula has none of (a closed loop loses about that share
        of its throughput). None without the three figures."""
        ttft, server, latency = self.ttft_mean_ms, self.server_ttft_ms, self.request_latency_mean_ms
        if ttft is None or server is None or not latency:
            return None
        return (ttft - server) / latency

    def to_dict(self) -> dict[str, Any]:
        out = json_record(self)
        out["per_token_off_share"] = self.per_token_off_share  # derived; not read back
        out["arrival_delay_share"] = self.arrival_delay_share  # derived; not read back
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RepeatMeasurement:
        known = cls.__dataclass_fields__
        read = {k: v for k, v in data.items() if k in known}
        read["histogram"] = {j: int(n) for j, n in int_keys(data.get("histogram")).items()}
        return cls(**read)


@dataclass
class Cell:
    """All repeats of one (k, concurrency) point of the grid."""

    k: int
    concurrency: int
    repeats: list[RepeatMeasurement] = field(default_factory=list)
    error: str | None = None  # why the cell could not be measured (server failed, ...)

    @property
    def measured(self) -> bool:
        """Whether a decision may read it: it has repeats and no error (a cell whose server
        failed, or whose payloads contradicted its k, keeps what it measured, flagged)."""
        return self.error is None and bool(self.repeats)

    @property
    def server_lag_share(self) -> float | None:
        """The worst repeat's server lag share (None when the server publishes none)."""
        shares = [r.server_lag_share for r in self.repeats if r.server_lag_share is not None]
        return max(shares) if shares else None

    @property
    def per_token_off_share(self) -> float | None:
        """How far the cell's per-token time was off the formula's: the median of its
        repeats' signed shares, as the cell's throughput is their median (None when no
        repeat has both figures). One short repeat can read a client-side stall (a 1 s
        repeat at 64 streams: 2.3-3.4% while the others read under 1%, quiet machine) that
        the cell's median figures do not carry; the worst repeat is kept beside it."""
        offs = self._per_token_offs()
        return statistics.median(offs) if offs else None

    @property
    def per_token_off_worst(self) -> float | None:
        """The repeat furthest off the formula's per-token time: its signed share."""
        offs = self._per_token_offs()
        return max(offs, key=abs) if offs else None

    def _per_token_offs(self) -> list[float]:
        return [r.per_token_off_share for r in self.repeats if r.per_token_off_share is not None]

    @property
    def server_behind(self) -> str | None:
        """The flag of a cell off its simulator's step model (`fidelity_reasons`: the same
        words as the health gate that excludes it), or None."""
        return "; ".join(fidelity_reasons(self.server_lag_share, self.per_token_off_share)) or None

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "concurrency": self.concurrency,
            "repeats": [r.to_dict() for r in self.repeats],
            "error": self.error,
            # derived from the repeats; not read back
            "server_behind": self.server_behind,
            "per_token_off_share": self.per_token_off_share,
            "per_token_off_worst": self.per_token_off_worst,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Cell:
        return cls(
            k=int(data["k"]),
            concurrency=int(data["concurrency"]),
            repeats=[RepeatMeasurement.from_dict(r) for r in data.get("repeats") or []],
            error=data.get("error"),
        )
