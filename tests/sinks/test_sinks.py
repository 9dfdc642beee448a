"""The session as a fan-out to declared sinks: a new consumer is one registered class, and
the summary export is composed once and written once (with specmon's extras in it)."""

from __future__ import annotations

import errno
import os
from types import SimpleNamespace
from typing import Any

import orjson
from support.metrics_helpers import SECOND, WORKED, error_capture, nonstream_capture, vllm_payload

import specmon.session as session_module
from specmon.accumulator import RunSnapshot
from specmon.capture import RawCapture
from specmon.config import RunConfig
from specmon.export.common import CSV_NAME, JSON_NAME
from specmon.pipeline import RequestResult
from specmon.run.multi import MultiRun
from specmon.server.scrape import run_totals_from
from specmon.session import RunSession
from specmon.sinks import BaseSink, ResultSink
from specmon.stats import MetricRow

S = 1_000_000_000


class Recorder(BaseSink):
    """A sink a later feature would add (say a Prometheus exporter): records what it sees."""

    def __init__(self) -> None:
        self.seen: list[tuple[str | None, str, bool]] = []
        self.finishes: list[bool] = []

    def on_result(self, result: RequestResult, capture: RawCapture | None) -> None:
        self.seen.append((result.x_request_id, result.phase, capture is not None))

    def on_finish(self, was_cancelled: bool) -> None:
        self.finishes.append(was_cancelled)

    def export_extras(self) -> dict[str, Any]:
        return {"x_recorder": {"results": len(self.seen)}}


def count_replaces(monkeypatch) -> list[str]:
    """Every os.replace target, in order (atomic_write renames its temp file onto it)."""
    targets: list[str] = []
    real = os.replace

    def spy(src, dst, *args, **kwargs):
        targets.append(os.fspath(dst))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", spy)
    return targets


def test_a_registered_sink_sees_every_result_and_the_finish_once(tmp_path, monkeypatch):
    replaced = count_replaces(monkeypatch)
    session = RunSession(tmp_path, "records", {})
    recorder = Recorder()
    session.add_sink(recorder)
    assert isinstance(recorder, ResultSink)
    session.add(
        nonstream_capture(vllm_payload(WORKED, k=4), x_request_id="w", benchmark_phase="warmup")
    )
    session.add(nonstream_capture(vllm_payload(WORKED, k=4), start_ns=0, x_request_id="a"))
    session.add(nonstream_capture(vllm_payload(SECOND, k=4), start_ns=S, x_request_id="b"))
    session.add(error_capture("timeout", start_ns=2 * S))
    session.finish(was_cancelled=True)
    session.finish()  # a second finish neither finishes the sinks again nor rewrites
    assert recorder.seen == [
        ("w", "warmup", True),
        ("a", "profiling", True),
        ("b", "profiling", True),
        (None, "profiling", True),
    ]
    assert recorder.finishes == [True]
    doc = orjson.loads((tmp_path / JSON_NAME).read_bytes())
    assert list(doc)[-1] == "x_recorder" and doc["x_recorder"] == {"results": 4}
    assert doc["request_count"]["avg"] == 2  # the accumulator got the same results
    snap = session.accumulator.snapshot()  # WORKED: 8 steps, 18 accepted; SECOND: 3, 2
    assert (snap.total_steps, snap.total_accepted, snap.total_drafted) == (11, 20, 44)
    assert replaced.count(str(tmp_path / JSON_NAME)) == 1


def test_the_json_summary_is_renamed_into_place_after_the_csv(tmp_path, monkeypatch):
    """A reader that polls for the JSON (after a hangup, say) must find the CSV already there:
    the JSON is the last export to appear."""
    replaced = count_replaces(monkeypatch)
    session = RunSession(tmp_path, "records", {})
    session.add(nonstream_capture(vllm_payload(WORKED, k=4), start_ns=0))
    session.finish(was_cancelled=True)
    names = [os.path.basename(t) for t in replaced]
    assert names.index(CSV_NAME) < names.index(JSON_NAME) == len(names) - 1


