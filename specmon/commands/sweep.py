"""`specmon sweep`: measure every (k, concurrency) cell, pick k per load, write the schedule.

  specmon sweep --serve 'vllm serve M --port {port} --speculative-config \\
      '"'"'{"method": "ngram", "num_speculative_tokens": {k}}'"'"'' \\
      --baseline-serve 'vllm serve M --port {port}' --num-spec-tokens 1,2,3 --concurrency 1,4,16

Placeholders: {k}, {port} (a free loopback port), {python} (this Python); other braces (JSON)
are left as written. Or `--url k2=URL --url k4=URL` for servers that cannot be restarted.
On a terminal without --headless the live sweep view (specmon/tui/sweep_app.py) shows the grid
filling in; q stops. The sweep is assembled and driven in specmon/run/sweep/execute.py. Headless: one line per finished cell, then the tables and the schedule.
Ctrl-C, SIGTERM and SIGHUP stop cleanly through specmon/stops.py (exit 128 + the signal);
`--resume DIR` continues (see specmon/run/sweep/runner.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from specmon import stops
from specmon.config import RUN_OPTIONS, RunConfig, build_config
from specmon.errors import UserError
from specmon.run.sweep.options import (
    DEFAULT_SEGMENT_REQUESTS,
    DEFAULT_SERVE_KS,
    REPLACED_RUN_OPTIONS,
    SWEEP_OPTIONS,
    SweepOptions,
)
from specmon.text_guard import MASK

if TYPE_CHECKING:
    from specmon.run.sweep.control import SweepControl
    from specmon.run.sweep.settings import Placement, SweepSettings

DEFAULT_SEED = 0  # every cell gets the same prompts unless --random-seed says otherwise


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The run options for each repeat's load, then the sweep's own (run/sweep/options.py),
    each declared once."""
    RUN_OPTIONS.add_arguments(parser, exclude=REPLACED_RUN_OPTIONS)
    SWEEP_OPTIONS.add_arguments(parser, config_flags=False)


def main(args: argparse.Namespace) -> int:
    from specmon.run.sweep.context import read_context_sweep
    from specmon.run.sweep.settings import read_sweep

    stops.stage("setup", interruptible=True)  # until the first server starts: stop at once

    options = SWEEP_OPTIONS.build(args)
    placement = placement_of(options)
    if placement.executor == "ray":  # Ray's start (seconds) overlaps the set-up below
        from specmon.run.sweep.ray_pool import start_connecting

        start_connecting(placement)
    context_doc = read_context_sweep(options.resume) if options.resume else None
    if context_doc is not None or options.input_tokens:
        return _context_main(options, args, context_doc)
    if options.context is not None:
        raise UserError("--context L picks one of the --input-tokens lengths: give those too")
    previous = read_sweep(options.resume) if options.resume else None
    if previous is not None and options.serve is None and not getattr(args, "url", None):
        settings, config = _settings_from(previous)  # `--resume DIR` alone: the same sweep
    else:
        settings, config = settings_of(options, args)
    if options.resume and config.artifact_dir and Path(config.artifact_dir) != Path(options.resume):
        raise UserError("--resume DIR continues the sweep in DIR: drop --artifact-dir")
    artifact_dir = options.resume or config.artifact_dir or default_dir()
    return execute(settings, config, artifact_dir, previous=previous, placement=placement)


def _context_main(
    options: SweepOptions, args: argparse.Namespace, doc: dict[str, Any] | None
) -> int:
    """`--input-tokens L,...` (or `--resume` of such a sweep): run/sweep/context.py."""
    from specmon.run.sweep.context import run_context_sweep
    from specmon.run.sweep.execute import execute_sweep

    if doc is not None and options.serve is None and not getattr(args, "url", None):
        settings, config = _settings_from(doc)  # `--resume DIR` alone: the same sweep
    else:
        settings, config = settings_of(options, args)
    lengths = options.input_tokens or (doc or {}).get("input_tokens") or []
    context = options.context
    if context is None and doc is not None and not options.input_tokens:
        context = doc.get("context")
    if options.resume and config.artifact_dir and Path(config.artifact_dir) != Path(options.resume):
        raise UserError("--resume DIR continues the sweep in DIR: drop --artifact-dir")
    placement = placement_of(options)

    def run_one(
        one: SweepSettings, one_config: RunConfig, where: str, cells: list[dict[str, Any]] | None
    ) -> int:
        return execute_sweep(one, one_config, where, previous_cells=cells, placement=placement)

    artifact_dir = options.resume or config.artifact_dir or default_dir()
    return run_context_sweep(
        settings, config, artifact_dir, list(lengths), context, run_one, sys.stdout
    )


