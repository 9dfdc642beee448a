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
  specmon_sim_step_batch_total            sum of the steps' batch sizes (B of the formula):
                                          / steps = the mean running batch
Per finished streamed request (one choice, at least two tokens: those with an ITL), what a
client measures as its inter-token latency, (last token - first) / (tokens - 1):
  specmon_sim_requests_timed_total        requests counted below
  specmon_sim_request_itl_formula_seconds_total  sum of each one's ITL by the formula (the
                                          formula durations of the steps it ran in)
  specmon_sim_request_itl_written_seconds_total  sum of each one's ITL as written (the time
                                          its last token's bytes went to the socket, less
                                          its first's): the step loop and the write path
  specmon_sim_request_ttft_written_seconds_total  sum of each one's time from its arrival
                                          (parsed) to its first token's write
A client's mean ITL over the same requests, against Δformula / Δtimed, says whether the
per-token time it measured is the formula's (specmon sweep does this per repeat).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, ProcessCollector, generate_latest

from specmon.sim.model import SequencePlan
from specmon.specdecode.engines import engine as registered_engine

LABELS = ["engine", "model_name"]
_VLLM = registered_engine(
    "vllm"
).metrics  # the simulator's /metrics imitates vLLM's (the registry's names)


def _named(name: str | None) -> str:
    if name is None:
        raise RuntimeError("vLLM's registry entry lacks a spec-decode counter name")
    return name