def test_a_csv_that_cannot_be_written_still_leaves_the_json(tmp_path, monkeypatch, capsys):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(session_module, "write_csv", full)
    session = RunSession(tmp_path, "records", {})
    session.add(nonstream_capture(vllm_payload(WORKED, k=4), start_ns=0))
    session.finish()
    doc = orjson.loads((tmp_path / JSON_NAME).read_bytes())
    assert doc["request_count"]["avg"] == 1 and not (tmp_path / CSV_NAME).exists()
    err = capsys.readouterr().err.splitlines()
    assert (
        err[0] == f"specmon: disk full writing {CSV_NAME}: the summary is the next line on stderr"
    )
    assert orjson.loads(err[1])["request_count"]["avg"] == 1


def test_multirun_writes_each_summary_once_with_segments_and_server_metrics(tmp_path, monkeypatch):
    replaced = count_replaces(monkeypatch)
    config = RunConfig(
        url=["a=http://127.0.0.1:1", "b=http://127.0.0.1:2"],
        server_metrics=False,
        model="m",
        artifact_dir=str(tmp_path),
    )
    multi = MultiRun(
        config,
        lambda cfg: RunSession(cfg.artifact_dir, "records", {}),
        # no runner needed to land results; finish() asks whether it was stopped early
        lambda cfg, session: SimpleNamespace(stopped_early=False),
        detect=lambda *a: None,
    )
    a, b = (run.session for run in multi.runs)
    a.add(nonstream_capture(vllm_payload(WORKED, k=4), start_ns=0, segment=0))
    b.add(nonstream_capture(vllm_payload(SECOND, k=4), start_ns=0, segment=0))
    multi.finish()
    for label, steps, accepted in (("a", 8, 18), ("b", 3, 2)):
        path = tmp_path / label / JSON_NAME
        assert replaced.count(str(path)) == 1  # composed once, never read back and patched
        doc = orjson.loads(path.read_bytes())
        assert list(doc)[-3:] == ["segments", "client_saturation", "server_metrics"]
        # a runner that watched no load loop: the client's saturation is not known
        assert doc["client_saturation"] == {"available": False}
        (row,) = doc["segments"]
        assert row["server"] == label and row["segment"] == 0
        assert (row["steps"], row["accepted"], row["request_count"]) == (steps, accepted, 1)
        assert row["acceptance_length"] == 1 + accepted / steps
        assert doc["server_metrics"] == {"available": False, "reason": "not polled"}


def test_run_totals_from_a_snapshot_stay_integers():
    # 2**53 + 1 has no float: a float hop (summary block -> int) would give 2**53
    big = 2**53 + 1
    snap = RunSnapshot(
        elapsed_s=1.0,
        request_count=1,
        error_count=0,
        warmup_count=0,
        error_summary={},
        pooled_histogram={0: 1},
        zero_step_requests=0,
        spec_reasons={},
        engine="vllm",
        num_spec_tokens=4,
        total_steps=big,
        total_accepted=big + 2,
        total_drafted=4 * big,
        spec_rows={"total_spec_decode_steps": MetricRow("count", float(big), derived=True)},
    )
    totals = run_totals_from(snap)
    assert (totals.steps, totals.accepted, totals.drafted) == (big, big + 2, 4 * big)
    assert all(type(v) is int for v in (totals.steps, totals.accepted, totals.drafted))


def test_acceptance_tally_matches_the_summary_average(tmp_path):
    from specmon.sinks.progress import AcceptanceTally

    session = RunSession(tmp_path, "summary", {})
    tally = AcceptanceTally()
    session.add_sink(tally)
    assert tally.mean() is None
    session.add(nonstream_capture(vllm_payload([0], k=4), benchmark_phase="warmup"))
    session.add(nonstream_capture(vllm_payload(WORKED, k=4)))  # AL 1 + 18/8 = 3.25
    session.add(nonstream_capture(vllm_payload(SECOND, k=4)))  # AL 1 + 2/3
    session.add(nonstream_capture(None))  # no record: no value
    session.add(error_capture("timeout"))
    assert tally.mean() == (3.25 + (1 + 2 / 3)) / 2
    assert tally.mean() == session.accumulator.summary()["spec_decode_acceptance_length"]["avg"]
