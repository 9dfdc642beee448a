"""A segment's per-request latencies cost 8 bytes a value (issue 19 item 6: flat memory)."""

from __future__ import annotations

import tracemalloc

from specmon.analysis.segments import SegmentTable
from specmon.pipeline import RequestResult, SpecOutcome

MS = 1_000_000


# a streamed request: its TTFT and ITL (stored in ns) are what the segment keeps
STREAMED = RequestResult(
    capture=None,
    outcome=SpecOutcome(record=None),
    values={"time_to_first_token": 20 * MS, "inter_token_latency": 5 * MS},
    start_ns=0,
    end_ns=500 * MS,
)


def test_a_segment_keeps_ttft_and_tpot_in_typed_arrays():
    """Each streamed request adds one TTFT and one TPOT value to its segment, for the
    percentiles an --slo and the export read: 16 bytes a request in typed arrays (plus
    their over-allocation, about 1/16). A list of Python floats holds each value as its own
    object (`metrics` converts on every read): 24 bytes for the float and 8 for its slot,
    67 bytes a request as measured. One result object is fed 20,000 times, so nothing but the
    segment's own keeping is measured."""
    table = SegmentTable()
    for _ in range(2_000):  # the arrays and dicts exist before the measurement
        table.add("a", STREAMED)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(20_000):
        table.add("a", STREAMED)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    # typed: 18 bytes a request measured, a float list 67; the bar leaves room for what
    # another thread of the process allocates meanwhile (tracemalloc counts it too)
    assert grown < 20_000 * 40
    (row,) = table.rows(latency=True)
    assert row["latency_percentiles"]["ttft_ms"]["p90"] == 20.0
    assert row["latency_percentiles"]["tpot_ms"]["p50"] == 5.0
