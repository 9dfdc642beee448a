"""The raw spec-decode payload travels with each result, so the drill-down can show what the
server sent after the session has dropped the response bodies; the session keeps it for a
bounded window of valid results and for good on results without a record."""

from __future__ import annotations

import pytest
from support.adapters_support import responses_of

from specmon import session as session_mod
from specmon.capture import RawCapture
from specmon.session import RunSession
from specmon.specdecode.adapters import detect
from specmon.tui.requests import payload_title, raw_payload


@pytest.mark.parametrize(
    "name,where",
    [
        (
            "vllm_merged_summary_chat_stream",
            lambda rs: rs[-1].data["metrics"]["speculative_decoding"],
        ),
        ("vllm_legacy_chat", lambda rs: rs[-1].data["choices"][0]["speculative_decoding_stats"]),
        ("trtllm_summary", lambda rs: rs[-1].data["choices"][0]["speculative_decoding"]),
        ("sglang_chat", lambda rs: rs[-1].data["sglext"]["spec_tokens_details"]),
    ],
)
def test_detect_returns_the_wire_object_it_read(name, where):
    responses, request = responses_of(name)
    outcome = detect(responses, request)
    assert outcome.record is not None
    assert outcome.payload is where(responses)  # the very object sent, not a copy


def test_a_rejected_payload_is_still_returned():
    # merged shape whose histogram sums to 3 steps while the payload says 4
    stats = {
        "mean_acceptance_length": 2.0,
        "draft_acceptance_rate": 0.5,
        "acceptance_histogram": [1, 1, 1],
        "num_spec_steps": 4,
        "num_accepted_draft_tokens": 3,
        "num_draft_tokens": 8,
        "num_spec_tokens": 2,
    }
    from specmon.specdecode.adapters.base import ParsedResponse

    outcome = detect([ParsedResponse({"choices": [], "metrics": {"speculative_decoding": stats}})])
    assert outcome.record is None and outcome.reason.startswith("malformed:")
    assert outcome.payload is stats


def _capture(i: int, steps_hist: list[int]) -> RawCapture:
    accepted = sum(j * n for j, n in enumerate(steps_hist))
    steps = sum(steps_hist)
    stats = {
        "mean_acceptance_length": 1 + accepted / steps if steps else 1.0,
        "draft_acceptance_rate": accepted / (2 * steps) if steps else 0.0,
        "acceptance_histogram": steps_hist,
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": 2 * steps,
        "num_spec_tokens": 2,
    }
    body = {
        "choices": [{"index": 0, "message": {"content": "x"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1 + steps + accepted},
        "metrics": {"speculative_decoding": stats},
    }
    return RawCapture.from_dict(
        {
            "endpoint": "chat",
            "streaming": False,
            "request": {"model": "m", "messages": []},
            "status": 200,
            "responses": [body],
            "start_ns": i * 1000,
            "response_ns": [i * 1000 + 500],
            "end_ns": i * 1000 + 500,
            "x_request_id": f"r{i}",
        }
    )


def test_session_keeps_payloads_of_the_newest_results_and_of_every_zero_step_one(
    monkeypatch, tmp_path
):
    monkeypatch.setattr(session_mod, "PAYLOAD_WINDOW", 3)
    session = RunSession(tmp_path, "records")
    results = [session.add(_capture(i, [1, 1, 1])) for i in range(5)]
    zero = session.add(_capture(5, [0, 0, 0]))  # zero-step: no record, payload kept for good
    results += [session.add(_capture(i, [2, 0, 1])) for i in range(6, 8)]
    # window of 3 valid results: r0..r4, r6, r7 are valid; the newest three keep theirs
    kept = [r.x_request_id for r in results if r.outcome.payload is not None]
    assert kept == ["r4", "r6", "r7"]
    assert zero.spec is None and zero.outcome.payload["num_spec_steps"] == 0
    assert results[0].capture.responses == []  # bodies are dropped in live sessions
    # the drill-down shows the payload as sent once the bodies are gone
    text = raw_payload(results[-1])
    assert '"payload_as_sent"' in text and '"acceptance_histogram": [2, 0, 1]' in text
    assert payload_title(results[-1]).startswith("spec-decode payload as sent")
    assert payload_title(results[0]).startswith("parsed record")
    session.finish()


def test_kept_results_drop_the_prompt_once_written(tmp_path):
    """A live session keeps each result for the log and the percentiles, but not its prompt
    (a synthetic prompt is kilobytes of unique text); the raw capture keeps the whole body."""
    session = RunSession(tmp_path, "raw")
    capture = _capture(1, [1, 1, 1])
    capture.request["messages"] = [{"role": "user", "content": "a long prompt " * 100}]
    result = session.add(capture)
    session.finish()
    assert result.capture.request == {"model": "m"}  # the prompt is gone, the rest stays
    raw = (tmp_path / "profile_export_raw.jsonl").read_text()
    assert "a long prompt a long prompt" in raw
