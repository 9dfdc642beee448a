"""vLLM's Prometheus spec-decode counters, one label set per simulated engine."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from specmon.sim.model import SequencePlan


class SpecCounters:
    """The counter families vLLM exposes on /metrics, written by prometheus_client like vLLM."""

    def __init__(self, model: str, k: int, engines: int) -> None:
        self.registry = CollectorRegistry()
        self.k = k
        labels = ["engine", "model_name"]
        reg = self.registry
        self.drafts = Counter(
            "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", labels, registry=reg
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
        self.prompt_tokens = Counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed.", labels, registry=reg
        )
        self.generation_tokens = Counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", labels, registry=reg
        )
        self.running = Gauge(
            "vllm:num_requests_running", "Number of requests running.", labels, registry=reg
        )
        self.labels = [(str(e), model) for e in range(engines)]
        for engine, name in self.labels:  # vLLM exposes every series from start, at 0
            for family in (
                self.drafts,
                self.draft_tokens,
                self.accepted,
                self.prompt_tokens,
                self.generation_tokens,
                self.running,
            ):
                family.labels(engine, name)
            for position in range(k):
                self.per_pos.labels(engine, name, str(position))

    def add_plan(self, engine: int, plan: SequencePlan, steps_done: int | None = None) -> None:
        """Count the first `steps_done` spec steps of a plan (all of them by default)."""
        accepted = (
            plan.per_step_accepted if steps_done is None else plan.per_step_accepted[:steps_done]
        )
        drafted = plan.per_step_drafted[: len(accepted)]
        if not accepted:
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

    def add_tokens(self, engine: int, prompt_tokens: int, generation_tokens: int) -> None:
        labels = self.labels[engine]
        self.prompt_tokens.labels(*labels).inc(prompt_tokens)
        self.generation_tokens.labels(*labels).inc(generation_tokens)

    def set_running(self, engine: int, delta: int) -> None:
        self.running.labels(*self.labels[engine]).inc(delta)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
