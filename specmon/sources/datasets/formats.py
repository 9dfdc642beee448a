"""Published prompt sets read from local files (docs/datasets.md has each format).

* spec_bench, mt_bench: question.jsonl, one {"question_id", "category", "turns": [user
  turns], "reference"?} a line (SpecBench extends MT-Bench's file with five categories);
* speed_bench: the JSONL that SPEED-Bench's preparation script writes, one row a line with
  "question_id", "category" and "messages" (OpenAI role/content, the user turns in order);
  a row still holding the dataset's placeholder instead of a prompt is refused;
* sharegpt: a JSON list (or JSONL) of {"id"?, "conversations": [{"from", "value"}], ...}.

Every row becomes a DatasetRow; any problem is one UserError naming the file and line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from specmon.bounded_read import read_bounded
from specmon.errors import UserError
from specmon.text_guard import control_character

DATASETS = ("spec_bench", "mt_bench", "speed_bench", "sharegpt")
# max_tokens as the peers send them: `vllm bench serve` sends 256 for spec_bench (and
# MT-Bench's questions) and 4096 for speed_bench; ShareGPT uses the reference answer's length.
DEFAULT_OUTPUT_TOKENS = {"spec_bench": 256, "mt_bench": 256, "speed_bench": 4096, "sharegpt": 256}
# What SPEED-Bench ships in place of prompts it may not redistribute; its preparation
# script replaces it with the fetched text. A row that still holds it was not prepared.
SPEED_BENCH_PLACEHOLDER = (
    "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH"
)
SHAREGPT_CATEGORY = "sharegpt"
CHARS_PER_TOKEN = 4  # reference answers have no token count: about 4 characters a token
_USER_FROM = ("human", "user")


@dataclass(frozen=True, slots=True)
class DatasetRow:
    """One question: its user turns in order, each with the max_tokens to send."""

    question_id: int | str
    category: str
    turns: tuple[str, ...]
    output_tokens: tuple[int, ...]  # one per turn
    line: int  # where it starts in the file (1-based)
    system: str | None = None  # a system message sent before the first turn


def load_dataset(kind: str, path: str) -> list[DatasetRow]:
    """Read and validate the whole file; a UserError names the first problem."""
    if kind not in DATASETS:
        raise UserError(f"unknown --dataset '{kind}' ({', '.join(DATASETS)})")
    data = read_bounded(path)
    parse = _PARSERS[kind]
    rows = [parse(_Where(path, number), obj, kind) for number, obj in _entries(kind, path, data)]
    if not rows:
        raise UserError(f"input file {path}: empty (no {kind} rows)")
    return rows


def select_categories(rows: list[DatasetRow], wanted: str | None, path: str) -> list[DatasetRow]:
    """Keep the rows of the comma-separated categories; an unknown one lists the others."""
    if not wanted:
        return rows
    names = [name.strip() for name in wanted.split(",") if name.strip()]
    available = list(dict.fromkeys(row.category for row in rows))
    unknown = [name for name in names if name not in available]
    if unknown or not names:
        raise UserError(
            f"--dataset-category: no category '{unknown[0] if unknown else wanted}' in {path} "
            f"(available: {', '.join(available)})"
        )
    return [row for row in rows if row.category in names]


# file layouts -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Where:
    path: str
    line: int

    def error(self, message: str) -> UserError:
        return UserError(f"input file {self.path} line {self.line}: {message}")


def _entries(kind: str, path: str, data: bytes) -> Iterator[tuple[int, Any]]:
    if kind == "sharegpt" and data.lstrip()[:1] == b"[":
        return _json_list_entries(path, data)
    return _jsonl_entries(path, data)


def _jsonl_entries(path: str, data: bytes) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            yield number, orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise _Where(path, number).error(f"invalid JSON ({exc})") from None


def _json_list_entries(path: str, data: bytes) -> Iterator[tuple[int, Any]]:
    """Walk a top-level JSON list entry by entry, so each entry's line is known."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise _Where(path, line).error("not UTF-8 text") from None
    decoder = json.JSONDecoder()
    pos = text.index("[") + 1
    line, counted = 1, 0
    while True:
        pos = _skip_space(text, pos)
        if pos < len(text) and text[pos] == "]":
            if text[pos + 1 :].strip():
                raise _bad_json(path, text, pos + 1, "text after the closing ']'")
            return
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _bad_json(path, text, exc.pos, exc.msg) from None
        line += text.count("\n", counted, pos)
        counted = pos
        yield line, obj
        pos = _skip_space(text, end)
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos >= len(text) or text[pos] != "]":
            raise _bad_json(path, text, pos, "expected ',' or ']' after an entry")


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _bad_json(path: str, text: str, pos: int, why: str) -> UserError:
    return _Where(path, text.count("\n", 0, pos) + 1).error(f"invalid JSON ({why})")


# row parsers ----------------------------------------------------------------------------


