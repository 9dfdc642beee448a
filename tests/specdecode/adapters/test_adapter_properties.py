"""Property tests (hypothesis): random and mutated payloads never raise out of detect() or
any adapter, and every record produced satisfies every invariant of docs/metrics.md §10,
checked here independently of the record's own validators."""

from __future__ import annotations

import copy
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.adapters_support import PAYLOADS, load_capture, parsed

from specmon.specdecode.adapters import ParsedResponse, detect
from specmon.specdecode.adapters.llamacpp import LlamaCppSpecDecodeAdapter
from specmon.specdecode.adapters.openai import OpenAIPredictionsAdapter
from specmon.specdecode.adapters.sglang import SGLangSpecDecodeAdapter
from specmon.specdecode.adapters.trtllm import TensorRTLLMSpecDecodeAdapter
from specmon.specdecode.adapters.vllm import VLLMSpecDecodeAdapter

ADAPTERS = (
    VLLMSpecDecodeAdapter,
    TensorRTLLMSpecDecodeAdapter,
    SGLangSpecDecodeAdapter,
    LlamaCppSpecDecodeAdapter,
    OpenAIPredictionsAdapter,
)
# the engine names records carry (AIPerf's: tensorrt_llm for trtllm)
ENGINES = {"vllm", "tensorrt_llm", "sglang", "llamacpp", "openai"}
SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

KEYS = [
    "acceptance_histogram",
    "num_spec_steps",
    "mean_acceptance_length",
    "draft_acceptance_rate",
    "num_accepted_draft_tokens",
    "num_draft_tokens",
    "num_spec_tokens",
    "per_step_accepted",
    "per_step_drafted",
    "acceptance_rate",
    "total_accepted_draft_tokens",
    "total_draft_tokens",
    "spec_verify_ct",
    "spec_num_correct_drafts",
    "spec_num_proposed_drafts",
    "spec_correct_drafts_histogram",
    "spec_accept_rate",
    "spec_accept_token_num",
    "spec_draft_token_num",
    "spec_accept_histogram",
    "draft_n",
    "draft_n_accepted",
    "accepted_prediction_tokens",
    "rejected_prediction_tokens",
    "other",
]

small_ints = st.integers(min_value=-3, max_value=12)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    small_ints,
    st.integers(),
    st.floats(allow_nan=True),
    st.sampled_from([0.0, 1.0, 0.5, 10**400, -1, "0", "3", "x", ""]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(st.sampled_from(["0", "1", "3", "a"]), inner, max_size=4),
    ),
    max_leaves=10,
)
int_lists = st.lists(small_ints, max_size=6)
field_values = st.one_of(
    json_values,
    int_lists,
    st.dictionaries(st.sampled_from(["0", "1", "2", "3", "-1", "x", "01"]), small_ints, max_size=4),
)
payloads = st.dictionaries(st.sampled_from(KEYS), field_values, max_size=len(KEYS))


def place(payload, where):
    """Put a payload where one of the engines puts it."""
    return {
        "vllm_root": {"choices": [], "metrics": {"speculative_decoding": payload}},
        "vllm_legacy": {"choices": [{"index": 0, "speculative_decoding_stats": payload}]},
        "trtllm": {"choices": [{"index": 0, "speculative_decoding": payload}]},
        "sglext": {"choices": [], "sglext": {"spec_tokens_details": payload}},
        "meta_info": {"text": "x", "meta_info": payload},
        "timings": {"choices": [], "timings": payload},
        "usage_details": {"choices": [], "usage": {"completion_tokens_details": payload}},
    }[where]


LOCATIONS = st.sampled_from(
    ["vllm_root", "vllm_legacy", "trtllm", "sglext", "meta_info", "timings", "usage_details"]
)
usages = st.one_of(st.none(), st.dictionaries(st.just("completion_tokens"), scalars, max_size=1))


