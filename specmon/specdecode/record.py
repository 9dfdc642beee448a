"""The engine-neutral per-request acceptance record (AIPerf's SpecDecodeAcceptanceRecord).

One record per request. It is a histogram, not per-position arrays, so it survives
variable-length and tree drafting. The invariants are exact integer identities
(docs/metrics.md §10); counts past 2^63-1 are malformed. The reported floats are kept
verbatim; one that contradicts the record's own counts by more than rounding makes the
record `contested` (self_contradiction, checked by the adapter registry).

An engine that reports counts only (accepted and proposed drafts, no verify steps: the
OpenAI-standard usage counts, llama.cpp's timings) gives a record whose num_spec_steps,
acceptance_histogram and mean_acceptance_length are None: absent, never invented. Such a
record carries none of the step-based fields at all; `fidelity` says which level a record
has (specmon/specdecode/fidelity.py).
"""

from __future__ import annotations

import math
import operator
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator, model_validator

from specmon.checks import is_count, is_int
from specmon.specdecode.fidelity import fidelity_of


class SpecDecodeAcceptanceRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    engine: str
    mean_acceptance_length: float | None = None  # None: counts only (no verify steps)
    draft_acceptance_rate: float  # a fraction 0..1, never a percentage
    # sparse: accepted drafts j -> steps; zero buckets omitted; None: counts only
    acceptance_histogram: dict[int, int] | None = None
    num_accepted_draft_tokens: int
    num_draft_tokens: int
    num_spec_steps: int | None = None
    num_spec_tokens: int | None = None
    completion_tokens: int | None = None
    per_step_accepted: list[int] | None = None
    per_step_drafted: list[int] | None = None
    # specmon's: the server uses a verification mode whose acceptance is not comparable
    # with exact verification (fidelity.verification_notes); None when it says none
    verification_note: str | None = None

    @field_validator("mean_acceptance_length", "draft_acceptance_rate", mode="before")
    @classmethod
    def _finite_real(cls, v: Any, info: ValidationInfo) -> float | None:
        if v is None and info.field_name == "mean_acceptance_length":
            return None  # a counts-only record has no acceptance length
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
    def _fraction(cls, v: float | None) -> float | None:
        # A fraction (docs/metrics.md §10); 56.25 here would be a percentage sent by mistake.
        if v is not None and v > 1.0:
            raise ValueError("draft_acceptance_rate must be a fraction in 0..1")
        return v

    @field_validator(
        "num_accepted_draft_tokens",
        "num_draft_tokens",
        "num_spec_steps",
        "num_spec_tokens",
        "completion_tokens",
        mode="before",
    )
    @classmethod
    def _count(cls, v: Any) -> int | None:
        if v is None:
            return None
        return _strict_count(v)

    @field_validator("acceptance_histogram", mode="before")
    @classmethod
    def _histogram(cls, v: Any) -> dict[int, int] | None:
        if v is None:
            return None
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
    def _invariants(self) -> SpecDecodeAcceptanceRecord:
        if self.num_accepted_draft_tokens > self.num_draft_tokens:
            raise ValueError("num_accepted_draft_tokens exceeds num_draft_tokens")
        hist, steps = self.acceptance_histogram, self.num_spec_steps
        if steps is None or hist is None or self.mean_acceptance_length is None:
            return self._counts_only()
        if sum(hist.values()) != steps:
            raise ValueError("histogram counts do not sum to num_spec_steps")
        if sum(j * n for j, n in hist.items()) != self.num_accepted_draft_tokens:
            raise ValueError("sum of j*H[j] != num_accepted_draft_tokens")
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

    def _counts_only(self) -> SpecDecodeAcceptanceRecord:
        """Without verify steps nothing step-based can be true: all of it must be absent."""
        step_based = (
            self.num_spec_steps,
            self.acceptance_histogram,
            self.mean_acceptance_length,
            self.per_step_accepted,
            self.per_step_drafted,
        )
        if any(v is not None for v in step_based):
            raise ValueError(
                "a counts-only record (no num_spec_steps, histogram or acceptance length) "
                "carries none of them"
            )
        return self

    @property
    def fidelity(self) -> str:
        """per-step, histogram or counts (specmon/specdecode/fidelity.py)."""
        return fidelity_of(self)

    @classmethod
    def checked(cls, **fields: Any) -> SpecDecodeAcceptanceRecord:
        """Build a record, skipping pydantic's Python validators when they could change nothing.

        `_is_canonical` accepts only input every validator above would pass through as is
        (exact types, sorted zero-free histogram, every invariant holding); anything else
        goes through the full constructor, so each rejection and its message stay the
        validators' own. Saves ~12 µs per request on the live path.
        """
        if _is_canonical(fields):
            if fields.get("mean_acceptance_length") is not None:
                fields["mean_acceptance_length"] = float(fields["mean_acceptance_length"])
            fields["draft_acceptance_rate"] = float(fields["draft_acceptance_rate"])
            if fields.get("acceptance_histogram") is not None:
                fields["acceptance_histogram"] = dict(fields["acceptance_histogram"])
            for key in ("per_step_accepted", "per_step_drafted"):
                if fields.get(key) is not None:
                    fields[key] = list(fields[key])
            return cls.model_construct(_fields_set=_shared_fields_set(fields), **fields)
        return cls(**fields)

    def to_export_dict(self) -> dict[str, Any]:
        """The JSONL `spec_decode_acceptance` struct: string histogram keys, None fields omitted."""
        # Built by hand in field order (what model_dump(exclude_none=True) gives, at a third
        # of its cost): this runs once per request on the live path.
        values = self.__dict__
        d = {name: value for name in _FIELD_ORDER if (value := values[name]) is not None}
        if self.acceptance_histogram is not None:
            d["acceptance_histogram"] = {str(j): n for j, n in self.acceptance_histogram.items()}
        for key in ("per_step_accepted", "per_step_drafted"):
            if key in d:
                d[key] = list(d[key])  # a copy, as model_dump makes
        return d


