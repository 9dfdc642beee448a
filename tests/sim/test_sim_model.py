"""The simulator's acceptance walk, token plan and latency model (pure functions, no I/O)."""

from __future__ import annotations

import random

import pytest

from specmon.errors import UserError
from specmon.sim.config import parse_acceptance, parse_category_acceptance
from specmon.sim.model import (
    draw_accepted,
    expected_tokens_per_second,
    expected_tokens_per_step,
    plan_sequence,
    step_time_ms,
)


class FixedDraws:
    """A stand-in RNG whose random() returns the given values in order."""

    def __init__(self, values: list[float]) -> None:
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


def test_walk_stops_at_first_rejection():
    # a = [0.8, 0.7, 0.6]; draws 0.5 < 0.8 accept, 0.69 < 0.7 accept, 0.9 >= 0.6 reject -> j = 2
    assert draw_accepted(FixedDraws([0.5, 0.69, 0.9]), [0.8, 0.7, 0.6], 3) == 2
    # first draw 0.8 >= 0.8 rejects position 1 -> j = 0, later positions never drawn
    rng = FixedDraws([0.8, 0.0, 0.0])
    assert draw_accepted(rng, [0.8, 0.7, 0.6], 3) == 0
    assert len(rng.values) == 2
    # only `drafted` positions are walked: 2 drafted, both accepted -> 2
    assert draw_accepted(FixedDraws([0.0, 0.0]), [0.8, 0.7, 0.6], 2) == 2


def test_plan_all_accepted_truncates_to_max_tokens():
    # k=3, always accept, max_tokens=10: prefill 1 token, 9 left.
    # step 1 drafts 3, emits 4 (5 left); step 2 drafts 3, emits 4 (1 left);
    # 1 left -> drafts min(3, 0) = 0 -> one non-spec step. 1 + 2 + 6 + 1 = 10.
    plan = plan_sequence(random.Random(0), 3, [1.0, 1.0, 1.0], 10, ignore_eos=True)
    assert plan.per_step_accepted == [3, 3]
    assert plan.per_step_drafted == [3, 3]
    assert plan.nonspec_steps == 1
    assert plan.step_tokens == [4, 4, 1]
    assert plan.histogram(3) == [0, 0, 0, 2]
    assert plan.completion_tokens == 10 and plan.finish_reason == "length"


def test_plan_all_rejected_drafts_shrink_at_the_end():
    # k=3, never accept, max_tokens=5: 4 left after prefill.
    # 4 left: draft 3, emit 1; 3 left: draft 2, emit 1; 2 left: draft 1, emit 1; 1 left: non-spec.
    plan = plan_sequence(random.Random(0), 3, [0.0, 0.0, 0.0], 5, ignore_eos=True)
    assert plan.per_step_drafted == [3, 2, 1]
    assert plan.per_step_accepted == [0, 0, 0]
    assert plan.nonspec_steps == 1
    assert plan.histogram(3) == [3, 0, 0, 0]


def test_plan_one_token_has_no_steps():
    plan = plan_sequence(random.Random(0), 3, [0.9] * 3, 1, ignore_eos=True)
    assert plan.steps == 0 and plan.step_tokens == [] and plan.completion_tokens == 1


@pytest.mark.parametrize("max_tokens", [1, 2, 3, 5, 17, 100, 257])
@pytest.mark.parametrize("seed", range(5))
def test_plan_invariants(max_tokens, seed):
    plan = plan_sequence(random.Random(seed), 4, [0.9, 0.7, 0.5, 0.3], max_tokens, ignore_eos=True)
    hist = plan.histogram(4)
    assert sum(hist) == plan.steps
    assert sum(j * h for j, h in enumerate(hist)) == plan.accepted
    assert plan.accepted <= plan.drafted
    assert all(0 <= a <= d <= 4 for a, d in zip(plan.per_step_accepted, plan.per_step_drafted))
    assert 1 + plan.steps + plan.accepted + plan.nonspec_steps == max_tokens
    assert 1 + sum(plan.step_tokens) == max_tokens


def test_plan_without_ignore_eos_may_stop_early():
    lengths = {
        plan_sequence(random.Random(s), 3, [0.5] * 3, 40, ignore_eos=False).completion_tokens
        for s in range(40)
    }
    assert min(lengths) >= 20 and max(lengths) <= 40  # EOS drawn in [max//2, max]
    assert len(lengths) > 1


