"""The load path's HTTP client: aiohttp + orjson, SSE parsed by hand on bytes.

Chosen by `benchmarks/bench_load.py --clients` (docs/performance.md): on this machine a bare
aiohttp + uvloop + orjson client reached 4,300 req/s at concurrency 64 where httpx managed
240 (its pool scans every connection per request). One TCPConnector sized to the concurrency keeps connections alive.

Every request fills one `RawCapture` (specmon/capture.py, the raw-capture format of
docs/architecture.md), the typed record that travels to the pipeline. Errors
are classified, never raised (one the wire does not name is `client_error`): the run goes on. Only the parsed JSON objects are kept, not the
bytes they came from.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import replace
from typing import Any

import aiohttp
import orjson

from specmon.capture import RawCapture

ENDPOINT_PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
_ERROR_BODY_LIMIT = 2048  # bytes of an error body worth keeping for its message
MAX_RESPONSE_BYTES = 64 * 2**20  # --max-response-bytes' default: a body past it is an error


def new_capture(endpoint: str, streaming: bool, body: dict[str, Any], **tags: Any) -> RawCapture:
    """A request about to be sent: its body and tags (RawCapture's fields: category, dataset
    row, phase, server, worker, segment), no answer yet."""
    return RawCapture(
        endpoint, streaming, body, status=0, start_ns=0, response_ns=[], end_ns=0, **tags
    )


def again(capture: RawCapture) -> RawCapture:
    """A new attempt of the same request: same body and tags; new id, stamps and answer."""
    return replace(
        capture,
        status=0,
        responses=[],
        start_ns=0,
        response_ns=[],
        end_ns=0,
        error=None,
        x_request_id=None,
        wall_start_ns=None,
    )


def error_message(status: int, raw: bytes) -> str:
    """The message of an OpenAI-style error body, else the start of the body."""
    text = raw[:_ERROR_BODY_LIMIT]
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        obj = None
    message = None
    if isinstance(obj, dict):
        inner = obj.get("error")
        if isinstance(inner, dict):
            message = inner.get("message")
        elif isinstance(inner, str):
            message = inner
        message = message or obj.get("message") or obj.get("detail")
    if not message:
        message = text.decode("utf-8", "replace").strip()[:200] or "(empty body)"
    return f"HTTP {status}: {message}"


def http_error(status: int, raw: bytes, headers: Any) -> dict[str, Any]:
    """The capture's error for an HTTP error status; a 429 says it is rate limiting and
    carries its Retry-After (seconds; the generator waits that long, capped)."""
    error: dict[str, Any] = {"type": "http_error", "message": error_message(status, raw)}
    if status == 429:
        after = retry_after_header(headers.get("Retry-After"))
        error["retry_after_s"] = after
        shown = f"Retry-After {after:g} s" if after is not None else "no Retry-After"
        error["message"] = f"rate-limited by the server ({shown}): " + error["message"]
    return error


def retry_after_header(value: str | None) -> float | None:
    """Retry-After in seconds (an HTTP date or garbage: None)."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds < float("inf") else None


class SSEParser:
    """Incremental `text/event-stream` parser over bytes.

    Events are separated by a blank line; only `data:` lines matter (joined by newlines),
    `:` comment lines and other fields are ignored, and `[DONE]` ends the stream.
    """

    __slots__ = ("_buffer", "_cr", "done")

    def __init__(self) -> None:
        self._buffer = b""
        self._cr = False  # the last chunk ended in CR: its LF may be the next chunk's start
        self.done = False

    def feed(self, chunk: bytes) -> list[bytes]:
        """Return the data payloads of every event completed by this chunk."""
        if self._cr:
            chunk, self._cr = b"\r" + chunk, False
        if chunk[-1:] == b"\r":  # held back: CR LF split across two reads is one line end
            chunk, self._cr = chunk[:-1], True
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buffer = self._buffer + chunk if self._buffer else chunk
        events = buffer.split(b"\n\n")
        self._buffer = events.pop()  # an incomplete tail waits for the next chunk
        payloads = []
        for event in events:
            data: bytes | None
            if event.startswith(b"data: ") and b"\n" not in event:
                data = event[6:]  # the common one-line event, without the general scan
            else:
                data = self._data_of(event)
                if data is None:
                    continue
            if data[:1] == b"[" and data.strip() == b"[DONE]":
                self.done = True
                break
            payloads.append(data)
        return payloads

    def finish(self) -> list[bytes]:
        """Flush an event the server did not terminate with a blank line."""
        tail, self._buffer = self._buffer + (b"\n" if self._cr else b""), b""
        self._cr = False
        if self.done or not tail.strip():
            return []
        return self.feed(tail + b"\n\n")

    @staticmethod
    def _data_of(event: bytes) -> bytes | None:
        parts = []
        for line in event.split(b"\n"):
            if line.startswith(b"data:"):
                value = line[5:]
                parts.append(value[1:] if value.startswith(b" ") else value)
        return b"\n".join(parts) if parts else None


