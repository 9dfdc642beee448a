"""Dataset loaders (SpecBench / MT-Bench / SPEED-Bench / ShareGPT), their one-line errors,
the category filter, the order rows are sent in and multi-turn history.

The real SpecBench file lives outside the repo (shared/data/spec_bench/question.jsonl next
to the checkout); the SPEED-Bench and ShareGPT fixtures are specmon's own.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path

import pytest
from support.paths import shared_file

from specmon.bounded_read import read_bounded
from specmon.capture import RawCapture
from specmon.config import RunConfig, build_config
from specmon.errors import UserError
from specmon.sim.config import parse_category_acceptance
from specmon.sources.datasets import (
    ConversationSource,
    answer_text,
    load_dataset,
    prepare_run,
    select_categories,
)
from specmon.sources.datasets.formats import SPEED_BENCH_PLACEHOLDER
from specmon.sources.load.datasets import Prompt
from specmon.sources.load.generator import RequestFactory

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "datasets"
SPEC_BENCH_CATEGORIES = ("translation", "summarization", "qa", "math_reasoning", "rag")
MT_BENCH_CATEGORIES = (
    "writing",
    "roleplay",
    "reasoning",
    "math",
    "coding",
    "extraction",
    "stem",
    "humanities",
)


def spec_bench_file() -> Path:
    """../shared/data/spec_bench/question.jsonl from the checkout (or a folder above it)."""
    return shared_file(
        "data",
        "spec_bench",
        "question.jsonl",
        missing="the SpecBench question.jsonl is not in ../shared/data/spec_bench/",
    )


def write(tmp_path: Path, text: str, name: str = "data.jsonl") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# loaders on real and format-faithful files ---------------------------------------------


@pytest.mark.parametrize("kind", ["spec_bench", "mt_bench"])
def test_spec_bench_file_counts_per_category(kind):
    rows = load_dataset(kind, str(spec_bench_file()))
    counts = Counter(row.category for row in rows)
    expected = {c: 80 for c in SPEC_BENCH_CATEGORIES} | {c: 10 for c in MT_BENCH_CATEGORIES}
    assert counts == expected and len(rows) == 480
    assert len({row.question_id for row in rows}) == 480
    # MT-Bench's questions have two turns, SpecBench's own five categories one
    assert {len(row.turns) for row in rows if row.category in MT_BENCH_CATEGORIES} == {2}
    assert {len(row.turns) for row in rows if row.category in SPEC_BENCH_CATEGORIES} == {1}
    assert {n for row in rows for n in row.output_tokens} == {256}
    first = rows[0]
    assert (first.question_id, first.category, first.line) == (81, "writing", 1)
    assert (
        first.turns[1] == "Rewrite your previous response. Start every sentence with the letter A."
    )


def test_speed_bench_fixture():
    rows = load_dataset("speed_bench", str(FIXTURES / "speed_bench_qualitative.jsonl"))
    assert [row.category for row in rows] == [
        "coding",
        "multilingual",
        "humanities",
        "math_reasoning",
    ]
    assert rows[0].question_id == "a3f1c2d4e5b6a7980112233445566778"
    assert rows[2].turns == (
        "Name two causes of the French Revolution.",
        "Which of the two mattered more, and why?",
    )
    assert rows[3].system == "Answer with the working shown." and rows[3].turns == (
        "What is 17 times 23?",
    )
    assert {n for row in rows for n in row.output_tokens} == {4096}  # as vllm bench serve


def test_sharegpt_fixture_lengths_lines_and_default_category():
    path = FIXTURES / "sharegpt.json"
    rows = load_dataset("sharegpt", str(path))
    assert [row.question_id for row in rows] == ["sg-1", "sg-2", "sg-3"]
    assert [row.category for row in rows] == ["sharegpt", "chat", "sharegpt"]
    # reference length = ceil(chars / 4): 400 chars -> 100; "Lima." 5 -> 2;
    # "Santiago, the largest city of Chile." 36 -> 9; no answer -> the 256 default
    assert rows[0].output_tokens == (100,)
    assert rows[1].turns == ("What is the capital of Peru?", "And of Chile?")
    assert rows[1].output_tokens == (2, 9) and rows[1].system == "You are terse."
    assert rows[2].output_tokens == (256,)
    lines = path.read_text().splitlines()
    starts = [lines.index(f'    "id": "sg-{n}",') for n in (1, 2, 3)]  # 0-based line of "id"
    assert [row.line for row in rows] == starts  # the "{" is one line above: 1-based == that


def test_sharegpt_jsonl_also_reads(tmp_path):
    line = {
        "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello there"}]
    }
    rows = load_dataset("sharegpt", write(tmp_path, "\n" + json.dumps(line) + "\n"))
    assert rows[0].question_id == "line-2" and rows[0].output_tokens == (3,)  # 11 chars


# bad files: one line naming the file, the line and the problem -------------------------

GOOD_SPEC = '{"question_id": 1, "category": "qa", "turns": ["Why?"]}\n'
BAD_FILES = [
    ("spec_bench", "", "empty"),
    ("spec_bench", "\n\n", "empty"),
    (
        "spec_bench",
        GOOD_SPEC + '{"question_id": 2, "category": "qa", "turns": ["x"]\n',
        "line 2: invalid JSON",
    ),
    ("spec_bench", GOOD_SPEC + "[1, 2]\n", "line 2: expected a JSON object, got list"),
    ("spec_bench", '{"category": "qa", "turns": ["x"]}\n', "line 1: 'question_id' must be"),
    (
        "spec_bench",
        '{"question_id": true, "category": "qa", "turns": ["x"]}\n',
        "'question_id' must be",
    ),
    ("spec_bench", '{"question_id": 1, "turns": ["x"]}\n', "line 1: 'category' must be"),
    ("spec_bench", '{"question_id": 1, "category": "qa"}\n', "line 1: 'turns' must be a non-empty"),
    (
        "spec_bench",
        '{"question_id": 1, "category": "qa", "turns": []}\n',
        "'turns' must be a non-empty",
    ),
    (
        "mt_bench",
        '{"question_id": 1, "category": "qa", "turns": ["a", 3]}\n',
        "'turns' item 2 must be",
    ),
    (
        "mt_bench",
        '{"question_id": 1, "category": "qa", "turns": ["a"], "reference": 5}\n',
        "'reference'",
    ),
    ("speed_bench", '{"question_id": "q", "category": "qa"}\n', "line 1: 'messages' must be"),
    (
        "speed_bench",
        '{"question_id": "q", "category": "qa", "messages": [{"role": "user"}]}\n',
        "'messages' item 1 content must be",
    ),
    (
        "speed_bench",
        '{"question_id": "q", "category": "qa", "messages": ["hi"]}\n',
        "'messages' item 1 must be",
    ),
    (
        "speed_bench",
        '{"question_id": "q", "category": "qa", "messages": '
        '[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}\n',
        "role 'assistant'",
    ),
    (
        "speed_bench",
        '{"question_id": "q", "category": "qa", "messages": '
        '[{"role": "system", "content": "a"}]}\n',
        "no user turn",
    ),
    (
        "speed_bench",
        '{"question_id": "q", "category": "", "messages": [{"role": "user", "content": "a"}]}\n',
        "'category' must be",
    ),
    ("sharegpt", "[]", "empty"),
    (
        "sharegpt",
        '[{"conversations": [{"from": "human", "value": "a"}]},\n {"conversations": 3}]',
        "line 2: 'conversations' must be a list",
    ),
    (
        "sharegpt",
        '[{"conversations": [{"from": "gpt", "value": "a"}]}]',
        "line 1: 'conversations' has no human",
    ),
    (
        "sharegpt",
        '[{"conversations": [{"from": "human", "value": 7}]}]',
        "item 1 value must be a string",
    ),
    ("sharegpt", '[{"conversations": [{"value": "x"}]}]', "item 1 must be an object with from"),
    (
        "sharegpt",
        '[{"conversations": [{"from": "human", "value": "a"}]},\n\n {"conversations": [}]',
        "line 3: invalid JSON",
    ),
    ("sharegpt", '[{"conversations": [{"from": "human", "value": "a"}]}', "line 1: invalid JSON"),
    (
        "sharegpt",
        '[{"conversations": [{"from": "human", "value": "a"}]}] x',
        "text after the closing",
    ),
    (
        "sharegpt",
        '[{"conversations": [{"from": "human", "value": "a"}]} {}]',
        "expected ',' or ']'",
    ),
]


@pytest.mark.parametrize(("kind", "text", "message"), BAD_FILES)
def test_bad_files_are_one_line_errors(tmp_path, kind, text, message):
    path = write(tmp_path, text)
    with pytest.raises(UserError) as info:
        load_dataset(kind, path)
    text_of_error = str(info.value)
    assert "\n" not in text_of_error and text_of_error.startswith(f"input file {path}")
    assert message in text_of_error


def test_speed_bench_placeholder_row_is_refused_naming_its_line(tmp_path):
    good = (FIXTURES / "speed_bench_qualitative.jsonl").read_text()
    row = {
        "question_id": "x" * 32,
        "category": "qa",
        "messages": [{"role": "user", "content": SPEED_BENCH_PLACEHOLDER + "\n\n{article}"}],
    }
    path = write(tmp_path, good + json.dumps(row) + "\n")
    with pytest.raises(UserError, match=r"line 5: still holds SPEED-Bench's placeholder"):
        load_dataset("speed_bench", path)


def test_special_files_missing_files_and_the_size_bound(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="not a regular file"):
        load_dataset("spec_bench", str(fifo))  # returns at once: opened non-blocking
    with pytest.raises(UserError, match="not a regular file"):
        read_bounded("/dev/zero")
    with pytest.raises(UserError, match="is a directory"):
        load_dataset("spec_bench", str(tmp_path))
    with pytest.raises(UserError, match="not found"):
        load_dataset("spec_bench", str(tmp_path / "nope.jsonl"))
    path = write(tmp_path, GOOD_SPEC)
    assert read_bounded(path, limit=len(GOOD_SPEC)) == GOOD_SPEC.encode()
    with pytest.raises(
        UserError, match=f"{len(GOOD_SPEC)} bytes, over the {len(GOOD_SPEC) - 1} bytes limit"
    ):
        read_bounded(path, limit=len(GOOD_SPEC) - 1)


# the category filter --------------------------------------------------------------------


def test_category_filter_keeps_only_those_and_lists_the_others():
    path = str(spec_bench_file())
    rows = load_dataset("spec_bench", path)
    kept = select_categories(rows, "rag, coding", path)
    assert Counter(row.category for row in kept) == {"rag": 80, "coding": 10}
    assert [row.question_id for row in kept] == [
        row.question_id for row in rows if row.category in ("rag", "coding")
    ]  # file order kept
    with pytest.raises(UserError) as info:
        select_categories(rows, "rag,poetry", path)
    message = str(info.value)
    assert "no category 'poetry'" in message and "available: writing, roleplay" in message
    assert all(c in message for c in SPEC_BENCH_CATEGORIES + MT_BENCH_CATEGORIES)


# order and multi-turn ----------------------------------------------------------------------


def spec_rows(n_single: int = 3, n_double: int = 2) -> list:
    lines = [
        json.dumps({"question_id": i, "category": "qa", "turns": [f"q{i}"]})
        for i in range(n_single)
    ] + [
        json.dumps({"question_id": 100 + i, "category": "writing", "turns": [f"w{i}a", f"w{i}b"]})
        for i in range(n_double)
    ]
    from specmon.sources.datasets.formats import _jsonl_entries, _spec_bench_row, _Where

    data = ("\n".join(lines) + "\n").encode()
    return [
        _spec_bench_row(_Where("f", n), obj, "spec_bench") for n, obj in _jsonl_entries("f", data)
    ]


def test_sequential_sends_each_row_once_a_pass_in_file_order():
    source = ConversationSource(spec_rows(), random.Random(1))
    assert source.requests_per_pass == 5
    sent = [source.next() for _ in range(7)]
    assert [p.question_id for p in sent] == [0, 1, 2, 100, 101, 0, 1]
    assert {p.turn for p in sent} == {1} and source.passes == 2


def test_random_sampling_is_a_seeded_permutation_each_pass():
    rows = spec_rows(20, 0)

    def order(seed: int) -> list:
        source = ConversationSource(rows, random.Random(seed), sampling="random")
        return [source.next().question_id for _ in range(40)]

    a, b = order(3), order(3)
    assert a == b  # same seed, same order
    assert sorted(a[:20]) == list(range(20)) and sorted(a[20:]) == list(range(20))
    assert a[:20] != list(range(20)) and order(4) != a


def test_all_turns_waits_for_the_answer_and_sends_the_history():
    source = ConversationSource(spec_rows(1, 2), random.Random(0), all_turns=True)
    assert source.requests_per_pass == 5
    q0, w0, w1 = source.next(), source.next(), source.next()
    assert [(p.question_id, p.turn) for p in (q0, w0, w1)] == [(0, 1), (100, 1), (101, 1)]
    assert q0.conversation is None and w0.conversation is not None
    assert source.next() is None  # the pass is used up; the second turns wait for answers
    source.answered(w1, "answer of w1")
    second = source.next()
    assert (second.question_id, second.turn, second.text) == (101, 2, "w1b")
    assert second.history == (("user", "w1a"), ("assistant", "answer of w1"))
    assert second.conversation is None  # the last turn: nothing waits on it
    source.answered(w0, None)  # turn 1 failed: its conversation ends
    assert source.next().question_id == 0 and source.passes == 2  # the next pass


def test_answer_text_streaming_non_streaming_and_errors():
    chunks = [
        {"choices": [{"delta": {"role": "assistant", "content": ""}}]},
        {"choices": [{"delta": {"content": " alpha"}}]},
        {"choices": [{"delta": {"content": " beta"}}]},
        {"choices": [], "usage": {"completion_tokens": 2}},
    ]

    def answered(responses: list, error: dict | None = None) -> RawCapture:
        return RawCapture("chat", True, {}, 200, responses=responses, error=error)

    assert answer_text(answered(chunks)) == " alpha beta"
    body = {"choices": [{"message": {"role": "assistant", "content": "whole"}}]}
    assert answer_text(answered([body])) == "whole"
    completions = [{"choices": [{"text": "c1"}]}, {"choices": [{"text": "c2"}]}]
    assert answer_text(answered(completions)) == "c1c2"
    assert answer_text(answered(chunks, {"type": "timeout"})) is None


def test_request_bodies_carry_the_history_and_the_dataset_length():
    prompt = Prompt(
        "second?",
        "writing",
        256,
        question_id=7,
        turn=2,
        history=(("system", "be brief"), ("user", "first?"), ("assistant", "A1")),
    )
    chat = RequestFactory(RunConfig(output_tokens_mean=None), "m", random.Random(0)).body(prompt)
    assert chat["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first?"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "second?"},
    ]
    assert chat["max_tokens"] == 256
    config = RunConfig(
        endpoint_type="completions",
        output_tokens_mean=40,
        dataset="mt_bench",
        input_file=str(spec_bench_file()),
    )
    completion = RequestFactory(config, "m", random.Random(0)).body(prompt)
    assert completion["prompt"] == (
        "System: be brief\n\nUser: first?\n\nAssistant: A1\n\nUser: second?\n\nAssistant:"
    )
    assert completion["max_tokens"] == 40  # --output-tokens-mean overrides the dataset


# what the dataset decides about the run ----------------------------------------------


def test_prepare_run_defaults_lengths_and_one_pass():
    path = str(spec_bench_file())
    config = build_config(overrides={"dataset": "spec_bench", "input_file": path})
    prepare_run(config)
    assert (config.output_tokens_mean, config.request_count) == (256, 480)
    both = build_config(
        overrides={
            "dataset": "mt_bench",
            "input_file": path,
            "dataset_turns": "all",
            "dataset_category": "coding,rag",
        }
    )
    prepare_run(both)
    assert both.request_count == 10 * 2 + 80  # coding has two turns, rag one
    speed = build_config(
        overrides={
            "dataset": "speed_bench",
            "input_file": str(FIXTURES / "speed_bench_qualitative.jsonl"),
        }
    )
    prepare_run(speed)
    assert (speed.output_tokens_mean, speed.request_count) == (4096, 4)
    share = build_config(
        overrides={"dataset": "sharegpt", "input_file": str(FIXTURES / "sharegpt.json")}
    )
    prepare_run(share)
    assert share.output_tokens_mean is None  # each row's reference length
    given = build_config(
        overrides={
            "dataset": "spec_bench",
            "input_file": path,
            "output_tokens_mean": 64,
            "request_count": 12,
        }
    )
    prepare_run(given)
    assert (given.output_tokens_mean, given.request_count) == (64, 12)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"dataset": "spec_bench"}, "reads --input-file"),
        (
            {"dataset": "spec_bench", "input_file": "f", "prompt_source": "synthetic"},
            "drop --prompt-source",
        ),
        ({"dataset_category": "qa"}, "needs --dataset"),
        ({"dataset": "alpaca", "input_file": "f"}, "'dataset'"),
        ({"dataset": "sharegpt", "input_file": "f", "dataset_turns": "some"}, "'dataset_turns'"),
    ],
)
def test_config_checks(overrides, message):
    with pytest.raises(UserError, match=message):
        build_config(overrides=overrides)


def test_sim_category_acceptance_takes_the_dataset_category_names():
    """SpecBench's, MT-Bench's and SPEED-Bench's names go through the sim's parser as-is."""
    names = list(dict.fromkeys(SPEC_BENCH_CATEGORIES + MT_BENCH_CATEGORIES + ("multilingual",)))
    spec = ",".join(f"{name}={(i + 1) * 5}e-2" for i, name in enumerate(names))
    parsed = parse_category_acceptance(spec, 3)
    assert list(parsed) == names
    for i, name in enumerate(names):
        assert parsed[name] == [pytest.approx((i + 1) * 0.05)] * 3
