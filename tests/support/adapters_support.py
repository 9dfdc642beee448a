"""Shared helpers for the adapter tests: load hand-written payload fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specmon.specdecode.adapters.base import ParsedResponse

PAYLOADS = Path(__file__).resolve().parents[1] / "fixtures" / "payloads"


def load_capture(name: str) -> dict[str, Any]:
    path = PAYLOADS / name if name.endswith(".json") else PAYLOADS / f"{name}.json"
    return json.loads(path.read_text())


def parsed(capture: dict[str, Any]) -> list[ParsedResponse]:
    return [
        ParsedResponse(r, i, capture.get("request")) for i, r in enumerate(capture["responses"])
    ]


def responses_of(name: str) -> tuple[list[ParsedResponse], dict[str, Any] | None]:
    capture = load_capture(name)
    return parsed(capture), capture.get("request")


def wrap(*bodies: dict[str, Any]) -> list[ParsedResponse]:
    return [ParsedResponse(b) for b in bodies]