def _object(where: _Where, obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise where.error(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _question_id(where: _Where, obj: dict[str, Any], key: str = "question_id") -> int | str:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, str)) or value == "":
        raise where.error(f"'{key}' must be a number or a non-empty string")
    return value


def _category(where: _Where, obj: dict[str, Any], default: str | None = None) -> str:
    value = obj.get("category", default)
    if not isinstance(value, str) or not value.strip():
        raise where.error("'category' must be a non-empty string")
    if (bad := control_character(value.strip())) is not None:  # sent as a header, shown
        raise where.error(f"'category' holds the control character {bad}")
    return value.strip()


def _text(where: _Where, value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise where.error(f"{what} must be a non-empty string")
    return value


def _row_head(
    where: _Where, obj: Any, key: str, what: str
) -> tuple[dict[str, Any], int | str, str, list[Any]]:
    """A row's object, question id, category and its non-empty list under `key` (`what`
    says what the list holds, for the error)."""
    row = _object(where, obj)
    items = row.get(key)
    question_id, category = _question_id(where, row), _category(where, row)
    if not isinstance(items, list) or not items:
        raise where.error(f"'{key}' must be a non-empty list of {what}")
    return row, question_id, category, items


def _spec_bench_row(where: _Where, obj: Any, kind: str) -> DatasetRow:
    obj, question_id, category, turns = _row_head(where, obj, "turns", "user turns")
    texts = tuple(_text(where, t, f"'turns' item {i}") for i, t in enumerate(turns, 1))
    reference = obj.get("reference")
    if reference is not None and not isinstance(reference, (list, str)):
        raise where.error("'reference' must be a list of answers (or absent)")
    length = DEFAULT_OUTPUT_TOKENS[kind]
    return DatasetRow(question_id, category, texts, (length,) * len(texts), where.line)


def _speed_bench_row(where: _Where, obj: Any, kind: str) -> DatasetRow:
    obj, question_id, category, messages = _row_head(where, obj, "messages", "{role, content}")
    system: str | None = None
    turns: list[str] = []
    for i, message in enumerate(messages, 1):
        if not isinstance(message, dict):
            raise where.error(f"'messages' item {i} must be an object with role and content")
        role = message.get("role")
        content = _text(where, message.get("content"), f"'messages' item {i} content")
        if SPEED_BENCH_PLACEHOLDER in content:
            raise where.error(
                "still holds SPEED-Bench's placeholder instead of a prompt "
                "(prepare the file with the dataset's preparation script first)"
            )
        if role == "system" and not turns and system is None:
            system = content
        elif role == "user":
            turns.append(content)
        else:
            raise where.error(
                f"'messages' item {i} role {role!r}: expected user turns (one system first)"
            )
    if not turns:
        raise where.error("'messages' has no user turn")
    length = DEFAULT_OUTPUT_TOKENS[kind]
    return DatasetRow(
        question_id, category, tuple(turns), (length,) * len(turns), where.line, system
    )


def _sharegpt_row(where: _Where, obj: Any, kind: str) -> DatasetRow:
    obj = _object(where, obj)
    question_id = _question_id(where, obj, "id") if "id" in obj else f"line-{where.line}"
    category = _category(where, obj, SHAREGPT_CATEGORY)
    conversation = obj.get("conversations")
    if not isinstance(conversation, list):
        raise where.error("'conversations' must be a list of {from, value} turns")
    system: str | None = None
    turns: list[str] = []
    lengths: list[int] = []
    answered = True  # whether the last human turn has its reference answer yet
    for i, turn in enumerate(conversation, 1):
        if not isinstance(turn, dict) or not isinstance(turn.get("from"), str):
            raise where.error(f"'conversations' item {i} must be an object with from and value")
        speaker, value = turn["from"], turn.get("value")
        if not isinstance(value, str):
            raise where.error(f"'conversations' item {i} value must be a string")
        if speaker in _USER_FROM:
            turns.append(_text(where, value, f"'conversations' item {i} value"))
            lengths.append(DEFAULT_OUTPUT_TOKENS[kind])  # until its answer is seen
            answered = False
        elif speaker == "system" and not turns:
            system = value or None
        elif not answered:  # the model's reply (gpt, chatgpt, bard, ...) to that turn
            lengths[-1] = reference_tokens(value)
            answered = True
    if not turns:
        raise where.error("'conversations' has no human turn")
    return DatasetRow(question_id, category, tuple(turns), tuple(lengths), where.line, system)


def reference_tokens(answer: str) -> int:
    """Approximate token count of a reference answer: characters / 4, at least 1."""
    return max(1, math.ceil(len(answer) / CHARS_PER_TOKEN))


_PARSERS: dict[str, Callable[[_Where, Any, str], DatasetRow]] = {
    "spec_bench": _spec_bench_row,
    "mt_bench": _spec_bench_row,
    "speed_bench": _speed_bench_row,
    "sharegpt": _sharegpt_row,
}
