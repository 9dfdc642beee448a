"""RunConfig: every run flag, from one table used for argparse, TOML files and SPECMON_* env.

Precedence: command-line flags > SPECMON_* environment variables > `--config FILE` > defaults.
Flags are registered with `default=argparse.SUPPRESS`, so the parsed namespace holds only
what the user typed and the layers can be merged key by key.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from specmon.errors import UserError


class RunConfig(BaseModel):
    """The effective configuration of one run (what `--save-config` writes)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    url: list[str] = Field(default_factory=list)
    endpoint_type: Literal["chat", "completions"] = "chat"
    streaming: bool = False
    model: str | None = None
    api_key: str | None = None
    extra_inputs: dict[str, Any] = Field(default_factory=dict)
    request_timeout: float = Field(600.0, gt=0)
    concurrency: int | None = Field(None, ge=1)
    request_rate: float | None = Field(None, gt=0)
    request_rate_mode: Literal["constant", "poisson"] = "poisson"
    request_count: int | None = Field(None, ge=1)
    benchmark_duration: float | None = Field(None, gt=0)
    warmup_request_count: int = Field(0, ge=0)
    synthetic_input_tokens_mean: int = Field(550, ge=1)
    synthetic_input_tokens_stddev: float = Field(0.0, ge=0)
    output_tokens_mean: int | None = Field(128, ge=1)
    output_tokens_stddev: float = Field(0.0, ge=0)
    prompt_source: Literal["synthetic", "builtin", "file"] | None = None
    input_file: str | None = None
    dataset: Literal["spec_bench", "mt_bench", "speed_bench", "sharegpt"] | None = None
    dataset_category: str | None = None
    dataset_turns: Literal["first", "all"] = "first"
    dataset_sampling: Literal["sequential", "random"] = "sequential"
    random_seed: int | None = None
    artifact_dir: str | None = None
    export_level: Literal["summary", "records", "raw"] = "records"
    headless: bool = False
    refresh_hz: float = Field(4.0, gt=0, le=60)
    theme: str | None = None
    workers: int = Field(1, ge=1, le=256)
    engine: Literal["auto", "vllm", "sglang", "trtllm"] = "auto"
    split: bool = False
    mirror: bool = False
    segments: str | None = None
    segment_duration: float | None = Field(None, gt=0)
    segment_requests: int | None = Field(None, ge=1)
    draft_cost: float | None = Field(None, ge=0)
    server_metrics: bool = True

    @field_validator("url", mode="before")
    @classmethod
    def _url_list(cls, value: Any) -> Any:
        if isinstance(value, str):  # env / TOML may give one string, comma-separated
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("url")
    @classmethod
    def _url_shape(cls, urls: list[str]) -> list[str]:
        for entry in urls:
            _, target = split_url_label(entry)
            if not re.match(r"^https?://[^/\s]+", target):
                raise ValueError(f"'{entry}' is not an http(s) URL (e.g. http://127.0.0.1:8000)")
        return urls

    @field_validator("extra_inputs", mode="before")
    @classmethod
    def _extra_inputs(cls, value: Any) -> Any:
        if isinstance(value, (str, list)):
            return parse_extra_inputs([value] if isinstance(value, str) else value)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        if self.prompt_source == "file" and not self.input_file:
            raise ValueError("prompt_source 'file' needs --input-file")
        if self.dataset is not None and not self.input_file:
            raise ValueError(f"--dataset {self.dataset} reads --input-file FILE: give the file")
        if self.dataset is not None and self.prompt_source is not None:
            raise ValueError("--dataset sets the prompts: drop --prompt-source")
        if self.dataset_category and self.dataset is None:
            raise ValueError("--dataset-category needs --dataset")
        if self.split and self.mirror:
            raise ValueError("--split and --mirror exclude each other: pick one")
        if self.segments is not None:
            self._check_segments()
        elif self.segment_duration is not None or self.segment_requests is not None:
            raise ValueError("--segment-duration / --segment-requests need --segments")
        return self

    def _check_segments(self) -> None:
        from specmon.analysis.segments import parse_segments  # validates the spec itself

        parse_segments(self.segments or "")
        if (self.segment_duration is None) == (self.segment_requests is None):
            raise ValueError(
                "--segments needs exactly one of --segment-duration S or --segment-requests N"
            )
        if self.request_count is not None or self.benchmark_duration is not None:
            raise ValueError(
                "--segments sets the run length: drop --request-count / --benchmark-duration"
            )
        if self.workers > 1:
            raise ValueError("--segments runs in one process: drop --workers")

    # Resolved views used by the load loop -------------------------------------------
    @property
    def effective_prompt_source(self) -> str:
        if self.dataset:
            return "dataset"
        if self.prompt_source:
            return self.prompt_source
        return "file" if self.input_file else "builtin"

    @property
    def effective_concurrency(self) -> int | None:
        """Closed loop default is concurrency 1 (as AIPerf); open loop may leave it None."""
        if self.concurrency is None and self.request_rate is None:
            return 1
        return self.concurrency

    def targets(self) -> list[tuple[str, str]]:
        """(label, base URL) per --url; the label defaults to host:port."""
        out = []
        for entry in self.url:
            label, target = split_url_label(entry)
            target = target.rstrip("/")
            out.append((label or re.sub(r"^https?://", "", target), target))
        return out

    def load_name(self) -> str:
        """AIPerf-style stimulus part of the artifact dir name."""
        if self.request_rate is not None:
            name = f"request_rate{self.request_rate:g}"
            if self.concurrency is not None:
                name += f"-concurrency{self.concurrency}"
            return name
        return f"concurrency{self.effective_concurrency}"

    def default_artifact_dir(self, model: str) -> str:
        safe_model = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_") or "model"
        return str(
            Path("artifacts") / f"{safe_model}-openai-{self.endpoint_type}-{self.load_name()}"
        )


