"""The adapter interface (exactly as the seed gives it) and the parsed-response type.

An adapter is the only code that knows an engine's wire shape. It sees every parsed
response of one request (JSON body, or each SSE `data:` object in arrival order) and
either claims the payload by its engine-specific signature or defers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from specmon.specdecode.record import SpecDecodeAcceptanceRecord


@dataclass(frozen=True, slots=True)
class ParsedResponse:
    """One JSON body or one SSE `data:` object of a request, as received."""

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

    The adapter's public `adapt` catches it, counts `kind` and returns None.
    """

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind
        self.detail = detail
