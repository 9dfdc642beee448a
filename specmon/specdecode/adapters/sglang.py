"""SGLang (docs/metrics.md §10; facts from SGLang's own code, AIPerf has no adapter).

Two surfaces carry the same counts:
* OpenAI endpoints with `"return_spec_tokens_details": true` in the request: response-root
  `sglext.spec_tokens_details`, an object for n = 1 and a list (one per choice) for n > 1.
* native `/generate`: `meta_info` with spec_verify_ct, spec_accept_token_num,
  spec_draft_token_num, spec_accept_histogram (and spec_accept_rate); newer SGLang writes
  the sglext names there too (spec_num_correct_drafts, spec_num_proposed_drafts =
  verify_ct x (draft tokens - 1), spec_correct_drafts_histogram, with the old
  spec_accept_histogram as an alias), read as the surface `meta_info_v2`.
The mean acceptance length is derived from the counts (1 + accepted / steps), never from
spec_accept_length, which divides completion_tokens and so counts the prefill token.
"""

from __future__ import annotations

from typing import Any

from specmon.specdecode.adapters.base import (
    AdapterRejection,
    ParsedResponse,
    SpecDecodeAdapter,
    completion_tokens,
    counts,
    dense_histogram,
    require,
    response_data,
)
from specmon.specdecode.record import SpecDecodeAcceptanceRecord

SGLEXT = "sglext"
META = "meta_info"
META_V2 = "meta_info_v2"  # meta_info under the sglext field names

# surface -> (signature keys, field mapping onto the record's counts)
FIELDS = {
    SGLEXT: {
        "steps": "spec_verify_ct",
        "accepted": "spec_num_correct_drafts",
        "drafted": "spec_num_proposed_drafts",
        "histogram": "spec_correct_drafts_histogram",
        "rate": "spec_accept_rate",
    },
    META: {
        "steps": "spec_verify_ct",
        "accepted": "spec_accept_token_num",
        "drafted": "spec_draft_token_num",
        "histogram": "spec_accept_histogram",
        "rate": "spec_accept_rate",
    },
    META_V2: {
        "steps": "spec_verify_ct",
        "accepted": "spec_num_correct_drafts",
        "drafted": "spec_num_proposed_drafts",
        "histogram": "spec_correct_drafts_histogram",
        "rate": "spec_accept_rate",
    },
}
SIGNATURE = {
    SGLEXT: ("spec_verify_ct", "spec_num_correct_drafts"),
    META: ("spec_verify_ct", "spec_accept_token_num", "spec_draft_token_num"),
    META_V2: ("spec_verify_ct", "spec_num_correct_drafts", "spec_num_proposed_drafts"),
}


def _signed(surface: str, obj: Any) -> bool:
    return isinstance(obj, dict) and all(key in obj for key in SIGNATURE[surface])


def _sglext_payloads(data: dict[str, Any]) -> list[tuple[str, Any]]:
    ext = data.get(SGLEXT)
    details = ext.get("spec_tokens_details") if isinstance(ext, dict) else None
    if _signed(SGLEXT, details):
        return [(SGLEXT, details)]
    if isinstance(details, list):
        signed = [d for d in details if _signed(SGLEXT, d)]
        if len(signed) == 1:
            return [(SGLEXT, signed[0])]
        if signed:  # the n > 1 list form: one object per choice
            return [("list", signed)]
    return []


class SGLangSpecDecodeAdapter(SpecDecodeAdapter):
    engine = "sglang"
    priority = 80

    @classmethod
    def payloads(cls, responses: list[ParsedResponse]) -> list[tuple[str, Any]]:
        found: list[tuple[str, Any]] = []
        for data in response_data(responses):
            found.extend(_sglext_payloads(data))
            meta = data.get(META)
            if _signed(META, meta):
                found.append((META, meta))
            elif _signed(META_V2, meta):
                found.append((META_V2, meta))
        return found

    @classmethod
    def sequence_count(cls, payloads: list[tuple[str, Any]]) -> int:
        # SGLang marks n > 1 with the list form; repeated objects across stream chunks are
        # cumulative snapshots of the one sequence (native /generate repeats meta_info on
        # every chunk), so they count once and the last wins.
        if any(surface == "list" for surface, _ in payloads):
            return max(len(p) for surface, p in payloads if surface == "list")
        return 1 if payloads else 0

    @classmethod
    def raw_payload(cls, payload: tuple[str, Any]) -> Any:
        return payload[1]  # (shape, wire object)

    @classmethod
    def build(
        cls, payload: tuple[str, Any], responses: list[ParsedResponse]
    ) -> SpecDecodeAcceptanceRecord:
        surface, stats = payload
        if surface == "list":  # reached only through adapt(); detect() stops at n_gt_1
            raise AdapterRejection("n_gt_1", "one spec_tokens_details object per choice")
        names = FIELDS[surface]
        keys = (names["steps"], names["accepted"], names["drafted"])
        steps, accepted, drafted = counts(stats, *keys, required=True)
        rate = stats.get(names["rate"])
        if rate is None:
            rate = accepted / drafted if drafted else 0.0
        return SpecDecodeAcceptanceRecord.checked(
            engine=cls.record_engine(),
            mean_acceptance_length=1 + accepted / steps if steps else 1.0,
            draft_acceptance_rate=rate,
            # SGLang reports no k; the histogram's length (block size + 1) is not checked.
            acceptance_histogram=dense_histogram(require(stats, names["histogram"]), None),
            num_accepted_draft_tokens=accepted,
            num_draft_tokens=drafted,
            num_spec_steps=steps,
            completion_tokens=completion_tokens(responses),
        )
