"""llama.cpp's native `POST /completion` for `specmon sim --shape llamacpp`.

The request (`prompt`, `n_predict`) is answered by the simulator's own completions path and
the answer rewritten into llama.cpp's native body (tools/server/server-task.cpp
`to_json_non_oaicompat`): `content`, `stop`, `tokens_predicted`, `tokens_evaluated`,
`stop_type` and the same root `timings` (with `draft_n` / `draft_n_accepted` when the request
drafted). Non-streaming only; the OpenAI endpoints carry the same timings streamed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

Completion = Callable[[Request, str], Awaitable[Any]]
JSON = "application/json"


def _openai_body(native: dict[str, Any], model: str) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "prompt": native.get("prompt", "")}
    if "n_predict" in native:
        body["max_tokens"] = native["n_predict"]
    if native.get("ignore_eos"):
        body["ignore_eos"] = True
    return body


def _native_answer(openai: dict[str, Any]) -> dict[str, Any]:
    choice = (openai.get("choices") or [{}])[0]
    usage = openai.get("usage") or {}
    return {
        "index": 0,
        "content": choice.get("text", ""),
        "tokens": [],
        "id_slot": 0,
        "stop": True,
        "model": openai.get("model"),
        "tokens_predicted": usage.get("completion_tokens", 0),
        "tokens_evaluated": usage.get("prompt_tokens", 0),
        "stop_type": "limit" if choice.get("finish_reason") == "length" else "eos",
        "stopping_word": "",
        "timings": openai.get("timings", {}),
    }


def routes(completion: Completion) -> list[Route]:
    """The native route, answered through `completion` (server.py's `_completion`)."""

    async def native(request: Request) -> Any:
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError as exc:
            return Response(orjson.dumps({"error": str(exc)}), status_code=400, media_type=JSON)
        if not isinstance(body, dict) or body.get("stream"):
            message = {"error": "the simulator's /completion takes a non-streaming object"}
            return Response(orjson.dumps(message), status_code=400, media_type=JSON)
        data = orjson.dumps(_openai_body(body, request.app.state.sim.cfg.model))
        sent = False

        async def receive() -> Any:  # the rewritten body once, then the client's own events
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": data, "more_body": False}
            return await request.receive()

        answer = await completion(Request(request.scope, receive), "completions")
        if answer.status_code != 200:
            return answer
        native_body = _native_answer(orjson.loads(answer.body))
        return Response(orjson.dumps(native_body), media_type=JSON)

    return [Route("/completion", native, methods=["POST"])]
