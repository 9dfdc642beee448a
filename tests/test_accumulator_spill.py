"""A group's columns spill their values to a temporary file (specmon/accumulator.py
SpillFile): in memory a spilled column never holds a whole chunk, its exact statistics read
every value back, and a failed write keeps the values in memory (issue 35 item 6)."""

from __future__ import annotations

import errno
import os
import random

import pytest
from support.metrics_helpers import nonstream_capture, vllm_payload

from specmon.accumulator import MetricColumn, SpillFile
from specmon.analysis.categories import CategoryTable
from specmon.pipeline import process_capture

MS = 1_000_000


def _shuffled(n: int, step: float = 1.5) -> list[float]:
    values = [i * step for i in range(n)]
    random.Random(7).shuffle(values)
    return values


def test_a_spilled_column_holds_under_one_chunk_and_reads_every_value_back():
    column = MetricColumn(spill=SpillFile())
    n = 10_000  # distinct: past DISTINCT_MAX, so every value is kept, not counted
    for value in _shuffled(n):
        column.add(value)
        assert len(column._pending) < MetricColumn.SPILL_CHUNK
    assert len(column._sorted) == 0 and len(column._staged) == 0  # nothing sorted in memory
    assert column._chunks is not None and len(column._chunks) == n // MetricColumn.SPILL_CHUNK
    frozen = column.freeze()
    stats = column.stats(frozen, exact=True)
    # values 0, 1.5, ..., 14998.5: by hand (percentiles interpolate between ranks)
    assert stats["count"] == n and stats["min"] == 0.0 and stats["max"] == 14_998.5
    assert stats["avg"] == pytest.approx(7_499.25)
    assert stats["p50"] == pytest.approx(7_499.25)  # rank 4999.5: between 7498.5 and 7500
    assert stats["p99"] == pytest.approx(1.5 * 9_899.01)  # rank 0.99 * 9999 = 9899.01
    # the same values in memory: the same block, number for number
    memory = MetricColumn()
    for value in _shuffled(n):
        memory.add(value)
    assert memory.stats(memory.freeze(), exact=True) == stats


def test_a_spilled_column_live_has_running_figures_and_no_order_statistics():
    column = MetricColumn(scale=1e-6, spill=SpillFile())  # ns -> ms, as a time metric
    for value in _shuffled(5_000, step=1_000.0):  # 0 .. 4,999,000 ns
        column.add(value)
    live = column.stats(column.freeze(), exact=False)
    assert live["count"] == 5_000
    assert live["avg"] == pytest.approx(2_499.5 * 1_000.0 * 1e-6)  # 2.4995 ms
    assert live["sum"] == pytest.approx(2_499.5 * 1_000.0 * 1e-6 * 5_000)
    assert live["p50"] is None and live["min"] is None and live["max"] is None
    # population std of 0..4999 (x1000 ns): sqrt((n^2 - 1) / 12)
    assert live["std"] == pytest.approx(((5_000**2 - 1) / 12) ** 0.5 * 1_000.0 * 1e-6)


def test_values_added_after_a_freeze_stay_out_of_its_statistics():
    """freeze() marks where the values end; a chunk written after it is not read."""
    column = MetricColumn(spill=SpillFile())
    values = _shuffled(MetricColumn.SPILL_CHUNK + 2_000)
    for value in values[:3_000]:
        column.add(value)
    frozen = column.freeze()
    for value in values[3_000:]:  # writes the first chunk out after the freeze
        column.add(value)
    stats = column.stats(frozen, exact=True)
    first = sorted(values[:3_000])
    assert stats["count"] == 3_000 and stats["min"] == first[0] and stats["max"] == first[-1]


def test_a_full_disk_keeps_the_values_in_memory_and_the_statistics_exact(monkeypatch):
    writes = []

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        writes.append(len(data))
        if len(writes) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, offset)

    real = os.pwrite
    monkeypatch.setattr(os, "pwrite", pwrite)
    spill = SpillFile()
    column = MetricColumn(spill=spill)
    n = 3 * MetricColumn.SPILL_CHUNK
    for value in _shuffled(n):
        column.add(value)
    assert spill.failed and len(writes) == 2  # one chunk written, the second refused
    assert column._chunks is not None and len(column._chunks) == 1
    assert len(column._pending) == n - MetricColumn.SPILL_CHUNK  # kept, not lost
    stats = column.stats(column.freeze(), exact=True)
    assert stats["count"] == n and stats["max"] == 1.5 * (n - 1)


def test_a_category_keeps_under_one_chunk_per_column_after_many_requests(monkeypatch):
    """The structural bound: N > several chunks of requests, each column of the category
    holds fewer than SPILL_CHUNK values in memory, and the export's figures are exact."""
    monkeypatch.setattr(MetricColumn, "SPILL_CHUNK", 64)
    table = CategoryTable()
    n = 1_500  # distinct latencies 10 .. 1509 ms: past DISTINCT_MAX (1024)
    for i in range(n):
        cap = nonstream_capture(
            vllm_payload([1, 2], 3), start_ns=i * 2_000 * MS, latency_ms=10 + i, category="a"
        )
        table.add(process_capture(cap))
    acc = table.accumulator("a")
    assert acc is not None
    latency = acc.columns["request_latency"]
    # the 1,025th distinct value ends counting: those 1,025 go out as one chunk, then one
    # chunk each 64: 1 + (1500 - 1025) // 64 = 8 chunks, 27 values held
    assert latency._chunks is not None and len(latency._chunks) == 8
    assert len(latency._pending) == 27
    for column in acc.columns.values():
        assert len(column._pending) < 64 and len(column._sorted) == 0
    block = table.export_block()["a"]["request_latency"]
    assert block["count"] == n and block["min"] == 10.0 and block["max"] == 1_509.0
    assert block["avg"] == pytest.approx(10 + (n - 1) / 2)  # 759.5 ms
    assert block["p50"] == pytest.approx(759.5)  # rank 749.5: between 759 and 760 ms


def test_a_headless_session_spills_its_latency_columns_but_keeps_spec_decode_ones(
    tmp_path, monkeypatch
):
    """make_session(headless) -> RunSession(spill=True): the run's time columns hold under a
    chunk in memory, the spec-decode ones stay (a sweep's live view shows them), and the
    exported summary is exact."""
    from specmon.config import RunConfig
    from specmon.run.assemble import make_session

    monkeypatch.setattr(MetricColumn, "SPILL_CHUNK", 64)
    config = RunConfig(
        url=["http://127.0.0.1:9"], artifact_dir=str(tmp_path / "run"), headless=True
    )
    session = make_session(config)
    n = 1_200  # distinct latencies 10 .. 1209 ms
    for i in range(n):
        session.add(
            nonstream_capture(vllm_payload([1, 2], 3), start_ns=i * 2_000 * MS, latency_ms=10 + i)
        )
    columns = session.accumulator.columns
    assert columns["request_latency"]._chunks is not None
    assert len(columns["request_latency"]._pending) < 64
    assert columns["spec_decode_acceptance_length"]._chunks is None  # in memory
    block = session.accumulator.summary()["request_latency"]
    assert block["count"] == n and block["min"] == 10.0 and block["max"] == 1_209.0
    assert block["p50"] == pytest.approx(609.5)  # rank 599.5: between 609 and 610 ms
    session.finish()