def placement_of(options: SweepOptions) -> Placement:
    from specmon.run.sweep.settings import Placement

    names = ("executor", "gpus", "gpus_per_server", "ray_address", "ray_num_gpus")
    values = {name: getattr(options, name) for name in names}
    return Placement(**values, isolate_baseline=options.isolate_baseline)


def _settings_from_args(args: argparse.Namespace) -> tuple[SweepSettings, RunConfig]:
    return settings_of(SWEEP_OPTIONS.build(args), args)


def settings_of(options: SweepOptions, args: argparse.Namespace) -> tuple[SweepSettings, RunConfig]:
    """The sweep's settings from its options and the run options of each repeat; the
    rules between options are SweepSettings' (run/sweep/settings.py)."""
    from specmon.run.sweep.settings import SweepSettings, load_settings_of, parse_url_labels

    config = build_config(args, defaults={"streaming": True})  # TTFT and ITL need streaming
    if config.random_seed is None:
        config.random_seed = DEFAULT_SEED
    urls = parse_url_labels(config.url) if config.url else {}
    ks = options.num_spec_tokens
    if options.serve is not None and not ks:  # a first sweep needs no list of k
        ks = list(DEFAULT_SERVE_KS)
        print(
            "specmon sweep: no --num-spec-tokens given: measuring k="
            + ",".join(map(str, DEFAULT_SERVE_KS)),
            file=sys.stderr,
            flush=True,
        )
    if urls and (ks or options.baseline_serve):
        raise UserError(
            "with --url kN=URL the labels give k: drop --num-spec-tokens / --baseline-serve"
        )
    for given in ("request_count", "benchmark_duration", "segments"):
        if getattr(config, given) is not None:
            flag = "--" + given.replace("_", "-")
            raise UserError(f"{flag}: a sweep sets each repeat's length with --segment-requests")
    duration = options.segment_duration
    requests = options.segment_requests or (None if duration else DEFAULT_SEGMENT_REQUESTS)
    settings = SweepSettings(
        ks=sorted(urls) if urls else list(ks or []),
        concurrencies=list(options.concurrency),
        serve=options.serve,
        baseline_serve=options.baseline_serve,
        urls=urls,
        repeats=options.repeats,
        segment_requests=requests,
        segment_duration=duration,
        warmup_request_count=config.warmup_request_count,
        ready_timeout=options.ready_timeout,
        stop_on_error=options.stop_on_error,
        load=load_settings_of(config),
        slo=config.slo,  # the run option --slo (config.py): every surface reads it
        variants=parse_variants(options.variant),
        verify_schedule=options.verify_schedule,
        schedule_serve=options.schedule_serve,
    )
    return settings, config


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


def _settings_from(previous: dict[str, Any]) -> tuple[SweepSettings, RunConfig]:
    from specmon.run.sweep.settings import SweepSettings

    settings = SweepSettings.from_dict(previous["settings"])
    saved = [settings.serve, settings.baseline_serve, settings.schedule_serve]
    if any(MASK in cmd for cmd in [*saved, *settings.variants.values()] if cmd is not None):
        raise UserError(
            "--resume: sweep.json keeps the server commands with their keys masked (***): "
            "give --serve (and --baseline-serve, --variant) again"
        )
    config = build_config(overrides=dict(settings.load))
    return settings, config


def default_dir() -> str:
    return str(Path("artifacts") / time.strftime("sweep-%Y%m%d-%H%M%S"))


def execute(
    settings: SweepSettings,
    config: RunConfig,
    artifact_dir: str,
    *,
    previous: dict[str, Any] | None = None,
    out: TextIO | None = None,
    placement: Placement | None = None,
) -> int:
    """The sweep (specmon/run/sweep/execute.py), under the live view on a terminal without
    --headless, else headless."""
    from specmon.commands.run import check_theme_early
    from specmon.run.sweep.execute import execute_sweep

    check_theme_early(config)  # an unknown --theme is an error headless too
    out = out or sys.stdout
    live = not config.headless and out is sys.stdout and sys.stdout.isatty()
    screen = TextualSweepScreen() if live else None
    cells = (previous or {}).get("cells")
    return execute_sweep(
        settings,
        config,
        artifact_dir,
        screen=screen,
        previous_cells=cells,
        out=out,
        placement=placement,
    )


class TextualSweepScreen:
    """The live sweep view (tui/sweep_app.py) as run/sweep/execute.py's SweepScreen."""

    def show(self, control: SweepControl, theme: str | None) -> None:
        from specmon.tui.sweep_app import SweepApp

        SweepApp(control, theme_name=theme).run()

    def detach(self) -> None:
        from specmon.tui.app import detach_from_terminal

        detach_from_terminal()
