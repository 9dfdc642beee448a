"""The order a dataset's questions are sent in, and multi-turn conversations.

Each row is sent once per pass, in file order (`sequential`) or in a seeded shuffled order
(`random`: a fresh permutation each pass, so every row still goes once a pass). With
`--dataset-turns all`, a row's turn n+1 becomes ready only when turn n's answer is back;
it is sent with the whole history (user turns and the model's own answers), as MT-Bench
does. A turn that fails ends its conversation. docs/datasets.md describes the rules.
"""

from __future__ import annotations

import random
from collections import deque

from specmon.capture import RawCapture
from specmon.sources.datasets.formats import DatasetRow
from specmon.sources.load.datasets import Prompt

SAMPLINGS = ("sequential", "random")
TURN_MODES = ("first", "all")


class ConversationSource:
    """Prompts from dataset rows; `next()` is None while only follow-up turns are left and
    their previous answers are still out (the caller waits for a completion)."""

    def __init__(
        self,
        rows: list[DatasetRow],
        rng: random.Random,
        *,
        all_turns: bool = False,
        sampling: str = "sequential",
    ) -> None:
        self.rows = rows
        self.rng = rng
        self.all_turns = all_turns
        self.sampling = sampling
        self.passes = 0
        self._order: list[int] = []
        self._pos = 0
        self._ready: deque[Prompt] = deque()  # follow-up turns whose history is complete
        self._open: dict[int, DatasetRow] = {}  # conversation key -> row, while a turn is out
        self._keys = 0

    @property
    def requests_per_pass(self) -> int:
        """Requests that send every selected row (every turn with --dataset-turns all)."""
        if self.all_turns:
            return sum(len(row.turns) for row in self.rows)
        return len(self.rows)

    def next(self) -> Prompt | None:
        if self._ready:
            return self._ready.popleft()
        if self._pos >= len(self._order):
            if self._open:  # finish this pass's conversations before the next pass
                return None
            self._new_pass()
        row = self.rows[self._order[self._pos]]
        self._pos += 1
        return self._turn(row, 0, _start_history(row))

    def answered(self, prompt: Prompt, answer: str | None) -> None:
        """Turn `prompt.turn` got `answer` (None: it failed, the conversation ends)."""
        if prompt.conversation is None:
            return
        row = self._open.pop(prompt.conversation, None)
        if row is None or answer is None:
            return
        history = prompt.history + (("user", prompt.text), ("assistant", answer))
        self._ready.append(self._turn(row, prompt.turn or 1, history))

    def _new_pass(self) -> None:
        self._order = list(range(len(self.rows)))
        if self.sampling == "random":
            self.rng.shuffle(self._order)
        self._pos = 0
        self.passes += 1

    def _turn(self, row: DatasetRow, index: int, history: tuple[tuple[str, str], ...]) -> Prompt:
        key = None
        if self.all_turns and index + 1 < len(row.turns):
            key = self._keys = self._keys + 1
            self._open[key] = row
        return Prompt(
            row.turns[index],
            row.category,
            row.output_tokens[index],
            question_id=row.question_id,
            turn=index + 1,
            history=history,
            conversation=key,
        )


def _start_history(row: DatasetRow) -> tuple[tuple[str, str], ...]:
    return (("system", row.system),) if row.system else ()


def answer_text(capture: RawCapture) -> str | None:
    """The assistant text of a finished request (streamed deltas joined); None on error."""
    if capture.error is not None:
        return None
    parts: list[str] = []
    for response in capture.responses or ():
        choices = response.get("choices") if isinstance(response, dict) else None
        if not choices or not isinstance(choices[0], dict):
            continue  # e.g. the usage-only chunk
        choice = choices[0]
        for key in ("message", "delta"):
            inner = choice.get(key)
            if isinstance(inner, dict) and isinstance(inner.get("content"), str):
                parts.append(inner["content"])
        if isinstance(choice.get("text"), str):
            parts.append(choice["text"])
    return "".join(parts)
