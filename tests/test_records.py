"""specmon/records.py: the one dataclass -> JSON object rule, and one JSON object read."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from specmon.decision.cells import CellStats
from specmon.records import int_keys, json_object, json_record, stored_as


@dataclass(frozen=True)
class _Inner:
    x: int

    def to_dict(self) -> dict[str, int]:
        return {"x_doubled": 2 * self.x}


@dataclass(frozen=True)
class _Plain:
    a: int


@dataclass(frozen=True)
class _Record:
    name: str
    flags: tuple[str, ...]
    by_k: dict[int, list[str]]
    named: dict[str, float]
    inner: _Inner
    plain: _Plain
    points: tuple[_Inner, ...]
    speed: float = field(default=1.5, metadata=stored_as("speed_tok_s"))
    scratch: int = field(default=7, metadata=stored_as(None))


def test_every_field_in_order_with_json_shapes():
    rec = _Record(
        "arm",
        ("a", "b"),
        {4: ["slow"], 0: []},
        {"z": 1.0, "a": 2.0},
        _Inner(3),
        _Plain(5),
        (_Inner(1), _Inner(2)),
    )
    out = json_record(rec)
    assert out == {
        "name": "arm",
        "flags": ["a", "b"],  # a tuple is a list
        "by_k": {"0": [], "4": ["slow"]},  # int keys as strings, in key order
        "named": {"z": 1.0, "a": 2.0},  # str keys kept as they are, in their order
        "inner": {"x_doubled": 6},  # a nested record's own to_dict
        "plain": {"a": 5},  # a nested dataclass without one: the same rule
        "points": [{"x_doubled": 2}, {"x_doubled": 4}],
        "speed_tok_s": 1.5,  # stored_as names it; stored_as(None) leaves `scratch` out
    }
    assert list(out) == [
        "name",
        "flags",
        "by_k",
        "named",
        "inner",
        "plain",
        "points",
        "speed_tok_s",
    ]
    assert list(out["by_k"]) == ["0", "4"]


def test_not_a_dataclass_is_refused():
    with pytest.raises(TypeError, match="dataclass instance"):
        json_record({"a": 1})
    with pytest.raises(TypeError, match="dataclass instance"):
        json_record(_Plain)


def test_cell_stats_keep_their_sweep_json_names():
    cell = CellStats(
        k=2,
        concurrency=4,
        repeats=3,
        median=100.0,
        mad=2.0,
        relative_mad=float("inf"),
        score=97.0,
        unstable=False,
        few_repeats=False,
        excluded=("client saturated",),
        slowest=98.0,
        fastest=103.0,
    )
    out = cell.to_dict()
    assert out["median_output_token_throughput"] == 100.0
    assert out["mad_output_token_throughput"] == 2.0
    assert out["relative_mad"] is None  # an infinite ratio is not JSON
    assert out["excluded"] == ["client saturated"]
    assert "median" not in out and "slowest" not in out and "fastest" not in out


def test_int_keys_read_back():
    assert int_keys({"2": "a", "10": "b"}) == {2: "a", 10: "b"}
    assert int_keys(None) == {}


def test_json_object_reads_one_object_or_says_why():
    assert json_object('{"a": [1, 2]}') == {"a": [1, 2]}
    assert json_object(b'{"b": null}') == {"b": None}
    with pytest.raises(ValueError, match=r"^invalid JSON \("):
        json_object("{broken")
    with pytest.raises(ValueError, match="^expected a JSON object, got list$"):
        json_object("[1, 2]")


def test_same_named_copies_the_fields_the_source_has_and_no_other():
    from dataclasses import dataclass

    from specmon.records import same_named

    @dataclass
    class Target:
        a: int = 0
        b: str = ""
        only_here: float = 1.5

    class Source:
        a = 7
        b = "x"
        extra = "never copied"

    assert same_named(Target, Source()) == {"a": 7, "b": "x"}
    assert same_named(Target, Source(), ("b",)) == {"b": "x"}
    assert Target(**same_named(Target, Source())) == Target(7, "x", 1.5)
