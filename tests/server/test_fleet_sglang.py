"""SGLang replicas in a fleet (server/promql.py): `specmon sim` cannot export SGLang's
/metrics, so one tick is asked of a stand-in store answering the PromQL specmon sends with
hand-made vectors. SGLang's counter (verify calls) sums into the fleet like vLLM's; its
acceptance gauges are each replica's last value, kept per replica and never summed or
averaged into the fleet row."""

from __future__ import annotations

import asyncio

from specmon.server.promql import FleetQuery, Sample, fleet_tick

VERIFY = "sglang:spec_verify_calls_total"


class Store:
    """Answers each query by what it asks for: the increase of the verify-step counter (both
    ranges) and SGLang's two gauges, per instance; nothing else."""

    async def query(self, promql: str, at: float) -> list[Sample]:
        if promql.startswith("sum by (instance) (increase(") and "num_drafts_total" in promql:
            assert VERIFY in promql  # SGLang's counter is asked with vLLM's spellings
            return [Sample({"instance": "a"}, 120.0), Sample({"instance": "b"}, 30.0)]
        if promql.startswith("avg by (instance) (") and "spec_accept_length" in promql:
            return [Sample({"instance": "a"}, 3.1), Sample({"instance": "b"}, 1.4)]
        if promql.startswith("avg by (instance) (") and "spec_accept_rate" in promql:
            return [Sample({"instance": "a"}, 0.7), Sample({"instance": "b"}, 0.2)]
        return []


def test_sglang_counters_sum_and_its_gauges_stay_per_replica():
    tick = asyncio.run(fleet_tick(Store(), FleetQuery(), 1000.0, 2.0, 60.0))  # type: ignore[arg-type]
    assert set(tick.replicas) == {"a", "b"}
    assert tick.replicas["a"].interval.drafts == 120.0
    assert tick.fleet.interval.drafts == 150.0 and tick.fleet.window.drafts == 150.0
    assert tick.replicas["a"].gauges == {
        "sglang:spec_accept_length": 3.1,
        "sglang:spec_accept_rate": 0.7,
    }
    assert tick.replicas["b"].gauges["sglang:spec_accept_length"] == 1.4
    assert tick.fleet.gauges == {}  # a last value is no count: never summed or averaged
    # no accepted-token counter: no acceptance figure is made up for the fleet
    assert tick.fleet.interval.accepted is None
