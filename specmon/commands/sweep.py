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
from specmon.config import RunConfig, add_run_arguments, build_config, seconds
from specmon.errors import UserError
from specmon.text_guard import MASK

if TYPE_CHECKING:
    from specmon.run.sweep.control import SweepControl
    from specmon.run.sweep.settings import Placement, SweepSettings

DEFAULT_SEGMENT_REQUESTS = 64
DEFAULT_SERVE_KS = (1, 2, 3, 4, 5)  # --serve without --num-spec-tokens
DEFAULT_SEED = 0  # every cell gets the same prompts unless --random-seed says otherwise


def int_list(text: str) -> list[int]:
    """'1,4,16' -> [1, 4, 16] (distinct, >= 0); argparse shows the error on one line."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not N or N,N,... (whole numbers)") from None
    if not values or min(values) < 0 or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"'{text}': give distinct whole numbers >= 0")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    # --concurrency is a list here, and the segment length is per cell: these replace the
    # run flags of the same name (the per-cell RunConfig is built in run/sweep/runner.py)
    parser.conflict_handler = "resolve"
    group = parser.add_argument_group("sweep options")
    group.add_argument(
        "--serve", default=None, metavar="'CMD {k} {port}'", help="server command template"
    )
    group.add_argument(
        "--baseline-serve",
        default=None,
        metavar="'CMD {port}'",
        help="server command without speculation (k=0, run first)",
    )
    group.add_argument(
        "--num-spec-tokens",
        dest="sweep_ks",
        type=int_list,
        default=None,
        metavar="K,K,...",
        help="the k values to measure (with --serve; default "
        + ",".join(map(str, DEFAULT_SERVE_KS))
        + ")",
    )
    group.add_argument(
        "--concurrency",
        dest="sweep_concurrency",
        type=int_list,
        default=[1, 4, 16],
        metavar="C,C,...",
        help="concurrencies to measure at every k (default 1,4,16)",
    )
    group.add_argument("--repeats", type=int, default=3, help="runs per cell (default 3)")
    _add_context_axis(group)
    _add_repeat_length(group)
    _add_server_handling(group)
    _add_placement(parser.add_argument_group("where the arms run (docs/scale-out.md)"))


def _add_context_axis(group: argparse._ArgumentGroup) -> None:
    """The context axis (run/sweep/context.py): the sweep once per prompt length."""
    group.add_argument(
        "--input-tokens",
        dest="sweep_input_tokens",
        type=int_list,
        default=None,
        metavar="L,L,...",
        help="sweep once per prompt length (synthetic prompts of L tokens, in DIR/ctxL/) and "
        "decide k per (concurrency, length); headless",
    )
    group.add_argument(
        "--context",
        dest="sweep_context",
        type=int,
        default=None,
        metavar="L",
        help="with --input-tokens: the length whose schedule is written (default: the "
        "median of the lengths)",
    )


def _add_repeat_length(group: argparse._ArgumentGroup) -> None:
    """How long each repeat measures: a request count or a duration, not both."""
    length = group.add_mutually_exclusive_group()
    length.add_argument(
        "--segment-requests",
        dest="sweep_segment_requests",
        type=int,
        default=None,
        metavar="N",
        help=f"profiling requests per repeat (default {DEFAULT_SEGMENT_REQUESTS})",
    )
    length.add_argument(
        "--segment-duration",
        dest="sweep_segment_duration",
        type=seconds,
        default=None,
        metavar="S",
        help="seconds of profiling per repeat",
    )


def _add_server_handling(group: argparse._ArgumentGroup) -> None:
    """Waiting for each server, failures, and resuming a sweep."""
    group.add_argument(
        "--ready-timeout",
        type=seconds,
        default=600.0,
        metavar="S",
        help="seconds a server may take to list its model (default 600)",
    )
    group.add_argument(
        "--stop-on-error", action="store_true", help="stop the sweep at the first failed server"
    )
    group.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME='CMD {port}'",
        help="an extra arm: this server measured at every concurrency beside the fixed k "
        "(repeatable; placeholders {port} {python})",
    )
    group.add_argument(
        "--verify-schedule",
        action="store_true",
        help="after the fixed-k cells, restart the server with the schedule just written and "
        "measure it at every concurrency (the arm 'schedule'); a wrapper script gets it "
        "through {schedule} in --serve: the path of a JSON file holding the speculative-config "
        "fragment (num_speculative_tokens, num_speculative_tokens_per_batch_size)",
    )
    group.add_argument(
        "--schedule-serve",
        default=None,
        metavar="'CMD {port} {schedule}'",
        help="the schedule arm's own command (default: --serve); {schedule} is the path of "
        "the fragment's JSON file",
    )
    group.add_argument(
        "--resume",
        default=None,
        metavar="DIR",
        help="continue the sweep in DIR, skipping cells measured with the same settings",
    )


def _add_placement(group: argparse._ArgumentGroup) -> None:
    """Arms side by side: a local GPU pool or a Ray cluster (run/sweep/pool.py, ray_pool.py)."""
    group.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="local: this machine (default); ray: each arm a Ray task (pip install 'specmon[ray]')",
    )
    group.add_argument(
        "--gpus",
        type=lambda text: [part.strip() for part in text.split(",") if part.strip()],
        default=[],
        metavar="ID,ID,...",
        help="local GPU pool: arms run side by side on disjoint slices of these GPUs "
        "(CUDA_VISIBLE_DEVICES and {gpus} in the server commands); default one arm at a time",
    )
    group.add_argument(
        "--gpus-per-server",
        type=int,
        default=1,
        metavar="N",
        help="GPUs per arm's server (default 1)",
    )
    group.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="the Ray cluster (e.g. auto, HOST:6379); default a running one, else a local one",
    )
    group.add_argument(
        "--ray-num-gpus",
        type=int,
        default=None,
        metavar="N",
        help="start a local Ray cluster with N GPUs (logical ones allowed)",
    )
    group.add_argument(
        "--isolate-baseline",
        action="store_true",
        help="run the k=0 arm alone, before the others (no arm beside it disturbs it)",
    )


def placement_of(args: argparse.Namespace) -> Placement:
    from specmon.run.sweep.settings import Placement

    return Placement(
        executor=args.executor,
        gpus=list(args.gpus),
        gpus_per_server=args.gpus_per_server,
        ray_address=args.ray_address,
        ray_num_gpus=args.ray_num_gpus,
        isolate_baseline=args.isolate_baseline,
    )


def main(args: argparse.Namespace) -> int:
    from specmon.run.sweep.context import read_context_sweep
    from specmon.run.sweep.settings import read_sweep

    stops.stage("setup", interruptible=True)  # until the first server starts: stop at once
    placement = placement_of(args)
    if placement.executor == "ray":  # Ray's start (seconds) overlaps the set-up below
        from specmon.run.sweep.ray_pool import start_connecting

        start_connecting(placement)
    context_doc = read_context_sweep(args.resume) if args.resume else None
    if context_doc is not None or args.sweep_input_tokens:
        return _context_main(args, context_doc)
    if args.sweep_context is not None:
        raise UserError("--context L picks one of the --input-tokens lengths: give those too")

    previous = read_sweep(args.resume) if args.resume else None
    if previous is not None and args.serve is None and not getattr(args, "url", None):
        settings, config = _settings_from(previous)  # `--resume DIR` alone: the same sweep
    else:
        settings, config = _settings_from_args(args)
    if args.resume and config.artifact_dir and Path(config.artifact_dir) != Path(args.resume):
        raise UserError("--resume DIR continues the sweep in DIR: drop --artifact-dir")
    artifact_dir = args.resume or config.artifact_dir or default_dir()
    return execute(settings, config, artifact_dir, previous=previous, placement=placement)


def _context_main(args: argparse.Namespace, doc: dict[str, Any] | None) -> int:
    """`--input-tokens L,...` (or `--resume` of such a sweep): run/sweep/context.py."""
    from specmon.run.sweep.context import run_context_sweep
    from specmon.run.sweep.execute import execute_sweep

    if doc is not None and args.serve is None and not getattr(args, "url", None):
        settings, config = _settings_from(doc)  # `--resume DIR` alone: the same sweep
    else:
        settings, config = _settings_from_args(args)
    lengths = args.sweep_input_tokens or (doc or {}).get("input_tokens") or []
    if min(lengths) < 1:
        raise UserError("--input-tokens values must be at least 1")
    context = args.sweep_context
    if context is None and doc is not None and not args.sweep_input_tokens:
        context = doc.get("context")
    if args.resume and config.artifact_dir and Path(config.artifact_dir) != Path(args.resume):
        raise UserError("--resume DIR continues the sweep in DIR: drop --artifact-dir")
    placement = placement_of(args)

    def run_one(
        one: SweepSettings, one_config: RunConfig, where: str, cells: list[dict[str, Any]] | None
    ) -> int:
        return execute_sweep(one, one_config, where, previous_cells=cells, placement=placement)

    artifact_dir = args.resume or config.artifact_dir or default_dir()
    return run_context_sweep(
        settings, config, artifact_dir, list(lengths), context, run_one, sys.stdout
    )


def _settings_from_args(args: argparse.Namespace) -> tuple[SweepSettings, RunConfig]:
    from specmon.run.sweep.settings import SweepSettings, load_settings_of, parse_url_labels

    config = build_config(args, defaults={"streaming": True})  # TTFT and ITL need streaming
    if config.random_seed is None:
        config.random_seed = DEFAULT_SEED
    urls = parse_url_labels(config.url) if config.url else {}
    if args.serve is not None and not args.sweep_ks:  # a first sweep needs no list of k
        args.sweep_ks = list(DEFAULT_SERVE_KS)
        print(
            "specmon sweep: no --num-spec-tokens given: measuring k="
            + ",".join(map(str, DEFAULT_SERVE_KS)),
            file=sys.stderr,
            flush=True,
        )
    if urls and (args.sweep_ks or args.baseline_serve):
        raise UserError(
            "with --url kN=URL the labels give k: drop --num-spec-tokens / --baseline-serve"
        )
    for given in ("request_count", "benchmark_duration", "segments"):
        if getattr(config, given) is not None:
            flag = "--" + given.replace("_", "-")
            raise UserError(f"{flag}: a sweep sets each repeat's length with --segment-requests")
    if min(args.sweep_concurrency) < 1:
        raise UserError("--concurrency values must be at least 1")
    duration = args.sweep_segment_duration
    requests = args.sweep_segment_requests or (None if duration else DEFAULT_SEGMENT_REQUESTS)
    settings = SweepSettings(
        ks=sorted(urls) if urls else list(args.sweep_ks or []),
        concurrencies=list(args.sweep_concurrency),
        serve=args.serve,
        baseline_serve=args.baseline_serve,
        urls=urls,
        repeats=args.repeats,
        segment_requests=requests,
        segment_duration=duration,
        warmup_request_count=config.warmup_request_count,
        ready_timeout=args.ready_timeout,
        stop_on_error=args.stop_on_error,
        load=load_settings_of(config),
        slo=config.slo,  # the run option --slo (config.py): every surface reads it
        variants=parse_variants(args.variant),
        verify_schedule=args.verify_schedule,
        schedule_serve=args.schedule_serve,
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
