"""vLLM's Prometheus series on /metrics, one label set per simulated engine.

Spec-decode counters (vllm:spec_decode_*) exist only with speculation (k >= 1), as on a real
vLLM started without a speculative config. The health series (running, waiting, KV-cache
usage, preemptions, prefix cache) are driven by specmon.sim.scheduler.

The simulator's own fidelity series (specmon_sim_*, per engine; how a step's lag is measured
is in specmon/sim/engine.py; other parts of specmon read these exact names):
  specmon_sim_steps_total                 steps run
  specmon_sim_steps_late_total            steps whose actual duration > formula * 1.02
  specmon_sim_step_formula_seconds_total  sum of the steps' formula durations
  specmon_sim_step_lag_seconds_total      sum of max(0, actual - formula)
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from specmon.sim.engine import LATE_FACTOR
from specmon.sim.model import SequencePlan


class SpecCounters:
    """The series vLLM exposes on /metrics, written by prometheus_client like vLLM."""

    def __init__(self, model: str, k: int, engines: int) -> None:
        self.registry = CollectorRegistry()
        self.k = k
        labels = ["engine", "model_name"]
        reg = self.registry
        families: list[Counter | Gauge] = []
        if k > 0:
            self.drafts = Counter(
                "vllm:spec_decode_num_drafts",
                "Number of spec decoding drafts.",
                labels,
                registry=reg,
            )
            self.draft_tokens = Counter(
                "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", labels, registry=reg
            )
            self.accepted = Counter(
                "vllm:spec_decode_num_accepted_tokens",
                "Number of accepted tokens.",
                labels,
                registry=reg,
            )
            self.per_pos = Counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos",
                "Accepted tokens per draft position.",
                labels + ["position"],
                registry=reg,
            )
            families += [self.drafts, self.draft_tokens, self.accepted]
        self.prompt_tokens = Counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed.", labels, registry=reg
        )
        self.generation_tokens = Counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", labels, registry=reg
        )
        self.running = Gauge(
            "vllm:num_requests_running", "Number of requests running.", labels, registry=reg
        )
        self.waiting = Gauge(
            "vllm:num_requests_waiting", "Number of requests waiting.", labels, registry=reg
        )
        self.kv_usage = Gauge(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            labels,
            registry=reg,
        )
        self.preemptions = Counter(
            "vllm:num_preemptions", "Cumulative number of preemption.", labels, registry=reg
        )
        self.prefix_queries = Counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            labels,
            registry=reg,
        )
        self.prefix_hits = Counter(
            "vllm:prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens.",
            labels,
            registry=reg,
        )
        families += [
            self.prompt_tokens,
            self.generation_tokens,
            self.running,
            self.waiting,
            self.kv_usage,
            self.preemptions,
            self.prefix_queries,
            self.prefix_hits,
        ]
        self.steps = Counter(
            "specmon_sim_steps", "Simulator engine steps run.", labels, registry=reg
        )
        self.steps_late = Counter(
            "specmon_sim_steps_late",
            "Simulator steps whose actual duration exceeded the formula by more than 2%.",
            labels,
            registry=reg,
        )
        self.formula_seconds = Counter(
            "specmon_sim_step_formula_seconds",
            "Sum of the simulator steps' formula durations.",
            labels,
            registry=reg,
        )
        self.lag_seconds = Counter(
            "specmon_sim_step_lag_seconds",
            "Sum of how far the simulator's steps ran over their formula durations.",
            labels,
            registry=reg,
        )
        families += [self.steps, self.steps_late, self.formula_seconds, self.lag_seconds]
        self.labels = [(str(e), model) for e in range(engines)]
        # per engine: the fidelity counters' children, looked up once (add_step runs per step)
        self._step_children = [
            tuple(c.labels(*lab) for c in (self.steps, self.steps_late, self.formula_seconds))
            + (self.lag_seconds.labels(*lab),)
            for lab in self.labels
        ]
        for engine, name in self.labels:  # vLLM exposes every series from start, at 0
            for family in families:
                family.labels(engine, name)
            for position in range(k):
                self.per_pos.labels(engine, name, str(position))

    def add_plan(self, engine: int, plan: SequencePlan, steps_done: int | None = None) -> None:
        """Count the first `steps_done` spec steps of a plan (all of them by default)."""
        accepted = (
            plan.per_step_accepted if steps_done is None else plan.per_step_accepted[:steps_done]
        )
        drafted = plan.per_step_drafted[: len(accepted)]
        if not accepted or self.k == 0:
            return
        labels = self.labels[engine]
        self.drafts.labels(*labels).inc(len(accepted))
        self.draft_tokens.labels(*labels).inc(sum(drafted))
        self.accepted.labels(*labels).inc(sum(accepted))
        # Per step, +1 at each position 0..accepted-1 (a survival count).
        for position in range(self.k):
            hits = sum(1 for j in accepted if j > position)
            if hits:
                self.per_pos.labels(*labels, str(position)).inc(hits)

    def add_step(self, engine: int, formula_s: float, lag_s: float) -> None:
        """One engine step: its formula duration and its lag (engine.py); late over 2%."""
        steps, late, formula, lag = self._step_children[engine]
        steps.inc()
        if formula_s > 0:
            formula.inc(formula_s)
            if lag_s > 0:
                lag.inc(lag_s)
                if lag_s > (LATE_FACTOR - 1.0) * formula_s:
                    late.inc()

    def add_tokens(self, engine: int, prompt_tokens: int, generation_tokens: int) -> None:
        labels = self.labels[engine]
        self.prompt_tokens.labels(*labels).inc(prompt_tokens)
        self.generation_tokens.labels(*labels).inc(generation_tokens)

    def set_health(self, engine: int, running: int, waiting: int, kv_usage: float) -> None:
        labels = self.labels[engine]
        self.running.labels(*labels).set(running)
        self.waiting.labels(*labels).set(waiting)
        self.kv_usage.labels(*labels).set(kv_usage)

    def add_preemption(self, engine: int) -> None:
        self.preemptions.labels(*self.labels[engine]).inc()

    def add_prefix(self, engine: int, queried: int, hits: int) -> None:
        labels = self.labels[engine]
        self.prefix_queries.labels(*labels).inc(queried)
        if hits:
            self.prefix_hits.labels(*labels).inc(hits)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
