"""What defines a k sweep: `SweepSettings` (stored in sweep.json; its hash decides which
cells `--resume` keeps), where its arms run (`Placement`: --executor, --gpus), the names
of its rows and files, and reading an earlier sweep.json (docs/architecture.md, "k sweep")."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from specmon.config import RunConfig
from specmon.decision.slo import Slo, slo_option
from specmon.decision.sweep_types import SWEEP_JSON
from specmon.errors import UserError
from specmon.records import int_keys
from specmon.text_guard import mask_secrets

SCHEMA = "specmon-sweep/1"
PLACEHOLDERS = ("{k}", "{port}", "{gpus}", "{python}", "{schedule}")
# RunConfig fields the sweep sets per cell, or that do not change what is measured
_PER_CELL_FIELDS = (
    "url",
    "concurrency",
    "request_count",
    "benchmark_duration",
    "warmup_request_count",
    "segments",
    "segment_duration",
    "segment_requests",
)
# (slo: the objective is SweepSettings.slo, outside the hash: it decides, it is not measured)
_NOT_MEASURED = ("artifact_dir", "headless", "refresh_hz", "theme", "api_key", "server_metrics",
                 "selector", "prometheus_port", "prometheus_host",
                 "slo")  # fmt: skip


@dataclass
class SweepSettings:
    """Everything that defines a sweep (stored in sweep.json; the hash decides --resume)."""

    ks: list[int]
    concurrencies: list[int]
    serve: str | None = None  # template with {k} {port} {gpus} {python} [{schedule}]
    baseline_serve: str | None = None  # template with {port} {gpus} {python}: k = 0
    urls: dict[int, str] = field(default_factory=dict)  # --url kN=URL: k -> base URL
    repeats: int = 3
    segment_requests: int | None = None
    segment_duration: float | None = None
    warmup_request_count: int = 0
    ready_timeout: float = 600.0
    stop_on_error: bool = False
    load: dict[str, Any] = field(default_factory=dict)  # the run flags, less _PER_CELL_FIELDS
    slo: str | None = None  # --slo ttft=S,tpot=MS[,p=90]: what the decisions must meet
    # arms beyond fixed k (measured after the k rows, never "the best k"; re-measured on
    # --resume, so they are left out of the hash): --variant NAME='CMD {port}' ...
    variants: dict[str, str] = field(default_factory=dict)
    verify_schedule: bool = False  # measure the schedule just written as the arm "schedule"
    # the schedule arm's own command (default --serve): {port} {schedule} [{k} {python}]
    schedule_serve: str | None = None

    def __post_init__(self) -> None:
        if (self.serve is None) == (not self.urls):
            raise UserError("give either --serve 'COMMAND' or --url kN=URL ..., not both")
        if self.serve is not None:
            for template, name in (
                (self.serve, "--serve"),
                (self.baseline_serve, "--baseline-serve"),
            ):
                if template is not None and "{port}" not in template:
                    raise UserError(
                        f"{name} needs the {{port}} placeholder: '{mask_secrets(template)}'"
                    )
            if "{k}" not in self.serve:
                raise UserError(
                    f"--serve needs the {{k}} placeholder: '{mask_secrets(self.serve)}'"
                )
            if 0 in self.ks:
                raise UserError("k=0 is the baseline: give its command with --baseline-serve")
        if (self.segment_requests is None) == (self.segment_duration is None):
            raise UserError("give exactly one of --segment-requests N or --segment-duration S")
        if self.repeats < 1:
            raise UserError("--repeats must be at least 1")
        slo_option(self.slo)  # a malformed --slo: a UserError now, not at the end
        self._check_arms()

    def _check_arms(self) -> None:
        if (self.variants or self.verify_schedule) and self.serve is None:
            raise UserError("--variant and --verify-schedule need --serve (servers it starts)")
        if self.schedule_serve is not None:
            if not self.verify_schedule:
                raise UserError("--schedule-serve is the command of --verify-schedule's arm")
            for needed in ("{port}", "{schedule}"):
                if needed not in self.schedule_serve:
                    raise UserError(
                        f"--schedule-serve needs the {needed} placeholder: "
                        f"'{mask_secrets(self.schedule_serve)}'"
                    )
        for name, template in self.variants.items():
            if not ARM_NAME.fullmatch(name) or name == SCHEDULE_ARM:
                raise UserError(
                    f"--variant '{name}': name it with letters, digits, '.', '_' or '-' "
                    f"(not '{SCHEDULE_ARM}')"
                )
            if "{port}" not in template:
                raise UserError(
                    f"--variant {name} needs the {{port}} placeholder: '{mask_secrets(template)}'"
                )
            if SCHEDULE_PLACEHOLDER in template:
                raise UserError(f"--variant {name}: {{schedule}} is for --serve / --schedule-serve")
        if self.verify_schedule and schedule_placement(self.schedule_template()) is None:
            raise UserError(
                "--verify-schedule: --serve has no {schedule} placeholder (a JSON file holding "
                "the speculative-config fragment), no '\"num_speculative_tokens\": {k}' in its "
                "--speculative-config JSON and no `specmon sim`: cannot add the schedule"
            )

    def schedule_template(self) -> str:
        """The command of the schedule arm: --schedule-serve, else --serve."""
        return self.schedule_serve or self.serve or ""

    def objective(self) -> Slo | None:
        return slo_option(self.slo)

    @property
    def grid_ks(self) -> list[int]:
        """The k values in the order they run: the baseline (0) first."""
        if self.urls:
            return sorted(self.urls)
        return ([0] if self.baseline_serve else []) + list(self.ks)

    def settings_hash(self) -> str:
        """A cell measured under the same hash is not measured again on --resume. The grid
        (ks, concurrencies) and how failures are handled are left out: a resumed sweep may
        add k or concurrency values."""
        data = asdict(self)
        # the SLO changes the decision, not what a cell measures
        for key in ("ks", "concurrencies", "ready_timeout", "stop_on_error", "urls", "slo") + (
            "variants",
            "verify_schedule",
            "schedule_serve",
        ):
            data.pop(key)
        data["urls"] = {str(k): u for k, u in sorted(self.urls.items())}
        blob = json.dumps(data, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """What sweep.json stores: the server commands with their secrets masked (a key
        given to the server never lands in a shared artifact; --resume asks for them)."""
        data = asdict(self)
        data["urls"] = {str(k): u for k, u in sorted(self.urls.items())}
        for key in ("serve", "baseline_serve", "schedule_serve"):
            data[key] = mask_secrets(data[key]) if data[key] is not None else None
        data["variants"] = {name: mask_secrets(cmd) for name, cmd in self.variants.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepSettings:
        data = dict(data)
        data["urls"] = int_keys(data.get("urls"))
        return cls(**data)


def load_settings_of(config: RunConfig) -> dict[str, Any]:
    """The run flags that shape what a cell measures (SweepSettings.load)."""
    return config.model_dump(exclude=set(_PER_CELL_FIELDS) | set(_NOT_MEASURED))


def parse_url_labels(entries: list[str]) -> dict[int, str]:
    """['k2=http://h:1', 'k0=http://h:2'] -> {2: ..., 0: ...}; the label names the k."""
    from specmon.config import split_url_label

    out: dict[int, str] = {}
    for entry in entries:
        label, target = split_url_label(entry)
        if not label or not label.startswith("k") or not label[1:].isdigit():
            raise UserError(f"--url '{entry}': label it with its k, e.g. k2=http://HOST:PORT")
        k = int(label[1:])
        if k in out:
            raise UserError(f"--url: k{k} given twice")
        out[k] = target.rstrip("/")
    return out


ARM_NAME = re.compile(r"[A-Za-z0-9._-]+")
SCHEDULE_ARM = "schedule"
SCHEDULE_PLACEHOLDER = "{schedule}"
ARM_K = -1  # the k of an arm's Cell: not a k (arms are kept apart from the grid's cells)
# where vLLM's schedule goes: beside num_speculative_tokens in the --speculative-config JSON
VLLM_K = re.compile(r'"num_speculative_tokens"\s*:\s*\{k\}')


def schedule_placement(template: str) -> str | None:
    """How a schedule is added to the --serve template: "file" (the {schedule} placeholder:
    the path of a JSON file holding the speculative-config fragment, for a wrapper script),
    "vllm" (into the JSON), "sim" (`specmon sim --spec-schedule`) or None (not known)."""
    if SCHEDULE_PLACEHOLDER in template:
        return "file"
    if VLLM_K.search(template):
        return "vllm"
    return "sim" if "specmon sim" in template else None


def row_dir(row: int | str) -> str:
    """The directory of a row's exports: k{k}, or arm-{name}."""
    return f"k{row}" if isinstance(row, int) else f"arm-{row}"


