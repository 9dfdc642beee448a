"""Auto-detection never confuses two shapes (issue 21): hypothesis property tests over
responses that mix one engine's real payload with other engines' look-alikes, or carry two
engines' full payloads at once. The wire objects are built here by hand from each engine's
field list (docs/metrics.md §10.1), independently of the simulator's builders; the expected
counts are sums over the drawn steps."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.specdecode.adapters import ParsedResponse, detect, registered_adapters
from specmon.specdecode.engines import record_name

SETTINGS = settings(max_examples=250, deadline=None)


def _dense(steps: list[int], k: int) -> list[int]:
    return [sum(1 for a in steps if a == j) for j in range(k + 1)]


def objects(steps: list[int], k: int) -> dict[str, tuple[str, dict]]:
    """shape -> (where it goes, the wire object) for one request's verify steps."""
    s, a = len(steps), sum(steps)
    d = s * k
    dense = _dense(steps, k)
    sparse = {str(j): n for j, n in enumerate(dense) if n}
    return {
        "vllm": (
            "metrics",
            {
                "mean_acceptance_length": 1 + a / s,
                "draft_acceptance_rate": a / d,
                "acceptance_histogram": dense,
                "num_spec_steps": s,
                "num_accepted_draft_tokens": a,
                "num_draft_tokens": d,
                "num_spec_tokens": k,
            },
        ),
        "vllm-legacy": (
            "choice:speculative_decoding_stats",
            {
                "mean_acceptance_length": 1 + a / s,
                "draft_acceptance_rate": a / d,
                "acceptance_histogram": sparse,
                "num_spec_steps": s,
                "num_accepted_draft_tokens": a,
                "num_draft_tokens": d,
            },
        ),
        "trtllm": (
            "choice:speculative_decoding",
            {
                "acceptance_rate": a / d,
                "total_accepted_draft_tokens": a,
                "total_draft_tokens": d,
                "num_spec_steps": s,
                "acceptance_histogram": dense,
                "num_spec_tokens": k,
            },
        ),
        "sglang": (
            "sglext",
            {
                "spec_accept_rate": a / d,
                "spec_accept_length": (s + a) / s,
                "spec_num_correct_drafts": a,
                "spec_num_proposed_drafts": d,
                "spec_verify_ct": s,
                "spec_correct_drafts_histogram": dense,
            },
        ),
        "llamacpp": ("timings", {"predicted_n": s + a, "draft_n": d, "draft_n_accepted": a}),
        "openai": (
            "usage_details",
            {"accepted_prediction_tokens": a, "rejected_prediction_tokens": d - a},
        ),
    }


ENGINE = {
    "vllm": "vllm",
    "vllm-legacy": "vllm",
    "trtllm": "trtllm",
    "sglang": "sglang",
    "llamacpp": "llamacpp",
    "openai": "openai",
}
# What makes each a claim (its adapter's signature): dropping one key makes a look-alike.
SIGNED_BY = {
    "vllm": ("acceptance_histogram", "num_spec_steps", "mean_acceptance_length"),
    "vllm-legacy": ("acceptance_histogram", "num_spec_steps", "mean_acceptance_length"),
    "trtllm": ("total_accepted_draft_tokens", "total_draft_tokens"),
    "sglang": ("spec_verify_ct", "spec_num_correct_drafts"),
    "llamacpp": ("draft_n", "draft_n_accepted"),
    "openai": ("accepted_prediction_tokens", "rejected_prediction_tokens"),
}
PRIORITY = {e.name: e.priority for e in registered_adapters()}


def place(body: dict, where: str, obj: dict) -> None:
    if where == "metrics":
        body["metrics"] = {"speculative_decoding": obj}
    elif where.startswith("choice:"):
        body["choices"][0][where.split(":", 1)[1]] = obj
    elif where == "sglext":
        body["sglext"] = {"spec_tokens_details": obj}
    elif where == "timings":
        body["timings"] = obj
    else:
        body["usage"]["completion_tokens_details"] = obj


def base_body(tokens: int) -> dict:
    return {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": tokens, "total_tokens": tokens + 3},
    }


requests = st.integers(min_value=1, max_value=5).flatmap(
    lambda k: st.tuples(
        st.just(k), st.lists(st.integers(min_value=0, max_value=k), min_size=1, max_size=12)
    )
)
shapes = st.sampled_from(sorted(ENGINE))


def check(record, shape: str, steps: list[int], k: int) -> None:
    s, a = len(steps), sum(steps)
    assert record.engine == record_name(ENGINE[shape])  # AIPerf's name (tensorrt_llm)
    assert (record.num_accepted_draft_tokens, record.num_draft_tokens) == (a, s * k)
    if shape in ("llamacpp", "openai"):  # counts only
        assert record.num_spec_steps is None and record.acceptance_histogram is None
    else:
        assert record.num_spec_steps == s
        assert record.acceptance_histogram == {j: n for j, n in enumerate(_dense(steps, k)) if n}


@SETTINGS
@given(request=requests, shape=shapes, decoys=st.sets(shapes), data=st.data())
def test_one_payload_among_look_alikes_is_read_as_its_engine(request, shape, decoys, data):
    k, steps = request
    built = objects(steps, k)
    body = base_body(len(steps) + sum(steps))
    for other in sorted(decoys - {shape}):
        if ENGINE[other] == ENGINE[shape] or built[other][0] == built[shape][0]:
            continue  # the same engine's other shape, or the same place: not a look-alike
        where, obj = copy.deepcopy(built[other])
        del obj[data.draw(st.sampled_from(SIGNED_BY[other]), label=f"drop from {other}")]
        place(body, where, obj)
    place(body, *built[shape])
    responses = [ParsedResponse(body)]
    claims = {e.name for e in registered_adapters() if e.cls.can_adapt(responses)}
    assert claims == {ENGINE[shape]}
    outcome = detect(responses)
    assert outcome.reason is None, (outcome.reason, outcome.detail)
    check(outcome.record, shape, steps, k)


@SETTINGS
@given(request=requests, pair=st.lists(shapes, min_size=2, max_size=2, unique=True))
def test_two_engines_payloads_give_the_richer_one_never_a_mix(request, pair):
    k, steps = request
    built = objects(steps, k)
    if built[pair[0]][0] == built[pair[1]][0] or ENGINE[pair[0]] == ENGINE[pair[1]]:
        return  # one place holds one object; vLLM's two shapes are one engine
    body = base_body(len(steps) + sum(steps))
    for shape in pair:
        place(body, *built[shape])
    winner = max(pair, key=lambda shape: PRIORITY[ENGINE[shape]])
    outcome = detect([ParsedResponse(body)])
    check(outcome.record, winner, steps, k)
    # --engine names the other: only its payload is read, whole
    loser = next(shape for shape in pair if shape != winner)
    check(detect([ParsedResponse(body)], None, ENGINE[loser]).record, loser, steps, k)