def split_url_label(entry: str) -> tuple[str | None, str]:
    """'gpu0=http://h:8000' -> ('gpu0', 'http://h:8000'); a plain URL has no label."""
    if "=" in entry and not re.match(r"^https?://", entry):
        label, _, target = entry.partition("=")
        return label.strip() or None, target.strip()
    return None, entry.strip()


def _coerce_scalar(text: str) -> Any:
    """AIPerf's key:value values: JSON when it parses (true, 12, 0.5, {...}), else a string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_extra_inputs(items: list[Any]) -> dict[str, Any]:
    """Merge --extra-inputs items: JSON objects or AIPerf's `key:value` form."""
    merged: dict[str, Any] = {}
    for item in items:
        if isinstance(item, dict):
            merged.update(item)
            continue
        text = str(item).strip()
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise ValueError(f"'{text}' is not valid JSON ({exc.msg})") from None
            if not isinstance(value, dict):
                raise ValueError(f"'{text}' must be a JSON object")
            merged.update(value)
        elif ":" in text:
            key, _, value = text.partition(":")
            merged[key.strip()] = _coerce_scalar(value.strip())
        else:
            raise ValueError(f"'{text}' must be a JSON object or key:value")
    return merged


# --------------------------------------------------------------------------------------
# The flag table: one row per RunConfig field.


@dataclass(frozen=True)
class FlagDef:
    field: str
    help: str
    type: Any = str
    choices: tuple[str, ...] | None = None
    kind: str = "value"  # value | bool | append
    metavar: str | None = None
    env_alias: str | None = None  # a second, lower-priority env var (OPENAI_API_KEY)

    @property
    def flag(self) -> str:
        return "--" + self.field.replace("_", "-")

    @property
    def env(self) -> str:
        return "SPECMON_" + self.field.upper()


