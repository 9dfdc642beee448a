"""SpecDecodeAcceptanceRecord: fields and invariants of docs/metrics.md §10."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from specmon.specdecode.record import (
    MAX_NUM_SPEC_TOKENS,
    SpecDecodeAcceptanceRecord,
    implausible_k,
    k_contradiction,
    record_from_export_dict,
)


def make(**over):
    # A worked example: per-step accepted [2,3,1,4,2,0,3,3], k 4 ->
    # H {0:1, 1:1, 2:2, 3:3, 4:1}; s = 8; a = 0+1+4+9+4 = 18; d = 8*4 = 32;
    # AL = 1 + 18/8 = 3.25; rate = 18/32 = 0.5625.
    base = dict(
        engine="vllm",
        mean_acceptance_length=3.25,
        draft_acceptance_rate=0.5625,
        acceptance_histogram={0: 1, 1: 1, 2: 2, 3: 3, 4: 1},
        num_accepted_draft_tokens=18,
        num_draft_tokens=32,
        num_spec_steps=8,
        num_spec_tokens=4,
        per_step_accepted=[2, 3, 1, 4, 2, 0, 3, 3],
        per_step_drafted=[4] * 8,
    )
    base.update(over)
    return SpecDecodeAcceptanceRecord(**base)


def test_worked_example_is_valid_and_keeps_values():
    r = make()
    assert r.acceptance_histogram == {0: 1, 1: 1, 2: 2, 3: 3, 4: 1}
    assert (r.num_spec_steps, r.num_accepted_draft_tokens, r.num_draft_tokens) == (8, 18, 32)
    assert r.mean_acceptance_length == 3.25 and r.draft_acceptance_rate == 0.5625
    assert r.completion_tokens is None


def test_zero_buckets_dropped_and_keys_sorted():
    # {3:1, 0:2, 1:0}: bucket 1 is empty -> omitted; s = 3, a = 3*1 = 3
    r = make(
        acceptance_histogram={3: 1, 0: 2, 1: 0},
        num_spec_steps=3,
        num_accepted_draft_tokens=3,
        num_draft_tokens=9,
        per_step_accepted=None,
        per_step_drafted=None,
    )
    assert list(r.acceptance_histogram.items()) == [(0, 2), (3, 1)]


def test_zero_step_record_is_valid():
    r = make(
        acceptance_histogram={},
        num_spec_steps=0,
        num_accepted_draft_tokens=0,
        num_draft_tokens=0,
        mean_acceptance_length=1.0,
        draft_acceptance_rate=0.0,
        per_step_accepted=[],
        per_step_drafted=[],
    )
    assert r.num_spec_steps == 0 and r.acceptance_histogram == {}


@pytest.mark.parametrize(
    "over, why",
    [
        (dict(num_spec_steps=9), "histogram sums to 8, not 9"),
        (dict(num_accepted_draft_tokens=17), "sum j*H[j] is 18"),
        (dict(num_draft_tokens=17, per_step_drafted=None), "18 accepted > 17 drafted"),
        (dict(per_step_accepted=[2, 3, 1, 4, 2, 0, 6]), "length 7 != 8 steps"),
        (dict(per_step_accepted=[2, 3, 1, 4, 2, 0, 3, 4]), "sum 19 != 18"),
        (dict(per_step_drafted=[4] * 7 + [3]), "sum 31 != 32"),
        (dict(per_step_drafted=[4] * 7), "length 7 != 8"),
        (dict(per_step_drafted=[1, 4, 4, 4, 4, 7, 4, 4]), "step 0 accepted 2 > drafted 1"),
        (dict(num_spec_steps=-8), "negative scalar"),
        (dict(acceptance_histogram={0: 1, 1: 1, 2: 2, 3: 3, 4: 1, 5: -1}), "negative count"),
        (dict(acceptance_histogram={-1: 1, 1: 1, 2: 2, 3: 3, 4: 1}), "negative key"),
        (dict(per_step_accepted=[2, 3, 1, 4, 2, 0, 3, -3]), "negative per-step"),
        (dict(num_spec_steps=True), "bool is not a count"),
        (dict(num_spec_steps=8.0), "float is not a count"),
        (dict(num_spec_steps="8"), "string is not a count"),
        (dict(acceptance_histogram={"0": 1, 1: 1, 2: 2, 3: 3, 4: 1}), "string key"),
        (dict(acceptance_histogram=[1, 1, 2, 3, 1]), "list is not a mapping"),
        (dict(mean_acceptance_length=math.nan), "NaN"),
        (dict(mean_acceptance_length=math.inf), "infinite"),
        (dict(draft_acceptance_rate=-math.inf), "negative infinite"),
        (dict(mean_acceptance_length=10**400), "too large for a float"),
        (dict(draft_acceptance_rate=56.25), "a percentage, not a fraction"),
        (dict(draft_acceptance_rate=True), "bool is not a number"),
        (dict(draft_acceptance_rate="0.5"), "string is not a number"),
        (dict(unknown_field=1), "extra field"),
    ],
)
def test_invariant_violations_rejected(over, why):
    with pytest.raises(ValidationError):
        make(**over)


def test_floats_not_cross_checked():
    # docs/metrics.md §10: mean vs 1+a/s and rate vs a/d are deliberately not checked (rounding).
    r = make(mean_acceptance_length=3.0, draft_acceptance_rate=0.5)
    assert (r.mean_acceptance_length, r.draft_acceptance_rate) == (3.0, 0.5)


def test_export_dict_round_trip_and_string_keys():
    r = make(completion_tokens=27)
    d = r.to_export_dict()
    assert d["acceptance_histogram"] == {"0": 1, "1": 1, "2": 2, "3": 3, "4": 1}
    assert d["draft_acceptance_rate"] == 0.5625  # a fraction in the JSONL struct
    assert record_from_export_dict(d) == r


def test_export_dict_omits_none_and_reader_accepts_nulls():
    r = make(num_spec_tokens=None, per_step_accepted=None, per_step_drafted=None)
    d = r.to_export_dict()
    assert (
        "num_spec_tokens" not in d and "per_step_accepted" not in d and "completion_tokens" not in d
    )
    # an older AIPerf writer emitted explicit nulls
    d_with_nulls = dict(d, num_spec_tokens=None, completion_tokens=None, per_step_drafted=None)
    assert record_from_export_dict(d_with_nulls) == r


# -- a declared k its own counts deny (issue 35 item 7) -------------------------------------
# make()'s record: 8 steps, k 4, 32 drafts, buckets up to 4, 4 drafts a step.


def test_a_consistent_k_is_plausible():
    assert implausible_k(make()) is None
    assert implausible_k(make(num_spec_tokens=None)) is None  # no k declared: nothing to deny


@pytest.mark.parametrize(
    "over, says",
    [
        # the hostile payload of the issue: counts of a k=4 run, k = 2^63-1
        ({"num_spec_tokens": 2**63 - 1}, "num_spec_tokens 9223372036854775807 exceeds"),
        (
            {"num_spec_tokens": MAX_NUM_SPEC_TOKENS + 1},
            f"exceeds the maximum {MAX_NUM_SPEC_TOKENS}",
        ),
        # 8 steps x k 3 = 24 < 32 drafts
        (
            {"num_spec_tokens": 3, "per_step_drafted": None},
            "num_draft_tokens 32 > num_spec_steps 8 x num_spec_tokens 3",
        ),
        # 32 drafts over 8 steps at k 8 is possible, but a step drafted 9 of at most 8
        (
            {"num_spec_tokens": 8, "per_step_drafted": [9, 3, 1, 4, 4, 4, 3, 4]},
            "a step drafted 9 tokens, more than num_spec_tokens 8",
        ),
    ],
)
def test_a_k_its_own_counts_deny_is_named(over, says):
    reason = implausible_k(make(**over))
    assert reason is not None and says in reason


def test_a_bucket_above_k_or_drafts_at_k_zero_are_implausible():
    # 8 steps x k 3 = 24 >= 18 drafts, but bucket 4 (a step accepted 4) > k 3
    rec = make(
        num_spec_tokens=3, num_draft_tokens=24, per_step_drafted=None, draft_acceptance_rate=18 / 24
    )
    assert implausible_k(rec) == "a step accepted 4 drafts, more than num_spec_tokens 3"
    assert k_contradiction(0, 5, None, 0, 0) == "num_spec_tokens 0 with 5 draft tokens"
    assert k_contradiction(0, 0, 3, 0, 0) is None  # k = 0 and no drafts: plain decoding
    # zero verify steps: a zero_step record, counted as such, not here
    assert k_contradiction(3, 1, 0, 0, 0) is None
