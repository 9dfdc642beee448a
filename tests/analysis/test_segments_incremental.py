"""The incremental segments table (segments.SegmentTable, MultiRun.segment_rows) gives exactly
what segment_table() gives on the full results, whatever batches the results arrive in."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from types import SimpleNamespace
from unittest import mock

import pytest
from support import segments_oracle
from support.segments_oracle import segment_table

from analysis.test_segments import result
from specmon.analysis import segments
from specmon.analysis.segments import SegmentTable
from specmon.config import RunConfig
from specmon.run.multi import MultiRun
from specmon.segment_plan import SegmentLog
from specmon.session import RunSession

KS = {"a": 2, "b": 4, "c": 6}


def random_result(rng: random.Random, server: str | None, k: int):
    """Every branch segment_row() takes: errors, warmup, no record, no ITL, odd segments."""
    hist = None
    if rng.random() > 0.15:
        hist = {j: rng.randint(0, 5) for j in range(k + 1)}
        hist[rng.randint(0, k)] += 1  # at least one step
    start = rng.uniform(0, 100)
    return result(
        rng.choice([None, 0, 1, 2, 3]),
        start,
        start + rng.uniform(0.01, 5),
        hist=hist,
        k=k,
        itl=rng.uniform(1, 30) if rng.random() > 0.2 else None,
        osl=rng.randint(1, 300),
        server=server,
        error={"type": "timeout"} if rng.random() < 0.1 else None,
        phase="warmup" if rng.random() < 0.05 else "profiling",
    )


def batches(rng: random.Random, items: list) -> list[list]:
    """`items` cut at random points, empty batches included."""
    cuts = sorted(rng.randint(0, len(items)) for _ in range(rng.randint(1, 12)))
    edges = [0, *cuts, len(items)]
    return [items[a:b] for a, b in zip(edges, edges[1:])]


# What `_recommend` writes into a row (the table's rows carry some of these keys before it)
ADVICE_KEYS = (
    "recommended_k", "draft_cost", "recommended_from", "recommendation", "basis",
    "predicted_gain_vs_k0", "p_best", "caveat", "hint", "answer", "proposal", "flags",
)  # fmt: skip


def _no_advice(rows: list[dict], *settings: object) -> None:
    """`_recommend`'s stand-in: the same advice keys, blank (whatever cost, SLO, ...)."""
    for row in rows:
        row.update(dict.fromkeys(ADVICE_KEYS))


@contextlib.contextmanager
def recommending(last: bool) -> Iterator[None]:
    """Both sides recommend a k only at a test's last batch. The table's incremental part is
    the per-segment sums; the recommendation is one deterministic function (`_recommend`:
    decision.advise, its bootstrap seeded by the data) that both sides apply to their rows,
    and it is most of a comparison's cost. So every batch compares the rows (sums, settings,
    servers, order; the advice left blank alike on both sides) and the last one compares
    them whole: an incremental sum that goes wrong still fails at the batch it goes wrong."""
    if last:
        yield
        return
    with (
        mock.patch.object(segments, "_recommend", _no_advice),
        mock.patch.object(segments_oracle, "_recommend", _no_advice),
    ):
        yield


# Each case already draws hundreds of results over every branch (errors, warmup, no record,
# no ITL, five segment values) and cuts them at up to 12 random points per server; more seeds
# only repeat those paths with other numbers (each case costs ~0.3 s of fitting in
# _recommend), so 12 per configuration.
@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("draft_cost, across", [(None, True), (0.1, True), (None, False)])
def test_servers_in_random_batches_equal_segment_table(seed, draft_cost, across):
    rng = random.Random(seed)
    full = {
        label: [random_result(rng, label, k) for _ in range(rng.randint(0, 120))]
        for label, k in KS.items()
    }
    settings = {label: {i: {"concurrency": 2**i} for i in range(3)} for label in KS}
    table = SegmentTable(draft_cost=draft_cost, across_servers=across)
    seen = {label: [] for label in KS}
    steps = list(zip(*(batches(rng, full[label]) for label in KS)))  # unequal numbers per server
    for step, batch_per_server in enumerate(steps, start=1):
        for label, batch in zip(KS, batch_per_server):
            seen[label].extend(batch)  # the live list grows; update() reads its new tail
            table.update(label, seen[label])
        with recommending(last=step == len(steps)):
            expected = segment_table(
                seen, settings=settings, draft_cost=draft_cost, across_servers=across
            )
            assert table.rows(settings) == expected
    assert all(isinstance(row["flags"], list) for row in expected)  # the last: advised too


@pytest.mark.parametrize("seed", range(8))
def test_one_server_in_random_batches_equal_segment_table(seed):
    rng = random.Random(100 + seed)
    full = [random_result(rng, None, rng.choice([3, 4])) for _ in range(rng.randint(1, 300))]
    settings = {0: {"concurrency": 4}, 2: {"output_tokens": 64}}
    table = SegmentTable(draft_cost=0.05)
    live: list = []
    cuts = batches(rng, full)
    for step, batch in enumerate(cuts, start=1):
        live.extend(batch)
        table.update(None, live)
        table.update(None, live)  # a second call with nothing new changes nothing
        with recommending(last=step == len(cuts)):
            expected = segment_table(live, settings=settings, draft_cost=0.05)
            assert table.rows(settings) == expected


def fake_multi(urls: list[str], **kw) -> MultiRun:
    config = RunConfig(url=urls, concurrency=4, server_metrics=False, model="m", **kw)

    def make_session(cfg):
        return RunSession(None, "summary", live=False)

    def make_runner(cfg, session):
        return SimpleNamespace(segment_log=SegmentLog(cfg.concurrency, None, 128))

    return MultiRun(config, make_session, make_runner, detect=lambda *a: None)


@pytest.mark.parametrize(
    "urls", [["http://127.0.0.1:1"], ["a=http://127.0.0.1:1", "b=http://127.0.0.1:2"]]
)
def test_multirun_segment_rows_is_incremental_and_exact(urls):
    rng = random.Random(7)
    multi = fake_multi(urls, draft_cost=0.1)
    several = len(urls) > 1
    for step in range(1, 16):
        for run in multi.runs:
            label = run.label if several else None
            for _ in range(rng.randint(0, 40)):  # each lands through the session's sinks
                run.session.add_result(random_result(rng, label, 3))
            if step == 6:
                run.runner.segment_log.change(concurrency=8)  # a knob: segment 1's settings
        results = {r.label: r.session.accumulator.results for r in multi.runs}
        settings = {r.label: r.runner.segment_log.settings() for r in multi.runs}
        with recommending(last=step == 15):
            if several:
                expected = segment_table(results, settings=settings, draft_cost=0.1)
            else:
                ((label, rs),) = results.items()
                expected = segment_table(rs, settings=settings[label], draft_cost=0.1)
            assert multi.segment_rows() == expected
    assert any(
        row["settings"] == {"concurrency": 8, "request_rate": None, "output_tokens": 128}
        for row in expected
    )