def is_count(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def check_record(r):
    """Every invariant of docs/metrics.md §10, written out again rather than trusting the model."""
    assert r.engine in ENGINES
    assert isinstance(r.draft_acceptance_rate, float) and math.isfinite(r.draft_acceptance_rate)
    assert 0 <= r.draft_acceptance_rate <= 1.0
    assert is_count(r.num_accepted_draft_tokens) and is_count(r.num_draft_tokens)
    assert r.num_accepted_draft_tokens <= r.num_draft_tokens
    if r.num_spec_steps is None:  # counts only: nothing step-based may be present
        assert r.fidelity == "counts"
        assert r.mean_acceptance_length is None and r.acceptance_histogram is None
        assert r.per_step_accepted is None and r.per_step_drafted is None
        return
    v = r.mean_acceptance_length
    assert isinstance(v, float) and math.isfinite(v) and v >= 0
    assert is_count(r.num_spec_steps)
    for v in (r.num_spec_tokens, r.completion_tokens):
        assert v is None or is_count(v)
    hist = r.acceptance_histogram
    assert all(is_count(j) and is_count(n) and n > 0 for j, n in hist.items())
    assert sum(hist.values()) == r.num_spec_steps
    assert sum(j * n for j, n in hist.items()) == r.num_accepted_draft_tokens
    assert r.num_accepted_draft_tokens <= r.num_draft_tokens
    acc, dra = r.per_step_accepted, r.per_step_drafted
    if acc is not None:
        assert all(map(is_count, acc)) and len(acc) == r.num_spec_steps
        assert sum(acc) == r.num_accepted_draft_tokens
    if dra is not None:
        assert all(map(is_count, dra)) and len(dra) == r.num_spec_steps
        assert sum(dra) == r.num_draft_tokens
    if acc is not None and dra is not None:
        assert all(a <= d for a, d in zip(acc, dra))


def check_everything(responses, request=None):
    for adapter in ADAPTERS:  # adapters alone must not raise either
        if adapter.can_adapt(responses):
            r = adapter.adapt(responses)
            if r is not None:
                check_record(r)
    outcome = detect(responses, request)
    assert outcome.reason != "malformed:internal_error", outcome.detail
    if outcome.record is not None:
        assert outcome.reason is None and not outcome.zero_step
        steps = outcome.record.num_spec_steps
        assert steps is None or steps > 0
        check_record(outcome.record)
    else:
        assert outcome.reason is not None
    if outcome.zero_step:
        assert outcome.reason == "zero_step" and outcome.zero_step_record.num_spec_steps == 0
        check_record(outcome.zero_step_record)
    return outcome


@SETTINGS
@given(payload=payloads, where=LOCATIONS, usage=usages, extra=st.lists(json_values, max_size=2))
def test_random_payloads_never_raise(payload, where, usage, extra):
    body = place(payload, where)
    if usage is not None:
        body["usage"] = usage
    responses = [ParsedResponse(body)] + [ParsedResponse(x) for x in extra]
    check_everything(responses)


@SETTINGS
@given(body=json_values, request=st.one_of(st.none(), json_values))
def test_arbitrary_json_bodies_never_raise(body, request):
    check_everything([ParsedResponse(body)], request if isinstance(request, dict) else None)


VALID = sorted(p.stem for p in PAYLOADS.glob("*.json"))


def payload_slot(body):
    """(container, key) of the engine payload inside a fixture body, if it has one."""
    if isinstance(body.get("metrics"), dict) and body["metrics"].get("speculative_decoding"):
        return body["metrics"], "speculative_decoding"
    for choice in body.get("choices") or []:
        for key in ("speculative_decoding_stats", "speculative_decoding"):
            if choice.get(key):
                return choice, key
    if isinstance(body.get("sglext"), dict):
        return body["sglext"], "spec_tokens_details"
    if isinstance(body.get("meta_info"), dict):
        return body, "meta_info"
    return None


mutations = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "delete",
                "set",
                "bump",
                "negate",
                "stringify",
                "floatify",
                "null",
                "percent",
                "grow_list",
                "shrink_list",
                "listify",
                "dup_response",
            ]
        ),
        # mostly a key the payload has (an index into its keys), sometimes any known key
        st.one_of(st.integers(min_value=0, max_value=20), st.sampled_from(KEYS)),
        field_values,
        st.integers(min_value=-2, max_value=2),
    ),
    min_size=1,
    max_size=4,
)