class LoadClient:
    """One aiohttp session per event loop; `send` fills one capture per request."""

    def __init__(
        self,
        base_url: str,
        *,
        max_connections: int,
        request_timeout: float,
        api_key: str | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.request_timeout = request_timeout
        self.max_response_bytes = max_response_bytes
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self._max_connections = max(
            0, max_connections
        )  # 0: unbounded; the generator caps in-flight
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> LoadClient:
        connector = aiohttp.TCPConnector(
            limit=self._max_connections, limit_per_host=0, keepalive_timeout=60, ttl_dns_cache=None
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=self.request_timeout),
            auto_decompress=False,
            skip_auto_headers=("User-Agent",),
        )
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(self, capture: RawCapture, category: str | None = None) -> RawCapture:
        """Send capture.request and record what came back into `capture`.

        Whatever the request raises is an error of a named kind on the capture, with its own
        start and end stamps (never a success with invented times). On task cancellation the
        capture is marked `cancelled` and CancelledError propagates, so the caller can still
        record it.
        """
        capture.wall_start_ns = time.time_ns()
        capture.start_ns = time.perf_counter_ns()
        try:
            await self._exchange(capture, category)
        except asyncio.CancelledError:
            capture.error = {"type": "cancelled", "message": "request cancelled (run stopped)"}
            capture.end_ns = time.perf_counter_ns()
            raise
        except (TimeoutError, aiohttp.ServerTimeoutError):
            capture.error = {
                "type": "timeout",
                "message": f"no complete response within {self.request_timeout:g} s",
            }
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as exc:
            kind = "broken_stream" if capture.status else "connection_error"
            capture.error = {"type": kind, "message": describe_exception(exc)}
        except (aiohttp.ClientError, OSError) as exc:
            kind = "broken_stream" if capture.status and capture.responses else "connection_error"
            capture.error = {"type": kind, "message": describe_exception(exc)}
        except Exception as exc:  # anything else (a header aiohttp refuses, a bug): counted
            capture.error = {"type": "client_error", "message": describe_exception(exc)}
        capture.end_ns = time.perf_counter_ns()
        return capture

    async def _exchange(self, capture: RawCapture, category: str | None) -> None:
        """The request and its answer, read into `capture` (raises what the wire raises)."""
        assert self._session is not None
        if capture.x_request_id is None:
            capture.x_request_id = uuid.uuid4().hex
        extra = {"X-Request-Id": capture.x_request_id}
        if category:
            extra["X-Specmon-Category"] = category
        headers = {**self.headers, **extra}
        url = self.base_url + ENDPOINT_PATHS[capture.endpoint]
        data = orjson.dumps(capture.request)
        if capture.response_ns is None:
            capture.response_ns = []
        async with self._session.post(url, data=data, headers=headers) as resp:
            capture.status = resp.status
            if resp.status >= 400:
                raw = await resp.content.read(_ERROR_BODY_LIMIT)
                capture.error = http_error(resp.status, raw, resp.headers)
            elif (resp.content_length or 0) > self.max_response_bytes:
                _too_large(capture, self.max_response_bytes)
            elif capture.streaming:
                await self._read_stream(resp, capture, capture.response_ns, self.max_response_bytes)
            else:
                await self._read_body(resp, capture, capture.response_ns, self.max_response_bytes)

    @staticmethod
    async def _read_body(
        resp: aiohttp.ClientResponse, capture: RawCapture, stamps: list[int], limit: int
    ) -> None:
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.content.iter_any():
            size += len(chunk)
            if size > limit:
                _too_large(capture, limit)
                return
            chunks.append(chunk)
        raw = b"".join(chunks)
        stamps.append(time.perf_counter_ns())
        try:
            capture.responses.append(orjson.loads(raw))
        except orjson.JSONDecodeError as exc:
            stamps.pop()
            capture.error = {
                "type": "invalid_json",
                "message": f"response body is not JSON ({exc})",
            }

    @staticmethod
    async def _read_stream(
        resp: aiohttp.ClientResponse, capture: RawCapture, stamps: list[int], limit: int
    ) -> None:
        parser = SSEParser()
        responses = capture.responses
        loads, clock = orjson.loads, time.perf_counter_ns
        size = 0
        async for chunk in resp.content.iter_any():
            now = clock()
            size += len(chunk)
            if size > limit:
                _too_large(capture, limit)
                return
            for payload in parser.feed(chunk):
                try:
                    responses.append(loads(payload))
                except orjson.JSONDecodeError:
                    _invalid_event(payload, capture)
                    return
                stamps.append(now)
            if parser.done:
                return
        for payload in parser.finish():
            if not _append_json(payload, time.perf_counter_ns(), responses, stamps, capture):
                return
        if not parser.done:
            capture.error = {"type": "broken_stream", "message": "stream ended before [DONE]"}


def _append_json(
    payload: bytes, now: int, responses: list, stamps: list, capture: RawCapture
) -> bool:
    try:
        responses.append(orjson.loads(payload))
    except orjson.JSONDecodeError:
        _invalid_event(payload, capture)
        return False
    stamps.append(now)
    return True


def _too_large(capture: RawCapture, limit: int) -> None:
    capture.error = {
        "type": "response_too_large",
        "message": f"response body over {limit} bytes (--max-response-bytes)",
    }


def _invalid_event(payload: bytes, capture: RawCapture) -> None:
    capture.error = {
        "type": "invalid_json",
        "message": f"SSE event {len(capture.responses) + 1} is not JSON: {payload[:80]!r}",
    }


def describe_exception(exc: BaseException | None) -> str:
    """'TypeName: message' (the type alone when the message is empty)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
