"""The hot-path shortcuts give exactly what the slow paths give; the pipeline benchmark
measures the real record path.

* SpecDecodeAcceptanceRecord.checked (model_construct after our own checks) equals the full
  pydantic constructor on valid input, and raises the very same ValidationError otherwise.
* pipeline.content_times (scan from both ends) picks the first / second / last response
  with content, as a scan of every response would.
"""

from __future__ import annotations

import copy
import math
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from specmon.pipeline import content_times, process_capture
from specmon.session import RunSession
from specmon.specdecode.adapters.base import ParsedResponse
from specmon.specdecode.record import SpecDecodeAcceptanceRecord as Record

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import bench_pipeline


def valid_fields() -> dict:
    # 4 steps with accepted drafts 2, 0, 3, 1 (k = 3): histogram {0: 1, 1: 1, 2: 1, 3: 1},
    # accepted = 0 + 1 + 2 + 3 = 6, drafted = 4 * 3 = 12, mean = 1 + 6 / 4 = 2.5, rate 0.5.
    return dict(
        engine="vllm",
        mean_acceptance_length=2.5,
        draft_acceptance_rate=0.5,
        acceptance_histogram={0: 1, 1: 1, 2: 1, 3: 1},
        num_accepted_draft_tokens=6,
        num_draft_tokens=12,
        num_spec_steps=4,
        num_spec_tokens=3,
        completion_tokens=11,
        per_step_accepted=[2, 0, 3, 1],
        per_step_drafted=[3, 3, 3, 3],
    )


def mutate(key: str, value) -> dict:
    fields = valid_fields()
    if value is DELETE:
        del fields[key]
    else:
        fields[key] = value
    return fields


class _Delete:
    """Marks a mutation that removes the key; a stable repr keeps test ids equal across
    pytest-xdist workers (a bare object()'s repr carries its address)."""

    def __repr__(self) -> str:
        return "DELETE"


DELETE = _Delete()

# Each changes one thing the validators look at; some stay valid, most do not.
MUTATIONS = [
    ("engine", 3),
    ("engine", DELETE),
    ("mean_acceptance_length", 2),
    ("mean_acceptance_length", True),
    ("mean_acceptance_length", math.nan),
    ("mean_acceptance_length", math.inf),
    ("mean_acceptance_length", -1.0),
    ("mean_acceptance_length", "2.5"),
    ("mean_acceptance_length", 10**400),
    ("draft_acceptance_rate", 1),
    ("draft_acceptance_rate", 0),
    ("draft_acceptance_rate", 50.0),
    ("draft_acceptance_rate", 1.0000001),
    ("draft_acceptance_rate", None),
    ("draft_acceptance_rate", math.nan),
    ("draft_acceptance_rate", -0.0),
    ("draft_acceptance_rate", -1e-9),
    ("acceptance_histogram", {3: 1, 0: 1, 2: 1, 1: 1}),  # unsorted: valid, gets sorted
    ("acceptance_histogram", {0: 1, 1: 1, 2: 1, 3: 1, 5: 0}),  # zero bucket: dropped
    ("acceptance_histogram", {0: 1, 1: 1, 2: 1, True: 1}),  # noqa: F601 (a bool key on purpose)
    ("acceptance_histogram", {0: 1, 1: 1, 2: 1, 3: 1.0}),
    ("acceptance_histogram", {0: 2, 1: 1, 2: 1, 3: 1}),  # sums to 5 steps, not 4
    ("acceptance_histogram", {0: 1, 1: 2, 3: 1}),  # 4 steps but 1*2 + 3 = 5 accepted, not 6
    ("acceptance_histogram", {0: 1, 1: 1, 2: 1, -3: 1}),
    ("acceptance_histogram", [1, 1, 1, 1]),
    ("acceptance_histogram", {}),
    ("num_accepted_draft_tokens", 7),
    ("num_accepted_draft_tokens", 6.0),
    ("num_accepted_draft_tokens", True),
    ("num_draft_tokens", 5),
    ("num_draft_tokens", -12),
    ("num_spec_steps", 5),
    ("num_spec_steps", "4"),
    ("num_spec_tokens", None),
    ("num_spec_tokens", False),
    ("num_spec_tokens", -1),
    ("completion_tokens", 11.0),
    ("completion_tokens", None),
    ("per_step_accepted", None),
    ("per_step_accepted", [2, 0, 3]),
    ("per_step_accepted", [2, 0, 3, 2]),
    ("per_step_accepted", [2, 0, 3, True]),
    ("per_step_accepted", (2, 0, 3, 1)),
    ("per_step_accepted", [2, 0, 3.0, 1]),
    ("per_step_accepted", [4, -1, 3, 0]),  # sums to 6 but holds a negative
    ("per_step_accepted", [3, 0, 3, 0]),  # valid: sums to 6, each <= 3 drafted
    ("per_step_drafted", [4, 2, 3, 3]),  # step 2 accepted 0 <= 2 drafted: valid
    ("per_step_drafted", [1, 5, 3, 3]),  # step 1 accepted 2 > 1 drafted: rejected
    ("per_step_drafted", None),
    ("per_step_drafted", "3333"),
    ("unknown_field", 1),
]