# (attribute, kind, series, help), in the order /metrics lists them. Spec decoding's exist
# only with speculation (k >= 1); its per-position counter has a third label, `position`.
SPEC_SERIES: tuple[tuple[str, type[Counter] | type[Gauge], str, str], ...] = (
    ("drafts", Counter, _named(_VLLM.steps), "Number of spec decoding drafts."),
    ("draft_tokens", Counter, _named(_VLLM.draft_tokens), "Number of draft tokens."),
    ("accepted", Counter, _named(_VLLM.accepted), "Number of accepted tokens."),
)
PER_POSITION = (_named(_VLLM.per_position), "Accepted tokens per draft position.")
SERIES: tuple[tuple[str, type[Counter] | type[Gauge], str, str], ...] = (
    ("prompt_tokens", Counter, "vllm:prompt_tokens", "Number of prefill tokens processed."),
    (
        "generation_tokens",
        Counter,
        "vllm:generation_tokens",
        "Number of generation tokens processed.",
    ),
    ("running", Gauge, "vllm:num_requests_running", "Number of requests running."),
    ("waiting", Gauge, "vllm:num_requests_waiting", "Number of requests waiting."),
    ("kv_usage", Gauge, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
    ("preemptions", Counter, "vllm:num_preemptions", "Cumulative number of preemption."),
    (
        "prefix_queries",
        Counter,
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
    ),
    (
        "prefix_hits",
        Counter,
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
    ),
    # the simulator's own fidelity series (the module docstring)
    ("steps", Counter, "specmon_sim_steps", "Simulator engine steps run."),
    (
        "steps_late",
        Counter,
        "specmon_sim_steps_late",
        "Simulator steps whose actual duration exceeded the formula by more than 2%.",
    ),
    (
        "formula_seconds",
        Counter,
        "specmon_sim_step_formula_seconds",
        "Sum of the simulator steps' formula durations.",
    ),
    (
        "lag_seconds",
        Counter,
        "specmon_sim_step_lag_seconds",
        "Sum of how far the simulator's steps ran over their formula durations.",
    ),
    ("step_batch", Counter, "specmon_sim_step_batch", "Sum of the simulator steps' batch sizes."),
    (
        "requests_timed",
        Counter,
        "specmon_sim_requests_timed",
        "Finished streamed requests with an inter-token latency (one choice, 2+ tokens).",
    ),
    (
        "itl_formula",
        Counter,
        "specmon_sim_request_itl_formula_seconds",
        "Sum of those requests' inter-token latencies by the step formula.",
    ),
    (
        "itl_written",
        Counter,
        "specmon_sim_request_itl_written_seconds",
        "Sum of those requests' inter-token latencies as their chunks were written.",
    ),
    (
        "ttft_written",
        Counter,
        "specmon_sim_request_ttft_written_seconds",
        "Sum of those requests' times from arrival to their first token's write.",
    ),
)


class SpecCounters:
    """The series vLLM exposes on /metrics, written by prometheus_client like vLLM."""

    # one attribute per row of SPEC_SERIES (k >= 1 only) and SERIES
    drafts: Counter
    draft_tokens: Counter
    accepted: Counter
    per_pos: Counter
    prompt_tokens: Counter
    generation_tokens: Counter
    running: Gauge
    waiting: Gauge
    kv_usage: Gauge
    preemptions: Counter
    prefix_queries: Counter
    prefix_hits: Counter
    steps: Counter
    steps_late: Counter
    formula_seconds: Counter
    lag_seconds: Counter
    step_batch: Counter
    requests_timed: Counter
    itl_formula: Counter
    itl_written: Counter
    ttft_written: Counter

    def __init__(self, model: str, k: int, engines: int) -> None:
        self.registry = CollectorRegistry()
        # process_start_time_seconds and the other process_* series, as vLLM's default
        # registry has them: they tell replicas behind one URL apart (server/replicas.py)
        ProcessCollector(registry=self.registry)
        self.k = k
        families = [self._declare(*row) for row in (SPEC_SERIES if k > 0 else ())]
        if k > 0:
            self.per_pos = Counter(*PER_POSITION, [*LABELS, "position"], registry=self.registry)
        families += [self._declare(*row) for row in SERIES]
        self.labels = [(str(e), model) for e in range(engines)]
        self._step_children = self._children(
            self.steps, self.steps_late, self.formula_seconds, self.lag_seconds, self.step_batch
        )
        self._itl_children = self._children(
            self.requests_timed, self.itl_formula, self.itl_written, self.ttft_written
        )
        for engine, name in self.labels:  # vLLM exposes every series from start, at 0
            for family in families:
                family.labels(engine, name)
            for position in range(k):
                self.per_pos.labels(engine, name, str(position))

    def _children(self, *families: Counter) -> list[tuple[Counter, ...]]:
        """Per engine: these counters' children, looked up once (add_step runs per step)."""
        return [tuple(c.labels(*lab) for c in families) for lab in self.labels]

    def _declare(
        self, attribute: str, kind: type[Counter] | type[Gauge], name: str, help_text: str
    ) -> Counter | Gauge:
        family = kind(name, help_text, LABELS, registry=self.registry)
        setattr(self, attribute, family)
        return family

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

    def add_step(
        self, engine: int, formula_s: float, lag_s: float, late: bool, batch: int = 1
    ) -> None:
        """One engine step: its formula duration, its lag, whether it was late (engine.py
        decides: LATE_FACTOR) and the batch size its formula was given."""
        steps, late_steps, formula, lag, batches = self._step_children[engine]
        steps.inc()
        batches.inc(batch)
        if formula_s > 0:
            formula.inc(formula_s)
            if lag_s > 0:
                lag.inc(lag_s)
                if late:
                    late_steps.inc()

    def add_request_itl(
        self, engine: int, formula_s: float, written_s: float, ttft_s: float
    ) -> None:
        """One finished request's inter-token latency by the formula and as written, and its
        time from arrival to the first token's write."""
        timed, formula, written, ttft = self._itl_children[engine]
        timed.inc()
        formula.inc(formula_s)
        written.inc(written_s)
        ttft.inc(ttft_s)

    def add_lag(self, engine: int, lag_s: float) -> None:
        """Lag counted at the end of a busy period (engine.py), outside any step."""
        if lag_s > 0:
            self._step_children[engine][3].inc(lag_s)

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
