"""The per-request figures: the acceptance histogram the panels show (the requests' own, or
the server's counters when no response carried any), the what-if over it and the headline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from specmon.specdecode.fidelity import SERVER_WIDE as SERVER_WIDE_FIDELITY
from specmon.stats import MetricRow, Rows, metric_row, row_value
from specmon.tui.tuning_view import CounterStatus, WhatIf, recommendation_text

if TYPE_CHECKING:
    from specmon.accumulator import RunSnapshot

SERVER_WIDE = "server-wide (/metrics)"


@dataclass(frozen=True)
class Acceptance:
    """Accepted drafts per verify step: H[j] -> steps, the server's k, and whether it comes
    from the server's /metrics counters (no per-request records)."""

    histogram: tuple[tuple[int, int], ...]
    k: int | None
    server_wide: bool

    @property
    def hist(self) -> dict[int, int]:
        return dict(self.histogram)

    @property
    def steps(self) -> int:
        return sum(n for _, n in self.histogram)

    @property
    def title_suffix(self) -> str:
        return f" · {SERVER_WIDE}" if self.server_wide else ""

    @property
    def acceptance_length(self) -> float | None:
        """1 + Σ j·H[j] / Σ H[j] over every step (the token-weighted AL)."""
        steps = self.steps
        return 1 + sum(j * n for j, n in self.histogram) / steps if steps else None


def no_speculation(snap: RunSnapshot, counters: CounterStatus | None) -> bool:
    """A server at k=0: requests finished, none carried a spec-decode record, and its
    /metrics has no spec-decode counters (no poller: `counters` None) or counted no verify
    step. (With /metrics polling off a server whose payloads are stripped reads the same;
    the segments table makes the same call.)"""
    answered = snap.request_count > 0 and snap.fidelity is None and not snap.zero_step_requests
    return answered and (counters is None or counters.no_drafts)


def shown_k(snap: RunSnapshot, counters: CounterStatus | None) -> int | None:
    """The server's k: its records', else its counters', else 0 for a server that does not
    speculate (no_speculation), else None (not known yet)."""
    k = snap.num_spec_tokens or (counters.k if counters is not None else None)
    if k is None and no_speculation(snap, counters):
        return 0
    return k


def acceptance_of(snap: RunSnapshot, counters: CounterStatus | None) -> Acceptance:
    """The requests' pooled histogram; the server's counters when no response had any."""
    hist = snap.pooled_histogram or {}
    if sum(hist.values()) == 0 and counters is not None and counters.histogram:
        return Acceptance(tuple(sorted(counters.histogram.items())), counters.k, True)
    return Acceptance(tuple(sorted(hist.items())), snap.num_spec_tokens, False)


@dataclass(frozen=True)
class Headline:
    al: float | None  # per-request mean acceptance length
    al_token_weighted: float | None
    draft_rate_pct: float | None  # per-request mean draft acceptance rate
    overall_rate_pct: float | None  # pooled Σa / Σd
    output_tok_s: float | None
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    itl_p50_ms: float | None
    errors: int
    recommendation: str  # "best k=5 (2.11x, extrapolated)"
    basis: str  # what the recommendation rests on
    fidelity: str | None = None  # what the engine reported (specmon/specdecode/fidelity.py)


def headline_of(
    spec: Rows,
    std: Rows,
    errors: int,
    recommendation: str,
    basis: str,
    fidelity: str | None = None,
) -> Headline:
    """The headline figures from a snapshot's typed spec and std rows."""
    return Headline(
        al=row_value(spec, "spec_decode_acceptance_length", "avg"),
        al_token_weighted=row_value(spec, "spec_decode_token_weighted_acceptance_length", "avg"),
        draft_rate_pct=row_value(spec, "spec_decode_draft_acceptance_rate", "avg"),
        overall_rate_pct=row_value(spec, "spec_decode_overall_draft_acceptance_rate", "avg"),
        output_tok_s=row_value(std, "output_token_throughput", "avg"),
        ttft_p50_ms=row_value(std, "time_to_first_token", "p50"),
        ttft_p99_ms=row_value(std, "time_to_first_token", "p99"),
        itl_p50_ms=row_value(std, "inter_token_latency", "p50"),
        errors=errors,
        recommendation=recommendation,
        basis=basis,
        fidelity=fidelity,
    )


def run_headline(
    snap: RunSnapshot,
    acceptance: Acceptance,
    estimate: WhatIf | None,
    counters: CounterStatus | None,
) -> Headline:
    """The headline of one server: its figures, and the recommended k with the basis
    decision.advise names (docs/tuning.md) after the measured steps it rests on."""
    said = estimate.text.split(" · ", 1)[1] if estimate and " · " in estimate.text else ""
    # the model's basis stays in the what-if panel (6): the headline keeps to one line
    said = " · ".join(p for p in said.split(" · ") if not p.startswith("model: "))
    where = f" {SERVER_WIDE}" if acceptance.server_wide else ""
    basis = f"{acceptance.steps:,} steps{where}" + (f", {said}" if said else "") if estimate else ""
    if estimate and estimate.proposal:  # the model's proposal follows the measured answer
        # short: "next: k=10 +49% [-68..+547]" (the what-if panel has the whole line)
        said = estimate.proposal.split(" over measured k=")[0]
        basis += " · " + said.replace("measure ", "", 1).replace(", predicted", "", 1)
    spec: Rows = snap.spec_rows
    fidelity = snap.fidelity
    if acceptance.server_wide and not spec and counters is not None:
        # no per-request stats: the server's
        spec, fidelity = server_wide_spec(counters), SERVER_WIDE_FIDELITY
    return headline_of(
        spec,
        snap.std_rows,
        int(snap.error_count),
        estimate.head if estimate else recommendation_text(None),  # margins, intervals in
        basis,
        fidelity,
    )


def server_wide_spec(counters: CounterStatus) -> dict[str, MetricRow]:
    """The headline's acceptance rows from the server's counters (1 + Δaccepted / Δdrafts,
    Δaccepted / Δdraft_tokens: docs/metrics.md §11); per-request figures stay absent."""
    spec: dict[str, MetricRow] = {}
    if counters.acceptance_length is not None:
        # pooled over every verify step, 1 + Σa / Σs: the token-weighted acceptance length
        # (docs/metrics.md §6); the per-request mean needs requests
        tag = "spec_decode_token_weighted_acceptance_length"
        spec[tag] = metric_row(tag, value=counters.acceptance_length)
    if counters.acceptance_rate is not None:
        # pooled over every step: the overall rate (the per-request mean needs requests)
        tag = "spec_decode_overall_draft_acceptance_rate"
        spec[tag] = metric_row(tag, value=100 * counters.acceptance_rate)
    return spec
