"""Asking a server what it serves: `GET /v1/models`, and the other blocking start-up GETs
(SGLang's server info), in one place. The preflight, the engine check, a sweep server's
readiness and `start_sim()` all read the listing through `get_json` / `model_ids`.

Blocking on purpose, with the standard library's urllib: these run once before the load
(or in a readiness poll on a plain thread), outside any event loop, where aiohttp (the
load's client) has no blocking call (docs/architecture.md, "HTTP").
"""

from __future__ import annotations

import http.client
import urllib.error
import urllib.request
from typing import Any

import orjson

MODELS_PATH = "/v1/models"
# what a GET here can raise besides a JSON error: no answer, a refused or reset connection,
# or an answer that is not HTTP (a bad status line, a body cut short: http.client's
# HTTPException, BadStatusLine and IncompleteRead among them): each is "no usable answer"
UNREACHABLE = (urllib.error.URLError, OSError, http.client.HTTPException)
HTTPError = urllib.error.HTTPError  # an answer with status >= 400 (`.code`)


def describe_failure(exc: BaseException) -> str:
    """One line for what a GET raised: 'IncompleteRead: 5 bytes read, 20 more expected'."""
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def get_json(url: str, api_key: str | None = None, timeout: float = 10.0) -> Any:
    """One GET of a JSON document; HTTPError, UNREACHABLE and orjson.JSONDecodeError
    propagate (the caller words them)."""
    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return orjson.loads(response.read())


def get_models(base: str, api_key: str | None = None, timeout: float = 10.0) -> Any:
    """The server's /v1/models document, errors as `get_json`'s."""
    return get_json(base.rstrip("/") + MODELS_PATH, api_key, timeout)


def model_cards(listing: Any) -> list[dict[str, Any]]:
    """The model entries of a /v1/models document (anything else: none)."""
    data = listing.get("data") if isinstance(listing, dict) else None
    return [card for card in data if isinstance(card, dict)] if isinstance(data, list) else []


def model_ids(listing: Any) -> list[str]:
    """The ids a /v1/models document lists, in its order."""
    return [str(card["id"]) for card in model_cards(listing) if card.get("id")]


def list_models(base: str, api_key: str | None = None, timeout: float = 2.0) -> list[str]:
    """The ids the server lists now; [] while it does not answer (a readiness poll)."""
    try:
        return model_ids(get_models(base, api_key, timeout))
    except (*UNREACHABLE, ValueError):
        return []
