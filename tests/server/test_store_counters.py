"""The store's answer read as a scrape (server/store_counters.py): each replica's series by
its labels, Ray Serve's names as vLLM's, label values escaped; the form of the option."""

from __future__ import annotations

import pytest

from specmon.errors import UserError
from specmon.server.promql import Sample
from specmon.server.scrape import counter_delta, parse_counters
from specmon.server.store_counters import page_of, series_names, store_url


def answer(a: float, b: float) -> list[Sample]:
    return [
        Sample({"__name__": "vllm:spec_decode_num_drafts_total", "instance": "a:1"}, a),
        Sample({"__name__": "ray_vllm_spec_decode_num_drafts_total", "instance": "b:2"}, b),
        Sample({"__name__": "vllm:num_requests_running", "instance": 'q"\\'}, 3.0),
    ]


def test_each_replica_is_a_series_of_its_own():
    before = parse_counters(page_of(answer(10, 100)), taken_s=0.0)
    after = parse_counters(page_of(answer(25, 3)), taken_s=1.0)  # b restarted: counts 3
    assert before.label_sets == 2
    delta = counter_delta(before, after)
    assert delta.drafts == 15 + 3 and delta.resets == 1
    assert before.health is not None  # the health gauge with an escaped label still reads


def test_the_names_asked_cover_both_spellings():
    names = series_names()
    assert "vllm:spec_decode_num_drafts_total" in names
    assert "ray_vllm_spec_decode_num_accepted_tokens_per_pos_total" in names
    assert "vllm:num_requests_running" in names


def test_the_option_takes_prometheus_colon_url():
    assert store_url("prometheus:http://127.0.0.1:9090") == "http://127.0.0.1:9090"
    for bad in ("http://127.0.0.1:9090", "prometheus:ftp://x"):
        with pytest.raises(UserError, match="prometheus:"):
            store_url(bad)
