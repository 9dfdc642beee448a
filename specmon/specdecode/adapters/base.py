"""The adapter interface (exactly as the seed gives it) and the parsed-response type.

An adapter is the only code that knows an engine's wire shape. It sees every parsed
response of one request (JSON body, or each SSE `data:` object in arrival order) and
either claims the payload by its engine-specific signature or defers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, Protocol, runtime_checkable

from pydantic import ValidationError

from specmon.checks import is_count
from specmon.specdecode.engines import record_name
from specmon.specdecode.record import SpecDecodeAcceptanceRecord


@dataclass(slots=True)
class ParsedResponse:
    """One JSON body or one SSE `data:` object of a request, as received.

    Not frozen: a frozen dataclass's __init__ goes through object.__setattr__ per field,
    which made wrapping a 32-event stream cost ~13 µs instead of ~5. Treat it as read-only.
    """

    data: dict[str, Any]
    perf_ns: int | None = None  # monotonic receive time, when known
    # The request body that was sent, so an adapter can see e.g. `n` (optional).
    request: dict[str, Any] | None = field(default=None, compare=False)


@runtime_checkable
class SpecDecodeAdapterProtocol(Protocol):
    @classmethod
    def can_adapt(cls, responses: list[ParsedResponse]) -> bool: ...

    @classmethod
    def adapt(cls, responses: list[ParsedResponse]) -> SpecDecodeAcceptanceRecord | None: ...


class AdapterRejection(Exception):
    """Raised inside an adapter to reject a malformed payload with a reason kind.

    `SpecDecodeAdapter.adapt` catches it and returns None; detect() counts `kind`
    as the reason `malformed:<kind>`.
    """

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind
        self.detail = detail


# ---------------------------------------------------------------------------------------
# Shared machinery for the built-in adapters (third-party adapters need only the Protocol).

Payload = Any  # whatever one adapter extracts from one response (usually a dict)


def response_data(responses: Any) -> list[dict[str, Any]]:
    """The dict bodies of a request's responses, in arrival order; anything else is skipped.

    Adapters must survive any input (a JSON list body, a None, a non-list), so every
    walk over responses goes through here. A list, built in one comprehension: a
    generator's per-item resume cost showed up in profiles of 32-event streams.
    """
    if not isinstance(responses, (list, tuple)):
        return []
    return [data for r in responses if isinstance(data := getattr(r, "data", None), dict)]


def choice_dicts(data: dict[str, Any]) -> list[dict[str, Any]]:
    choices = data.get("choices")
    if not choices or not isinstance(choices, list):
        return []
    return [c for c in choices if isinstance(c, dict)]


def require(payload: dict[str, Any], key: str) -> Any:
    """A required key; a null value counts as absent (vLLM writes explicit nulls)."""
    value = payload.get(key)
    if value is None:
        raise AdapterRejection("missing_field", key)
    return value


def counts(payload: dict[str, Any], *keys: str, required: bool = False) -> list[int]:
    """Each key's value, every one a count (a non-negative int, not a bool); a value that is
    not one rejects the payload as `bad_value`, naming the key. With `required`, a missing
    or null key is `missing_field` first (`require`), before any value is judged."""
    values = [require(payload, key) if required else payload.get(key) for key in keys]
    checked: list[int] = []
    for key, value in zip(keys, values):
        if not is_count(value):
            raise AdapterRejection("bad_value", f"{key}={value!r}")
        checked.append(value)
    return checked


def completion_tokens(responses: Any) -> int | None:
    """completion_tokens of the LAST non-empty `usage` of the request (None without one).

    A usage whose completion_tokens is not a count gives None rather than sinking an
    otherwise valid spec-decode record: the record only carries it.
    """
    if not isinstance(responses, (list, tuple)):
        return None
    for r in reversed(responses):  # usage rides the last event: stop there, no full copy
        data = getattr(r, "data", None)
        if not isinstance(data, dict):
            continue
        usage = data.get("usage")
        if isinstance(usage, dict) and usage:
            ct = usage.get("completion_tokens")
            return ct if is_count(ct) else None
    return None


def dense_histogram(hist: Any, num_spec_tokens: Any) -> dict[int, int]:
    """Dense list (index j = steps that accepted j drafts) -> sparse {j: count}.

    Every element must be an int and not a bool, checked before zeros are dropped
    (0.0, False, "0" and None are rejected, docs/metrics.md §10). When k is known the
    length must be exactly k + 1, which also forbids buckets above k.
    """
    if not isinstance(hist, list):
        raise AdapterRejection("histogram", f"expected a list, got {type(hist).__name__}")
    for x in hist:
        if not is_count(x):
            raise AdapterRejection("histogram", f"element {x!r} is not a non-negative int")
    if num_spec_tokens is not None:
        if not is_count(num_spec_tokens):
            raise AdapterRejection("bad_value", f"num_spec_tokens={num_spec_tokens!r}")
        if len(hist) != num_spec_tokens + 1:
            raise AdapterRejection(
                "histogram_length",
                f"length {len(hist)} != num_spec_tokens+1 = {num_spec_tokens + 1}",
            )
    return {j: n for j, n in enumerate(hist) if n}


def sparse_histogram(hist: Any) -> dict[int, int]:
    """Sparse string-keyed object {"0": 39, "3": 3} -> {0: 39, 3: 3}; keys must be decimal."""
    if not isinstance(hist, dict):
        raise AdapterRejection("histogram", f"expected an object, got {type(hist).__name__}")
    out: dict[int, int] = {}
    for key, count in hist.items():
        if isinstance(key, str) and key.isascii() and key.isdigit():
            j = int(key)
        elif is_count(key):
            j = key
        else:
            raise AdapterRejection("histogram", f"key {key!r} is not a non-negative integer")
        if not is_count(count):
            raise AdapterRejection("histogram", f"count {count!r} is not a non-negative int")
        if count:
            out[j] = out.get(j, 0) + count
    return out


def validation_kind(exc: ValidationError) -> str:
    """Field-level errors are bad values; model-level ones are contradicting counts."""
    errors = exc.errors()
    if errors and not errors[0].get("loc"):
        return "inconsistent"
    return "bad_value"


class SpecDecodeAdapter:
    """Base for the built-in adapters: find payloads, take the last one, build a record.

    Subclasses set `engine` (the registered name defaults to it; `name` only where the two
    differ) and `priority`, implement `payloads` (every truthy engine payload of the
    request, in arrival order) and `build` (one payload -> record, raising AdapterRejection
    for a malformed one).
    """

    name: ClassVar[str] = ""
    engine: ClassVar[str] = ""
    priority: ClassVar[int] = 0

    @classmethod
    def record_engine(cls) -> str:
        """The `engine` a record of this adapter carries: AIPerf's name for the engine
        (tensorrt_llm for trtllm; the registry's `record_name`), the exports' promise."""
        return record_name(cls.engine)

    @classmethod
    def payloads(cls, responses: list[ParsedResponse]) -> list[Payload]:
        raise NotImplementedError

    @classmethod
    def raw_payload(cls, payload: Payload) -> Any:
        """The wire object inside one extracted payload, as the server sent it."""
        return payload

    @classmethod
    def sequence_count(cls, payloads: list[Payload]) -> int:
        """How many sequences the payloads describe (> 1 means an n > 1 request)."""
        return len(payloads)

    @classmethod
    def build(cls, payload: Payload, responses: list[ParsedResponse]) -> SpecDecodeAcceptanceRecord:
        raise NotImplementedError

    @classmethod
    def can_adapt(cls, responses: list[ParsedResponse]) -> bool:
        return bool(cls.payloads(responses))

    @classmethod
    def adapt(cls, responses: list[ParsedResponse]) -> SpecDecodeAcceptanceRecord | None:
        return cls.adapt_with_reason(responses)[0]

    @classmethod
    def adapt_with_reason(
        cls,
        responses: list[ParsedResponse],
        payloads: list[Payload] | None = None,
    ) -> Adapted:
        """The record, or None with a reason kind and a detail. The last truthy payload wins."""
        if payloads is None:
            payloads = cls.payloads(responses)
        if not payloads:
            return Adapted(None, "absent", "")
        try:
            return Adapted(cls.build(payloads[-1], responses), None, "")
        except AdapterRejection as exc:
            return Adapted(None, exc.kind, exc.detail)
        except ValidationError as exc:
            errors = exc.errors()
            return Adapted(
                None, validation_kind(exc), str(errors[0]["msg"]) if errors else str(exc)
            )
        except (
            KeyError,
            TypeError,
            ValueError,
            AttributeError,
            ZeroDivisionError,
            OverflowError,
        ) as exc:
            return Adapted(None, "bad_value", f"{type(exc).__name__}: {exc}")


class CountsAdapter(SpecDecodeAdapter):
    """Counts only: accepted and proposed draft tokens, no verify steps and no histogram, so
    no acceptance length (fidelity `counts`). Each response carries at most one report on
    the request's one sequence (running totals, or request-level usage): a stream's reports
    are snapshots of that one sequence, so they count once and the last wins.

    Subclasses declare where a body carries the report (`path`, nested objects) and its two
    keys (a report without both is none), and give `drafts`.
    """

    path: ClassVar[tuple[str, ...]] = ()
    keys: ClassVar[tuple[str, str]] = ("", "")

    @classmethod
    def report(cls, data: dict[str, Any]) -> dict[str, Any] | None:
        """The report one response body carries; None without one."""
        obj: Any = data
        for key in cls.path:
            obj = obj.get(key) if isinstance(obj, dict) else None
        if isinstance(obj, dict) and all(key in obj for key in cls.keys):
            return obj
        return None

    @classmethod
    def drafts(cls, report: dict[str, Any]) -> tuple[int, int]:
        """(accepted, drafted) of one report, checked (AdapterRejection otherwise)."""
        raise NotImplementedError

    @classmethod
    def output_tokens(cls, responses: list[ParsedResponse]) -> int | None:
        return completion_tokens(responses)

    @classmethod
    def payloads(cls, responses: list[ParsedResponse]) -> list[dict[str, Any]]:
        return [p for data in response_data(responses) if (p := cls.report(data)) is not None]

    @classmethod
    def sequence_count(cls, payloads: list[Payload]) -> int:
        return 1 if payloads else 0

    @classmethod
    def build(
        cls, report: dict[str, Any], responses: list[ParsedResponse]
    ) -> SpecDecodeAcceptanceRecord:
        accepted, drafted = cls.drafts(report)
        return SpecDecodeAcceptanceRecord.checked(
            engine=cls.record_engine(),
            draft_acceptance_rate=accepted / drafted,
            num_accepted_draft_tokens=accepted,
            num_draft_tokens=drafted,
            completion_tokens=cls.output_tokens(responses),
        )


class Adapted(NamedTuple):
    record: SpecDecodeAcceptanceRecord | None
    kind: str | None  # None on success
    detail: str
