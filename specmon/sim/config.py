"""Simulator options (`specmon sim`, and the simulator part of `specmon demo`), declared once.

`SimConfig` is both the server's settings and the option declarations: each field is one
option (see specmon/config.py for how a field becomes a flag, a TOML key and a
SPECMON_SIM_* variable). Adding a simulator option is adding one field here; `specmon demo`
offers it too unless demo lists it in the options it sets itself.
"""

from __future__ import annotations

import json
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from specmon.config import OptionSet, option
from specmon.errors import UserError
from specmon.records import same_named
from specmon.sim import presets
from specmon.sim import schedule as sim_schedule
from specmon.sim.model import LatencyModel, context_acceptance
from specmon.specdecode.engines import sim_shapes
from specmon.specdecode.method import parse_method

# The shapes are the engine registry's (specmon/specdecode/engines.py `sim_shapes`); sglext
# is SGLang's OpenAI-endpoint shape by the name of its wire field (the same as sglang, which
# also answers /get_server_info); openai-predictions and llamacpp carry counts only
# (specmon/sim/payloads.py).
SHAPE_ALIASES = {"sglext": "sglang"}
Level = Literal["summary", "detailed"]
Spelling = Literal["vllm", "ray"]  # vLLM's own /metrics names, or Ray Serve's
LatencyKind = Literal["linear", "roofline"]  # sim/model.py LATENCY_MODELS
SHAPES: tuple[str, ...] = (*sim_shapes(), *SHAPE_ALIASES)  # the built-in ones, for the help
LEVELS: tuple[str, ...] = typing.get_args(Level)