def mutate(stats, op, key, value, delta):
    if not isinstance(stats, dict) or not stats:
        return
    if isinstance(key, int):
        key = sorted(stats)[key % len(stats)]
    old = stats.get(key)
    if op == "delete":
        stats.pop(key, None)
    elif op == "set":
        stats[key] = value
    elif op == "null":
        stats[key] = None
    elif op == "bump" and isinstance(old, int):
        stats[key] = old + delta
    elif op == "percent" and isinstance(old, (int, float)) and not isinstance(old, bool):
        stats[key] = old * 100 + abs(delta)  # the fraction-vs-percentage mistake
    elif op == "negate" and isinstance(old, (int, float)):
        stats[key] = -old
    elif op == "stringify":
        stats[key] = str(old)
    elif op == "floatify" and isinstance(old, int):
        stats[key] = float(old)
    elif op == "grow_list" and isinstance(old, list):
        stats[key] = old + [abs(delta)]
    elif op == "shrink_list" and isinstance(old, list):
        stats[key] = old[:-1]
    elif op == "listify" and isinstance(old, dict):
        stats[key] = list(old.values())


@SETTINGS
@given(name=st.sampled_from(VALID), ops=mutations)
def test_mutated_valid_payloads_never_raise_and_stay_valid(name, ops):
    capture = load_capture(name)
    baseline = detect(parsed(capture), capture.get("request"))
    capture = copy.deepcopy(capture)
    bodies = capture["responses"]
    for op, key, value, delta in ops:
        if op == "dup_response":
            bodies.append(copy.deepcopy(bodies[-1]))
            continue
        for body in bodies:
            slot = payload_slot(body)
            if slot:
                container, slot_key = slot
                mutate(container[slot_key], op, key, value, delta)
    outcome = check_everything(parsed(capture), capture.get("request"))
    # a mutation can only take a record away or change it, never invent another engine
    if outcome.engine is not None and baseline.engine is not None:
        assert outcome.engine == baseline.engine


@SETTINGS
@given(
    hist=st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=8),
    extra_drafts=st.integers(min_value=0, max_value=40),
    tokens=st.integers(0, 500),
)
def test_consistent_vllm_payloads_round_trip_exactly(hist, extra_drafts, tokens):
    # Build a consistent merged payload from a random dense histogram: s = sum(H),
    # a = sum(j*H[j]), d = a + extra (up to s*k); the record must carry exactly these numbers.
    steps = sum(hist)
    accepted = sum(j * n for j, n in enumerate(hist))
    # consistent: at most k drafts a step (k = len(hist) - 1; record.k_contradiction)
    drafted = accepted + min(extra_drafts, steps * (len(hist) - 1) - accepted)
    rate = accepted / drafted if drafted else 0.0
    stats = {
        "mean_acceptance_length": 1 + accepted / steps if steps else 1.0,
        "draft_acceptance_rate": rate,
        "acceptance_histogram": hist,
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": len(hist) - 1,
    }
    body = {
        "choices": [],
        "usage": {"completion_tokens": tokens},
        "metrics": {"speculative_decoding": stats},
    }
    outcome = check_everything([ParsedResponse(body)])
    record = outcome.record or outcome.zero_step_record
    assert record.acceptance_histogram == {j: n for j, n in enumerate(hist) if n}
    assert (record.num_spec_steps, record.num_accepted_draft_tokens, record.num_draft_tokens) == (
        steps,
        accepted,
        drafted,
    )
    assert record.completion_tokens == tokens and outcome.zero_step == (steps == 0)
