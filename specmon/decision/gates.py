"""Measurement health: a point (a sweep cell, a run's segment, one server's run) that cannot
be trusted is excluded from every selection and named, never selected silently.

The rules (docs/tuning.md "Health gates"), one list for every surface:

* error rate above MAX_ERROR_RATE (failed / all decided requests): a k whose server fails
  requests is not faster, it is broken (vLLM's closed tuner rejects any failed request);
* a saturated client (the load loop's health warning): its timestamps include its own
  queueing, so TPOT and throughput are the client's, not the server's;
* a server behind its own step model (`server_lag_share` above MAX_SERVER_LAG_SHARE: the
  seconds the simulator's steps ran late over the seconds its formula gave them, Δlag /
  Δformula on its /metrics): the figures are not the configuration's;
* a per-token time off the simulator's formula (`formula_off_share`, the client's mean ITL
  against the formula ITL of the same requests, beyond MAX_SERVER_LAG_SHARE either way):
  whatever slowed it (the simulator's loop, its writes, the client), not the configuration;
* fewer than `min_requests` valid requests: too little to compare (MIN_REQUESTS for a sweep
  cell, its repeats summed; MIN_SEGMENT_REQUESTS for a run or a load segment, which the
  monitor shows from its first requests on).
"""

from __future__ import annotations

from dataclasses import dataclass

from specmon.decision.sweep_types import SERVER_LAG_LIMIT, fidelity_reasons

MAX_ERROR_RATE = 0.01
MAX_SERVER_LAG_SHARE = SERVER_LAG_LIMIT  # the sweep's flag and the gate: one bar
MIN_REQUESTS = 5
# a run or segment is shown live from its first request; its errors gate it, its count not
MIN_SEGMENT_REQUESTS = 1


@dataclass(frozen=True)
class Health:
    """What is known of one point's health; None / False where nothing is known."""

    requests: int | None = None  # valid requests (None: not counted, e.g. a histogram only)
    errors: int = 0
    saturated: bool = False
    server_lag_share: float | None = None
    min_requests: int = MIN_REQUESTS
    formula_off_share: float | None = None  # measured / formula per-token time - 1 (sim)

    def reasons(self) -> list[str]:
        """Why the point is excluded (empty: healthy)."""
        out = []
        decided = (self.requests or 0) + self.errors
        if decided and self.errors / decided > MAX_ERROR_RATE:
            out.append(
                f"error rate {100 * self.errors / decided:.1f}% > {MAX_ERROR_RATE:.0%} "
                f"({self.errors} of {decided} requests failed)"
            )
        if self.saturated:
            out.append("client saturated (the load loop's health warning)")
        out += fidelity_reasons(self.server_lag_share, self.formula_off_share)
        if self.requests is not None and self.requests < self.min_requests:
            out.append(f"too few requests ({self.requests} < {self.min_requests})")
        return out


# Conditions of the machine rather than of one configuration: when every cell at a load
# shares one of them the sweep still decides among those cells, saying so loudly (an
# overloaded machine slows every arm; excluding them all would hide what was measured).
# Errors and too few requests always exclude.
MACHINE_WIDE = ("client saturated", "server behind its step model", "off the simulator's")


def machine_wide(reasons: list[str] | tuple[str, ...]) -> bool:
    """Every reason is one that a busy machine gives every arm alike."""
    return bool(reasons) and all(r.startswith(MACHINE_WIDE) for r in reasons)


def flag(where: str, reasons: list[str]) -> str:
    """'k=4 at concurrency 16 excluded: error rate 50% > 1% (...)'."""
    return f"{where} excluded: {'; '.join(reasons)}"
