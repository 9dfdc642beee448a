"""Several replicas behind one /metrics URL, told apart from a restart (server/replicas.py):
the process identity a page carries, and the counters when it carries none."""

from __future__ import annotations

from dataclasses import replace

from specmon.server.replicas import ReplicaTracker
from specmon.server.scrape import (
    RunTotals,
    counter_delta,
    describe_window,
    parse_counters,
    reconcile,
)


def page(drafts: int, start: float | None = None, created: float | None = None) -> str:
    lines = [f'vllm:spec_decode_num_drafts_total{{engine="0"}} {drafts}']
    lines.append(f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {3 * drafts}')
    lines.append(f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {2 * drafts}')
    if created is not None:
        lines.append(f'vllm:spec_decode_num_drafts_created{{engine="0"}} {created}')
    if start is not None:
        lines.append(f"process_start_time_seconds {start}")
    return "\n".join(lines) + "\n"


def test_the_identity_names_the_process_and_is_no_counter():
    sample = parse_counters(page(10, start=1700000000.25, created=1700000001.5))
    assert sample.identity == (
        "process_start_time_seconds=1700000000.250, counters created 1700000001.500000"
    )
    assert sample.totals()["drafts"] == 10  # the identity lines are no series
    assert parse_counters(page(10)).identity is None
    labelled = parse_counters('vllm:spec_decode_num_drafts_total{instance="a:1"} 4\n')
    assert labelled.identity == "instance=a:1"


def test_an_identity_that_comes_back_is_several_replicas_a_new_one_a_restart():
    restart = ReplicaTracker()
    for identity in ("A", "A", "B", "B", "C"):  # two restarts: never an old one again
        restart.observe(identity, None)
    assert not restart.several and restart.count == 1
    fleet = ReplicaTracker()
    for identity in ("A", "B", "A"):
        fleet.observe(identity, None)
    assert fleet.several and fleet.count == 2 and fleet.returns == 1


def test_without_identity_a_total_that_falls_and_stands_again_is_several_replicas():
    restart = ReplicaTracker()
    for total in (500.0, 520.0, 3.0, 40.0, 90.0):  # fell to near zero, grows from there
        restart.observe(None, total)
    assert not restart.several
    fleet = ReplicaTracker()
    for total in (500.0, 120.0, 510.0):  # replica A, replica B, replica A again
        fleet.observe(None, total)
    assert fleet.several and fleet.flaps == 1 and fleet.count == 2


def test_a_window_across_replicas_is_named_and_never_read():
    before = parse_counters(page(100, start=1.0), taken_s=0.0)
    after = parse_counters(page(40, start=2.0), taken_s=1.0)
    delta = counter_delta(before, after)
    assert delta.resets == 3  # read alone, it looks like a restart
    several = replace(delta, replicas=2)
    rec = reconcile(several, RunTotals(steps=40, accepted=80, drafted=120))
    assert rec.equal is False  # even where the sums happen to agree
    assert rec.reasons == [
        "/metrics is answered by several replicas (at least 2 seen): its counter deltas mix "
        "their counts; use --server-metrics-from prometheus:URL --selector "
        "'{LABEL=\"VALUE\"}' (a store that scrapes each replica) for the run's server counters"
    ]
    assert not any("restarted" in r for r in rec.reasons)
    line = describe_window(several)
    assert line.startswith("server /metrics: /metrics is answered by several replicas")
    assert "acceptance length" not in line  # no figure from mixed counts