I64_MAX = 2**63 - 1  # a count past int64 is absurd, and overflows every typed total


def _strict_count(v: Any) -> int:
    """A non-negative int up to 2^63-1. Rejects bools, floats (even 3.0), strings, None."""
    if not is_int(v):
        raise ValueError(f"expected a non-negative integer, got {str(v)[:40]}")
    if not is_count(v):
        raise ValueError(f"negative count {v}")
    if v > I64_MAX:
        raise ValueError("count past 2^63-1")
    return v


# How far a server-reported float may sit from what the record's own counts give: rounding
# to a few decimals (a server printing 2.33 for 7/3 + 1), nothing more.
ROUNDING = {"rel_tol": 1e-3, "abs_tol": 5e-3}


def self_contradiction(record: SpecDecodeAcceptanceRecord) -> str | None:
    """Why the record's reported mean_acceptance_length or draft_acceptance_rate cannot be
    its own counts' (1 + accepted / steps, accepted / drafted) by more than rounding; None
    when they agree. Such a record is `contested`: which side is wrong is unknown."""
    accepted, drafted, steps = (
        record.num_accepted_draft_tokens,
        record.num_draft_tokens,
        record.num_spec_steps,
    )
    al = record.mean_acceptance_length
    if al is not None and steps and not math.isclose(al, 1 + accepted / steps, **ROUNDING):
        return (
            f"mean_acceptance_length {al:.6g}, but 1 + accepted/steps = {1 + accepted / steps:.6g}"
        )
    rate = record.draft_acceptance_rate
    if drafted and not math.isclose(rate, accepted / drafted, **ROUNDING):
        return f"draft_acceptance_rate {rate:.6g}, but accepted/drafted = {accepted / drafted:.6g}"
    return None


# The largest num_spec_tokens a record may declare (docs/metrics.md §10): far above any
# engine's draft length (vLLM, SGLang trees and TRT-LLM draft tens of tokens a step), far
# below a corrupt or hostile value such as 2^63-1, which would name an absurd k in the advice.
MAX_NUM_SPEC_TOKENS = 1024


def implausible_k(record: SpecDecodeAcceptanceRecord) -> str | None:
    """Why the record's declared k (num_spec_tokens) cannot be true, or None: past
    MAX_NUM_SPEC_TOKENS, or contradicted by its own counts (more drafts than steps x k, a
    step that drafted or accepted more than k, drafts with k = 0). None when k is absent."""
    return k_contradiction(
        record.num_spec_tokens,
        record.num_draft_tokens,
        record.num_spec_steps,
        max(record.acceptance_histogram or (0,)),
        max(record.per_step_drafted or (0,)),
    )


def k_contradiction(
    k: int | None, drafted: int, steps: int | None, most_accepted: int, most_drafted: int
) -> str | None:
    """implausible_k on plain counts (also what `tune` and `compare` check each JSONL record
    with): `most_accepted` / `most_drafted` are the largest per-step values known (0: none)."""
    if k is None:
        return None
    if k > MAX_NUM_SPEC_TOKENS:
        return f"num_spec_tokens {k} exceeds the maximum {MAX_NUM_SPEC_TOKENS}"
    if k == 0 and drafted:
        return f"num_spec_tokens 0 with {drafted} draft tokens"
    if steps and drafted > steps * k:  # zero steps: a zero_step record, counted as such
        return f"num_draft_tokens {drafted} > num_spec_steps {steps} x num_spec_tokens {k}"
    if most_accepted > k:
        return f"a step accepted {most_accepted} drafts, more than num_spec_tokens {k}"
    if most_drafted > k:
        return f"a step drafted {most_drafted} tokens, more than num_spec_tokens {k}"
    return None