FLAGS: tuple[FlagDef, ...] = (
    FlagDef(
        "url", "server base URL, optionally LABEL=URL; repeatable", kind="append", metavar="URL"
    ),
    FlagDef(
        "endpoint_type", "OpenAI endpoint to drive (default chat)", choices=("chat", "completions")
    ),
    FlagDef("streaming", "stream responses over SSE (--no-streaming to turn off)", kind="bool"),
    FlagDef("model", "model name (default: the first id /v1/models lists)"),
    FlagDef("api_key", "bearer token (default: $OPENAI_API_KEY)", env_alias="OPENAI_API_KEY"),
    FlagDef(
        "extra_inputs",
        "JSON object or key:value merged into every request body; repeatable",
        kind="append",
        metavar="JSON|KEY:VALUE",
    ),
    FlagDef(
        "request_timeout", "seconds before a request counts as a timeout (default 600)", type=float
    ),
    FlagDef(
        "concurrency", "closed loop: requests in flight (default 1); caps --request-rate", type=int
    ),
    FlagDef("request_rate", "open loop: requests per second", type=float),
    FlagDef(
        "request_rate_mode",
        "arrival process of --request-rate (default poisson)",
        choices=("constant", "poisson"),
    ),
    FlagDef("request_count", "stop after this many profiling requests", type=int),
    FlagDef("benchmark_duration", "stop after this many seconds of profiling", type=float),
    FlagDef("warmup_request_count", "requests sent first and left out of the metrics", type=int),
    FlagDef(
        "synthetic_input_tokens_mean", "synthetic prompt length in tokens (default 550)", type=int
    ),
    FlagDef("synthetic_input_tokens_stddev", "stddev of the synthetic prompt length", type=float),
    FlagDef("output_tokens_mean", "max_tokens sent with ignore_eos (default 128)", type=int),
    FlagDef("output_tokens_stddev", "stddev of max_tokens", type=float),
    FlagDef(
        "prompt_source",
        "prompts: synthetic, builtin (categories) or file (default builtin)",
        choices=("synthetic", "builtin", "file"),
    ),
    FlagDef(
        "input_file",
        'JSONL prompts, one {"text", "category", "max_tokens"} a line (or a --dataset file)',
    ),
    FlagDef(
        "dataset",
        "read --input-file as this published prompt set (default: specmon's own JSONL)",
        choices=("spec_bench", "mt_bench", "speed_bench", "sharegpt"),
    ),
    FlagDef("dataset_category", "keep only these dataset categories (comma-separated)"),
    FlagDef(
        "dataset_turns",
        "first turn only (default), or all turns with the model's answers as history",
        choices=("first", "all"),
    ),
    FlagDef(
        "dataset_sampling",
        "dataset row order, each row once a pass: sequential (file order, default) or "
        "random (seeded by --random-seed)",
        choices=("sequential", "random"),
    ),
    FlagDef("random_seed", "seed for prompts, lengths and arrivals", type=int),
    FlagDef("artifact_dir", "where exports go (default artifacts/<model>-<endpoint>-<load>/)"),
    FlagDef(
        "export_level",
        "summary, records (default) or raw (adds the raw capture)",
        choices=("summary", "records", "raw"),
    ),
    FlagDef("headless", "no TUI: progress lines, then the console tables", kind="bool"),
    FlagDef("refresh_hz", "TUI refresh rate (default 4)", type=float),
    FlagDef("theme", "TUI theme name"),
    FlagDef("workers", "spread the load over N processes (default 1)", type=int),
    FlagDef(
        "engine",
        "payload shape to expect (default auto-detect; sglang also asks every "
        "request for return_spec_tokens_details)",
        choices=("auto", "vllm", "sglang", "trtllm"),
    ),
    FlagDef(
        "split",
        "several --url: divide concurrency, rate and request count among them "
        "(default: each server gets the full load)",
        kind="bool",
    ),
    FlagDef(
        "mirror", "several --url: send the same prompts in the same order to each", kind="bool"
    ),
    FlagDef(
        "segments",
        'scripted load segments, e.g. "concurrency=1,4,16" (also request_rate=, '
        "output_tokens=; several keys joined by ';')",
        metavar="KEY=V1,V2,...",
    ),
    FlagDef("segment_duration", "seconds per scripted segment", type=float),
    FlagDef("segment_requests", "requests per scripted segment (per server)", type=int),
    FlagDef(
        "draft_cost",
        "draft cost ratio c for the per-segment recommended k "
        "(default: fitted when servers run at several k)",
        type=float,
    ),
    FlagDef(
        "server_metrics", "poll each server's /metrics during the run (default on)", kind="bool"
    ),
)
FLAG_BY_FIELD = {flag.field: flag for flag in FLAGS}
assert set(FLAG_BY_FIELD) == set(RunConfig.model_fields), "flag table and RunConfig disagree"


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Register every run flag plus --config/--save-config (all default to SUPPRESS)."""
    parser.error = _one_line_error  # type: ignore[method-assign]
    group = parser.add_argument_group("run options")
    for flag in FLAGS:
        kwargs: dict[str, Any] = {
            "dest": flag.field,
            "default": argparse.SUPPRESS,
            "help": flag.help,
        }
        if flag.kind == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        elif flag.kind == "append":
            kwargs.update(action="append", metavar=flag.metavar)
        else:  # strings: RunConfig validates, so a bad value is one line, not argparse's usage
            kwargs["metavar"] = flag.metavar or _metavar(flag)
        group.add_argument(flag.flag, **kwargs)
    group.add_argument(
        "--config",
        dest="config_file",
        default=None,
        metavar="FILE",
        help="read options from a TOML file (flags and SPECMON_* env win)",
    )
    group.add_argument(
        "--save-config",
        dest="save_config",
        default=None,
        metavar="FILE",
        help="write the effective configuration as TOML",
    )


def _one_line_error(message: str) -> None:
    """argparse's errors (unknown flag, missing value) as one line, like every UserError."""
    print(f"specmon: error: {message} (see --help)", file=sys.stderr)
    raise SystemExit(2)


