"""llama.cpp's server: root `timings.draft_n` / `draft_n_accepted` (docs/metrics.md §10.1).

Both the native `/completion` body and its OpenAI endpoints carry a root `timings` object
(tools/server/server-task.cpp `result_timings::to_json`); the two draft keys are written
only when the request drafted (`draft_n > 0`). Counts only: no verify steps, no histogram,
so no acceptance length (fidelity `counts`). In a stream each chunk that carries timings
holds the running totals of the one sequence, so the last wins.
"""

from __future__ import annotations

from typing import Any

from specmon.checks import is_count
from specmon.specdecode.adapters.base import (
    AdapterRejection,
    CountsAdapter,
    ParsedResponse,
    completion_tokens,
    counts,
    response_data,
)

DRAFTED = "draft_n"
ACCEPTED = "draft_n_accepted"


class LlamaCppSpecDecodeAdapter(CountsAdapter):
    engine = "llamacpp"
    priority = 20
    path = ("timings",)  # running totals of the one sequence
    keys = (DRAFTED, ACCEPTED)

    @classmethod
    def drafts(cls, timings: dict[str, Any]) -> tuple[int, int]:
        drafted, accepted = counts(timings, *cls.keys)
        if accepted > drafted:
            raise AdapterRejection("inconsistent", f"{ACCEPTED}={accepted} > {DRAFTED}={drafted}")
        if drafted == 0:
            raise AdapterRejection("zero_drafts", "draft_n=0 (llama.cpp omits the keys then)")
        return accepted, drafted

    @classmethod
    def output_tokens(cls, responses: list[ParsedResponse]) -> int | None:
        """OpenAI endpoints: usage.completion_tokens; native /completion: tokens_predicted."""
        tokens = completion_tokens(responses)
        if tokens is not None:
            return tokens
        for data in reversed(response_data(responses)):
            predicted = data.get("tokens_predicted")
            if is_count(predicted):
                return int(predicted)
        return None
