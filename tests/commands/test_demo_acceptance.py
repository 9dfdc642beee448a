"""`specmon demo --num-spec-tokens 2,4,6 --acceptance a1,...,a6`: one per-position list,
each simulator takes its first k values (issue 11 item 6)."""

from __future__ import annotations

import argparse

import pytest

from specmon.commands import demo
from specmon.errors import UserError


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_each_simulator_takes_its_first_k_values():
    args = parse("--num-spec-tokens", "2,4,6", "--acceptance", "0.9,0.8,0.7,0.6,0.5,0.4")
    got = {k: demo.sim_config(args, 1, k).acceptance for k in (2, 4, 6)}
    assert got == {
        2: [0.9, 0.8],
        4: [0.9, 0.8, 0.7, 0.6],
        6: [0.9, 0.8, 0.7, 0.6, 0.5, 0.4],
    }


def test_one_value_still_applies_to_every_position():
    args = parse("--num-spec-tokens", "2,4", "--acceptance", "0.7")
    assert demo.sim_config(args, 1, 4).acceptance == [0.7] * 4


def test_too_few_values_is_one_clear_line():
    args = parse("--num-spec-tokens", "2,4,6", "--acceptance", "0.9,0.8,0.7,0.6")
    with pytest.raises(UserError, match="4 values for --num-spec-tokens 2,4,6; give 1 or 6"):
        demo.sim_config(args, 1, 2)
