"""The engine registry: every serving engine specmon knows, declared once.

An `Engine` names the engine (the short name `--engine`, the reasons and the screen use;
`record_name`, AIPerf's name, is what a record's `engine` field and the exports carry:
`tensorrt_llm` for `trtllm`), the adapter classes that read its per-request wire shapes, the
request-side options that make the server send them (SGLang's `return_spec_tokens_details`),
how a server identifies itself as this engine (its `/v1/models` `owned_by`, its
`/get_server_info` keys), its `/metrics` spec-decode names and how far its reports go
(`fidelity.py`), and the `specmon sim --shape` values that answer in its wire shape (the
simulator derives its shapes and `/v1/models` owners from them, and its vLLM /metrics
names from vLLM's entry). Nothing here imports an adapter: the adapter registry imports the
classes named here, so this module stays a leaf that `config.py` may read.

A new engine is one entry (`register_engine`, or a line in ENGINES), its adapter and, for
the simulator, its payload builder (sim/payloads.py `register_choice_payload`);
tests/specdecode/test_engines.py adds a toy engine that way.

Facts and sources per engine: docs/metrics.md §10.1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from specmon.specdecode.fidelity import COUNTS, HISTOGRAM, PER_STEP


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
    record_name: str = ""  # AIPerf's `engine` value in records and exports; "" = `name`
    sim_shapes: tuple[str, ...] = ()  # `specmon sim --shape` values in this wire shape

    @property
    def aiperf_name(self) -> str:
        """The name a record's `engine` field carries (AIPerf's: tensorrt_llm, vllm, ...)."""
        return self.record_name or self.name

    @property
    def sim_owner(self) -> str:
        """What the simulator's /v1/models card says owns the model in this engine's
        shapes (a gateway's cards name no engine: the simulator's own name)."""
        return self.owned_by[0] if self.owned_by else "specmon-sim"


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
        # none: vLLM answering without per-request stats (the /metrics counters only)
        sim_shapes=("vllm", "vllm-legacy", "none"),
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
        record_name="tensorrt_llm",  # AIPerf's name in its records (the CLI's is trtllm)
        sim_shapes=("trtllm",),
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
        sim_shapes=("sglang",),
    ),
    Engine(
        "llamacpp",
        "llama.cpp",
        "server timings (tools/server/server-task.cpp)",
        (f"{_ADAPTERS}.llamacpp:LlamaCppSpecDecodeAdapter",),
        COUNTS,
        owned_by=("llamacpp",),
        sim_shapes=("llamacpp",),
    ),
    Engine(
        "openai",
        "OpenAI-standard usage (smg gateway #2481)",
        "usage.completion_tokens_details (smg #2481)",
        (f"{_ADAPTERS}.openai:OpenAIPredictionsAdapter",),
        COUNTS,
        sim_shapes=("openai-predictions",),
    ),
)

ENGINE_NAMES: tuple[str, ...] = tuple(e.name for e in ENGINES)
# the live table: the built-in engines, then any registered later (a plugin, a test)
_BY_NAME: dict[str, Engine] = {e.name: e for e in ENGINES}


def register_engine(entry: Engine) -> Engine:
    """Add an engine beside the built-in ones (its adapters are registered by
    specmon.specdecode.adapters.add_engine, which calls this). A shape another engine
    serves is refused: one shape, one engine."""
    taken = {s: e.name for e in _BY_NAME.values() if e.name != entry.name for s in e.sim_shapes}
    clash = [s for s in entry.sim_shapes if s in taken]
    if clash:
        raise ValueError(f"engine {entry.name}: shape {clash[0]} is {taken[clash[0]]}'s")
    _BY_NAME[entry.name] = entry
    return entry


def registered() -> tuple[Engine, ...]:
    """Every engine known now: the built-in ones in their order, then the registered."""
    return tuple(_BY_NAME.values())


def engine(name: str) -> Engine:
    """The engine called `name` (KeyError names the known ones)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        known = ", ".join(_BY_NAME)
        raise KeyError(f"unknown engine {name!r}; known: {known}") from None


def record_name(name: str) -> str:
    """The `engine` value a record of engine `name` carries: AIPerf's name for a known
    engine, the name itself for one the registry does not know (an outside adapter)."""
    found = _BY_NAME.get(name)
    return found.aiperf_name if found is not None else name


def sim_shapes() -> tuple[str, ...]:
    """Every `specmon sim --shape` value, in the registry's order."""
    return tuple(s for e in _BY_NAME.values() for s in e.sim_shapes)


def engine_of_shape(shape: str) -> Engine:
    """The engine whose wire shape `--shape` serves (KeyError for an unknown shape)."""
    for e in _BY_NAME.values():
        if shape in e.sim_shapes:
            return e
    raise KeyError(f"unknown shape {shape!r}; known: {', '.join(sim_shapes())}")


def metrics_counters() -> dict[str, tuple[str, str]]:
    """Every engine's spec-decode counter (name without `_total`) -> (engine, field), the
    fields being scrape.py's: drafts (verify steps), draft_tokens, accepted, per_pos."""
    out: dict[str, tuple[str, str]] = {}
    for e in _BY_NAME.values():
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
    return {g: e.name for e in _BY_NAME.values() for g in e.metrics.gauges}


def engine_choice(value: str) -> str:
    """`--engine`'s value checked against the live table: auto, or an engine's name."""
    if value != "auto" and value not in _BY_NAME:
        raise ValueError(f"'{value}' is not one of auto, {', '.join(_BY_NAME)}")
    return value


def request_options(name: str | None) -> dict[str, Any]:
    """What every request body carries for this engine (none for auto / unknown)."""
    found = _BY_NAME.get(name or "")
    return dict(found.request_options) if found is not None else {}


def engine_of_models(listing: Any) -> str | None:
    """The engine a /v1/models listing names through its cards' owned_by, or None."""
    data = listing.get("data") if isinstance(listing, dict) else None
    owners = {m.get("owned_by") for m in data or () if isinstance(m, dict)}
    return next((e.name for e in _BY_NAME.values() if owners & set(e.owned_by)), None)


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
    found = (e.name for e in _BY_NAME.values() if any(k in info for k in e.server_info_keys))
    return next(found, None)


def probed_engines() -> tuple[str, ...]:
    """Engines worth asking the server about before the load: those whose requests change."""
    return tuple(e.name for e in _BY_NAME.values() if e.request_options)
