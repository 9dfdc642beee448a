"""The alarm sink (specmon/sinks/alarms.py): which results it reads, its one stderr line per
starting alarm, the `specmon_alarm` Prometheus series and the summary's `alarms` section."""

from __future__ import annotations

import io

from prometheus_client.parser import text_string_to_metric_families

from specmon.analysis.alarms import ALARM_NAMES
from specmon.pipeline import RequestResult, SpecOutcome
from specmon.sinks.alarms import AlarmSink, observation
from specmon.sinks.prometheus import PrometheusExporter
from specmon.specdecode.record import SpecDecodeAcceptanceRecord


def spread(accepted: int, steps: int) -> dict[int, int]:
    """A histogram with `accepted` drafts over `steps` steps: q or q + 1 a step."""
    q, r = divmod(accepted, steps)
    return {j: n for j, n in ((q, steps - r), (q + 1, r)) if n}


def result(accepted: int, steps: int = 10, k: int = 3, **kw: object) -> RequestResult:
    """A request of `steps` verify steps drafting k each, `accepted` drafts accepted."""
    spec = SpecDecodeAcceptanceRecord(
        engine="vllm",
        mean_acceptance_length=1 + accepted / steps,
        draft_acceptance_rate=accepted / (k * steps),
        num_accepted_draft_tokens=accepted,
        num_draft_tokens=k * steps,
        num_spec_steps=steps,
        num_spec_tokens=k,
        acceptance_histogram=spread(accepted, steps),
    )
    values = {"spec_decode_acceptance_length": 1 + accepted / steps}
    return RequestResult(capture=None, outcome=SpecOutcome(record=spec), values=values, **kw)  # type: ignore[arg-type]


def alarm_series(exporter: PrometheusExporter) -> dict[str, float]:
    (family,) = [
        f for f in text_string_to_metric_families(exporter.render()) if f.name == "specmon_alarm"
    ]
    return {s.labels["alarm"]: s.value for s in family.samples if s.labels["server"] == "s1"}


def test_observation_reads_valid_profiling_results_only() -> None:
    obs = observation(result(15, steps=10))  # 1 + 15/10; k = 30 drafts / 10 steps
    assert obs is not None and obs.acceptance_length == 2.5 and obs.k == 3.0
    assert observation(result(15, phase="warmup")) is None
    failed = RequestResult(capture=None, error={"type": "http", "message": "x"})
    assert observation(failed) is None


def test_a_garbled_run_sets_the_series_prints_once_and_lands_in_the_summary() -> None:
    exporter = PrometheusExporter(serve=False)
    out = io.StringIO()
    sink = AlarmSink("s1", out, exporter)
    assert alarm_series(exporter) == {name: 0.0 for name in ALARM_NAMES}  # present from start
    for _ in range(19):
        sink.on_result(result(0), None)  # acceptance length 1.0
    assert alarm_series(exporter)["garbled_drafter"] == 0.0 and out.getvalue() == ""
    for _ in range(5):
        sink.on_result(result(0), None)
    assert alarm_series(exporter)["garbled_drafter"] == 1.0
    assert out.getvalue().count("\n") == 1  # one line when it starts, none while it holds
    assert out.getvalue().startswith("specmon: ALARM garbled_drafter [s1] since request 20: ")
    for _ in range(20):
        sink.on_result(result(20), None)  # acceptance length 3.0: it clears
    assert alarm_series(exporter)["garbled_drafter"] == 0.0
    (alarm,) = sink.export_extras()["alarms"]
    assert alarm["name"] == "garbled_drafter" and alarm["active"] is False
    assert alarm["until_request"] == 26  # 18 x 1.0 + 2 x 3.0 over 20: mean 1.2 > 1.1
