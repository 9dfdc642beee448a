"""The engine-neutral per-request acceptance record (AIPerf's SpecDecodeAcceptanceRecord).

One record per request. It is a histogram, not per-position arrays, so it survives
variable-length and tree drafting. The invariants are exact integer identities
(aiperf-semantics.md §2.2); floats are taken verbatim and never cross-checked.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator, model_validator


class SpecDecodeAcceptanceRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    engine: str
    mean_acceptance_length: float
    draft_acceptance_rate: float  # a fraction 0..1, never a percentage
    acceptance_histogram: dict[int, int]  # sparse: accepted drafts j -> steps; zero buckets omitted
    num_accepted_draft_tokens: int
    num_draft_tokens: int
    num_spec_steps: int
    num_spec_tokens: int | None = None
    completion_tokens: int | None = None
    per_step_accepted: list[int] | None = None
    per_step_drafted: list[int] | None = None

    @field_validator("mean_acceptance_length", "draft_acceptance_rate", mode="before")
    @classmethod
    def _finite_real(cls, v: Any) -> float:
        # bool is an int subclass; a bool here is a malformed payload, not 0/1.
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"expected a number, got {type(v).__name__}")
        try:
            value = float(v)  # a huge JSON int overflows here: malformed, not a crash
        except OverflowError:
            raise ValueError("number too large") from None
        if not math.isfinite(value):
            raise ValueError("must be finite")
        if value < 0:
            raise ValueError("must be >= 0")
        return value

    @field_validator("draft_acceptance_rate", mode="after")
    @classmethod
    def _fraction(cls, v: float) -> float:
        # A fraction (§2.1); 56.25 here would be a percentage sent by mistake.
        if v > 1.0:
            raise ValueError("draft_acceptance_rate must be a fraction in 0..1")
        return v

    @field_validator(
        "num_accepted_draft_tokens", "num_draft_tokens", "num_spec_steps",
        "num_spec_tokens", "completion_tokens", mode="before",
    )
    @classmethod
    def _count(cls, v: Any) -> int | None:
        if v is None:
            return None
        return _strict_count(v)

    @field_validator("acceptance_histogram", mode="before")
    @classmethod
    def _histogram(cls, v: Any) -> dict[int, int]:
        if not isinstance(v, dict):
            raise ValueError("acceptance_histogram must be a mapping")
        out: dict[int, int] = {}
        for key, count in v.items():
            j = _strict_count(key)
            n = _strict_count(count)
            if n:
                out[j] = out.get(j, 0) + n
        return dict(sorted(out.items()))

    @field_validator("per_step_accepted", "per_step_drafted", mode="before")
    @classmethod
    def _per_step(cls, v: Any) -> list[int] | None:
        if v is None:
            return None
        if not isinstance(v, list):
            raise ValueError("per-step values must be a list")
        return [_strict_count(x) for x in v]

    @model_validator(mode="after")
    def _invariants(self) -> "SpecDecodeAcceptanceRecord":
        hist = self.acceptance_histogram
        if sum(hist.values()) != self.num_spec_steps:
            raise ValueError("histogram counts do not sum to num_spec_steps")
        if sum(j * n for j, n in hist.items()) != self.num_accepted_draft_tokens:
            raise ValueError("sum of j*H[j] != num_accepted_draft_tokens")
        if self.num_accepted_draft_tokens > self.num_draft_tokens:
            raise ValueError("num_accepted_draft_tokens exceeds num_draft_tokens")
        acc, dra = self.per_step_accepted, self.per_step_drafted
        if acc is not None:
            if len(acc) != self.num_spec_steps or sum(acc) != self.num_accepted_draft_tokens:
                raise ValueError("per_step_accepted disagrees with steps/accepted")
        if dra is not None:
            if len(dra) != self.num_spec_steps or sum(dra) != self.num_draft_tokens:
                raise ValueError("per_step_drafted disagrees with steps/draft tokens")
        if acc is not None and dra is not None and any(a > d for a, d in zip(acc, dra)):
            raise ValueError("a step accepted more drafts than it proposed")
        return self

    def to_export_dict(self) -> dict[str, Any]:
        """The JSONL `spec_decode_acceptance` struct: string histogram keys, None fields omitted."""
        d = self.model_dump(exclude_none=True)
        d["acceptance_histogram"] = {str(j): n for j, n in self.acceptance_histogram.items()}
        return d


def _strict_count(v: Any) -> int:
    """A non-negative int. Rejects bools, floats (even 3.0), strings and None."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"expected a non-negative integer, got {v!r}")
    if v < 0:
        raise ValueError(f"negative count {v}")
    return v


def record_from_export_dict(d: dict[str, Any]) -> SpecDecodeAcceptanceRecord:
    """Inverse of to_export_dict (also reads AIPerf's JSONL struct, nulls included)."""
    data = {k: v for k, v in d.items() if v is not None}
    hist = data.get("acceptance_histogram", {})
    if isinstance(hist, dict):
        data["acceptance_histogram"] = {int(k): v for k, v in hist.items()}
    return SpecDecodeAcceptanceRecord(**data)
