"""Options: each one declared once, as a pydantic field; every layer is generated from it.

A model's fields are its options. `option(default, help, ...)` declares one: the field name
gives the flag (`--request-count`, or `flag=` when it differs), the TOML key (the flag without
its dashes; `request-count` and `request_count` both read) and the environment variable
(`SPECMON_REQUEST_COUNT`; the simulator's are `SPECMON_SIM_*`); the annotation and the
pydantic checks (`ge=`, `Literal[...]`, validators) give the type and the validation; `help`
is the help text, to which the generator appends the default. An `OptionSet` turns a model
into the argparse group, the TOML loader, the env layer, `--save-config` and (for a parent
that starts a child) an argv. `RUN_OPTIONS` here declares `specmon run` / `specmon demo`;
`specmon.sim.config.SIM_OPTIONS` declares `specmon sim`, and demo reuses it.

Adding an option is ONE edit: add a field to `RunConfig` (or `SimConfig`), e.g.
    settle_s: float = option(2.0, "seconds to wait before the first request", ge=0)
(a made-up option: the real fields below are the ones to read)
and every layer knows it (tests/test_options.py checks that each layer does).

Precedence: command-line flags > environment variables > `--config FILE` > defaults.
Flags are registered with `default=argparse.SUPPRESS`, so the parsed namespace holds only
what the user typed and the layers can be merged key by key. Every flag takes a string and
the model validates it, so a bad value is one line naming the flag, the variable, or the
file and key it came from.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tomllib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, NoReturn, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from specmon.bounded_read import read_bounded  # a FIFO or device: refused
from specmon.constants import PERCENTILES
from specmon.errors import UserError
from specmon.records import json_object
from specmon.segment_plan import parse_segments  # validates the spec itself
from specmon.specdecode.engines import ENGINE_NAMES, engine_choice
from specmon.specdecode.method import parse_method

M = TypeVar("M", bound=BaseModel)
MAX_TOKENS = 2**20  # prompt / output length bound: past any context window (a 1e9-token
# prompt once sat building at "done 0/5", deaf to signals)
MAX_SECONDS = 1e7  # about 115 days: beyond it a time option is a mistake (and overflows timers)


def seconds(text: str) -> float:
    """argparse type of a duration flag: a finite number of seconds > 0, at most MAX_SECONDS
    (nan, inf, 0 or a negative is refused in one line: `argument --X: ...`, status 2)."""
    return number_in(text, 0.0, MAX_SECONDS, "seconds")


def positive(text: str) -> float:
    """argparse type of a finite number > 0 (a rate, a refresh frequency)."""
    return number_in(text, 0.0, 1e12, "a number")


def non_negative(text: str) -> float:
    """argparse type of a finite number >= 0 (0 has a meaning: e.g. --speed 0 is no pacing)."""
    return number_in(text, 0.0, 1e12, "a number", low_included=True)


def number_in(text: str, low: float, most: float, what: str, low_included: bool = False) -> float:
    """A finite float from `low` (excluded unless `low_included`) to `most`; else an
    argparse.ArgumentTypeError naming the bounds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    above = low <= value if low_included else low < value
    if not (above and value <= most):  # nan fails every comparison
        bound = ">=" if low_included else ">"
        raise argparse.ArgumentTypeError(f"{text!r}: give {what} {bound} {low:g} and <= {most:g}")
    return value


def option(
    default: Any = None,
    help: str = "",
    *,
    flag: str | None = None,
    metavar: str | None = None,
    repeat: bool = False,
    env_alias: str | None = None,
    secret: bool = False,
    default_factory: Any = None,
    **checks: Any,
) -> Any:
    """Declare one option: a pydantic Field whose extra metadata the layers read.

    flag: the flag when it is not `--<field-name>`; repeat: the flag may be given several
    times (values collected in a list); env_alias: a second, lower-priority variable (as
    OPENAI_API_KEY); secret: never written by --save-config. `checks` are pydantic's (ge=...).
    """
    extra: dict[str, Any] = {"help": help, "repeat": repeat, "secret": secret}
    if flag:
        extra["flag"] = flag
    if metavar:
        extra["metavar"] = metavar
    if env_alias:
        extra["env_alias"] = env_alias
    if default_factory is not None:
        return Field(default_factory=default_factory, json_schema_extra=extra, **checks)
    return Field(default, json_schema_extra=extra, **checks)


