"""The health panel (specmon/tui/widgets/health.py): its figures from two hand-written
/metrics pages, per engine and summed, absent series left out; shown in a Pilot app."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult

from specmon.server.health import HealthDelta, parse_health
from specmon.tui.widgets.health import NO_HEALTH, HealthView, health_lines

PAGE = """\
vllm:num_requests_running{{engine="0"}} {r0}
vllm:num_requests_running{{engine="1"}} {r1}
vllm:num_requests_waiting{{engine="0"}} 2
vllm:num_requests_waiting{{engine="1"}} 0
vllm:kv_cache_usage_perc{{engine="0"}} 0.5
vllm:kv_cache_usage_perc{{engine="1"}} 0.25
vllm:generation_tokens_total{{engine="0"}} {g0}
vllm:generation_tokens_total{{engine="1"}} {g1}
"""


def _delta() -> HealthDelta:
    a = parse_health(PAGE.format(r0=1, r1=1, g0=100, g1=50), taken_s=10.0)
    b = parse_health(PAGE.format(r0=3, r1=4, g0=500, g1=250), taken_s=12.0)
    return HealthDelta.between(a, b)


def test_lines_sum_engines_and_leave_absent_series_out():
    lines = health_lines(_delta())
    header = lines[1].split()
    # no preemption or prefix-cache series on the page: those columns are not shown
    assert header == ["run", "wait", "KV%", "gen", "tok/s"]
    # summed: running 3+4, waiting 2+0, KV mean (50+25)/2, gen (400+200)/2 s
    assert lines[2].split() == ["all", "7", "2", "37.5", "300"]
    assert lines[3].split() == ['engine="0"', "3", "2", "50.0", "200"]
    assert lines[4].split() == ['engine="1"', "4", "0", "25.0", "100"]


SIM_PAGE = """\
vllm:num_requests_running{{engine="0"}} 16
specmon_sim_step_lag_seconds_total{{engine="0"}} {lag}
specmon_sim_step_formula_seconds_total{{engine="0"}} {formula}
"""


def test_the_simulators_lag_behind_its_step_model_is_a_column():
    # Δlag / Δformula = (0.43 - 0.4) / (12.0 - 10.0) = 1.5%
    a = parse_health(SIM_PAGE.format(lag=0.4, formula=10.0), taken_s=1.0)
    b = parse_health(SIM_PAGE.format(lag=0.43, formula=12.0), taken_s=2.0)
    lines = health_lines(HealthDelta.between(a, b))
    assert lines[1].split() == ["run", "lag%"]
    assert lines[2].split() == ["16", "1.5"]
    # an idle simulator (no step in the interval): no share, so no column (as any series
    # without a figure)
    idle = health_lines(HealthDelta.between(b, b))
    assert idle[1:] == ["run", "16"]


def test_no_health_series_says_so():
    empty = parse_health("vllm:other_metric 1\n", taken_s=1.0)
    assert health_lines(HealthDelta.between(empty, empty)) == [NO_HEALTH]


class _One(App):
    def compose(self) -> ComposeResult:
        yield HealthView(id="health")


@pytest.mark.asyncio
async def test_health_view_in_pilot():
    app = _One()
    async with app.run_test(size=(60, 8)) as pilot:
        view = app.query_one(HealthView)
        view.show(health_lines(_delta()))
        await pilot.pause()
        text = str(view.render())
        assert "server health" in text and "37.5" in text and 'engine="1"' in text
