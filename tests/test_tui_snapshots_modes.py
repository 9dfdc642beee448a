"""Snapshots (pytest-textual-snapshot) of the monitor's other modes, fed deterministic data:
`specmon watch` over hand-written /metrics pages (tests/watch_fixtures.py). Update baselines
with `pytest tests/test_tui_snapshots_modes.py --snapshot-update` after checking the SVGs."""

from __future__ import annotations

import pytest
from watch_fixtures import watch_app


@pytest.fixture(autouse=True)
def _colour(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)


@pytest.mark.parametrize("size", [(160, 48), (100, 30)], ids=["160x48", "100x30"])
def test_watch_mode(snap_compare, tmp_path, size):
    assert snap_compare(watch_app(tmp_path), terminal_size=size)