@dataclass(frozen=True)
class OptionSpec:
    """What every layer needs to know about one option (derived from its field)."""

    field: str
    flag: str  # --request-count
    env: str  # SPECMON_REQUEST_COUNT
    help: str  # as declared; help_text() adds the default
    default: Any  # PydanticUndefined when a factory makes it (an empty list or table)
    kind: Literal["value", "bool", "append"]
    metavar: str | None
    env_alias: str | None
    secret: bool

    def help_text(self, default: Any = PydanticUndefined) -> str:
        """The help line, with `default` (a command's own) or the declared default."""
        return self.help + _default_text(self.default if default is PydanticUndefined else default)

    @property
    def key(self) -> str:
        """The TOML key --save-config writes (the loader also takes underscores)."""
        return self.flag[2:]


def _base_type(annotation: Any) -> Any:
    """`int | None` -> int; `Literal[...] | None` -> the Literal."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation


def _metavar(field: str, annotation: Any) -> str:
    base = _base_type(annotation)
    if typing.get_origin(base) is Literal:
        return "{" + ",".join(str(choice) for choice in typing.get_args(base)) + "}"
    return {int: "N", float: "X"}.get(base, field.rsplit("_", 1)[-1].upper())


def _default_text(value: Any) -> str:
    """' (default X)' for the help text (none for None, off, empty or a factory default)."""
    if value is None or value is False or value == "" or value is PydanticUndefined:
        return ""
    shown = "on" if value is True else f"{value:g}" if isinstance(value, float) else str(value)
    return f" (default {shown})"


def _spec(name: str, info: FieldInfo, env_prefix: str) -> OptionSpec:
    extra = info.json_schema_extra
    if not isinstance(extra, dict) or "help" not in extra:
        raise TypeError(f"field {name!r} is not declared with option(...)")
    flag = str(extra.get("flag") or "--" + name.replace("_", "-"))
    if info.annotation is bool:
        kind: Literal["value", "bool", "append"] = "bool"
    else:
        kind = "append" if extra.get("repeat") else "value"
    metavar = extra.get("metavar")
    return OptionSpec(
        field=name,
        flag=flag,
        env=env_prefix + flag[2:].replace("-", "_").upper(),
        help=str(extra["help"]),
        default=info.default,
        kind=kind,
        metavar=None if kind == "bool" else str(metavar or _metavar(name, info.annotation)),
        env_alias=str(extra["env_alias"]) if extra.get("env_alias") else None,
        secret=bool(extra.get("secret")),
    )


class OptionSet(Generic[M]):
    """The layers of one options model: argparse, TOML file, environment, save, argv.

    `dest_prefix` keeps two sets apart in one namespace (demo parses run and simulator
    options together; both have a `model`)."""

    def __init__(self, model: type[M], *, env_prefix: str, title: str, dest_prefix: str = ""):
        self.model = model
        self.title = title
        self.dest_prefix = dest_prefix
        self.config_env = env_prefix + "CONFIG"
        self.specs: tuple[OptionSpec, ...] = tuple(
            _spec(name, info, env_prefix) for name, info in model.model_fields.items()
        )
        self.by_field = {spec.field: spec for spec in self.specs}
        self._by_key = {spec.key.replace("-", "_"): spec for spec in self.specs}

    # argparse ---------------------------------------------------------------------------
    def add_arguments(
        self,
        parser: argparse.ArgumentParser,
        *,
        exclude: Sequence[str] = (),
        rename: Mapping[str, str] | None = None,
        defaults: Mapping[str, Any] | None = None,
        config_flags: bool = True,
    ) -> None:
        """Register every option (all default to SUPPRESS), plus --config/--save-config.

        `exclude` leaves options out (a parent that sets them itself); `rename` gives an
        option another flag in this parser (demo's --sim-log); `defaults` are the command's
        own defaults, shown in the help (the same ones it gives build())."""
        parser.error = _one_line_error  # type: ignore[method-assign]  # one line, see below
        group = parser.add_argument_group(self.title)
        for spec in self.specs:
            if spec.field in exclude:
                continue
            text = spec.help_text((defaults or {}).get(spec.field, PydanticUndefined))
            kwargs: dict[str, Any] = {
                "dest": self.dest_prefix + spec.field,
                "default": argparse.SUPPRESS,
                # argparse formats help with %: a literal one ("more than 1% of") crashed --help
                "help": text.replace("%", "%%"),
            }
            if spec.kind == "bool":
                kwargs["action"] = argparse.BooleanOptionalAction
            else:  # strings: the model validates, so a bad value is one line, not a usage
                kwargs.update(metavar=spec.metavar)
                if spec.kind == "append":
                    kwargs["action"] = "append"
            group.add_argument((rename or {}).get(spec.field, spec.flag), **kwargs)
        if config_flags:
            group.add_argument(
                "--config",
                dest=self.dest_prefix + "config_file",
                default=None,
                metavar="FILE",
                help=f"read options from a TOML file (flags and {self.config_env[:-6]}* env win)",
            )
            group.add_argument(
                "--save-config",
                dest=self.dest_prefix + "save_config",
                default=None,
                metavar="FILE",
                help="write the effective configuration as TOML",
            )

    # layers -----------------------------------------------------------------------------
    def file_layer(self, path: str) -> dict[str, Any]:
        try:
            data = tomllib.loads(read_bounded(path, "config file").decode("utf-8"))
        except UnicodeDecodeError:
            raise UserError(f"config file {path}: not UTF-8 text") from None
        except tomllib.TOMLDecodeError as exc:
            raise UserError(f"config file {path}: invalid TOML ({exc})") from None
        except OSError as exc:
            raise UserError(f"config file {path}: {exc.strerror}") from None
        layer = {}
        for key, value in data.items():
            spec = self._by_key.get(key.replace("-", "_"))
            if spec is None:
                raise UserError(f"config file {path}: unknown key '{key}'")
            layer[spec.field] = value
        return layer

    def env_layer(self, environ: Mapping[str, str]) -> dict[str, Any]:
        layer: dict[str, Any] = {}
        for spec in self.specs:
            if spec.env_alias and environ.get(spec.env_alias):
                layer[spec.field] = environ[spec.env_alias]
            if spec.env in environ:
                layer[spec.field] = environ[spec.env]
        return layer

    def flag_layer(self, args: argparse.Namespace) -> dict[str, Any]:
        layer = {}
        for spec in self.specs:
            dest = self.dest_prefix + spec.field
            if hasattr(args, dest):
                layer[spec.field] = getattr(args, dest)
        return layer

    def build(
        self,
        args: argparse.Namespace | None = None,
        environ: Mapping[str, str] | None = None,
        overrides: Mapping[str, Any] | None = None,
        defaults: Mapping[str, Any] | None = None,
        rename: Mapping[str, str] | None = None,
    ) -> M:
        """Merge defaults < file < env < flags (< overrides from code) into a validated model.

        `defaults` replaces the model's own defaults (a command such as demo has its own);
        `rename` is the one given to add_arguments, so errors name the flag that was typed."""
        environ = dict(os.environ if environ is None else environ)
        args = args or argparse.Namespace()
        config_file = getattr(args, self.dest_prefix + "config_file", None) or environ.get(
            self.config_env
        )
        layers: list[tuple[str, Mapping[str, Any]]] = [("defaults", defaults or {})]
        if config_file:
            layers.append((f"config file {config_file}", self.file_layer(config_file)))
        layers.append(("environment", self.env_layer(environ)))
        layers.append(("command line", self.flag_layer(args)))
        layers.append(("options", overrides or {}))
        merged: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for where, layer in layers:
            for field, value in layer.items():
                merged[field] = value
                sources[field] = self._source(where, field, rename or {})
        try:
            return self.model(**merged)
        except ValidationError as exc:
            raise _layer_error(exc, sources) from None

    def _source(self, where: str, field: str, rename: Mapping[str, str]) -> str:
        spec = self.by_field.get(field)
        if spec is None:
            return where
        if where == "environment":
            return f"environment {spec.env}"
        if where == "command line":
            return f"option {rename.get(field, spec.flag)}"
        return where

    # output -----------------------------------------------------------------------------
    def save(self, config: M, path: str) -> None:
        """Write the effective configuration as TOML (None is left out: TOML has no null)."""
        import tomli_w

        try:
            Path(path).write_text(tomli_w.dumps(self.toml_data(config)))
        except OSError as exc:
            raise UserError(f"cannot write config {path}: {exc.strerror}") from None

    def toml_data(self, config: M) -> dict[str, Any]:
        values = config.model_dump()
        return {
            spec.key: values[spec.field]
            for spec in self.specs
            if values[spec.field] is not None and not spec.secret
        }

    def to_argv(self, config: M) -> list[str]:
        """Flags that rebuild `config` in a child process (lists and tables as JSON)."""
        argv: list[str] = []
        for field, value in config.model_dump().items():
            spec = self.by_field[field]
            if value is None:
                continue
            if spec.kind == "bool":
                argv.append(spec.flag if value else "--no-" + spec.flag[2:])
            elif spec.kind == "append":
                for item in value if isinstance(value, list) else [value]:
                    argv += [spec.flag, item if isinstance(item, str) else json.dumps(item)]
            else:
                text = json.dumps(value) if isinstance(value, (list, dict)) else str(value)
                argv += [spec.flag, text]
        return argv


def _one_line_error(message: str) -> NoReturn:
    """argparse's errors (unknown flag, missing value) as one line, like every UserError."""
    print(f"specmon: error: {message} (see --help)", file=sys.stderr)
    raise SystemExit(2)


def _layer_error(exc: ValidationError, sources: dict[str, str]) -> UserError:
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


# --------------------------------------------------------------------------------------
# The run options (specmon run, specmon demo).


class RunConfig(BaseModel):
    """The effective configuration of one run (what `--save-config` writes)."""

    # allow_inf_nan: every float option must be finite (an `inf` timeout once crashed every
    # request inside aiohttp while the run reported successes)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    url: list[str] = option(
        help="server base URL, optionally LABEL=URL; repeatable",
        default_factory=list,
        repeat=True,
        metavar="URL",
    )
    endpoint_type: Literal["chat", "completions"] = option("chat", "OpenAI endpoint to drive")
    streaming: bool = option(False, "stream responses over SSE (--no-streaming to turn off)")
    model: str | None = option(None, "model name (default: the first id /v1/models lists)")
    spec_method: str | None = option(
        None,
        "the speculative method and drafter, e.g. eagle3:yuhuili/EAGLE3-LLaMA3.1-Instruct-8B "
        "or draft_model:MODEL or ngram, for the header, the exports and compare (the "
        "server's own word wins where it tells: SGLang, vLLM's dev-mode /server_info)",
        metavar="METHOD[:DRAFTER]",
    )
    api_key: str | None = option(
        None, "bearer token (default: $OPENAI_API_KEY)", env_alias="OPENAI_API_KEY", secret=True
    )
    extra_inputs: dict[str, Any] = option(
        help="JSON object or key:value merged into every request body; repeatable",
        default_factory=dict,
        repeat=True,
        metavar="JSON|KEY:VALUE",
    )
    request_timeout: float = option(
        600.0, "seconds before a request counts as a timeout", gt=0, le=MAX_SECONDS
    )
    concurrency: int | None = option(
        None,
        "closed loop: requests in flight (1 without --request-rate); caps --request-rate",
        ge=1,
    )
    request_rate: float | None = option(None, "open loop: requests per second", gt=0)
    request_rate_mode: Literal["constant", "poisson"] = option(
        "poisson", "arrival process of --request-rate"
    )
    request_count: int | None = option(None, "stop after this many profiling requests", ge=1)
    benchmark_duration: float | None = option(
        None, "stop after this many seconds of profiling", gt=0, le=MAX_SECONDS
    )
    warmup_request_count: int = option(0, "requests sent first and left out of the metrics", ge=0)
    synthetic_input_tokens_mean: int = option(
        550, "synthetic prompt length in tokens", ge=1, le=MAX_TOKENS
    )
    synthetic_input_tokens_stddev: float = option(
        0.0, "stddev of the synthetic prompt length", ge=0
    )
    output_tokens_mean: int | None = option(
        128, "max_tokens sent with ignore_eos", ge=1, le=MAX_TOKENS
    )
    output_tokens_stddev: float = option(0.0, "stddev of max_tokens", ge=0)
    prompt_source: Literal["synthetic", "builtin", "file"] | None = option(
        None, "prompts: synthetic, builtin (categories) or file (default builtin)"
    )
    input_file: str | None = option(
        None, 'JSONL prompts, one {"text", "category", "max_tokens"} a line (or a --dataset file)'
    )
    dataset: Literal["spec_bench", "mt_bench", "speed_bench", "sharegpt"] | None = option(
        None, "read --input-file as this published prompt set (default: specmon's own JSONL)"
    )
    dataset_category: str | None = option(
        None, "keep only these dataset categories (comma-separated)"
    )
    dataset_turns: Literal["first", "all"] = option(
        "first", "first turn only, or all turns with the model's answers as history"
    )
    dataset_sampling: Literal["sequential", "random"] = option(
        "sequential",
        "dataset row order, each row once a pass: sequential (file order) or random "
        "(seeded by --random-seed)",
    )
    dataset_shard: str | None = option(
        None,
        "I/N: send only dataset rows I, I+N, I+2N, ... (0-based; several client hosts "
        "share one set); --workers and --split shard further, so each row is sent once",
        metavar="I/N",
        pattern=r"^\d+/[1-9]\d*$",
    )
    random_seed: int | None = option(None, "seed for prompts, lengths and arrivals")
    artifact_dir: str | None = option(
        None, "where exports go (default artifacts/<model>-<endpoint>-<load>/)"
    )
    overwrite: bool = option(
        False, "replace an earlier run in --artifact-dir (default: write to DIR-2, DIR-3, ...)"
    )
    drain_timeout: float = option(
        5.0,
        "on a stop or at --benchmark-duration, seconds in-flight requests may finish before "
        "they are cancelled",
        ge=0,
        le=MAX_SECONDS,
    )
    max_outage: float = option(
        60.0,
        "end the run (exit 1) once the server has been unreachable this many seconds",
        gt=0,
        le=MAX_SECONDS,
    )
    fail_on_errors: bool = option(
        False,
        "exit 1 when more than 1% of the requests failed (the share that excludes a run's "
        "measurements from the advice)",
    )
    max_response_bytes: int = option(
        64 * 2**20,
        "a response body larger than this is an error of its own (response_too_large)",
        ge=1024,
    )
    export_level: Literal["summary", "records", "raw"] = option(
        "records", "summary, records or raw (adds the raw capture)"
    )
    headless: bool = option(False, "no TUI: progress lines, then the console tables")
    refresh_hz: float = option(4.0, "TUI refresh rate", gt=0, le=60)
    theme: str | None = option(None, "TUI theme name")
    metric_percentiles: str = option(
        "99,90,50",
        "percentiles the console tables show, comma-separated "
        f"(as vllm bench serve's; any of {','.join(map(str, PERCENTILES))})",
        metavar="P,P,...",
    )
    workers: int = option(1, "spread the load over N processes", ge=1, le=256)
    engine: str = option(
        "auto",
        "read only this engine's payloads, counting others' as a reason (auto: any engine; "
        "sglang also asks every request for return_spec_tokens_details)",
        metavar="{" + ",".join(("auto", *ENGINE_NAMES)) + "}",
    )
    split: bool = option(
        False,
        "several --url: divide concurrency, rate and request count among them "
        "(default: each server gets the full load)",
    )
    mirror: bool = option(False, "several --url: send the same prompts in the same order to each")
    segments: str | None = option(
        None,
        'scripted load segments, e.g. "concurrency=1,4,16" (also request_rate=, '
        "output_tokens=; several keys joined by ';')",
        metavar="KEY=V1,V2,...",
    )
    segment_duration: float | None = option(
        None, "seconds per scripted segment", gt=0, le=MAX_SECONDS
    )
    segment_requests: int | None = option(None, "requests per scripted segment (per server)", ge=1)
    draft_cost: float | None = option(
        None,
        "draft cost ratio c for the per-segment recommended k "
        "(default: fitted when servers run at several k)",
        ge=0,
    )
    slo: str | None = option(
        None,
        "latency objective for the recommended k: the best k predicted to meet TTFT (s) and "
        "TPOT (ms) at a percentile (default p90), e.g. ttft=1,tpot=50,p=90",
        metavar="ttft=S,tpot=MS[,p=90]",
    )
    server_metrics: bool = option(True, "poll each server's /metrics during the run")
    server_metrics_from: str | None = option(
        None,
        "behind a load balancer: take the run's server counters from a Prometheus-compatible "
        "store that scrapes each replica, over the run's window, instead of scraping --url's "
        "/metrics (with --selector picking the service's replicas)",
        metavar="prometheus:URL",
    )
    selector: str = option(
        "",
        "label matchers picking the fleet's series in the Prometheus store, "
        "e.g. '{job=\"vllm\"}' (watch --prometheus, --server-metrics-from)",
        metavar='{LABEL="VALUE",...}',
    )
    prometheus_port: int | None = option(
        None,
        "serve specmon's own metrics for Prometheus on this port (0: a free one)",
        ge=0,
        le=65535,
        metavar="PORT",
    )
    prometheus_host: str = option(
        "127.0.0.1", "address the --prometheus-port endpoint binds", metavar="HOST"
    )

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
                shown = redact_url(entry)
                raise ValueError(f"'{shown}' is not an http(s) URL (e.g. http://127.0.0.1:8000)")
        return urls

    @field_validator("server_metrics_from")
    @classmethod
    def _store_shape(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^prometheus:https?://[^/\s]+", value.strip()):
            raise ValueError(
                f"{value!r}: give prometheus:URL (e.g. prometheus:http://127.0.0.1:9090)"
            )
        return value

    @model_validator(mode="after")
    def _no_userinfo(self) -> RunConfig:
        """user:key@ in a --url is taken off every URL (so none printed or written carries
        it); the key (or the user, without one) becomes --api-key when none is given."""
        cleaned, secret = [], None
        for entry in self.url:
            label, target = split_url_label(entry)
            parts = urlsplit(target)
            if "@" in parts.netloc:
                userinfo, _, host = parts.netloc.rpartition("@")
                user, _, key = userinfo.partition(":")
                secret = secret or unquote(key or user) or None
                target = urlunsplit(parts._replace(netloc=host))
            cleaned.append(f"{label}={target}" if label else target)
        if secret is not None:  # straight into __dict__: assignment would validate again
            self.__dict__["url"] = cleaned
            if self.api_key is None:
                self.__dict__["api_key"] = secret
        return self

    @field_validator("engine")
    @classmethod
    def _engine(cls, value: str) -> str:
        return engine_choice(value)  # the engine registry's names, plugins' included

    @field_validator("spec_method")
    @classmethod
    def _spec_method(cls, value: str | None) -> str | None:
        parse_method(value)  # a ValueError names what to give
        return value

    @field_validator("metric_percentiles")
    @classmethod
    def _percentiles(cls, value: str) -> str:
        return ",".join(map(str, parse_percentiles(value)))

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
        self._check_synthetic_lengths()
        if self.split and self.mirror:
            raise ValueError("--split and --mirror exclude each other: pick one")
        if self.segments is not None:
            self._check_segments()
        elif self.segment_duration is not None or self.segment_requests is not None:
            raise ValueError("--segment-duration / --segment-requests need --segments")
        return self

    def _check_synthetic_lengths(self) -> None:
        """A synthetic length given for prompts that are not synthetic would be ignored
        without a word (the builtin prompts are 10-50 tokens whatever the flag says)."""
        source = self.effective_prompt_source
        if source == "synthetic":
            return
        for name in ("synthetic_input_tokens_mean", "synthetic_input_tokens_stddev"):
            given = name in self.model_fields_set
            if given and getattr(self, name) != type(self).model_fields[name].default:
                flag = "--" + name.replace("_", "-")
                raise ValueError(
                    f"{flag} sets synthetic prompts' length; these prompts ({source}) keep "
                    f"their own: drop {flag}, or give --prompt-source synthetic"
                )

    def _check_segments(self) -> None:
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


def redact_url(url: str) -> str:
    """`http://user:key@h:8000/v1` -> `http://***@h:8000/v1` (anything else unchanged)."""
    return re.sub(r"(https?://)[^/@\s]*@", r"\1***@", url)


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
                merged.update(json_object(text))
            except ValueError as exc:
                raise ValueError(f"'{text}': {exc}") from None
        elif ":" in text:
            key, _, value = text.partition(":")
            merged[key.strip()] = _coerce_scalar(value.strip())
        else:
            raise ValueError(f"'{text}' must be a JSON object or key:value")
    return merged


RUN_OPTIONS: OptionSet[RunConfig] = OptionSet(RunConfig, env_prefix="SPECMON_", title="run options")


def add_run_arguments(
    parser: argparse.ArgumentParser, defaults: Mapping[str, Any] | None = None
) -> None:
    """Register every run flag plus --config/--save-config (all default to SUPPRESS).

    `defaults`: a command's own defaults (demo's), shown in the help."""
    RUN_OPTIONS.add_arguments(parser, defaults=defaults)


def build_config(
    args: argparse.Namespace | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> RunConfig:
    """Merge defaults < file < env < flags (< overrides from code) into a validated RunConfig.

    `defaults` replaces RunConfig's own defaults (a command such as demo has its own)."""
    return RUN_OPTIONS.build(args, environ, overrides, defaults)


def save_config(config: RunConfig, path: str) -> None:
    """Write the effective configuration as TOML (the API key is never written)."""
    RUN_OPTIONS.save(config, path)


def parse_percentiles(text: str) -> tuple[int, ...]:
    """ "99,90,50" (or "p99,p50") -> (99, 90, 50); each one of the computed PERCENTILES."""
    out = []
    for part in text.split(","):
        part = part.strip().removeprefix("p")
        if not part.isdigit() or int(part) not in PERCENTILES:
            choices = ",".join(map(str, PERCENTILES))
            raise ValueError(f"percentile '{part}' is not one of {choices}")
        out.append(int(part))
    return tuple(out)
