"""Snapshots (pytest-textual-snapshot) of the monitor's other modes, fed deterministic data:
`specmon watch` over hand-written /metrics pages (tests/support/watch_fixtures.py), a --dataset run's
per-category panel, and the health panel beside a run. Update baselines
with `pytest tests/tui/screens/test_tui_snapshots_modes.py --snapshot-update` after checking the SVGs."""

from __future__ import annotations

import pytest
from support.tui_fixtures import accumulate, make_capture, run_captures, session_view
from support.tui_tuning_fixtures import StubMulti, run_config
from support.watch_fixtures import FedPoller, fed_views, watch_app

from specmon.interfaces import MonitorConfig
from specmon.tui.app import SpecmonApp


@pytest.fixture(autouse=True)
def _colour(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)


@pytest.mark.parametrize("size", [(160, 48), (100, 30)], ids=["160x48", "100x30"])
def test_watch_mode(snap_compare, tmp_path, size):
    assert snap_compare(watch_app(tmp_path), terminal_size=size)


# SpecBench's categories, each with its own histogram (so its own acceptance length)
SPEC_BENCH_HISTS = {
    "translation": [3, 1, 1, 0],
    "summarization": [1, 1, 1, 2],
    "qa": [2, 2, 1, 1],
    "math_reasoning": [0, 1, 2, 3],
    "rag": [1, 0, 1, 4],
}


def dataset_app() -> SpecmonApp:
    """A --dataset spec_bench run's results (40 requests, 8 a category), frozen clock."""
    names = list(SPEC_BENCH_HISTS)
    captures = [
        make_capture(
            i,
            SPEC_BENCH_HISTS[names[i % 5]],
            start_ms=200.0 * i,
            latency_ms=150.0 + 20 * (i % 5),
            ttft_ms=30.0 + 10 * (i % 5),
            category=names[i % 5],
        )
        for i in range(1, 41)
    ]
    config = MonitorConfig(targets=["http://sim.invalid:8000"], dataset="spec_bench")
    return SpecmonApp(
        session_view(accumulate(captures)), None, config, source="replay", freeze_elapsed=8.0
    )


def test_categories_160x48(snap_compare):
    assert snap_compare(dataset_app(), terminal_size=(160, 48))


def test_categories_maximized_160x48(snap_compare):
    assert snap_compare(dataset_app(), terminal_size=(160, 48), press=["9"])


def health_app() -> SpecmonApp:
    """A run beside two engines' /metrics (tests/support/watch_fixtures.py pages): the health panel
    in the wide layout, summed and per engine, over the last scrape interval."""
    session = session_view(accumulate(run_captures(60)))
    poller = FedPoller(fed_views(engines=2)[-1])
    return SpecmonApp(
        session,
        StubMulti({"run": session}, {"run": poller}),  # type: ignore[dict-item]
        run_config(),
        freeze_elapsed=15.0,
    )


def test_health_panel_160x48(snap_compare):
    assert snap_compare(health_app(), terminal_size=(160, 48))
