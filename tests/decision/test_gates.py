"""Health gates and physical bounds of the one decision (issue 17 items 2 and 4)."""

from __future__ import annotations

import pytest

from specmon import decision
from specmon.decision.choose import _Basis, _decide, choose
from specmon.decision.gates import Health

# S_1 = .6, S_2 = .3, S_3 = .1 -> E(1..4) = 1.6, 1.9, 2.0, 2.0
HIST = {0: 40, 1: 30, 2: 20, 3: 10}


def test_health_reasons_by_rule():
    assert Health(requests=99, errors=1).reasons() == []  # 1.0%: not above 1%
    assert Health(requests=98, errors=2).reasons()[0].startswith("error rate 2.0% > 1%")
    # 37 of 3,176 (a server killed mid-run) is 1.165%: one decimal, never "1% > 1%"
    assert Health(requests=3139, errors=37).reasons() == [
        "error rate 1.2% > 1% (37 of 3176 requests failed)"
    ]
    assert Health(requests=10, saturated=True).reasons() == [
        "client saturated (the load loop's health warning)"
    ]
    assert Health(requests=10, server_lag_share=0.02).reasons() == []
    assert "too few requests (4 < 5)" in Health(requests=4).reasons()
    assert Health(requests=1, min_requests=1).reasons() == []
    assert Health().reasons() == []  # nothing known: nothing gated


def test_a_k_failing_half_its_requests_is_excluded_and_flagged():
    # servers at k=2 and k=4 under the same load; k=4's step time would make it the answer,
    # but it failed 20 of 40 requests: it is left out and the answer says so
    ok = decision.Measurement(2, 8, {0: 40, 1: 30, 2: 30}, 14.0, label="k2", requests=40)
    bad = decision.Measurement(4, 8, HIST, 15.0, label="k4", requests=20, errors=20)
    got = decision.advise([ok, bad], 8)
    assert got.measured_k == 2 and got.source == "histogram"
    assert got.flags == ("k4 (k=4 at concurrency 8) excluded: error rate 50.0% > 1% "
                         "(20 of 40 requests failed)",)  # fmt: skip
    assert "excluded: error rate 50.0%" in got.text()
    both_bad = decision.advise([bad], 8)
    assert both_bad.k is None and "every measurement excluded" in (both_bad.why or "")


def test_runs_at_several_k_without_step_contrast_are_refused_with_what_to_measure():
    # k=2, 4, 6 servers at one load, the step time falling with k (CPU contention): no
    # draft cost can be fitted; refused, never a "best"
    runs = [decision.Measurement(k, 4, HIST if k >= 3 else {0: 40, 1: 30, 2: 30}, t)
            for k, t in ((2, 12.0), (4, 11.0), (6, 10.0))]  # fmt: skip
    got = choose(runs, 4)
    assert got.k is None and got.refused
    assert "no contrast in step time across k=2,4,6" in got.text()
    assert got.text().endswith("measure k=0")


def test_a_prediction_above_tokens_per_step_is_refused():
    # a basis whose step time at k'=3 is shorter than at k=0 would claim E(3) x 2 over k=0
    weights = {k: 1.0 for k in range(9)} | {3: 2.0}
    basis = _Basis([weights], 0, "bad fit", "model")
    got = _decide(basis, [decision.Measurement(4, 1, HIST)], 1, ())
    assert got.k is None and got.refused
    assert "k'=3 predicted 4.00x over k=0, above its E(3)=2.00 tokens per step" in got.text()


def test_p_best_is_seeded_and_names_a_close_runner_up():
    # c = 0.1: E/(1+ck) = 1.455 (k=1), 1.583 (k=2), 1.538 (k=3): k=2, k=3 close behind
    first = choose([decision.Measurement(4, None, HIST)])
    again = choose([decision.Measurement(4, None, {j: n for j, n in HIST.items()})])
    assert first.k == 2 and first.p_best == again.p_best
    assert first.p_best is not None and 0.5 < first.p_best <= 1.0
    # 10x the steps: the same shares, a surer answer
    big = choose([decision.Measurement(4, None, {j: 10 * n for j, n in HIST.items()})])
    assert big.k == 2 and big.p_best is not None and big.p_best >= first.p_best
    assert f"P(best)={first.p_best:.2f}" in first.text()
    assert first.head() == "best k=2 (1.58x)"  # what the cards show


def test_the_caveat_never_calls_a_measured_k_beyond_the_measured_range():
    # a k=2 and a k=4 server side by side (the what-if of the k=2 one reads the same rows)
    runs = [
        decision.Measurement(2, 4, {0: 40, 1: 30, 2: 30}, 12.0),
        decision.Measurement(4, 4, HIST, 14.0),
    ]
    got = choose(runs, 4)
    assert got.measured_k == 4
    assert "beyond the measured k=2" not in got.caveat()
    assert (got.k is not None and got.k <= 4) or "largest measured k=4" in got.caveat()


@pytest.mark.parametrize("errors", [0, 1])
def test_one_error_in_a_hundred_is_not_gated(errors):
    got = decision.advise([decision.Measurement(4, None, HIST, requests=100 - errors,
                                                errors=errors)])  # fmt: skip
    # one k measured (4) answers; the model alone picks 2 and proposes it
    assert got.k == 4 and got.model_k == 2 and not got.flags
    assert got.proposal is not None and got.proposal.k == 2


def test_a_proposed_k_whose_run_was_excluded_is_re_measure_not_measure():
    # k=2 measured and healthy, accepting nearly every draft: the model proposes a larger k.
    # A run at that k which failed half its requests was measured but does not count: the
    # line must say "re-measure k=J" (the user did run it), never "measure" as if new
    hist = {0: 5, 1: 10, 2: 85}
    ok = decision.Measurement(2, 8, hist, 14.0, label="k2", requests=40, throughput=2000.0)
    alone = decision.advise([ok], 8)
    assert alone.proposal is not None and not alone.proposal.excluded
    j = alone.proposal.k
    assert j != 2 and f"next: measure k={j}," in alone.proposal.text()
    bad = decision.Measurement(j, 8, hist, 15.0, label=f"k{j}", requests=20, errors=20,
                               throughput=2500.0)  # fmt: skip
    got = decision.advise([ok, bad], 8)
    assert got.measured_k == 2 and got.proposal is not None
    assert got.proposal.k == j and got.proposal.excluded
    assert f"next: re-measure k={j}," in got.proposal.text()
    assert got.proposal.to_dict()["measured_but_excluded"] is True
    # the same k measured at another load leaves this load's proposal a first measurement
    elsewhere = decision.Measurement(j, 16, hist, 15.0, requests=20, errors=20, throughput=1.0)
    assert not decision.advise([ok, elsewhere], 8).proposal.excluded
