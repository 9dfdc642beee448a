"""The server's health from its /metrics page: queue, KV cache, preemptions, prefix cache,
token counters (vLLM's names), per engine / data-parallel label set and summed.

Pure functions over the Prometheus text page; the poller that fetches it is
`specmon/server/scrape.py`. Whatever the server does not expose is None (absent), never 0.

Over an interval (`HealthDelta.between`): generation tokens/s = Δgeneration_tokens / dt,
preemptions/s = Δpreemptions / dt, prefix-cache hit rate = Δhits / Δqueries (both count
tokens). A counter that went down restarted (server restart): the interval counts it from
zero and `reset` is set, so no rate is ever negative.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from specmon.errors import UserError

LabelSet = tuple[tuple[str, str], ...]  # sorted (name, value) pairs, e.g. engine="0"

# vLLM sample name -> field. Gauges are current values; counters are cumulative.
GAUGES = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",  # a fraction 0..1 despite the name
}
COUNTERS = {
    "vllm:num_preemptions_total": "preemptions",
    "vllm:prefix_cache_queries_total": "prefix_cache_queries",
    "vllm:prefix_cache_hits_total": "prefix_cache_hits",
    "vllm:generation_tokens_total": "generation_tokens",
    "vllm:prompt_tokens_total": "prompt_tokens",
    # specmon sim only (sim/counters.py): how far its steps ran over its own step formula
    "specmon_sim_step_lag_seconds_total": "sim_lag_seconds",
    "specmon_sim_step_formula_seconds_total": "sim_formula_seconds",
    "specmon_sim_steps_total": "sim_steps",
    "specmon_sim_step_batch_total": "sim_step_batch",
    # ... and what a client should measure as ITL: per finished request, by the formula and
    # as the simulator wrote it
    "specmon_sim_requests_timed_total": "sim_requests_timed",
    "specmon_sim_request_itl_formula_seconds_total": "sim_itl_formula_seconds",
    "specmon_sim_request_itl_written_seconds_total": "sim_itl_written_seconds",
    "specmon_sim_request_ttft_written_seconds_total": "sim_ttft_written_seconds",
}
COUNTER_FIELDS = tuple(COUNTERS.values())


@dataclass(frozen=True)
class HealthFigures:
    """One label set's (or the server's summed) figures at one scrape; None = not exposed."""

    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None  # 0..1; summed view: mean over label sets
    preemptions: float | None = None
    prefix_cache_queries: float | None = None
    prefix_cache_hits: float | None = None
    generation_tokens: float | None = None
    prompt_tokens: float | None = None
    sim_lag_seconds: float | None = None
    sim_formula_seconds: float | None = None
    sim_steps: float | None = None
    sim_step_batch: float | None = None
    sim_requests_timed: float | None = None
    sim_itl_formula_seconds: float | None = None
    sim_itl_written_seconds: float | None = None
    sim_ttft_written_seconds: float | None = None

    @property
    def prefix_cache_hit_rate(self) -> float | None:
        """Hits / queries since the server started (None without queries)."""
        q, h = self.prefix_cache_queries, self.prefix_cache_hits
        return h / q if q and h is not None else None


@dataclass(frozen=True)
class HealthSample:
    """One scrape: figures per label set (engine / DP rank), and when it was taken."""

    per_labels: dict[LabelSet, HealthFigures]
    taken_s: float  # time.monotonic() when the page arrived

    @property
    def present(self) -> bool:
        """The page carries at least one health series."""
        return any(
            getattr(f, name.name) is not None
            for f in self.per_labels.values()
            for name in fields(f)
        )

    @property
    def total(self) -> HealthFigures:
        """Summed over label sets; KV-cache usage is the mean (each engine has its own cache)."""
        return _combine(list(self.per_labels.values()))

    @property
    def kv_cache_usage_max(self) -> float | None:
        """The fullest engine's KV-cache usage (the one that preempts first)."""
        values = [
            f.kv_cache_usage for f in self.per_labels.values() if f.kv_cache_usage is not None
        ]
        return max(values) if values else None


def _combine(items: list[HealthFigures]) -> HealthFigures:
    out: dict[str, float | None] = {}
    for fld in fields(HealthFigures):
        values = [v for v in (getattr(f, fld.name) for f in items) if v is not None]
        if not values:
            out[fld.name] = None
        elif fld.name == "kv_cache_usage":
            out[fld.name] = sum(values) / len(values)
        else:
            out[fld.name] = sum(values)
    return HealthFigures(**out)


