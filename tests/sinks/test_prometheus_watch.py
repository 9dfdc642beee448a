"""A watch's figures as specmon_watch_* gauges: a figure the row lacks has no sample."""

from __future__ import annotations

from specmon.sinks.prometheus import PrometheusExporter


def test_watch_gauges_set_and_missing_is_missing() -> None:
    exporter = PrometheusExporter(serve=False)
    exporter.set_watch("fleet", 2.5, 0.5, [0.7, 0.5, 0.3])
    page = exporter.render()
    assert 'specmon_watch_acceptance_length{server="fleet"} 2.5' in page
    assert 'specmon_watch_draft_acceptance_ratio{server="fleet"} 0.5' in page
    assert 'specmon_watch_acceptance_per_position_ratio{position="2",server="fleet"} 0.3' in page
    exporter.set_watch("fleet", None, None, None)  # an interval without verify steps
    page = exporter.render()
    assert 'specmon_watch_acceptance_length{server="fleet"}' not in page
    assert 'position="0",server="fleet"' not in page
