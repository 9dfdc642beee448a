"""A hostile OpenAI-compatible server for tests (asyncio streams, no framework): each request
to /v1/chat/completions or /v1/completions gets the next case of CASES in turn, as a JSON body
or, when the request asks for a stream, as SSE events ending with [DONE].

Every case is valid HTTP; the bodies are what a broken or malicious server could send:
integers that sum past 64 bits, JSON nested deeper than an encoder allows, numbers at or past
the double range, timing values out of range.

    server = HostileServer(); server.start(); ... server.url ...; server.stop()
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

import orjson

MODEL = "hostile-model"
I64_MAX = 2**63 - 1


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def _body(usage: bytes, spec: bytes = b"null", timing: bytes = b"", extra: bytes = b"") -> bytes:
    return (
        b'{"id":"x","object":"chat.completion","model":"' + MODEL.encode() + b'",'
        b'"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},'
        b'"finish_reason":"stop"}],"usage":'
        + usage
        + b',"metrics":{'
        + timing
        + b'"speculative_decoding":'
        + spec
        + b"}"
        + extra
        + b"}"
    )


def _usage(prompt: object, completion: object) -> bytes:
    return (
        f'{{"prompt_tokens":{prompt},"completion_tokens":{completion},"total_tokens":3}}'.encode()
    )


def _spec(
    steps: object, accepted: object, drafted: object, hist: str = "[1,1,0,0]", k: int = 3
) -> bytes:
    # AL and rate follow the counts where they can (else the record is contested)
    counts = all(type(v) is int for v in (steps, accepted, drafted))
    al = 1 + accepted / steps if counts and steps else 2.0  # type: ignore[operator]
    rate = accepted / drafted if counts and drafted else 0.5  # type: ignore[operator]
    return (
        f'{{"mean_acceptance_length":{al!r},"draft_acceptance_rate":{rate!r},'
        f'"acceptance_histogram":{hist},'
        f'"num_spec_steps":{steps},"num_accepted_draft_tokens":{accepted},'
        f'"num_draft_tokens":{drafted},"num_spec_tokens":{k}}}'
    ).encode()


GOOD = _body(_usage(2, 2), _spec(2, 1, 6))
RESET = b""  # a case that answers with a connection reset, no status line
RATE_LIMITED = b"429 Too Many Requests\r\nRetry-After: "  # + seconds: a case that rate-limits
# name -> JSON text of the body (also the last SSE event when streaming)
CASES: dict[str, bytes] = {
    "good": GOOD,
    # each fits 64 bits; two of them sum past 2**64 in any total
    "totals_64bit": _body(_usage(I64_MAX, I64_MAX), _spec(I64_MAX, I64_MAX, I64_MAX)),
    # a self-consistent k=1 record at the int64 edge: three of them sum past 2**64 steps
    "totals_consistent": _body(
        _usage(I64_MAX, I64_MAX),
        _spec(I64_MAX, I64_MAX - 1, I64_MAX, hist=f"[1,{I64_MAX - 1}]", k=1),
    ),
    "beyond_u64": _body(_usage(2**64 + 5, 2**70), _spec(2**65, 2**64, 2**66)),
    "negative_i64": _body(_usage(-(2**63), -(2**63)), _spec(-(2**63), -1, -(2**63))),
    "near_double_max": _body(_usage(1.7e308, 1.7e308), _spec(1.7e308, 1.7e308, 1.7e308)),
    "past_double_max": _body(_usage(2, "1e400"), _spec(2, 1, 6)),  # inf when parsed
    "timing_out_of_range": _body(
        _usage(2, 2),
        _spec(2, 1, 6),
        timing=b'"time_to_first_token_ms":1e300,"generation_time_ms":-1e300,'
        b'"queue_time_ms":18446744073709551615,"mean_itl_ms":-5,"tokens_per_second":1.7e308,',
    ),
    # orjson writes at most 255 levels and reads at most 1024
    "nested_300": _body(_usage(2, 2), _spec(2, 1, 6), extra=b',"x":' + _nested(300)),
    "nested_1000": _body(_usage(2, 2), _spec(2, 1, 6), extra=b',"x":' + _nested(1000)),
    "nested_2000": _body(_usage(2, 2), _spec(2, 1, 6), extra=b',"x":' + _nested(2000)),
    "deep_histogram": _body(_usage(2, 2), _spec(2, 1, 6, hist=_nested(400).decode())),
}


# ---------------------------------------------------------------- hostile /metrics

# (scrape number from 1, the connection's writer): writes one whole /metrics answer, however
# slowly or endlessly it likes
# Answers to a start-up GET that are not usable HTTP (each an http.client.HTTPException
# for urllib): what a crashed or foreign server sends to /v1/models or /get_server_info
PROBE_ANSWERS: dict[str, bytes] = {
    "truncated": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    b'Content-Length: 100\r\n\r\n{"server_args": {',
    "bad_status_line": b"SSH-2.0-OpenSSH_9.6\r\n",
    "not_http": b"\x00\x01\x02 garbage\r\n\r\n",
    "bad_status_code": b"HTTP/1.1 abc OK\r\n\r\n",
}

MetricsMode = Callable[[int, asyncio.StreamWriter], Awaitable[None]]


def counters_page(drafts: float = 10, accepted: float = 5, position: str = "0") -> bytes:
    """A small vLLM-style page: the four spec-decode counters, one engine."""
    lines = [
        "# TYPE vllm:spec_decode_num_drafts counter",
        f'vllm:spec_decode_num_drafts_total{{engine="0"}} {drafts}',
        "# TYPE vllm:spec_decode_num_draft_tokens counter",
        f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {drafts}',
        "# TYPE vllm:spec_decode_num_accepted_tokens counter",
        f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {accepted}',
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter",
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="{position}"}}'
        f" {accepted}",
    ]
    return ("\n".join(lines) + "\n").encode()


def _head(length: int | None) -> bytes:
    size = b"Content-Length: " + str(length).encode() if length is not None else b""
    chunked = b"Transfer-Encoding: chunked" if length is None else b""
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + size + chunked + b"\r\n\r\n"


async def _send(writer: asyncio.StreamWriter, body: bytes) -> None:
    writer.write(_head(len(body)) + body)
    await writer.drain()


def metrics_page(make: Callable[[int], bytes]) -> MetricsMode:
    """A page made from the scrape number, sent at once."""

    async def mode(n: int, writer: asyncio.StreamWriter) -> None:
        await _send(writer, make(n))

    return mode


def metrics_slow(delay_s: float) -> MetricsMode:
    """A good page after `delay_s` seconds."""

    async def mode(n: int, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(delay_s)
        await _send(writer, counters_page(10 * n, 5 * n))

    return mode


def metrics_trickle(every_s: float) -> MetricsMode:
    """A good page one byte every `every_s` seconds: each read is quick, the page never ends
    in any reasonable time."""

    async def mode(n: int, writer: asyncio.StreamWriter) -> None:
        body = counters_page(10 * n, 5 * n) * 100
        writer.write(_head(len(body)))
        for i in range(len(body)):
            writer.write(body[i : i + 1])
            await writer.drain()
            await asyncio.sleep(every_s)

    return mode


async def metrics_endless(n: int, writer: asyncio.StreamWriter) -> None:
    """A chunked body that never ends (64 KiB comment lines, as fast as they are read)."""
    writer.write(_head(None))
    chunk = b"# " + b"x" * 65534 + b"\n"
    frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    while True:
        writer.write(frame)
        await writer.drain()


class _RawAnswered(Exception):
    """A raw answer was written: the connection ends there, closed (not reset)."""


class HostileServer:
    """Serves CASES in order (cycling) on 127.0.0.1 and an ephemeral port, in a thread."""

    def __init__(
        self,
        cases: dict[str, bytes] | None = None,
        metrics: MetricsMode | None = None,
        raw: dict[str, bytes] | None = None,
    ) -> None:
        self.cases = list((cases or CASES).items())
        # path -> the exact bytes answered there, then the connection closed: a bad status
        # line, a body shorter than its Content-Length (PROBE_ANSWERS)
        self.raw = {path.encode(): answer for path, answer in (raw or {}).items()}
        self.metrics = metrics  # how /metrics misbehaves (None: 404, no metrics)
        self.scrapes = 0  # /metrics requests seen
        self.sent: list[str] = []  # case names in the order they were served
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.AbstractServer | None = None

    def start(self) -> HostileServer:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        port = future.result(10)
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():  # answers still going (a slow or endless page)
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> HostileServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _listen(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # keep-alive: one request after another on this connection
                head = await reader.readuntil(b"\r\n\r\n")
                length = _content_length(head)
                body = await reader.readexactly(length) if length else b""
                if head.split(b" ", 2)[1] == b"/metrics" and self.metrics is not None:
                    self.scrapes += 1
                    await self.metrics(self.scrapes, writer)
                    continue
                await self._answer(head, body, writer.write)
                await writer.drain()
        except _RawAnswered:  # FIN after the raw bytes, so the client reads all of them
            await writer.drain()
            writer.close()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:  # the server stopped mid-answer (an endless body)
            pass
        finally:
            if writer.transport is not None and not writer.is_closing():
                writer.transport.abort()  # RST, not FIN: what a crashing server sends

    async def _answer(self, head: bytes, body: bytes, write: Callable[[bytes], object]) -> None:
        path = head.split(b" ", 2)[1]
        if path in self.raw:
            write(self.raw[path])
            raise _RawAnswered
        if path == b"/v1/models":
            listing = {"object": "list", "data": [{"id": MODEL, "object": "model"}]}
            write(_response(b"application/json", orjson.dumps(listing)))
            return
        if path not in (b"/v1/chat/completions", b"/v1/completions"):
            write(_response(b"application/json", b'{"error":"not found"}', b"404 Not Found"))
            return
        name, payload = self.cases[len(self.sent) % len(self.cases)]
        self.sent.append(name)
        if payload == RESET:
            raise ConnectionResetError("a reset instead of an answer")  # _serve closes it
        if payload.startswith(RATE_LIMITED):
            write(_response(b"application/json", b'{"error":"slow down"}', payload))
            return
        request = orjson.loads(body) if body else {}
        if request.get("stream"):
            first = b'{"id":"x","choices":[{"index":0,"delta":{"content":"hi"}}]}'
            events = b"data: " + first + b"\n\ndata: " + payload + b"\n\ndata: [DONE]\n\n"
            write(_response(b"text/event-stream", events))
        else:
            write(_response(b"application/json", payload))


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


def _response(content_type: bytes, body: bytes, status: bytes = b"200 OK") -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\nContent-Type: " + content_type + b"\r\nContent-Length: "
        + str(len(body)).encode() + b"\r\nConnection: keep-alive\r\n\r\n" + body
    )  # fmt: skip


# The hostile /metrics pages both the run and the watch face (tests/server/
# test_metrics_hostile.py, tests/run/watch/test_watch_hostile.py): too slow, a trickle, no end,
# a position past any histogram, one 10,000-label line beside good counters.
HUGE_LABELS = b",".join(b'l%d="v"' % i for i in range(10_000))


def hostile_metrics(scrape_timeout_s: float) -> dict[str, MetricsMode]:
    return {
        "slow": metrics_slow(3 * scrape_timeout_s),
        "trickle": metrics_trickle(0.2),
        "endless": metrics_endless,
        "huge_position": metrics_page(
            lambda n: counters_page(10 * n, 5 * n, position="1000000000")
        ),
        "ten_thousand_labels": metrics_page(
            lambda n: counters_page(10 * n, 5 * n)
            + b"vllm:spec_decode_num_drafts_total{" + HUGE_LABELS + b"} 1\n"
        ),
    }  # fmt: skip
