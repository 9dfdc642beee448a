"""Server health from /metrics (specmon/server/health.py): the real vLLM 0.32 page, two
engines summed, counter resets, and series the server does not expose staying None."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.paths import shared_file

from specmon.errors import UserError
from specmon.server.health import HealthDelta, label_text, parse_health


def real_page() -> Path:
    """The real vLLM 0.32 /metrics page: test data in the shared folder beside the checkout."""
    return shared_file(
        "reference",
        "vllm032-metrics-full.prom",
        missing="the real vLLM 0.32 /metrics page (vllm032-metrics-full.prom) is missing",
    )


ENGINE0 = (("engine", "0"), ("model_name", "tiny"))


def _page(engines: dict[str, dict[str, float]]) -> str:
    """A hand-written vLLM-style page: {engine: {sample name without 'vllm:': value}}."""
    kinds = {
        "num_requests_running": "gauge",
        "num_requests_waiting": "gauge",
        "kv_cache_usage_perc": "gauge",
        "num_preemptions": "counter",
        "prefix_cache_queries": "counter",
        "prefix_cache_hits": "counter",
        "generation_tokens": "counter",
        "prompt_tokens": "counter",
    }
    lines = []
    for base, kind in kinds.items():
        name = f"vllm:{base}_total" if kind == "counter" else f"vllm:{base}"
        rows = [(e, v[base]) for e, v in engines.items() if base in v]
        if not rows:
            continue
        lines.append(f"# TYPE vllm:{base} {kind}")
        for engine, value in rows:
            lines.append(f'{name}{{engine="{engine}",model_name="m"}} {value}')
            if kind == "counter":
                lines.append(f'vllm:{base}_created{{engine="{engine}",model_name="m"}} 1.7e9')
    return "\n".join(lines) + "\n"


def test_real_vllm032_page():
    # Values read off the page by hand (engine="0",model_name="tiny", one label set):
    # running 0, waiting 0, kv 0.0, preemptions 0, prefix queries 622, hits 0,
    # generation tokens 801, prompt tokens 622.
    sample = parse_health(real_page().read_text(), taken_s=10.0)
    assert list(sample.per_labels) == [ENGINE0]
    assert label_text(ENGINE0) == 'engine="0",model_name="tiny"'
    total = sample.total
    assert (total.running, total.waiting, total.kv_cache_usage) == (0.0, 0.0, 0.0)
    assert total.preemptions == 0.0
    assert (total.prefix_cache_queries, total.prefix_cache_hits) == (622.0, 0.0)
    assert total.generation_tokens == 801.0 and total.prompt_tokens == 622.0
    assert total.prefix_cache_hit_rate == 0.0  # 0 / 622
    assert sample.present


def test_two_engines_summed_and_per_engine():
    page = _page(
        {
            "0": {"num_requests_running": 3, "num_requests_waiting": 1, "kv_cache_usage_perc": 0.5},
            "1": {"num_requests_running": 5, "num_requests_waiting": 0, "kv_cache_usage_perc": 0.9},
        }
    )
    sample = parse_health(page, taken_s=0.0)
    assert len(sample.per_labels) == 2
    total = sample.total
    assert total.running == 8 and total.waiting == 1
    assert total.kv_cache_usage == pytest.approx(0.7)  # mean of 0.5 and 0.9
    assert sample.kv_cache_usage_max == 0.9
    assert total.preemptions is None and total.generation_tokens is None  # not on the page
    engine1 = sample.per_labels[(("engine", "1"), ("model_name", "m"))]
    assert (engine1.running, engine1.kv_cache_usage) == (5, 0.9)


def test_delta_rates_over_two_engines():
    before = {
        "0": {"generation_tokens": 1000, "num_preemptions": 2, "prefix_cache_queries": 400,
              "prefix_cache_hits": 100, "prompt_tokens": 400, "num_requests_running": 1},
        "1": {"generation_tokens": 500, "num_preemptions": 0, "prefix_cache_queries": 100,
              "prefix_cache_hits": 0, "prompt_tokens": 100, "num_requests_running": 2},
    }  # fmt: skip
    after = {
        "0": {"generation_tokens": 1600, "num_preemptions": 5, "prefix_cache_queries": 1000,
              "prefix_cache_hits": 400, "prompt_tokens": 1000, "num_requests_running": 4},
        "1": {"generation_tokens": 900, "num_preemptions": 1, "prefix_cache_queries": 500,
              "prefix_cache_hits": 200, "prompt_tokens": 500, "num_requests_running": 0},
    }  # fmt: skip
    prev, cur = parse_health(_page(before), 100.0), parse_health(_page(after), 102.0)
    delta = HealthDelta.between(prev, cur, 2.0)
    # Δgen = 600 + 400 = 1000 over 2 s; Δpreempt = 3 + 1 = 4; Δhits/Δqueries = 500/1000
    assert delta.generation_tokens == 1000 and delta.generation_tokens_per_s == 500.0
    assert delta.preemptions == 4 and delta.preemptions_per_s == 2.0
    assert delta.prefix_cache_hit_rate == 0.5
    assert delta.prompt_tokens_per_s == 500.0  # (600 + 400) / 2
    assert delta.running == 4 and not delta.reset
    assert delta.kv_cache_usage is None  # not on this page
    engine1 = delta.per_labels[(("engine", "1"), ("model_name", "m"))]
    assert engine1.generation_tokens_per_s == 200.0 and engine1.prefix_cache_hit_rate == 0.5
    # dt defaults to the scrapes' time apart (102 − 100)
    assert HealthDelta.between(prev, cur).generation_tokens_per_s == 500.0


def test_counter_reset_counts_from_zero_never_negative():
    prev = parse_health(_page({"0": {"generation_tokens": 5000, "num_preemptions": 7}}), 0.0)
    cur = parse_health(_page({"0": {"generation_tokens": 120, "num_preemptions": 0}}), 4.0)
    delta = HealthDelta.between(prev, cur)
    assert delta.reset
    assert delta.generation_tokens == 120 and delta.generation_tokens_per_s == 30.0
    assert delta.preemptions == 0 and delta.preemptions_per_s == 0.0
    # one engine reset, the other not: the flag is set, the sum adds each engine's increase
    prev = parse_health(
        _page({"0": {"generation_tokens": 900}, "1": {"generation_tokens": 100}}), 0.0
    )
    cur = parse_health(
        _page({"0": {"generation_tokens": 50}, "1": {"generation_tokens": 300}}), 1.0
    )
    delta = HealthDelta.between(prev, cur)
    assert delta.reset and delta.generation_tokens == 50 + 200


def test_absent_is_none_and_no_queries_is_no_rate():
    page = "# TYPE other_metric gauge\nother_metric 3\n"
    sample = parse_health(page, 0.0)
    assert not sample.present and sample.total.running is None
    delta = HealthDelta.between(sample, parse_health(page, 1.0))
    assert delta.generation_tokens_per_s is None and delta.prefix_cache_hit_rate is None
    assert delta.running is None and not delta.reset
    # queries did not move: the interval has no hit rate (not 0)
    same = _page({"0": {"prefix_cache_queries": 10, "prefix_cache_hits": 4}})
    delta = HealthDelta.between(parse_health(same, 0.0), parse_health(same, 1.0))
    assert delta.prefix_cache_queries == 0 and delta.prefix_cache_hit_rate is None
    # zero or negative interval: increases are known, rates are not
    delta = HealthDelta.between(parse_health(same, 0.0), parse_health(same, 1.0), dt=0.0)
    assert delta.preemptions_per_s is None


def test_new_engine_counts_from_zero():
    prev = parse_health(_page({"0": {"generation_tokens": 100}}), 0.0)
    cur = parse_health(_page({"0": {"generation_tokens": 150}, "1": {"generation_tokens": 30}}), 1)
    delta = HealthDelta.between(prev, cur)
    assert delta.generation_tokens == 50 + 30 and not delta.reset


def test_bad_page_is_one_line_user_error():
    with pytest.raises(UserError, match="not valid Prometheus text"):
        parse_health('vllm:num_requests_running{engine="0" 1\n')
