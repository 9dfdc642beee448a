"""The end-of-run reconciliation accounts for specmon's own cancelled requests (issue 10
item 2): the server counted their steps, the client never saw their stats."""

from __future__ import annotations

from specmon.server.scrape import CounterDelta, RunTotals, describe_reconciliation, reconcile


def window() -> CounterDelta:
    """The server's window: 40 verify steps, 120 drafted, 53 accepted (k = 3)."""
    return CounterDelta(
        drafts=40,
        draft_tokens=120,
        accepted=53,
        per_pos=[24, 17, 12],
        duration_s=10.0,
        label_sets=1,
        present=True,
    )


def test_extra_steps_within_the_cancelled_requests_bound_are_equal_apart_from_them():
    # the run saw 30 steps / 40 accepted / 90 drafted; 2 cancelled requests of max_tokens 8
    # could have decoded up to 16 steps, and the server counted 10 more
    run = RunTotals(30, 40, 90, cancelled=2)
    rec = reconcile(window(), run, cancelled_steps_bound=16)
    assert rec.equal and rec.apart_from_cancelled == 2
    assert rec.diffs == {"steps": 10, "accepted": 13, "drafted": 30}
    text = describe_reconciliation(rec)
    assert "apart from 2 cancelled request(s)" in text and "differ" not in text
    assert "other clients" not in text


def test_more_extra_steps_than_the_cancelled_requests_can_explain_still_differ():
    run = RunTotals(30, 40, 90, cancelled=2)
    for bound in (9, None):  # 10 extra steps > 9; an unknown bound explains nothing
        rec = reconcile(window(), run, cancelled_steps_bound=bound)
        assert not rec.equal and rec.apart_from_cancelled == 0
        assert "differ" in describe_reconciliation(rec)


def test_cancellations_do_not_excuse_a_server_that_counted_less():
    run = RunTotals(41, 53, 120, cancelled=3)  # one step more than the server counted
    rec = reconcile(window(), run, cancelled_steps_bound=100)
    assert not rec.equal and rec.diffs == {"steps": -1}


def test_no_cancellations_no_excuse():
    rec = reconcile(window(), RunTotals(30, 40, 90), cancelled_steps_bound=0)
    assert not rec.equal and any("other clients" in r for r in rec.reasons)
