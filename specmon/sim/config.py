"""Simulator settings and the parsing of their flag values (bad values -> UserError)."""

from __future__ import annotations

from dataclasses import dataclass, field

from specmon.errors import UserError
from specmon.sim.model import LATENCY_MODELS, LatencyModel

SHAPES = ("vllm", "vllm-legacy", "trtllm", "sglang", "none")
LEVELS = ("summary", "detailed")


@dataclass
class SimConfig:
    model: str = "specmon-sim"
    num_spec_tokens: int = 3
    # Conditional acceptance per draft position 1..k (P(accept i | accepted i-1)).
    acceptance: list[float] = field(default_factory=lambda: [0.7, 0.7, 0.7])
    category_acceptance: dict[str, list[float]] = field(default_factory=dict)
    ttft_ms: float = 0.0
    step_ms: float = 0.0
    draft_ms_per_token: float = 0.0
    batch_slope: float = 0.0
    shape: str = "vllm"
    level: str = "detailed"
    seed: int | None = None
    log_path: str | None = None
    api_key: str | None = None
    engines: int = 1
    error_rate: float = 0.0
    malformed_rate: float = 0.0
    disconnect_rate: float = 0.0
    default_max_tokens: int = 64
    force_include_usage: bool = False  # vLLM --enable-force-include-usage
    per_request_metrics: bool = False  # vLLM --enable-per-request-metrics (timing keys)
    # Latency model and server capacity (docs in specmon/sim/model.py and scheduler.py).
    latency_model: str = "linear"
    step_floor_ms: float = 0.0
    compute_ms_per_token: float = 0.0
    max_num_seqs: int = 1_000_000  # large: nothing waits unless asked
    kv_cache_tokens: int = 1_000_000_000  # large: nothing is preempted unless asked

    def latency(self) -> LatencyModel:
        return LatencyModel(
            kind=self.latency_model,
            step_ms=self.step_ms,
            batch_slope=self.batch_slope,
            step_floor_ms=self.step_floor_ms,
            compute_ms_per_token=self.compute_ms_per_token,
            draft_ms_per_token=self.draft_ms_per_token,
        )

    def acceptance_for(self, category: str | None) -> list[float]:
        """Per-position conditional acceptance for a request of this category."""
        if category and category in self.category_acceptance:
            return self.category_acceptance[category]
        return self.acceptance


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
    """'0.8' -> [0.8]*k; '0.8,0.7,0.6' -> one conditional probability per position (k of them)."""
    parts = [p.strip() for p in text.split(sep) if p.strip()]
    if not parts:
        raise UserError(f"{what}: empty value; give one probability or {k} of them")
    values = [_probability(p, what) for p in parts]
    if len(values) == 1:
        return values * k
    if len(values) != k:
        raise UserError(f"{what}: {len(values)} values for {k} draft positions; give 1 or {k}")
    return values


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


def validate(cfg: SimConfig) -> SimConfig:
    """Reject impossible settings with one clear line."""
    if cfg.num_spec_tokens < 0:
        raise UserError("--num-spec-tokens must be 0 (no speculation) or more")
    if cfg.shape not in SHAPES:
        raise UserError(f"--shape must be one of {', '.join(SHAPES)}")
    if cfg.level not in LEVELS:
        raise UserError(f"--level must be one of {', '.join(LEVELS)}")
    if cfg.engines < 1:
        raise UserError("--engines must be at least 1")
    if cfg.latency_model not in LATENCY_MODELS:
        raise UserError(f"--latency-model must be one of {', '.join(LATENCY_MODELS)}")
    for name in ("max_num_seqs", "kv_cache_tokens"):
        if getattr(cfg, name) < 1:
            raise UserError(f"--{name.replace('_', '-')} must be at least 1")
    for name in (
        "ttft_ms",
        "step_ms",
        "draft_ms_per_token",
        "batch_slope",
        "step_floor_ms",
        "compute_ms_per_token",
    ):
        if getattr(cfg, name) < 0:
            raise UserError(f"--{name.replace('_', '-')} must not be negative")
    for name in ("error_rate", "malformed_rate", "disconnect_rate"):
        if not 0.0 <= getattr(cfg, name) <= 1.0:
            raise UserError(f"--{name.replace('_', '-')} must be a probability in 0..1")
    if len(cfg.acceptance) != cfg.num_spec_tokens:
        raise UserError("--acceptance must give 1 or --num-spec-tokens values")
    if cfg.default_max_tokens < 1:
        raise UserError("--default-max-tokens must be at least 1")
    return cfg
