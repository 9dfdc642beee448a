"""`specmon sweep`'s own options, declared once (as `RunConfig`'s and `SimConfig`'s).

Each field is one option (specmon/config.py `option()`): its flag, its `SPECMON_SWEEP_*`
variable and its help follow from the declaration, and its value is checked by the model.
The run options of the same names (`--concurrency`, `--segment-requests`, ...) are per
cell in a sweep: the sweep's parser leaves them out (`PER_CELL_RUN_OPTIONS`) and sets them
for each repeat itself. The rules between settings (placeholders, one repeat length, arms)
are `SweepSettings`'s, which every sweep passes through (flags, `--resume`, demo).
"""

from __future__ import annotations

import sys
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from specmon.config import OptionSet, RunConfig, option
from specmon.errors import UserError
from specmon.run.sweep.runner import SweepSettings, load_settings_of, parse_url_labels

DEFAULT_SEGMENT_REQUESTS = 64
DEFAULT_SERVE_KS = (1, 2, 3, 4, 5)  # --serve without --num-spec-tokens
# run options a sweep sets per cell: not offered by `specmon sweep` (the sweep's own
# --concurrency and --segment-* take their flags)
PER_CELL_RUN_OPTIONS = (
    "concurrency",
    "request_count",
    "benchmark_duration",
    "segments",
    "segment_duration",
    "segment_requests",
)


def _int_list(value: Any) -> Any:
    """'1,4,16' (a flag, a variable) -> [1, 4, 16]: distinct whole numbers >= 0."""
    if not isinstance(value, str):
        return value
    try:
        values = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"'{value}' is not N or N,N,... (whole numbers)") from None
    if not values or min(values) < 0 or len(set(values)) != len(values):
        raise ValueError(f"'{value}': give distinct whole numbers >= 0")
    return values


class SweepOptions(BaseModel):
    """The options of `specmon sweep` beside the run options."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    serve: str | None = option(None, "server command template", metavar="'CMD {k} {port}'")
    baseline_serve: str | None = option(
        None, "server command without speculation (k=0, run first)", metavar="'CMD {port}'"
    )
    num_spec_tokens: list[int] = option(
        default_factory=list,
        help="the k values to measure (with --serve; default "
        + ",".join(map(str, DEFAULT_SERVE_KS))
        + ")",
        metavar="K,K,...",
    )
    concurrency: list[int] = option(
        default_factory=lambda: [1, 4, 16],
        help="concurrencies to measure at every k (default 1,4,16)",
        metavar="C,C,...",
    )
    repeats: int = option(3, "runs per cell")
    segment_requests: int | None = option(
        None, f"profiling requests per repeat (default {DEFAULT_SEGMENT_REQUESTS})", ge=1
    )
    segment_duration: float | None = option(None, "seconds of profiling per repeat", gt=0)
    ready_timeout: float = option(
        600.0, "seconds a server may take to list its model", metavar="S", gt=0
    )
    stop_on_error: bool = option(False, "stop the sweep at the first failed server")
    variant: list[str] = option(
        default_factory=list,
        help="an extra arm: this server measured at every concurrency beside the fixed k "
        "(repeatable; placeholders {port} {python})",
        metavar="NAME='CMD {port}'",
        repeat=True,
    )
    verify_schedule: bool = option(
        False,
        "after the fixed-k cells, restart the server with the schedule just written and "
        "measure it at every concurrency (the arm 'schedule'); a wrapper script gets it "
        "through {schedule} in --serve: the path of a JSON file holding the speculative-config "
        "fragment (num_speculative_tokens, num_speculative_tokens_per_batch_size)",
    )
    schedule_serve: str | None = option(
        None,
        "the schedule arm's own command (default: --serve); {schedule} is the path of "
        "the fragment's JSON file",
        metavar="'CMD {port} {schedule}'",
    )
    resume: str | None = option(
        None, "continue the sweep in DIR, skipping cells measured with the same settings",
        metavar="DIR",
    )  # fmt: skip

    @field_validator("num_spec_tokens", "concurrency", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _int_list(value)

    @field_validator("variant", mode="before")
    @classmethod
    def _one_variant(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value  # a variable holds one command

    @field_validator("concurrency")
    @classmethod
    def _positive(cls, values: list[int]) -> list[int]:
        if min(values, default=1) < 1:
            raise ValueError("concurrency values must be at least 1")
        return values

    def settings(self, config: RunConfig) -> SweepSettings:
        """The sweep these options and the run's `config` describe (SweepSettings checks
        the rules between them)."""
        urls = parse_url_labels(config.url) if config.url else {}
        ks = list(self.num_spec_tokens)
        if self.serve is not None and not ks:  # a first sweep needs no list of k
            ks = list(DEFAULT_SERVE_KS)
            print(
                "specmon sweep: no --num-spec-tokens given: measuring k="
                + ",".join(map(str, DEFAULT_SERVE_KS)),
                file=sys.stderr,
                flush=True,
            )
        duration = self.segment_duration
        requests = self.segment_requests or (None if duration else DEFAULT_SEGMENT_REQUESTS)
        return SweepSettings(
            ks=ks or sorted(urls),
            concurrencies=list(self.concurrency),
            serve=self.serve,
            baseline_serve=self.baseline_serve,
            urls=urls,
            repeats=self.repeats,
            segment_requests=requests,
            segment_duration=duration,
            warmup_request_count=config.warmup_request_count,
            ready_timeout=self.ready_timeout,
            stop_on_error=self.stop_on_error,
            load=load_settings_of(config),
            slo=config.slo,  # the run option --slo (config.py): every surface reads it
            variants=parse_variants(self.variant),
            verify_schedule=self.verify_schedule,
            schedule_serve=self.schedule_serve,
        )


def parse_variants(entries: list[str]) -> dict[str, str]:
    """["adaptive=vllm serve ... --port {port}"] -> {"adaptive": "vllm serve ..."}."""
    out: dict[str, str] = {}
    for entry in entries:
        name, sep, command = entry.partition("=")
        name = name.strip()
        if not sep or not name or not command.strip():
            raise UserError(f"--variant '{entry}': give NAME='SERVER COMMAND {{port}}'")
        if name in out:
            raise UserError(f"--variant: {name} given twice")
        out[name] = command.strip()
    return out


SWEEP_OPTIONS: OptionSet[SweepOptions] = OptionSet(
    SweepOptions, env_prefix="SPECMON_SWEEP_", title="sweep options", dest_prefix="sweep_"
)
