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

from specmon.specdecode.adapters.base import (
    OneReportAdapter,
    ParsedResponse,
    completion_tokens,
    counts,
)
from specmon.specdecode.record import SpecDecodeAcceptanceRecord

ACCEPTED = "accepted_prediction_tokens"
REJECTED = "rejected_prediction_tokens"


class OpenAIPredictionsAdapter(OneReportAdapter):
    engine = "openai"
    # Below every engine's own shape: a gateway may add these counts beside the richer
    # payload it read them from, and the richer one must win.
    priority = 10

    @classmethod
    def report(cls, data: dict[str, Any]) -> dict[str, Any] | None:
        usage = data.get("usage")  # request-level: one report per request
        details = usage.get("completion_tokens_details") if isinstance(usage, dict) else None
        if not isinstance(details, dict) or ACCEPTED not in details or REJECTED not in details:
            return None
        if details[ACCEPTED] == 0 and details[REJECTED] == 0:
            return None  # OpenAI's default answer, not a spec-decode report
        return details

    @classmethod
    def build(
        cls, details: dict[str, Any], responses: list[ParsedResponse]
    ) -> SpecDecodeAcceptanceRecord:
        accepted, rejected = counts(details, ACCEPTED, REJECTED)
        drafted = accepted + rejected
        return SpecDecodeAcceptanceRecord.checked(
            engine=cls.engine,
            draft_acceptance_rate=accepted / drafted,
            num_accepted_draft_tokens=accepted,
            num_draft_tokens=drafted,
            completion_tokens=completion_tokens(responses),
        )
