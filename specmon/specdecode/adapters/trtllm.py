"""TensorRT-LLM: per-choice `choices[i].speculative_decoding` (docs/metrics.md §10).

Streaming: only on the terminal chunk's choice. Fields: acceptance_rate (verbatim),
total_accepted_draft_tokens, total_draft_tokens, num_spec_steps, a dense histogram and
num_spec_tokens (null under a draft-length schedule: only the length check is skipped).
There is no mean acceptance length on the wire; it is derived as 1 + accepted / steps.
"""

from __future__ import annotations

from typing import Any

from specmon.checks import is_count
from specmon.specdecode.adapters.base import (
    AdapterRejection,
    ParsedResponse,
    SpecDecodeAdapter,
    choice_dicts,
    completion_tokens,
    dense_histogram,
    require,
    response_data,
)
from specmon.specdecode.record import SpecDecodeAcceptanceRecord

# Disjoint from vLLM's signature (which needs mean_acceptance_length).
SIGNATURE = ("total_accepted_draft_tokens", "total_draft_tokens")


class TensorRTLLMSpecDecodeAdapter(SpecDecodeAdapter):
    engine = "trtllm"
    priority = 90

    @classmethod
    def payloads(cls, responses: list[ParsedResponse]) -> list[dict[str, Any]]:
        found = []
        for data in response_data(responses):
            for choice in choice_dicts(data):
                stats = choice.get("speculative_decoding")
                if isinstance(stats, dict) and all(key in stats for key in SIGNATURE):
                    found.append(stats)
        return found

    @classmethod
    def build(
        cls, stats: dict[str, Any], responses: list[ParsedResponse]
    ) -> SpecDecodeAcceptanceRecord:
        steps = require(stats, "num_spec_steps")
        accepted = require(stats, "total_accepted_draft_tokens")
        if isinstance(steps, bool) or not isinstance(steps, int):
            raise AdapterRejection("bad_value", f"num_spec_steps={steps!r}")
        if steps <= 0:
            # TRT-LLM omits the block when nothing was drafted, so 0 steps is corruption.
            raise AdapterRejection("zero_steps", f"num_spec_steps={steps}")
        if not is_count(accepted):
            raise AdapterRejection("bad_value", f"total_accepted_draft_tokens={accepted!r}")
        k = stats.get("num_spec_tokens")
        return SpecDecodeAcceptanceRecord.checked(
            engine=cls.record_engine(),
            mean_acceptance_length=1 + accepted / steps,
            draft_acceptance_rate=require(stats, "acceptance_rate"),
            acceptance_histogram=dense_histogram(require(stats, "acceptance_histogram"), k),
            num_accepted_draft_tokens=accepted,
            num_draft_tokens=require(stats, "total_draft_tokens"),
            num_spec_steps=steps,
            num_spec_tokens=k,
            completion_tokens=completion_tokens(responses),
        )
