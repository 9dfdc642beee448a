"""The engine registry: every serving engine specmon knows, declared once.

An `Engine` names the engine (the one name used by `--engine`, the record's `engine`, the
exports and the screen), the adapter classes that read its per-request wire shapes, the
request-side options that make the server send them (SGLang's `return_spec_tokens_details`),
how a server identifies itself as this engine (its `/v1/models` `owned_by`, its
`/get_server_info` keys), its `/metrics` spec-decode names and how far its reports go
(`fidelity.py`). Nothing here imports an adapter: the adapter registry imports the classes
named here, so this module stays a leaf that `config.py` may read.

Facts and sources per engine: docs/metrics.md §10.1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, cast, get_args

from specmon.specdecode.fidelity import COUNTS, HISTOGRAM, PER_STEP

# `--engine`'s choices: auto, then each engine's name (checked against ENGINES below).
EngineChoice = Literal["auto", "vllm", "trtllm", "sglang", "llamacpp", "openai"]


@dataclass(frozen=True, slots=True)
class MetricsNames:
    """An engine's /metrics spec-decode series. counters: windowed deltas may be taken;
    gauges: a last value only (never reconciled as a counter)."""

    draft_tokens: str | None = None
    accepted: str | None = None
    steps: str | None = None  # verify steps (vLLM's num_drafts)
    per_position: str | None = None  # steps that accepted position i, label `position`
    gauges: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Engine:
    name: str
    title: str  # how the docs and the screen write it
    source: str  # the version or PR whose wire shape this follows
    adapters: tuple[str, ...]  # "module:Class" of each adapter, in registration order
    best_fidelity: str  # the most an answer of this engine can carry (fidelity.py)
    request_options: Mapping[str, Any] = field(default_factory=dict)
    owned_by: tuple[str, ...] = ()  # /v1/models card owners that identify the engine
    server_info_keys: tuple[str, ...] = ()  # a /get_server_info body with one of these
    metrics: MetricsNames = MetricsNames()


_ADAPTERS = "specmon.specdecode.adapters"

ENGINES: tuple[Engine, ...] = (
    Engine(
        "vllm",
        "vLLM",
        "vLLM 0.32 (#48915), legacy per-choice shape",
        (f"{_ADAPTERS}.vllm:VLLMSpecDecodeAdapter",),
        PER_STEP,
        owned_by=("vllm",),
        metrics=MetricsNames(
            "vllm:spec_decode_num_draft_tokens",
            "vllm:spec_decode_num_accepted_tokens",
            "vllm:spec_decode_num_drafts",
            "vllm:spec_decode_num_accepted_tokens_per_pos",
        ),
    ),
    Engine(
        "trtllm",
        "TensorRT-LLM",
        "per-request: open PR #19311; /metrics: released",
        (f"{_ADAPTERS}.trtllm:TensorRTLLMSpecDecodeAdapter",),
        HISTOGRAM,
        owned_by=("tensorrt_llm",),
        metrics=MetricsNames(
            "trtllm_spec_decode_num_draft_tokens",
            "trtllm_spec_decode_num_accepted_tokens",
            gauges=("trtllm_spec_decode_acceptance_length", "trtllm_spec_decode_draft_overhead"),
        ),
    ),
    Engine(
        "sglang",
        "SGLang",
        "sglext: #33518; /generate meta_info: #3152, #11441, #18332",
        (f"{_ADAPTERS}.sglang:SGLangSpecDecodeAdapter",),
        HISTOGRAM,
        # Its OpenAI endpoints send sglext.spec_tokens_details only when the body asks.
        request_options=MappingProxyType({"return_spec_tokens_details": True}),
        owned_by=("sglang",),
        server_info_keys=("server_args",),
        metrics=MetricsNames(gauges=("sglang:spec_accept_length", "sglang:spec_accept_rate")),
    ),
    Engine(
        "llamacpp",
        "llama.cpp",
        "server timings (tools/server/server-task.cpp)",
        (f"{_ADAPTERS}.llamacpp:LlamaCppSpecDecodeAdapter",),
        COUNTS,
        owned_by=("llamacpp",),
    ),
    Engine(
        "openai",
        "OpenAI-standard usage (smg gateway #2481)",
        "usage.completion_tokens_details (smg #2481)",
        (f"{_ADAPTERS}.openai:OpenAIPredictionsAdapter",),
        COUNTS,
    ),
)

ENGINE_NAMES: tuple[str, ...] = tuple(e.name for e in ENGINES)
if ("auto", *ENGINE_NAMES) != get_args(EngineChoice):  # the two lists cannot drift apart
    raise RuntimeError(f"EngineChoice {get_args(EngineChoice)} != auto + {ENGINE_NAMES}")
_BY_NAME = {e.name: e for e in ENGINES}


def engine(name: str) -> Engine:
    """The engine called `name` (KeyError names the known ones)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown engine {name!r}; known: {', '.join(ENGINE_NAMES)}") from None


def metrics_counters() -> dict[str, tuple[str, str]]:
    """Every engine's spec-decode counter (name without `_total`) -> (engine, field), the
    fields being scrape.py's: drafts (verify steps), draft_tokens, accepted, per_pos."""
    out: dict[str, tuple[str, str]] = {}
    for e in ENGINES:
        m = e.metrics
        for name, fld in (
            (m.steps, "drafts"),
            (m.draft_tokens, "draft_tokens"),
            (m.accepted, "accepted"),
            (m.per_position, "per_pos"),
        ):
            if name is not None:
                out[name] = (e.name, fld)
    return out


def metrics_gauges() -> dict[str, str]:
    """Every engine's spec-decode gauge -> engine: a last value, never a windowed delta."""
    return {g: e.name for e in ENGINES for g in e.metrics.gauges}


def as_choice(name: str) -> EngineChoice:
    """An engine's name as an `--engine` value (KeyError for an unknown one)."""
    return cast(EngineChoice, engine(name).name)


def request_options(name: str | None) -> dict[str, Any]:
    """What every request body carries for this engine (none for auto / unknown)."""
    found = _BY_NAME.get(name or "")
    return dict(found.request_options) if found is not None else {}


def engine_of_models(listing: Any) -> str | None:
    """The engine a /v1/models listing names through its cards' owned_by, or None."""
    data = listing.get("data") if isinstance(listing, dict) else None
    owners = {m.get("owned_by") for m in data or () if isinstance(m, dict)}
    return next((e.name for e in ENGINES if owners & set(e.owned_by)), None)


def engine_of_server_info(info: Any) -> str | None:
    """The engine a /get_server_info body identifies, or None.

    vLLM's dev-mode /server_info carries vllm_config, so it is never taken for another
    engine even if it shares a key.
    """
    if not isinstance(info, dict) or "vllm_config" in info:
        return None
    named = info.get("engine")
    if isinstance(named, str) and named in _BY_NAME:
        return named
    return next((e.name for e in ENGINES if any(k in info for k in e.server_info_keys)), None)


def probed_engines() -> tuple[str, ...]:
    """Engines worth asking the server about before the load: those whose requests change."""
    return tuple(e.name for e in ENGINES if e.request_options)