def parse_health(text: str, taken_s: float | None = None) -> HealthSample:
    """Parse a Prometheus text page; keeps only the health series above (`_created` ignored)."""
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError) as exc:
        raise UserError(f"/metrics is not valid Prometheus text: {exc}") from None
    return health_from_families(families, taken_s)


def health_from_families(families: Iterable[Any], taken_s: float | None = None) -> HealthSample:
    """The health sample of an already parsed page (the poller parses each page once)."""
    raw: dict[LabelSet, dict[str, float]] = {}
    for family in families:
        for sample in family.samples:
            fld = GAUGES.get(sample.name) or COUNTERS.get(sample.name)
            if fld is not None:
                values = raw.setdefault(tuple(sorted(sample.labels.items())), {})
                values[fld] = values.get(fld, 0.0) + float(sample.value)
    per_labels = {labels: HealthFigures(**values) for labels, values in raw.items()}
    return HealthSample(per_labels, time.monotonic() if taken_s is None else taken_s)


def label_text(labels: LabelSet) -> str:
    """engine="0",model_name="m" (as the page writes it); "" for an unlabelled series."""
    return ",".join(f'{name}="{value}"' for name, value in labels)


@dataclass(frozen=True)
class HealthDelta:
    """What happened between two scrapes (summed, or one label set); None = not exposed."""

    duration_s: float
    # current gauges (at the later scrape)
    running: float | None
    waiting: float | None
    kv_cache_usage: float | None
    # counter increases over the interval (a reset counter counted from zero)
    preemptions: float | None
    prefix_cache_queries: float | None
    prefix_cache_hits: float | None
    generation_tokens: float | None
    prompt_tokens: float | None
    sim_lag_seconds: float | None
    sim_formula_seconds: float | None
    sim_steps: float | None
    sim_step_batch: float | None
    sim_requests_timed: float | None
    sim_itl_formula_seconds: float | None
    sim_itl_written_seconds: float | None
    sim_ttft_written_seconds: float | None
    reset: bool  # some counter went down: the server restarted during the interval
    per_labels: dict[LabelSet, HealthDelta]  # empty on the per-label-set deltas themselves

    @property
    def sim_lag_share(self) -> float | None:
        """specmon sim: Δlag / Δformula seconds, how far its steps ran behind its own step
        model over the interval (None from other servers, or when no step ran)."""
        lag, formula = self.sim_lag_seconds, self.sim_formula_seconds
        return lag / formula if formula and lag is not None else None

    @property
    def sim_mean_batch(self) -> float | None:
        """specmon sim: the mean batch size its steps ran with over the interval."""
        steps, batch = self.sim_steps, self.sim_step_batch
        return batch / steps if steps and batch is not None else None

    @property
    def sim_itl_formula_ms(self) -> float | None:
        """specmon sim: the mean inter-token latency, by its formula, of the streamed
        requests that finished in the interval (what their client should measure)."""
        timed, formula = self.sim_requests_timed, self.sim_itl_formula_seconds
        return 1000.0 * formula / timed if timed and formula is not None else None

    @property
    def sim_ttft_written_ms(self) -> float | None:
        """specmon sim: those requests' mean time from arrival to the first token's write
        (a client's TTFT less the time its request took to arrive, and the token to return)."""
        timed, ttft = self.sim_requests_timed, self.sim_ttft_written_seconds
        return 1000.0 * ttft / timed if timed and ttft is not None else None

    @property
    def sim_itl_written_share(self) -> float | None:
        """specmon sim: how far those requests' ITL as written ran over the formula's
        (written / formula - 1): the step loop's and the write path's delay together."""
        formula, written = self.sim_itl_formula_seconds, self.sim_itl_written_seconds
        return written / formula - 1.0 if formula and written is not None else None

    @property
    def generation_tokens_per_s(self) -> float | None:
        return self._rate(self.generation_tokens)

    @property
    def prompt_tokens_per_s(self) -> float | None:
        return self._rate(self.prompt_tokens)

    @property
    def preemptions_per_s(self) -> float | None:
        return self._rate(self.preemptions)

    @property
    def prefix_cache_hit_rate(self) -> float | None:
        """Δhits / Δqueries over the interval (None when nothing was queried)."""
        q, h = self.prefix_cache_queries, self.prefix_cache_hits
        return h / q if q and h is not None else None

    def _rate(self, increase: float | None) -> float | None:
        if increase is None or self.duration_s <= 0:
            return None
        return increase / self.duration_s

    @classmethod
    def between(cls, prev: HealthSample, cur: HealthSample, dt: float | None = None) -> HealthDelta:
        """cur − prev per label set, then summed; dt defaults to the scrapes' time apart.

        A label set new in `cur` (an engine that started) counts from zero, as Prometheus's
        rate() does for a new series; one gone from `cur` contributes nothing.
        """
        duration = cur.taken_s - prev.taken_s if dt is None else dt
        per = {
            labels: _label_delta(prev.per_labels.get(labels), figures, duration)
            for labels, figures in cur.per_labels.items()
        }
        gauges = cur.total
        increases = _combine([_as_figures(d) for d in per.values()])
        return cls(
            duration_s=duration,
            running=gauges.running,
            waiting=gauges.waiting,
            kv_cache_usage=gauges.kv_cache_usage,
            **{name: getattr(increases, name) for name in COUNTER_FIELDS},
            reset=any(d.reset for d in per.values()),
            per_labels=per,
        )


