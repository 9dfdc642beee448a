"""The OpenAI-standard counts: `usage.completion_tokens_details` (docs/metrics.md §10.1).

`accepted_prediction_tokens` / `rejected_prediction_tokens` are OpenAI's Predicted Outputs
fields; the smg gateway (#2481) fills them from SGLang's, vLLM's and TokenSpeed's spec-decode
counts. They are counts only: proposed = accepted + rejected, and no verify steps, so the
record has no acceptance length and no histogram (fidelity `counts`). OpenAI's own API sends
both as 0 on every answer, so a pair of zeros is not claimed: it says nothing was drafted,
or nothing about drafting at all. Streaming: the usage chunk carries them; the last wins.
"""

from __future__ import annotations

from typing import Any

from specmon.specdecode.adapters.base import CountsAdapter, counts

ACCEPTED = "accepted_prediction_tokens"
REJECTED = "rejected_prediction_tokens"


class OpenAIPredictionsAdapter(CountsAdapter):
    engine = "openai"
    # Below every engine's own shape: a gateway may add these counts beside the richer
    # payload it read them from, and the richer one must win.
    priority = 10
    path = ("usage", "completion_tokens_details")  # request-level: one report per request
    keys = (ACCEPTED, REJECTED)

    @classmethod
    def report(cls, data: dict[str, Any]) -> dict[str, Any] | None:
        details = super().report(data)
        if details is not None and details[ACCEPTED] == 0 and details[REJECTED] == 0:
            return None  # OpenAI's default answer, not a spec-decode report
        return details

    @classmethod
    def drafts(cls, details: dict[str, Any]) -> tuple[int, int]:
        accepted, rejected = counts(details, *cls.keys)
        return accepted, accepted + rejected
