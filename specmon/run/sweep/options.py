"""`specmon sweep`'s own options, each declared once as a field (config.py `option()`), as
`specmon run`'s are: the flag, the TOML key, the `SPECMON_SWEEP_*` variable, the help text
and the field's own bounds follow from it (`SWEEP_OPTIONS`). The rules that tie several
options together are checked once, where the sweep's records are made from them
(`SweepSettings`, `Placement` in run/sweep/settings.py: a resumed sweep's too).

The run options (`RUN_OPTIONS`) come with it for each repeat's load, less `--concurrency`,
which is a list here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from specmon.config import MAX_SECONDS, OptionSet, option

DEFAULT_SEGMENT_REQUESTS = 64
DEFAULT_SERVE_KS = (1, 2, 3, 4, 5)  # --serve without --num-spec-tokens
SCHEDULE_SERVE_HELP = (
    "the schedule arm's own command (default: --serve); {schedule} is the path of the "
    "fragment's JSON file"
)
INPUT_TOKENS_HELP = (
    "sweep once per prompt length (synthetic prompts of L tokens, in DIR/ctxL/) and decide k "
    "per (concurrency, length); headless"
)
CONTEXT_HELP = (
    "with --input-tokens: the length whose schedule is written (default: the median of the lengths)"
)
RESUME_HELP = "continue the sweep in DIR, skipping cells measured with the same settings"
# the run options a sweep declares itself: a list of concurrencies, not one, and the
# length of every repeat, not of a scripted segment
REPLACED_RUN_OPTIONS = ("concurrency", "segment_requests", "segment_duration")


def int_list(value: Any) -> Any:
    """'1,4,16' -> [1, 4, 16]: distinct whole numbers >= 0 (a list passes as it is)."""
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
    """What `specmon sweep` is told beyond the run options."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    serve: str | None = option(None, "server command template", metavar="'CMD {k} {port}'")
    baseline_serve: str | None = option(
        None, "server command without speculation (k=0, run first)", metavar="'CMD {port}'"
    )
    num_spec_tokens: list[int] | None = option(
        None,
        "the k values to measure (with --serve; default "
        + ",".join(map(str, DEFAULT_SERVE_KS))
        + ")",
        metavar="K,K,...",
    )
    concurrency: list[int] = option(
        "1,4,16", "concurrencies to measure at every k", metavar="C,C,...", validate_default=True
    )
    repeats: int = option(3, "runs per cell")
    # the context axis (run/sweep/context.py): the sweep once per prompt length
    input_tokens: list[int] | None = option(None, INPUT_TOKENS_HELP, metavar="L,L,...")
    context: int | None = option(None, CONTEXT_HELP, metavar="L")
    segment_requests: int | None = option(
        None, f"profiling requests per repeat (default {DEFAULT_SEGMENT_REQUESTS})", ge=1
    )
    segment_duration: float | None = option(
        None, "seconds of profiling per repeat", metavar="S", gt=0, le=MAX_SECONDS
    )
    ready_timeout: float = option(
        600.0, "seconds a server may take to list its model", metavar="S", gt=0, le=MAX_SECONDS
    )
    stop_on_error: bool = option(False, "stop the sweep at the first failed server")
    variant: list[str] = option(
        help="an extra arm: this server measured at every concurrency beside the fixed k "
        "(repeatable; placeholders {port} {python})",
        default_factory=list,
        repeat=True,
        metavar="NAME='CMD {port}'",
    )
    verify_schedule: bool = option(
        False,
        "after the fixed-k cells, restart the server with the schedule just written and "
        "measure it at every concurrency (the arm 'schedule'); a wrapper script gets it "
        "through {schedule} in --serve: the path of a JSON file holding the speculative-config "
        "fragment (num_speculative_tokens, num_speculative_tokens_per_batch_size)",
    )
    schedule_serve: str | None = option(
        None, SCHEDULE_SERVE_HELP, metavar="'CMD {port} {schedule}'"
    )
    resume: str | None = option(None, RESUME_HELP, metavar="DIR")
    # where the arms run (docs/scale-out.md); the rules between them: Placement
    executor: Literal["local", "ray"] = option(
        "local",
        "local: this machine; ray: each arm a Ray task (pip install 'specmon[ray]')",
    )
    gpus: list[str] = option(
        help="local GPU pool: arms run side by side on disjoint slices of these GPUs "
        "(CUDA_VISIBLE_DEVICES and {gpus} in the server commands); default one arm at a time",
        default_factory=list,
        metavar="ID,ID,...",
    )
    gpus_per_server: int = option(1, "GPUs per arm's server")
    ray_address: str | None = option(
        None,
        "the Ray cluster (e.g. auto, HOST:6379); default a running one, else a local one",
        metavar="ADDR",
    )
    ray_num_gpus: int | None = option(
        None, "start a local Ray cluster with N GPUs (logical ones allowed)"
    )
    isolate_baseline: bool = option(
        False, "run the k=0 arm alone, before the others (no arm beside it disturbs it)"
    )

    @field_validator("num_spec_tokens", "concurrency", "input_tokens", mode="before")
    @classmethod
    def _int_list(cls, value: Any) -> Any:
        return int_list(value)

    @field_validator("concurrency", "input_tokens", mode="after")
    @classmethod
    def _at_least_one(cls, value: list[int] | None, info: ValidationInfo) -> list[int] | None:
        if value is not None and min(value) < 1:
            flag = "--" + str(info.field_name).replace("_", "-")
            raise ValueError(f"{flag} values must be at least 1")
        return value

    @field_validator("variant", mode="before")
    @classmethod
    def _one_variant(cls, value: Any) -> Any:
        """One from the environment or a TOML string: a list of one."""
        return [value] if isinstance(value, str) else value

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpu_list(cls, value: Any) -> Any:
        """'0,1,2' -> ['0', '1', '2']."""
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value


SWEEP_OPTIONS: OptionSet[SweepOptions] = OptionSet(
    SweepOptions, env_prefix="SPECMON_SWEEP_", title="sweep options", dest_prefix="sweep_"
)
