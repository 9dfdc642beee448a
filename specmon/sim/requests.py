"""Validation of OpenAI-style request bodies, with vLLM-like error bodies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class ApiError(Exception):
    """An OpenAI-style error answer: {"error": {"message", "type", "param", "code"}}."""

    def __init__(
        self, status: int, message: str, err_type: str = "BadRequestError", param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type
        self.param = param

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.err_type,
                "param": self.param,
                "code": self.status,
            }
        }


@dataclass
class ParsedRequest:
    endpoint: str  # "chat" | "completions"
    n: int
    max_tokens: int
    ignore_eos: bool
    stream: bool
    include_usage: bool
    prompt_tokens: list[int]  # one entry per prompt (completions may send several)
    return_spec_details: bool  # SGLang's per-request opt-in
    # Each prompt as text (chat: role and content of every message) or token ids, for the
    # prefix-cache model (specmon/sim/scheduler.py).
    prompts: list[str | list[int]] = field(default_factory=list)

    @property
    def num_choices(self) -> int:
        return self.n * len(self.prompt_tokens)


def estimate_tokens(text: str) -> int:
    """Cheap deterministic token estimate: about four characters per token."""
    return max(1, (len(text) + 3) // 4)


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _chat_prompt(body: dict[str, Any]) -> list[int]:
    messages = body.get("messages")
    if messages is None:
        raise ApiError(400, "Field 'messages' is required.", param="messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "Field 'messages' must be a non-empty list.", param="messages")
    total = 0
    for message in messages:
        if not isinstance(message, dict) or "role" not in message:
            raise ApiError(400, "Each message must be an object with a 'role'.", param="messages")
        total += 1 + estimate_tokens(_message_text(message.get("content")))  # +1: role marker
    return [total]


def prompt_keys(endpoint: str, body: dict[str, Any]) -> list[str | list[int]]:
    """The prompts of a validated body, as the prefix cache sees them."""
    if endpoint == "chat":
        return [
            "".join(f"{m['role']}\0{_message_text(m.get('content'))}\0" for m in body["messages"])
        ]
    prompt = body["prompt"]
    if isinstance(prompt, str):
        return [prompt]
    if all(isinstance(t, int) for t in prompt):
        return [list(prompt)]
    return list(prompt)


def _completion_prompts(body: dict[str, Any]) -> list[int]:
    prompt = body.get("prompt")
    if prompt is None:
        raise ApiError(400, "Field 'prompt' is required.", param="prompt")
    if isinstance(prompt, str):
        return [estimate_tokens(prompt)]
    if isinstance(prompt, list) and prompt:
        if all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            return [len(prompt)]  # one prompt given as token ids
        if all(isinstance(p, str) for p in prompt):
            return [estimate_tokens(p) for p in prompt]
        if all(isinstance(p, list) and p for p in prompt):
            return [len(p) for p in prompt]
    raise ApiError(
        400, "Field 'prompt' must be a string, a list of strings or token ids.", param="prompt"
    )


def _positive_int(body: dict[str, Any], key: str, default: int) -> int:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise ApiError(400, f"'{key}' must be an integer.", param=key)
    if value < 1:
        raise ApiError(400, f"{key} must be at least 1, got {value}.", param=key)
    return value


def _context_checked(max_key: str, max_tokens: int, prompts: list[int], max_model_len: int) -> int:
    """vLLM 0.32's context checks (renderers/params.py, serve/utils/api_utils.py
    get_max_tokens): max_tokens above max_model_len or a prompt longer than it is a 400;
    otherwise the output is capped at max_model_len - prompt tokens."""
    if max_tokens > max_model_len:
        raise ApiError(
            400,
            f"{max_key}={max_tokens} cannot be greater than max_model_len={max_model_len}. "
            f"Please request fewer output tokens. (parameter={max_key}, value={max_tokens})",
            param=max_key,
        )
    longest = max(prompts)
    if longest > max_model_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {max_model_len} tokens. However, your "
            f"prompt contains {longest} input tokens, which exceeds this limit even without "
            "any output tokens. Please reduce the length of the input prompt. "
            f"(parameter=input_tokens, value={longest})",
            param="input_tokens",
        )
    return max(1, min(max_tokens, max_model_len - longest))


def parse_request(
    endpoint: str,
    body: Any,
    served_model: str,
    default_max_tokens: int,
    max_model_len: int = 131072,
) -> ParsedRequest:
    """Check a request body the way vLLM's OpenAI server does; raise ApiError when wrong."""
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    model = body.get("model")
    if model is None:
        raise ApiError(400, "Field 'model' is required.", param="model")
    if model != served_model:
        # vLLM answers an unknown model with 404 NotFoundError.
        raise ApiError(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
    prompts = _chat_prompt(body) if endpoint == "chat" else _completion_prompts(body)
    max_key = (
        "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    )
    max_tokens = _positive_int(body, max_key, default_max_tokens)
    max_tokens = _context_checked(max_key, max_tokens, prompts, max_model_len)
    n = _positive_int(body, "n", 1)
    stream = bool(body.get("stream", False))
    options = body.get("stream_options")
    if options is not None and not stream:
        raise ApiError(
            400, "Stream options can only be defined when `stream=True`.", param="stream_options"
        )
    if options is not None and not isinstance(options, dict):
        raise ApiError(400, "'stream_options' must be an object.", param="stream_options")
    include_usage = bool(stream and options and options.get("include_usage"))
    return ParsedRequest(
        endpoint=endpoint,
        n=n,
        max_tokens=max_tokens,
        ignore_eos=bool(body.get("ignore_eos", False)),
        stream=stream,
        include_usage=include_usage,
        prompt_tokens=prompts,
        return_spec_details=bool(body.get("return_spec_tokens_details", False)),
        prompts=prompt_keys(endpoint, body),
    )