def row_label(row: int | str) -> str:
    """A row of the sweep: an int is a fixed k, a str an arm's name."""
    return f"k={row}" if isinstance(row, int) else f"arm {row}"


def read_sweep(artifact_dir: str | Path) -> dict[str, Any]:
    """An earlier sweep.json (for --resume); one-line error when missing or unreadable."""
    path = Path(artifact_dir) / SWEEP_JSON
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"--resume {artifact_dir}: no {SWEEP_JSON} there") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"--resume {artifact_dir}: cannot read {SWEEP_JSON} ({exc})") from None
    if doc.get("schema") != SCHEMA:
        raise UserError(f"--resume {artifact_dir}: {SWEEP_JSON} is not a {SCHEMA} document")
    return cast(dict[str, Any], doc)


EXECUTORS = ("local", "ray")


@dataclass
class Placement:
    """Where a sweep's arms run (sweep.json "placement"; not in the hash: it does not change
    what one cell measures, though arms side by side share the machine: see
    `arms_at_once` beside each cell). `--gpus 0,1,2,3 --gpus-per-server 2` gives two slots
    of two GPUs each; no --gpus, one arm at a time on whatever the server finds."""

    executor: str = "local"
    gpus: list[str] = field(default_factory=list)
    gpus_per_server: int = 1
    ray_address: str | None = None  # None: a running cluster, else a local one
    ray_num_gpus: int | None = None  # GPUs a local Ray cluster declares (logical ones allowed)
    isolate_baseline: bool = False  # the k=0 arm runs alone, before the others

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise UserError(f"--executor {self.executor}: give one of {', '.join(EXECUTORS)}")
        if self.gpus_per_server < 1:
            raise UserError("--gpus-per-server must be at least 1")
        if len(set(self.gpus)) != len(self.gpus):
            raise UserError(f"--gpus {','.join(self.gpus)}: a GPU given twice")
        if self.gpus and len(self.gpus) < self.gpus_per_server:
            raise UserError(
                f"--gpus {','.join(self.gpus)}: fewer GPUs than --gpus-per-server "
                f"{self.gpus_per_server}"
            )
        if self.executor == "local" and (self.ray_address or self.ray_num_gpus is not None):
            raise UserError("--ray-address and --ray-num-gpus need --executor ray")
        if self.executor == "ray" and self.gpus:
            raise UserError("--gpus is for --executor local; Ray hands out its own GPUs")

    def local_slices(self) -> list[list[str]]:
        """The local pool's slots: disjoint GPU slices (one slot without --gpus)."""
        n = self.gpus_per_server
        return [self.gpus[i : i + n] for i in range(0, len(self.gpus) - n + 1, n)] or [[]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
