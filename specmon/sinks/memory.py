"""What a kept result holds after the writers have seen it: the response bodies and the
prompt are released (100k streamed requests would otherwise hold every SSE chunk), and the
spec-decode wire object is kept only for the newest PAYLOAD_WINDOW results with a record
(and for good for those without one, where the raw payload says why) for the drill-down.

Registered after the writers and before the accumulator, so the writers see the whole
capture and the screen (which reads the accumulator's results) never sees one change."""

from __future__ import annotations

from collections import deque
from typing import Any

from specmon.capture import RawCapture
from specmon.pipeline import RequestResult
from specmon.sinks.base import BaseSink

PAYLOAD_WINDOW = 2_000  # newest results whose raw spec-decode payload is kept
_PROMPT_KEYS = ("messages", "prompt")


class ReleaseBodies(BaseSink):
    def __init__(self, payload_window: int = PAYLOAD_WINDOW) -> None:
        self.payload_window = payload_window
        self._window: deque[RequestResult] = deque()

    def on_result(self, result: RequestResult, capture: RawCapture | None) -> None:
        if capture is not None:
            capture.responses = []
            capture.response_ns = None  # ~1.4 kB for 32 events; the result has its times
            capture.request = without_prompt(capture.request)
        self._bound_payloads(result)

    def _bound_payloads(self, result: RequestResult) -> None:
        outcome = result.outcome
        if outcome.payload is None or result.spec is None:
            return  # nothing kept, or a rejected/zero-step payload: kept for good
        window = self._window
        window.append(result)
        if len(window) > self.payload_window:
            window.popleft().outcome.payload = None


def without_prompt(request: dict[str, Any]) -> dict[str, Any]:
    """The request body minus its prompt, once written: a synthetic 550-token prompt is
    ~3 kB of unique text per request, more than everything else a kept result holds. The
    raw capture (--export-level raw) has the whole body."""
    if not any(key in request for key in _PROMPT_KEYS):
        return request
    return {key: value for key, value in request.items() if key not in _PROMPT_KEYS}