def _metavar(flag: FlagDef) -> str:
    if flag.choices:
        return "{" + ",".join(flag.choices) + "}"
    return {int: "N", float: "X"}.get(flag.type, flag.field.rsplit("_", 1)[-1].upper())


def _normalise_key(key: str) -> str:
    return key.replace("-", "_")


def _file_layer(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise UserError(f"config file {path}: not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"config file {path}: invalid TOML ({exc})") from None
    except OSError as exc:
        raise UserError(f"config file {path}: {exc.strerror}") from None
    layer = {}
    for key, value in data.items():
        field = _normalise_key(key)
        if field not in FLAG_BY_FIELD:
            raise UserError(f"config file {path}: unknown key '{key}'")
        layer[field] = value
    return layer


def _env_layer(environ: dict[str, str]) -> dict[str, Any]:
    layer: dict[str, Any] = {}
    for flag in FLAGS:
        if flag.env_alias and environ.get(flag.env_alias):
            layer[flag.field] = environ[flag.env_alias]
        if flag.env in environ:
            layer[flag.field] = environ[flag.env]
    return layer


def _flag_layer(args: argparse.Namespace) -> dict[str, Any]:
    return {field: getattr(args, field) for field in FLAG_BY_FIELD if hasattr(args, field)}


def _layer_errors(exc: ValidationError, sources: dict[str, str]) -> UserError:
    """One line naming the first bad key and where it came from."""
    err = exc.errors()[0]
    field = str(err["loc"][0]) if err["loc"] else ""
    where = sources.get(field, "option")
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        return UserError(f"{where}: unknown key '{field}'")
    if not field:
        return UserError(message)
    given = err.get("input")
    shown = f" {given!r}" if given is not None and not isinstance(given, (dict, list)) else ""
    return UserError(f"{where}: bad value{shown} for '{field}': {message}")


def build_config(
    args: argparse.Namespace | None = None,
    environ: dict[str, str] | None = None,
    overrides: dict[str, Any] | None = None,
    defaults: dict[str, Any] | None = None,
) -> RunConfig:
    """Merge defaults < file < env < flags (< overrides from code) into a validated RunConfig.

    `defaults` replaces RunConfig's own defaults (a command such as demo has its own)."""
    environ = dict(os.environ if environ is None else environ)
    args = args or argparse.Namespace()
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    config_file = getattr(args, "config_file", None) or environ.get("SPECMON_CONFIG")
    layers = [("defaults", defaults or {})]
    if config_file:
        layers.append((f"config file {config_file}", _file_layer(config_file)))
    layers.append(("environment", _env_layer(environ)))
    layers.append(("command line", _flag_layer(args)))
    layers.append(("options", overrides or {}))
    for where, layer in layers:
        for field, value in layer.items():
            merged[field] = value
            flag = FLAG_BY_FIELD.get(field)
            if where == "environment" and flag:
                sources[field] = f"environment {flag.env}"
            elif where == "command line" and flag:
                sources[field] = f"option {flag.flag}"
            else:
                sources[field] = where
    try:
        return RunConfig(**merged)
    except ValidationError as exc:
        raise _layer_errors(exc, sources) from None


def save_config(config: RunConfig, path: str) -> None:
    """Write the effective configuration as TOML (None values are left out: TOML has no null)."""
    import tomli_w

    data = {
        FLAG_BY_FIELD[k].flag[2:]: v
        for k, v in config.model_dump().items()
        if v is not None and k != "api_key"
    }
    try:
        Path(path).write_text(tomli_w.dumps(data))
    except OSError as exc:
        raise UserError(f"cannot write config {path}: {exc.strerror}") from None
