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
    OneReportAdapter,
    ParsedResponse,
    completion_tokens,
    counts,
    response_data,
)
from specmon.specdecode.record import SpecDecodeAcceptanceRecord

DRAFTED = "draft_n"
ACCEPTED = "draft_n_accepted"


def _completion_tokens(responses: list[ParsedResponse]) -> int | None:
    """OpenAI endpoints: usage.completion_tokens; native /completion: tokens_predicted."""
    tokens = completion_tokens(responses)
    if tokens is not None:
        return tokens
    for data in reversed(response_data(responses)):
        predicted = data.get("tokens_predicted")
        if is_count(predicted):
            return int(predicted)
    return None


class LlamaCppSpecDecodeAdapter(OneReportAdapter):
    engine = "llamacpp"
    priority = 20

    @classmethod
    def report(cls, data: dict[str, Any]) -> dict[str, Any] | None:
        timings = data.get("timings")  # running totals of the one sequence
        if isinstance(timings, dict) and DRAFTED in timings and ACCEPTED in timings:
            return timings
        return None

    @classmethod
    def build(
        cls, timings: dict[str, Any], responses: list[ParsedResponse]
    ) -> SpecDecodeAcceptanceRecord:
        drafted, accepted = counts(timings, DRAFTED, ACCEPTED)
        if accepted > drafted:
            raise AdapterRejection("inconsistent", f"{ACCEPTED}={accepted} > {DRAFTED}={drafted}")
        if drafted == 0:
            raise AdapterRejection("zero_drafts", "draft_n=0 (llama.cpp omits the keys then)")
        return SpecDecodeAcceptanceRecord.checked(
            engine=cls.engine,
            draft_acceptance_rate=accepted / drafted,
            num_accepted_draft_tokens=accepted,
            num_draft_tokens=drafted,
            completion_tokens=_completion_tokens(responses),
        )
