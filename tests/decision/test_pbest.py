"""P(best) resamples requests, not verify steps (issue 17 item 3): steps within one request
share a prompt and a text, so a run whose requests differ a lot is less sure of its k than
one of steady requests with the same pooled histogram."""

from __future__ import annotations

from specmon.decision.acceptance import REQUEST_BLOCKS, add_request
from specmon.decision.choose import MIN_REQUEST_BLOCKS, KChoice, Measurement, choose
from specmon.decision.measured import add_rate

# 40 requests of 50 steps at k=4, pooled {0: 800, 1: 600, 2: 400, 3: 200}: S = .6, .3, .1, 0
POOLED = {0: 800, 1: 600, 2: 400, 3: 200}
STEADY = {0: 20, 1: 15, 2: 10, 3: 5}  # every request alike
HIGH = {0: 10, 1: 15, 2: 15, 3: 10}  # half the requests accept a lot ...
LOW = {0: 30, 1: 15, 2: 5, 3: 0}  # ... half little: 20 x (HIGH + LOW) = POOLED


def at(blocks: tuple) -> KChoice:
    return choose([Measurement(4, None, POOLED, blocks=blocks)], draft_cost=0.05)


def test_varying_requests_give_a_lower_p_best_than_steady_ones():
    # With the high requests' weight share f: S_1 = .4 + .4 f, S_2 = .1 + .4 f, S_3 = .2 f.
    # c = 0.05: k=2 gives (1.5 + .8 f) / 1.1, k=3 (1.5 + f) / 1.15; at f = .5: 1.727 and
    # 1.739, within 1%: k=2. k=3 wins a draw only when k=2 < .99 x k=3, i.e. f > .541
    steady, varying, steps = at((STEADY,) * 40), at((HIGH, LOW) * 20), at(())
    assert steady.k == varying.k == steps.k == 2
    # every block alike: each draw is the pooled histogram rescaled, the pick never moves
    assert steady.p_best == 1.0 and steady.p_best_over == "requests"
    # Dirichlet(1,..,1) over 40 blocks: f has sd ~ 0.5 / sqrt(41) = 0.078, P(f > .541) ~ 0.30
    assert varying.p_best is not None and 0.5 <= varying.p_best <= 0.85
    assert varying.within_noise == (3,) and "k=3 within noise" in varying.text()
    # the old bootstrap over 2000 independent steps: S_1's sd 0.011, f's 0.027 -> ~0.93:
    # more sure than the requests allow
    assert steps.p_best_over == "verify steps"
    assert steps.p_best is not None and varying.p_best < steps.p_best
    assert "over requests" in varying.to_dict()["p_best_basis"]
    # seeded by the data: the same figure every time
    assert at((HIGH, LOW) * 20).p_best == varying.p_best


def test_requests_fold_into_blocks_of_consecutive_requests():
    blocks: list[dict[int, int]] = []
    cap = 2 * REQUEST_BLOCKS
    for i in range(cap):  # one request a block up to the cap
        add_request(blocks, i, {0: 1, 2: i})
    assert len(blocks) == cap and blocks[5] == {0: 1, 2: 5}
    # request 80 doubles the block size: neighbours merge pairwise (0+1, 2+3, ...), and it
    # opens block 40 (requests 80 and 81)
    add_request(blocks, cap, {0: 1, 2: cap})
    assert len(blocks) == REQUEST_BLOCKS + 1
    assert blocks[0] == {0: 2, 2: 0 + 1} and blocks[1] == {0: 2, 2: 2 + 3}
    assert blocks[REQUEST_BLOCKS] == {0: 1, 2: cap}
    add_request(blocks, cap + 1, {0: 1, 2: cap + 1})
    assert len(blocks) == REQUEST_BLOCKS + 1 and blocks[-1] == {0: 2, 2: 2 * cap + 1}
    # at any length the count stays within the cap and every request is counted once
    for i in range(cap + 2, 1000):
        add_request(blocks, i, {0: 1, 2: i})
    assert len(blocks) <= cap and sum(b[0] for b in blocks) == 1000
    assert sum(b[2] for b in blocks) == sum(range(1000))


def test_rate_blocks_fold_the_same_way():
    blocks: list[list[float]] = []
    for i in range(1000):
        add_rate(blocks, i, 10.0, 0.5)
    # 1000 requests: per = 16 (1000 < 2 x 40 x 16 = 1280), 63 blocks (62 full + 1000 - 992)
    assert len(blocks) == 63 and blocks[0] == [160.0, 8.0] and blocks[-1] == [80.0, 4.0]
    assert sum(b[0] for b in blocks) == 10_000.0


def test_too_few_requests_resample_the_verify_steps():
    # one request resampled is itself in every draw: no spread, P(best) = 1.00 from a single
    # request. Under MIN_REQUEST_BLOCKS blocks the verify steps are resampled instead, and
    # the figure is the pooled one's (the same histogram, no blocks)
    one = choose([Measurement(4, None, POOLED, blocks=(POOLED,))], draft_cost=0.05)
    nine = at((HIGH, LOW, HIGH, LOW, HIGH, LOW, HIGH, LOW, POOLED))
    assert MIN_REQUEST_BLOCKS == 10
    for few in (one, nine):
        assert few.p_best_over == "verify steps"
        assert few.p_best == at(()).p_best
