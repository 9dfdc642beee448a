"""Every capture of a real vLLM 0.32 server (tests/fixtures/vllm032, captured by the real-vLLM
teammate) adapts to a record equal to the server's own payload, ints exact; suppressed cases
(n = 2, prompt list, no usage chunk, zero steps) give the right reason."""

from __future__ import annotations

import json

import pytest
from support.paths import FIXTURES as FIXTURES_DIR

from specmon.specdecode.adapters import ParsedResponse, detect

CAPTURES = FIXTURES_DIR / "vllm032"
LINES = [
    (path.name, i, json.loads(line))
    for path in sorted(CAPTURES.glob("*.jsonl"))
    for i, line in enumerate(path.read_text().splitlines())
    if line.strip()
]

# README's table, checked by hand: [3,1,1,2] s 7, a 1+2+6 = 9; [1,4,2,2] s 9, a 4+4+6 = 14;
# [0,0,2,5] s 7, a 4+15 = 19; [1,6,0,4] s 11, a 6+12 = 18.
HAND = {
    (3, 1, 1, 2): (7, 9, 21),
    (1, 4, 2, 2): (9, 14, 19),
    (0, 0, 2, 5): (7, 19, 19),
    (1, 6, 0, 4): (11, 18, 21),
}


def server_payload(capture):
    """The server's own object, found without the adapter: root metrics.speculative_decoding."""
    found = [
        r["metrics"]["speculative_decoding"]
        for r in capture["responses"]
        if isinstance(r.get("metrics"), dict) and r["metrics"].get("speculative_decoding")
    ]
    assert len(found) <= 1  # vLLM sends it once per request
    return found[0] if found else None


def last_usage_tokens(capture):
    usages = [r["usage"] for r in capture["responses"] if r.get("usage")]
    return usages[-1]["completion_tokens"] if usages else None


def outcome_of(capture):
    parsed = [ParsedResponse(r, None, capture["request"]) for r in capture["responses"]]
    return detect(parsed, capture["request"])


def test_captures_present():
    names = {name for name, _, _ in LINES}
    assert len(LINES) >= 20 and any(n.startswith("summary_") for n in names)
    assert any(n.startswith("detailed_") for n in names)


@pytest.mark.parametrize("name, index, capture", LINES, ids=[f"{n}:{i}" for n, i, _ in LINES])
def test_capture_adapts_to_the_server_payload(name, index, capture):
    outcome = outcome_of(capture)
    payload = server_payload(capture)
    request = capture["request"]
    if request.get("n", 1) > 1 or isinstance(request.get("prompt"), list):
        assert outcome.reason == "n_gt_1" and outcome.record is None
        return
    if payload is None:
        assert "no_usage" in name and outcome.reason == "absent" and outcome.record is None
        return
    record = outcome.record if not outcome.zero_step else outcome.zero_step_record
    assert record is not None, outcome
    dense = payload["acceptance_histogram"]
    assert record.acceptance_histogram == {j: n for j, n in enumerate(dense) if n}
    for key in (
        "num_spec_steps",
        "num_accepted_draft_tokens",
        "num_draft_tokens",
        "num_spec_tokens",
        "mean_acceptance_length",
        "draft_acceptance_rate",
    ):
        assert getattr(record, key) == payload[key] and type(getattr(record, key)) is type(
            payload[key]
        ), key
    assert record.per_step_accepted == payload.get("per_step_accepted")
    assert record.per_step_drafted == payload.get("per_step_drafted")
    assert record.completion_tokens == last_usage_tokens(capture)
    if payload["num_spec_steps"] == 0:
        assert outcome.zero_step and outcome.reason == "zero_step" and outcome.record is None
    else:
        assert outcome.reason is None and outcome.engine == "vllm"
        s, a, d = HAND[tuple(dense)]
        assert (
            record.num_spec_steps,
            record.num_accepted_draft_tokens,
            record.num_draft_tokens,
        ) == (s, a, d)
        # real-vllm.md §4: completion_tokens = 1 + steps + accepted + non-spec decode steps
        assert record.completion_tokens >= 1 + s + a
    if name.startswith("summary_"):
        assert record.per_step_accepted is None  # null at summary level counts as absent
    elif payload["num_spec_steps"]:
        assert len(record.per_step_drafted) == record.num_spec_steps