def test_valid_input_builds_the_same_record_both_ways():
    fast, slow = Record.checked(**valid_fields()), Record(**valid_fields())
    assert fast == slow
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.to_export_dict() == slow.to_export_dict()
    assert fast.acceptance_histogram == {0: 1, 1: 1, 2: 1, 3: 1}
    assert fast.mean_acceptance_length == 2.5 and type(fast.mean_acceptance_length) is float


@pytest.mark.parametrize("key,value", MUTATIONS, ids=[f"{k}={v!r}"[:40] for k, v in MUTATIONS])
def test_every_mutation_gives_what_the_full_constructor_gives(key, value):
    fields = mutate(key, value)
    try:
        expected = Record(**copy.deepcopy(fields))
    except ValidationError as exc:
        with pytest.raises(ValidationError) as caught:
            Record.checked(**copy.deepcopy(fields))
        assert caught.value.errors(include_context=False) == exc.errors(include_context=False)
        assert str(caught.value) == str(exc)
        return
    got = Record.checked(**copy.deepcopy(fields))
    assert got == expected
    assert type(got.mean_acceptance_length) is float
    assert type(got.draft_acceptance_rate) is float
    assert list(got.acceptance_histogram) == sorted(got.acceptance_histogram)


def test_an_int_rate_becomes_a_float_as_the_validator_makes_it():
    got = Record.checked(**mutate("draft_acceptance_rate", 1))
    assert got.draft_acceptance_rate == 1.0 and type(got.draft_acceptance_rate) is float


def test_the_record_does_not_share_the_callers_lists():
    fields = valid_fields()
    rec = Record.checked(**fields)
    fields["per_step_accepted"].append(9)
    fields["acceptance_histogram"][7] = 1
    assert rec.per_step_accepted == [2, 0, 3, 1]
    assert 7 not in rec.acceptance_histogram


def _resp(ns, content=None, *, text=None, choices=True) -> ParsedResponse:
    if not choices:
        return ParsedResponse({"choices": [], "usage": {"completion_tokens": 3}}, ns)
    choice = {"index": 0, "delta": {"content": content}}
    if text is not None:
        choice = {"index": 0, "text": text}
    return ParsedResponse({"choices": [choice]}, ns)


def test_content_times_picks_first_second_and_last_content():
    # role chunk (empty) at 10, content at 20, 30, 40, empty finish at 50, usage at 60:
    # first 20, second 30, last 40.
    parsed = [
        _resp(10, ""),
        _resp(20, "a"),
        _resp(30, "b"),
        _resp(40, "c"),
        _resp(50, ""),
        _resp(60, choices=False),
    ]
    assert content_times(parsed) == (20, 30, 40)


def test_content_times_single_content_response_has_no_second():
    parsed = [_resp(10, ""), _resp(20, text="only"), _resp(30, choices=False)]
    assert content_times(parsed) == (20, None, 20)


def test_content_times_skips_untimed_responses_and_empty_streams():
    # the content at index 1 has no receive time, so it does not count: first 30, last 30
    parsed = [_resp(10, ""), _resp(None, "a"), _resp(30, "b"), _resp(None, "c")]
    assert content_times(parsed) == (30, None, 30)
    assert content_times([_resp(10, ""), _resp(20, choices=False)]) == (None, None, None)
    assert content_times([]) == (None, None, None)


def _dump_reference(rec: Record) -> dict:
    """to_export_dict as it was first written: model_dump, then string histogram keys."""
    d = rec.model_dump(exclude_none=True)
    d["acceptance_histogram"] = {str(j): n for j, n in rec.acceptance_histogram.items()}
    return d