_FIELD_ORDER = tuple(SpecDecodeAcceptanceRecord.model_fields)
_FIELD_NAMES = frozenset(_FIELD_ORDER)
_REQUIRED = frozenset(
    name for name, f in SpecDecodeAcceptanceRecord.model_fields.items() if f.is_required()
)
_INT_ONLY = {int}


# One fields-set per combination of given fields, shared by the records built with it:
# a private 11-name set is 512 bytes per kept request. pydantic never mutates it in place
# (the model is frozen; model_copy copies the set before updating it).
_FIELDS_SETS: dict[tuple[str, ...], set[str]] = {}


def _shared_fields_set(fields: dict[str, Any]) -> set[str]:
    key = tuple(fields)
    shared = _FIELDS_SETS.get(key)
    if shared is None:
        shared = _FIELDS_SETS.setdefault(key, set(key))
    return shared


def _is_count(v: Any) -> bool:
    # The fast path's guard, stricter than checks.is_count on purpose: only an exact int
    # may skip validation; bool and other int subclasses take the validating path.
    return type(v) is int and 0 <= v <= I64_MAX


def _is_real_upto(v: Any, upper: float) -> bool:
    if type(v) is not float and type(v) is not int:
        return False
    try:
        value = float(v)
    except OverflowError:
        return False
    return math.isfinite(value) and 0 <= value <= upper


def _is_count_list(v: Any) -> bool:
    return type(v) is list and (not v or (set(map(type, v)) == _INT_ONLY and min(v) >= 0))


def _is_canonical(f: dict[str, Any]) -> bool:
    """True when SpecDecodeAcceptanceRecord(**f) would succeed and keep every value as is."""
    keys = f.keys()
    if not (_REQUIRED <= keys <= _FIELD_NAMES) or type(f["engine"]) is not str:
        return False
    if not _is_real_upto(f["draft_acceptance_rate"], 1.0):
        return False
    steps, accepted, drafted = (
        f.get("num_spec_steps"),
        f["num_accepted_draft_tokens"],
        f["num_draft_tokens"],
    )
    if not (_is_count(accepted) and _is_count(drafted)) or accepted > drafted:
        return False
    if steps is None:
        return False  # counts only: rare enough to take the validating path
    if not (_is_count(steps) and _is_real_upto(f.get("mean_acceptance_length"), math.inf)):
        return False
    for key in ("num_spec_tokens", "completion_tokens"):
        v = f.get(key)
        if v is not None and not _is_count(v):
            return False
    if not _histogram_holds(f.get("acceptance_histogram"), steps, accepted):
        return False
    return _per_step_holds(
        f.get("per_step_accepted"), f.get("per_step_drafted"), steps, accepted, drafted
    )


def _histogram_holds(hist: Any, steps: int, accepted: int) -> bool:
    """A dict already in the validator's output form (exact-int keys ascending, counts > 0)
    whose counts satisfy both histogram identities."""
    if type(hist) is not dict:
        return False
    previous, total, weighted = -1, 0, 0
    for j, n in hist.items():
        if type(j) is not int or type(n) is not int or j <= previous or n <= 0:
            return False
        previous, total, weighted = j, total + n, weighted + j * n
    return total == steps and weighted == accepted


def _per_step_holds(acc: Any, dra: Any, steps: int, accepted: int, drafted: int) -> bool:
    if acc is not None and not (_is_count_list(acc) and len(acc) == steps and sum(acc) == accepted):
        return False
    if dra is not None and not (_is_count_list(dra) and len(dra) == steps and sum(dra) == drafted):
        return False
    return acc is None or dra is None or all(map(operator.le, acc, dra))


def record_from_export_dict(d: dict[str, Any]) -> SpecDecodeAcceptanceRecord:
    """Inverse of to_export_dict (also reads AIPerf's JSONL struct, nulls included)."""
    data = {k: v for k, v in d.items() if v is not None}
    hist = data.get("acceptance_histogram")
    if isinstance(hist, dict):
        data["acceptance_histogram"] = {int(k): v for k, v in hist.items()}
    return SpecDecodeAcceptanceRecord.checked(**data)
