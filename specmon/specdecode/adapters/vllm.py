"""vLLM: both wire shapes vLLM has used for per-request spec-decode stats.

(a) merged (vLLM >= 0.32, `--per-request-spec-decode-metrics summary|detailed`):
    response-root `metrics.speculative_decoding`, dense list histogram of length k+1;
    streaming: only on the final usage chunk (`choices: []`).
(b) legacy per-choice `choices[i].speculative_decoding_stats` with a sparse string-keyed
    histogram; streaming: on the finish-reason chunk's choice.
Both carry the same field names; mean and rate are taken verbatim (docs/metrics.md §10).
"""

from __future__ import annotations

from typing import Any

from specmon.checks import is_count
from specmon.specdecode.adapters.base import (
    AdapterRejection,
    ParsedResponse,
    SpecDecodeAdapter,
    completion_tokens,
    dense_histogram,
    require,
    response_data,
    sparse_histogram,
)
from specmon.specdecode.record import SpecDecodeAcceptanceRecord

# All three must be present (as keys) to claim; mean_acceptance_length keeps vLLM off
# TensorRT-LLM payloads, which have no such key.
SIGNATURE = ("acceptance_histogram", "num_spec_steps", "mean_acceptance_length")

MERGED = "merged"
LEGACY = "legacy"


def _signed(obj: Any) -> bool:
    return isinstance(obj, dict) and all(key in obj for key in SIGNATURE)


def _merged_payload(data: dict[str, Any]) -> dict[str, Any] | None:
    metrics = data.get("metrics")  # `"metrics": null` (n > 1, flag off) counts as absent
    if not isinstance(metrics, dict):
        return None
    payload = metrics.get("speculative_decoding")
    return payload if _signed(payload) else None


class VLLMSpecDecodeAdapter(SpecDecodeAdapter):
    engine = "vllm"
    priority = 100

    @classmethod
    def payloads(cls, responses: list[ParsedResponse]) -> list[tuple[str, dict[str, Any]]]:
        """Every signed payload in arrival order; the merged shape wins if both appear.

        The merged scan is one dict lookup per response; the per-choice legacy scan runs
        only when no merged payload exists, since the merged ones would win anyway.
        """
        datas = response_data(responses)
        merged = [
            (MERGED, payload)
            for data in datas
            if "metrics" in data and (payload := _merged_payload(data)) is not None
        ]
        if merged:
            return merged
        return [
            (LEGACY, stats)
            for data in datas
            if (choices := data.get("choices")) and isinstance(choices, list)
            for choice in choices
            if isinstance(choice, dict)
            and (stats := choice.get("speculative_decoding_stats"))
            and _signed(stats)
        ]

    @classmethod
    def raw_payload(cls, payload: tuple[str, Any]) -> Any:
        return payload[1]  # (shape, wire object)

    @classmethod
    def build(
        cls, payload: tuple[str, dict[str, Any]], responses: list[ParsedResponse]
    ) -> SpecDecodeAcceptanceRecord:
        shape, stats = payload
        k = stats.get("num_spec_tokens")
        raw_hist = require(stats, "acceptance_histogram")
        if shape == MERGED:
            histogram = dense_histogram(raw_hist, k)
        else:
            histogram = sparse_histogram(raw_hist)
            if is_count(k) and histogram and max(histogram) > k:
                # the sparse twin of the dense length check: no bucket above k
                raise AdapterRejection(
                    "histogram_length", f"bucket {max(histogram)} > num_spec_tokens {k}"
                )
        return SpecDecodeAcceptanceRecord.checked(
            engine=cls.record_engine(),
            mean_acceptance_length=require(stats, "mean_acceptance_length"),
            draft_acceptance_rate=require(stats, "draft_acceptance_rate"),
            acceptance_histogram=histogram,
            num_accepted_draft_tokens=require(stats, "num_accepted_draft_tokens"),
            num_draft_tokens=require(stats, "num_draft_tokens"),
            num_spec_steps=require(stats, "num_spec_steps"),
            num_spec_tokens=k,
            completion_tokens=completion_tokens(responses),
            # null at `summary` level counts as absent
            per_step_accepted=stats.get("per_step_accepted"),
            per_step_drafted=stats.get("per_step_drafted"),
        )