def test_empirical_acceptance_matches_the_conditionals():
    # a = [0.8, 0.5, 0.25] -> survival S1 = 0.8, S2 = 0.4, S3 = 0.1; E(3) = 1 + 1.3 = 2.3
    rng = random.Random(123)
    draws = [draw_accepted(rng, [0.8, 0.5, 0.25], 3) for _ in range(40000)]
    s1 = sum(j >= 1 for j in draws) / len(draws)
    s2 = sum(j >= 2 for j in draws) / len(draws)
    s3 = sum(j >= 3 for j in draws) / len(draws)
    assert s1 == pytest.approx(0.8, abs=0.01)
    assert s2 == pytest.approx(0.4, abs=0.01)
    assert s3 == pytest.approx(0.1, abs=0.01)
    assert expected_tokens_per_step([0.8, 0.5, 0.25], 3) == pytest.approx(2.3)


def test_step_time_formula():
    # step_ms 20, draft 1 ms/token, slope 0.02:
    # B=1, k=3: 20 * 1 + 3 = 23;  B=64, k=3: 20 * (1 + 0.02*63*4) + 3 = 20 * 6.04 + 3 = 123.8
    assert step_time_ms(3, 1, 20, 1, 0.02) == pytest.approx(23.0)
    assert step_time_ms(3, 64, 20, 1, 0.02) == pytest.approx(123.8)
    assert step_time_ms(3, 0, 20, 1, 0.02) == pytest.approx(23.0)  # idle counts as batch 1
    assert step_time_ms(5, 10, 0, 0, 0.5) == 0.0  # all zero -> no waiting


def _best_k(in_flight: int) -> int:
    rates = {
        k: expected_tokens_per_second([0.8] * k, k, in_flight, 20, 1, 0.02) for k in range(1, 9)
    }
    return max(rates, key=rates.get)


def test_larger_k_wins_at_concurrency_1_and_smaller_at_64():
    # flat a = 0.8: E(k) = (1 - 0.8^(k+1)) / 0.2 -> E(1)=1.8, E(3)=2.952, E(6)=3.951424
    # B=1:  k=1 1.8/21 = 85.71/s, k=3 2.952/23 = 128.35/s, k=6 3.951424/26 = 151.98/s
    tps = lambda k, b: expected_tokens_per_second([0.8] * k, k, b, 20, 1, 0.02)
    assert tps(1, 1) == pytest.approx(1000 * 1.8 / 21)
    assert tps(3, 1) == pytest.approx(1000 * 2.952 / 23)
    assert tps(6, 1) == pytest.approx(1000 * 3.951424 / 26)
    assert tps(1, 1) < tps(3, 1) < tps(6, 1)
    # B=64: T(1) = 20*(1+0.02*63*2)+1 = 71.4 -> 64*1.8/71.4 = 1613.4/s;
    #       T(2) = 97.6 -> 64*2.44/97.6 = 1600.0/s; T(6) = 202.4 -> 64*3.951424/202.4 = 1249.5/s
    assert tps(1, 64) == pytest.approx(64000 * 1.8 / 71.4)
    assert tps(2, 64) == pytest.approx(64000 * 2.44 / 97.6)
    assert tps(1, 64) > tps(2, 64) > tps(6, 64)
    # best k over 1..8: E(8)/28 = 4.32891/28 = 154.6/s beats E(7)/27 = 4.16114/27 = 154.1/s at B=1
    assert _best_k(1) == 8
    assert _best_k(64) == 1
    best = [_best_k(b) for b in (1, 4, 16, 64)]
    assert best == sorted(best, reverse=True) and best[0] > best[-1]


def test_acceptance_flag_parsing():
    assert parse_acceptance("0.8", 3) == [0.8, 0.8, 0.8]
    assert parse_acceptance("0.8,0.7,0.6", 3) == [0.8, 0.7, 0.6]
    assert parse_category_acceptance("code=0.9,chat=0.5:0.4:0.3", 3) == {
        "code": [0.9, 0.9, 0.9],
        "chat": [0.5, 0.4, 0.3],
    }
    for bad in ("1.5", "0.8,0.7", "x", ""):
        with pytest.raises(UserError):
            parse_acceptance(bad, 3)
    with pytest.raises(UserError):
        parse_category_acceptance("code", 3)