class SimConfig(BaseModel):
    """The simulated server's settings; every field is a `specmon sim` option."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    host: str = option("127.0.0.1", "bind address")
    port: int = option(8000, "port; 0 picks a free one", ge=0, le=65535)
    model: str = option("specmon-sim", "served model id")
    api_key: str | None = option(
        None, "require 'Authorization: Bearer KEY'", metavar="KEY", secret=True
    )
    num_spec_tokens: int = option(
        3, "drafts per verify step, k (0: no speculation)", ge=0, metavar="K"
    )
    # Conditional acceptance per draft position 1..k (P(accept i | accepted i-1)).
    acceptance: list[float] = option(
        "0.7",
        "conditional acceptance per position: one value, or K or more (the first K are used; "
        "e.g. 0.8,0.7,0.6)",
        metavar="P[,P...]",
        validate_default=True,
    )
    category_acceptance: dict[str, list[float]] = option(
        "",
        "per X-Specmon-Category acceptance, e.g. code=0.9,chat=0.5 "
        "(per position: code=0.9:0.8:0.7)",
        metavar="CAT=P[:P...],...",
        validate_default=True,
    )
    preset: str | None = option(
        None,
        f"GPU-like latency and acceptance, listed below (without it and without latency "
        f"options: {presets.DEFAULT_PRESET})",
        metavar="NAME",
    )
    spec_method: str | None = option(
        None,
        "the speculative method and drafter it reports (vLLM's names: eagle, eagle3, "
        "draft_model, ngram, mtp), in /server_info as vLLM's dev mode and SGLang do "
        "(default: the preset's)",
        metavar="METHOD[:DRAFTER]",
    )
    ttft_ms: float = option(0.0, "time to first token", ge=0)
    step_ms: float = option(0.0, "target step time at batch 1", ge=0)
    draft_ms_per_token: float = option(0.0, "draft cost per drafted token", ge=0)
    batch_slope: float = option(0.0, "step-time growth per extra verified token in flight", ge=0)
    # Latency model and server capacity (formulas in specmon/sim/model.py and scheduler.py).
    latency_model: LatencyKind = option("linear", "step-time formula (see below)")
    step_floor_ms: float = option(0.0, "roofline: memory-bound step floor", ge=0)
    compute_ms_per_token: float = option(
        0.0, "roofline: cost per verified token in the batch (B * (k + 1) of them)", ge=0
    )
    # The context effect (sim/model.py; docs/simulator.md "Context effect"): off at 0.
    acceptance_context_halflife: float = option(
        0.0,
        "acceptance a_i * 2^(-prompt tokens / TOKENS): every position's acceptance halves "
        "each TOKENS of the request's prompt (0: no context effect)",
        ge=0,
        metavar="TOKENS",
    )
    kv_ms_per_ktoken: float = option(
        0.0,
        "step time + X ms per 1000 context tokens held by the running batch (KV reads)",
        ge=0,
        metavar="X",
    )
    max_num_seqs: int = option(1_000_000, "running requests per engine (the rest wait)", ge=1)
    kv_cache_tokens: int = option(
        1_000_000_000, "KV-cache capacity per engine, in tokens (overflow preempts)", ge=1
    )
    shape: str = option(
        "vllm", "where and how the per-request stats are sent", metavar="{" + ",".join(SHAPES) + "}"
    )
    level: Level = option("detailed", "summary omits per-step arrays")
    seed: int | None = option(None, "same seed + same requests -> same answers")
    log_path: str | None = option(
        None, "append one JSON line per request (ground truth)", flag="--log", metavar="FILE"
    )
    engines: int = option(1, "split /metrics counters over N engine label sets", ge=1)
    metrics_spelling: Spelling = option(
        "vllm", "/metrics names: vllm (vllm:...) or ray (Ray Serve's ray_vllm_...)"
    )
    default_max_tokens: int = option(64, "max_tokens when a request gives none", ge=1)
    startup_delay: float = option(
        0.0, "seconds before the port opens (a server loading its model)", ge=0, metavar="S"
    )
    # As vLLM: max_tokens above it, or a prompt longer than it, is a 400; otherwise the
    # output is capped at max_model_len - prompt tokens.
    max_model_len: int = option(131072, "context length: prompt + output tokens", ge=1)
    spec_schedule: str | None = option(
        None,
        "k per running batch size, vLLM's num_speculative_tokens_per_batch_size: "
        "[[start, end, K], ...] as JSON or a file (--num-spec-tokens stays the maximum)",
        metavar="JSON_OR_FILE",
    )
    force_include_usage: bool = option(
        False,
        "send the usage chunk (and its stats) on every stream, as vLLM's flag",
        flag="--enable-force-include-usage",
    )
    per_request_metrics: bool = option(
        False,
        "fill metrics' timing keys (ttft, generation time, ITL, tokens/s)",
        flag="--enable-per-request-metrics",
    )
    error_rate: float = option(0.0, "share of HTTP 500 answers", ge=0, le=1)
    malformed_rate: float = option(
        0.0, "share of payloads with a self-contradicting histogram", ge=0, le=1
    )
    disconnect_rate: float = option(0.0, "share of responses cut mid-way", ge=0, le=1)

    @field_validator("spec_method", mode="after")
    @classmethod
    def _spec_method(cls, value: str | None) -> str | None:
        parse_method(value)  # a ValueError names what to give
        return value

    @field_validator("preset", mode="after")
    @classmethod
    def _preset(cls, value: str | None) -> str | None:
        return presets.lookup(value).name if value else None

    @field_validator("shape", mode="after")
    @classmethod
    def _shape(cls, value: str) -> str:
        value = SHAPE_ALIASES.get(value, value)  # one shape, two names
        if value not in sim_shapes():  # the live registry: an engine added later serves too
            raise ValueError(f"'{value}' is not one of {', '.join(sim_shapes())}")
        return value

    @field_validator("acceptance", mode="before")
    @classmethod
    def _acceptance(cls, value: Any, info: ValidationInfo) -> Any:
        k = info.data.get("num_spec_tokens")
        if k is None:  # k itself was bad: that error is the one reported
            return []
        value = _from_json(value)
        if isinstance(value, (list, tuple)):  # a TOML file or --save-config: a list
            value = ",".join(str(v) for v in value)
        return parse_acceptance(str(value), k)

    @field_validator("category_acceptance", mode="before")
    @classmethod
    def _category_acceptance(cls, value: Any, info: ValidationInfo) -> Any:
        k = info.data.get("num_spec_tokens")
        if k is None:
            return {}
        value = _from_json(value)
        if isinstance(value, dict):  # a TOML table: {code = [0.9, 0.8, 0.7]}
            value = ",".join(f"{name}={_positions(v)}" for name, v in value.items())
        return parse_category_acceptance(str(value), k)

    @field_validator("spec_schedule", mode="before")
    @classmethod
    def _spec_schedule(cls, value: Any, info: ValidationInfo) -> Any:
        """Checked once here (vLLM's rules, sim/schedule.py) and kept as canonical JSON, so
        a child simulator gets the schedule itself, not a path it may not see."""
        if value is None or value == "":
            return None
        if info.data.get("num_spec_tokens") == 0:
            raise UserError(f"{sim_schedule.FLAG} needs speculation: set --num-spec-tokens K > 0")
        return json.dumps([list(e) for e in sim_schedule.load_schedule(value)])

    def schedule_entries(self) -> sim_schedule.Schedule | None:
        """The validated `--spec-schedule` (None without one)."""
        if self.spec_schedule is None:
            return None
        return sim_schedule.validate(json.loads(self.spec_schedule))

    def latency(self) -> LatencyModel:
        # the model's other fields are the options of the same name
        return LatencyModel(kind=self.latency_model, **same_named(LatencyModel, self))

    def acceptance_for(self, category: str | None, prompt_tokens: int = 0) -> list[float]:
        """Per-position conditional acceptance for a request of this category and prompt
        length (the context effect, sim/model.py context_acceptance)."""
        base = self.category_acceptance.get(category or "", self.acceptance)
        return context_acceptance(base, prompt_tokens, self.acceptance_context_halflife)


def with_preset(cfg: SimConfig) -> tuple[SimConfig, presets.Preset | None, bool]:
    """`cfg` with its preset's values under the options given explicitly (presets.choose
    says which preset), the preset, and whether it is the implicit default."""
    given = set(cfg.model_fields_set)
    preset, implicit = presets.choose(cfg.preset, given)
    if preset is None:
        return cfg, None, False
    data = {**preset.values(cfg.num_spec_tokens), **cfg.model_dump(include=given)}
    return SimConfig(**{**data, "preset": preset.name}), preset, implicit


SIM_OPTIONS: OptionSet[SimConfig] = OptionSet(
    SimConfig, env_prefix="SPECMON_SIM_", title="simulator options", dest_prefix="sim_"
)


def _from_json(value: Any) -> Any:
    """A parent passes lists and tables as JSON flags (OptionSet.to_argv)."""
    if isinstance(value, str) and value.strip().startswith(("[", "{")):
        try:
            return json.loads(value)
        except ValueError:
            return value  # the text parser gives the one-line error
    return value


def _positions(values: Any) -> str:
    return ":".join(str(v) for v in values) if isinstance(values, (list, tuple)) else str(values)


def _probability(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UserError(
            f"{what}: '{text}' is not a number; use a probability such as 0.7"
        ) from None
    if not 0.0 <= value <= 1.0:
        raise UserError(f"{what}: {value} is outside 0..1")
    return value


def parse_acceptance(text: str, k: int, what: str = "--acceptance", sep: str = ",") -> list[float]:
    """'0.8' -> [0.8]*k; '0.8,0.7,0.6' -> one conditional probability per position. A profile
    longer than k gives its first k values (a drafter's profile serves a sweep over k: each
    server keeps the positions it drafts); a shorter one (but not 1) is refused."""
    parts = [p.strip() for p in text.split(sep) if p.strip()]
    if not parts and k == 0:  # no draft positions: the k = 0 baseline's own (empty) list
        return []
    if not parts:
        raise UserError(f"{what}: empty value; give one probability or {k} of them")
    values = [_probability(p, what) for p in parts]
    if len(values) == 1:
        return values * k
    if len(values) < k:
        raise UserError(
            f"{what}: {len(values)} values for {k} draft positions; give 1 or at least {k}"
        )
    return values[:k]


def parse_category_acceptance(text: str, k: int) -> dict[str, list[float]]:
    """'code=0.9,chat=0.5' or per position 'code=0.9:0.8:0.7,chat=0.5'."""
    result: dict[str, list[float]] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        name, eq, values = item.partition("=")
        if not eq or not name.strip():
            raise UserError(
                f"--category-acceptance: '{item}' is not CATEGORY=P (e.g. code=0.9,chat=0.5)"
            )
        what = f"--category-acceptance {name.strip()}"
        result[name.strip()] = parse_acceptance(values, k, what, sep=":")
    return result