@pytest.mark.parametrize(
    "drop",
    [(), ("num_spec_tokens", "completion_tokens"), ("per_step_accepted", "per_step_drafted")],
)
def test_export_dict_keeps_model_dump_keys_and_order(drop):
    fields = {k: v for k, v in valid_fields().items() if k not in drop}
    for rec in (Record(**fields), Record.checked(**fields)):
        got = rec.to_export_dict()
        assert list(got.items()) == list(_dump_reference(rec).items())
        assert got["acceptance_histogram"] == {"0": 1, "1": 1, "2": 1, "3": 1}
        if "per_step_accepted" in got:
            got["per_step_accepted"].append(5)  # a copy: the record is unchanged
            assert rec.per_step_accepted == [2, 0, 3, 1]


def test_records_sharing_a_fields_set_stay_independent_under_model_copy():
    fields = {k: v for k, v in valid_fields().items() if k != "completion_tokens"}
    a, b = Record.checked(**fields), Record.checked(**fields)
    assert a.model_fields_set == Record(**fields).model_fields_set == set(fields)
    c = a.model_copy(update={"completion_tokens": 5})
    assert c.completion_tokens == 5 and "completion_tokens" in c.model_fields_set
    # the copy's fields set is its own: a and b still list exactly the fields given
    assert a.model_fields_set == b.model_fields_set == set(fields)
    assert a.completion_tokens is None and b.completion_tokens is None
    with pytest.raises(ValidationError):  # frozen: no in-place change that could touch the set
        a.engine = "x"


# ------------------------------------------------------------------ session and benchmark


@pytest.mark.parametrize("kind", bench_pipeline.KINDS)
def test_benchmark_captures_take_the_real_record_path(kind):
    # 28 steps, step i accepts i % 4 of k = 3 drafts: 7 steps each of 0..3 accepted;
    # accepted = (0 + 1 + 2 + 3) * 7 = 42, drafted = 28 * 3 = 84,
    # AL = 1 + 42 / 28 = 2.5, rate = 42 / 84 = 0.5, completion tokens = 1 + 28 + 42 = 71.
    result = process_capture(bench_pipeline.build(kind, 1)[0])
    assert result.error is None and result.outcome.reason is None
    spec = result.spec
    assert spec.acceptance_histogram == {0: 7, 1: 7, 2: 7, 3: 7}
    assert (spec.num_spec_steps, spec.num_accepted_draft_tokens, spec.num_draft_tokens) == (
        28,
        42,
        84,
    )
    assert spec.mean_acceptance_length == 2.5 and spec.draft_acceptance_rate == 0.5
    assert spec.completion_tokens == 71
    assert (spec.per_step_accepted is None) == (kind == "stream-summary")
    if kind.startswith("stream"):
        # content events at start + 100 us + 10 us * j for j = 1..29 (j = 0 is the empty
        # role chunk): TTFT = 110 us = 0.11 ms, latency = 100 + 290 = 390 us = 0.39 ms
        assert result.values["time_to_first_token"] == 110_000
        assert result.values["request_latency"] == 390_000
        assert result.values["time_to_second_token"] == 10_000


def test_session_drops_response_times_with_responses(tmp_path):
    fresh = bench_pipeline.build("stream-detailed", 1)[0]
    expected = process_capture(bench_pipeline.build("stream-detailed", 1)[0])
    session = RunSession(tmp_path / "a", "records")
    got = session.add(fresh)
    assert fresh.responses == [] and fresh.response_ns is None
    assert got.metrics == expected.metrics and got.end_ns == expected.end_ns
    kept = bench_pipeline.build("stream-detailed", 1)[0]
    RunSession(tmp_path / "b", "records", keep_responses=True).add(kept)
    assert len(kept.responses) == len(kept.response_ns) == 32  # role + 29 content + finish + usage
    session.finish()


def test_bench_pipeline_prints_one_row_per_kind(capsys):
    assert bench_pipeline.main(["--count", "5", "--repeats", "1", "--kinds", "nonstream"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| nonstream")]
    assert len(rows) == 1
    figures = [float(x) for x in rows[0].strip("| ").split("|")[1:]]
    assert len(figures) == 4 and all(f > 0 for f in figures)
    assert bench_pipeline.main(["--kinds", "bogus"]) == 2