def _label_delta(prev: HealthFigures | None, cur: HealthFigures, duration: float) -> HealthDelta:
    increases: dict[str, float | None] = {}
    reset = False
    for name in COUNTER_FIELDS:
        now = getattr(cur, name)
        before = getattr(prev, name) if prev is not None else None
        if now is None:
            increases[name] = None
        elif before is None:
            increases[name] = now
        elif now < before:
            reset, increases[name] = True, now
        else:
            increases[name] = now - before
    return HealthDelta(
        duration_s=duration,
        running=cur.running,
        waiting=cur.waiting,
        kv_cache_usage=cur.kv_cache_usage,
        **increases,
        reset=reset,
        per_labels={},
    )


def _as_figures(delta: HealthDelta) -> HealthFigures:
    return HealthFigures(**{name: getattr(delta, name) for name in COUNTER_FIELDS})


def figures_dict(figures: HealthFigures) -> dict[str, float]:
    """The exposed figures only (an absent series has no key)."""
    out = {f.name: getattr(figures, f.name) for f in fields(figures)}
    out["prefix_cache_hit_rate"] = figures.prefix_cache_hit_rate
    return {name: value for name, value in out.items() if value is not None}


def delta_dict(delta: HealthDelta) -> dict[str, Any]:
    """An interval's figures: current gauges, counter increases and their rates."""
    out: dict[str, Any] = {
        "duration_s": delta.duration_s,
        "running": delta.running,
        "waiting": delta.waiting,
        "kv_cache_usage": delta.kv_cache_usage,
        **{name: getattr(delta, name) for name in COUNTER_FIELDS},
        "preemptions_per_s": delta.preemptions_per_s,
        "generation_tokens_per_s": delta.generation_tokens_per_s,
        "prompt_tokens_per_s": delta.prompt_tokens_per_s,
        "prefix_cache_hit_rate": delta.prefix_cache_hit_rate,
        "sim_lag_share": delta.sim_lag_share,
        "sim_mean_batch": delta.sim_mean_batch,
        "sim_itl_formula_ms": delta.sim_itl_formula_ms,
        "sim_itl_written_share": delta.sim_itl_written_share,
        "sim_ttft_written_ms": delta.sim_ttft_written_ms,
    }
    out = {name: value for name, value in out.items() if value is not None}
    out["reset"] = delta.reset
    return out


def health_export(first: HealthSample, last: HealthSample) -> dict[str, Any] | None:
    """`server_metrics.health` of the summary JSON: the last sample (summed, and per label
    set when there are several) and the deltas over the window first -> last. None when the
    page carries no health series."""
    if not last.present:
        return None
    window = HealthDelta.between(first, last)
    several = len(last.per_labels) > 1
    last_out: dict[str, Any] = figures_dict(last.total)
    window_out = delta_dict(window)
    if several:
        last_out["kv_cache_usage_max"] = last.kv_cache_usage_max
        last_out["per_labels"] = {
            label_text(k): figures_dict(v) for k, v in sorted(last.per_labels.items())
        }
        window_out["per_labels"] = {
            label_text(k): delta_dict(v) for k, v in sorted(window.per_labels.items())
        }
    return {"label_sets": len(last.per_labels), "last": last_out, "window": window_out}


__all__ = [
    "COUNTERS",
    "GAUGES",
    "HealthDelta",
    "HealthFigures",
    "HealthSample",
    "LabelSet",
    "delta_dict",
    "figures_dict",
    "health_export",
    "health_from_families",
    "label_text",
    "parse_health",
]
