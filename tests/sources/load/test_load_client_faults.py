"""Client error classification against a real uvicorn process that misbehaves on purpose.

The simulator only produces well-formed JSON; these faults (bad SSE JSON, bad body JSON,
a stream without [DONE], comment lines, CRLF framing) need a server of their own.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict

import pytest

from specmon.sources.load.client import LoadClient, new_capture

APP = textwrap.dedent("""
    from starlette.applications import Starlette
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    async def chat(request):
        kind = (await request.json())["model"]
        if kind == "bad-body":
            return Response(b"{not json", media_type="application/json")
        if kind == "http-400":
            return Response(b'{"object":"error","message":"bad max_tokens","code":400}', status_code=400)
        async def events():
            if kind == "crlf":
                yield b': ping\\r\\n\\r\\ndata: {"i": 1}\\r\\n\\r\\ndata: {"i": 2}\\r\\n\\r\\ndata: [DONE]\\r\\n\\r\\n'
            elif kind == "bad-sse":
                yield b'data: {"i": 1}\\n\\ndata: {oops\\n\\ndata: [DONE]\\n\\n'
            elif kind == "no-done":
                yield b'data: {"i": 1}\\n\\n'
        return StreamingResponse(events(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
""")


@pytest.fixture(scope="module")
def fault_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fault")
    (folder / "fault_app.py").write_text(APP)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "fault_app:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=folder,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


async def send(url: str, kind: str, streaming: bool) -> dict:
    """The capture the client filled, as its fields (a RawCapture)."""
    async with LoadClient(url, max_connections=2, request_timeout=10) as client:
        return asdict(await client.send(new_capture("chat", streaming, {"model": kind})))


@pytest.mark.e2e
async def test_crlf_framing_and_comments_parse(fault_server):
    capture = await send(fault_server, "crlf", True)
    assert capture["error"] is None
    assert capture["responses"] == [{"i": 1}, {"i": 2}]
    assert len(capture["response_ns"]) == 2


@pytest.mark.e2e
async def test_invalid_sse_json_keeps_what_came_before(fault_server):
    capture = await send(fault_server, "bad-sse", True)
    assert capture["error"]["type"] == "invalid_json"
    assert "SSE event 2" in capture["error"]["message"]
    assert capture["responses"] == [{"i": 1}]


@pytest.mark.e2e
async def test_stream_without_done_is_broken_stream(fault_server):
    capture = await send(fault_server, "no-done", True)
    assert capture["error"]["type"] == "broken_stream"
    assert capture["responses"] == [{"i": 1}]


@pytest.mark.e2e
async def test_invalid_body_json(fault_server):
    capture = await send(fault_server, "bad-body", False)
    assert capture["error"]["type"] == "invalid_json"
    assert capture["responses"] == [] and capture["response_ns"] == []


@pytest.mark.e2e
async def test_http_error_keeps_status_and_message(fault_server):
    capture = await send(fault_server, "http-400", False)
    assert capture["status"] == 400
    assert capture["error"] == {"type": "http_error", "message": "HTTP 400: bad max_tokens"}
