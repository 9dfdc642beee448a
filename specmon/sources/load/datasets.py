"""Prompt sources: synthetic text of a target token count, the built-in set, a JSONL file.

Token counts come from the server's usage, so no tokenizer is needed; synthetic prompts use
short common words that are about one token each.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from specmon.bounded_read import read_bounded
from specmon.config import MAX_TOKENS
from specmon.errors import UserError
from specmon.records import json_object
from specmon.sources.load.prompts import BUILTIN_PROMPTS, SYNTHETIC_WORDS
from specmon.text_guard import control_character


@dataclass(frozen=True, slots=True)
class Prompt:
    text: str
    category: str | None = None
    max_tokens: int | None = None  # a file may fix it per prompt; else --output-tokens-*
    # dataset rows (specmon.sources.datasets): which question and turn (1-based) this is,
    # the messages before it (system, earlier turns and the model's own answers), and the
    # key under which the source waits for this turn's answer (None: no turn follows)
    question_id: int | str | None = None
    turn: int | None = None
    history: tuple[tuple[str, str], ...] = ()
    conversation: int | None = None


def sample_length(rng: random.Random, mean: float, stddev: float) -> int:
    """A normal draw rounded to an int, in 1..MAX_TOKENS (stddev 0 gives the mean exactly)."""
    if stddev <= 0:
        return min(MAX_TOKENS, max(1, round(mean)))
    return min(MAX_TOKENS, max(1, round(rng.gauss(mean, stddev))))  # a wide stddev: bounded


def synthetic_text(rng: random.Random, n_tokens: int) -> str:
    return " ".join(rng.choice(SYNTHETIC_WORDS) for _ in range(n_tokens))


class PromptSource:
    """Yields prompts forever; deterministic for a given seed."""

    def __init__(
        self,
        kind: str,
        rng: random.Random,
        *,
        input_tokens_mean: int = 550,
        input_tokens_stddev: float = 0.0,
        input_file: str | None = None,
    ) -> None:
        self._pool = _pool(kind, input_file)  # checks the kind and reads the file first
        self.kind = kind
        self.rng = rng
        self.input_tokens_mean = input_tokens_mean
        self.input_tokens_stddev = input_tokens_stddev
        self._index = 0

    def next(self) -> Prompt:
        if self.kind == "synthetic":
            n = sample_length(self.rng, self.input_tokens_mean, self.input_tokens_stddev)
            return Prompt(synthetic_text(self.rng, n), "synthetic")
        if self.kind == "builtin":  # random order, so short runs still mix categories
            return self.rng.choice(self._pool)
        prompt = self._pool[self._index % len(self._pool)]  # a file is replayed in order
        self._index += 1
        return prompt


def _pool(kind: str, input_file: str | None) -> list[Prompt]:
    """The prompts a source draws from ([] for synthetic text, made per request)."""
    if kind == "builtin":
        return [
            Prompt(text, category) for category, texts in BUILTIN_PROMPTS.items() for text in texts
        ]
    if kind == "file":
        if not input_file:
            raise UserError("--prompt-source file needs --input-file FILE")
        return load_jsonl_prompts(input_file)
    if kind == "synthetic":
        return []
    raise UserError(f"unknown prompt source '{kind}' (synthetic, builtin or file)")


def load_jsonl_prompts(path: str) -> list[Prompt]:
    """Read {"text", "category", "max_tokens"} lines; a bad line is a UserError naming it."""
    lines = read_bounded(path).splitlines()
    prompts = [p for number, line in enumerate(lines, 1) if (p := _parse_line(path, number, line))]
    if not prompts:
        raise UserError(f"input file {path}: no prompts (expected one JSON object a line)")
    return prompts


def _parse_line(path: str, number: int, line: bytes) -> Prompt | None:
    if not line.strip():
        return None
    where = f"input file {path} line {number}"
    try:
        obj = json_object(line)
    except ValueError as exc:
        raise UserError(f"{where}: {exc}") from None
    unknown = set(obj) - {"text", "category", "max_tokens"}
    if unknown:
        raise UserError(f"{where}: unknown key '{sorted(unknown)[0]}' (text, category, max_tokens)")
    text, category, max_tokens = obj.get("text"), obj.get("category"), obj.get("max_tokens")
    if not isinstance(text, str) or not text.strip():
        raise UserError(f"{where}: 'text' must be a non-empty string")
    if category is not None and not isinstance(category, str):
        raise UserError(f"{where}: 'category' must be a string")
    if category is not None and (bad := control_character(category)) is not None:
        raise UserError(f"{where}: 'category' holds the control character {bad}")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise UserError(f"{where}: 'max_tokens' must be a positive integer")
    return Prompt(text, category, max_tokens)
