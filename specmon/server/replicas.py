"""Several replicas behind one /metrics URL (a load balancer, a Kubernetes Service), told
apart from a server that restarted.

A scrape's identity (`scrape.CounterSample.identity`) names the process that answered:
vLLM's `process_start_time_seconds` (prometheus_client's process collector), the counters'
`_created` times where the server keeps them, an `instance` or `pod` label on the series. A
server that restarts shows a new identity once and never an old one again; a URL answered by
several replicas shows an identity come back after another one.

Where a page names no process, the counters tell: a total of verify steps that fell and, at
the very next scrape, stands at or above where it stood before the fall came from another
process (a restarted server counts from zero, and does not regain its whole lifetime's
count within one scrape interval).

Counter deltas across such scrapes mix the replicas' counts; the run's server counters come
from a store that scrapes each replica instead (`--server-metrics-from prometheus:URL`,
server/store_counters.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

SEVERAL_REPLICAS = "/metrics is answered by several replicas"
ADVICE = (
    "use --server-metrics-from prometheus:URL --selector '{LABEL=\"VALUE\"}' (a store that "
    "scrapes each replica) for the run's server counters"
)


def several_replicas_text(replicas: int) -> str:
    """The one line every surface prints for it (reconciliation, window, watch)."""
    seen = f"{replicas} seen" if replicas > 2 else "at least 2 seen"
    return f"{SEVERAL_REPLICAS} ({seen}): its counter deltas mix their counts; {ADVICE}"


@dataclass
class ReplicaTracker:
    """The identities and totals of one URL's scrapes, in order."""

    seen: list[str] = field(default_factory=list)  # identities, in order of first answer
    current: str | None = None  # the identity of the last scrape that had one
    returns: int = 0  # scrapes whose identity came back after another one
    flaps: int = 0  # totals that fell and stood again at the next scrape
    _totals: list[float] = field(default_factory=list)  # the last two totals

    def observe(self, identity: str | None, total: float | None) -> None:
        """One good scrape: its identity (None: the page names no process) and its total of
        verify steps (None: no such counter)."""
        if identity is not None and identity != self.current:
            if identity in self.seen:
                self.returns += 1
            else:
                self.seen.append(identity)
            self.current = identity
        if total is None:
            return
        last = self._totals
        if len(last) == 2 and last[1] < last[0] <= total:
            self.flaps += 1
        last.append(total)
        del last[:-2]

    @property
    def several(self) -> bool:
        return bool(self.returns or self.flaps)

    @property
    def count(self) -> int:
        """Replicas seen answering: 1 unless several are (then at least 2)."""
        return max(2, len(self.seen)) if self.several else 1
