"""`specmon sweep`: measure every (k, concurrency) cell, pick k per load, write the schedule.

  specmon sweep --serve 'vllm serve M --port {port} --speculative-config \\
      '"'"'{"method": "ngram", "num_speculative_tokens": {k}}'"'"'' \\
      --baseline-serve 'vllm serve M --port {port}' --num-spec-tokens 1,2,3 --concurrency 1,4,16

Placeholders: {k}, {port} (a free loopback port), {python} (this Python); other braces (JSON)
are left as written. Or `--url k2=URL --url k4=URL` for servers that cannot be restarted.
On a terminal without --headless the live sweep view (specmon/tui/sweep_app.py) shows the grid
filling in; q stops. Headless: one line per finished cell, then the tables and the schedule.
Ctrl-C, SIGTERM and SIGHUP stop cleanly through specmon/stops.py (exit 128 + the signal);
`--resume DIR` continues (see specmon/sources/sweep.py).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from specmon import stops
from specmon.config import RunConfig, add_run_arguments, build_config
from specmon.errors import UserError

DEFAULT_SEGMENT_REQUESTS = 64
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
    # run flags of the same name (the per-cell RunConfig is built in sources/sweep.py)
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
        help="the k values to measure (with --serve)",
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
        type=float,
        default=None,
        metavar="S",
        help="seconds of profiling per repeat",
    )
    group.add_argument(
        "--ready-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="seconds a server may take to list its model (default 600)",
    )
    group.add_argument(
        "--stop-on-error", action="store_true", help="stop the sweep at the first failed server"
    )
    group.add_argument(
        "--slo",
        default=None,
        metavar="ttft=S,tpot=MS[,p=90]",
        help="choose per load the best k that meets this latency objective (TTFT seconds, "
        "TPOT ms, at percentile p, default 90); says so when none does",
    )
    group.add_argument(
        "--resume",
        default=None,
        metavar="DIR",
        help="continue the sweep in DIR, skipping cells measured with the same settings",
    )


def main(args: argparse.Namespace) -> int:
    from specmon.sources.sweep import read_sweep

    stops.stage("setup", interruptible=True)  # until the first server starts: stop at once

    previous = read_sweep(args.resume) if args.resume else None
    if previous is not None and args.serve is None and not getattr(args, "url", None):
        settings, config = _settings_from(previous)  # `--resume DIR` alone: the same sweep
    else:
        settings, config = _settings_from_args(args)
    if args.resume and config.artifact_dir and Path(config.artifact_dir) != Path(args.resume):
        raise UserError("--resume DIR continues the sweep in DIR: drop --artifact-dir")
    artifact_dir = args.resume or config.artifact_dir or _default_dir()
    return execute(settings, config, artifact_dir, previous=previous)


def _settings_from_args(args: argparse.Namespace) -> tuple[Any, RunConfig]:
    from specmon.sources.sweep import SweepSettings, load_settings_of, parse_url_labels

    config = build_config(args, defaults={"streaming": True})  # TTFT and ITL need streaming
    if config.random_seed is None:
        config.random_seed = DEFAULT_SEED
    urls = parse_url_labels(config.url) if config.url else {}
    if args.serve is not None and not args.sweep_ks:
        raise UserError("--serve needs --num-spec-tokens K,K,... (the k values to measure)")
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
        slo=args.slo,
    )
    return settings, config


def _settings_from(previous: dict[str, Any]) -> tuple[Any, RunConfig]:
    from specmon.sources.sweep import SweepSettings

    settings = SweepSettings.from_dict(previous["settings"])
    config = build_config(overrides=dict(settings.load))
    return settings, config


def _default_dir() -> str:
    return str(Path("artifacts") / time.strftime("sweep-%Y%m%d-%H%M%S"))


def execute(
    settings: Any,
    config: RunConfig,
    artifact_dir: str,
    *,
    previous: dict[str, Any] | None = None,
    out: Any = None,
) -> int:
    """Run the sweep, headless or in the live view (without --headless, on a terminal);
    Ctrl-C / SIGTERM / q stop it and keep every finished cell."""
    from specmon.sources.sweep import SWEEP_JSON, SweepRunner

    out = out or sys.stdout
    live = not config.headless and out is sys.stdout and sys.stdout.isatty()
    runner = SweepRunner(
        settings,
        config,
        artifact_dir,
        out=_progress_log(artifact_dir) if live else out,
        previous=(previous or {}).get("cells"),
    )

    def on_stop(signum: int) -> None:
        """From the process-wide stop handler (specmon/stops.py): flags and prints only."""
        if live and signum == signal.SIGHUP:  # the terminal is gone: let the screen close
            from specmon.tui.app import detach_from_terminal

            detach_from_terminal()
        if not runner.stopping.is_set():
            name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            print(
                f"specmon sweep: stopping ({name}): finished cells are kept", file=out, flush=True
            )
        runner.stop()

    from specmon.sinks.prometheus import close_exporters, exporter_for

    # up before the first server is ready; every repeat's session feeds it (make_session)
    exporter_for(config.prometheus_port, config.prometheus_host)
    stops.stage("load")  # a signal from here on stops the sweep; the finished cells stay
    stops.on_stop(on_stop)
    stops.on_abandon(runner.abandon)  # a third signal: no server is left behind
    try:
        result = run_live(runner, config.theme) if live else runner.run()
    finally:
        stops.remove_callback(on_stop)
        close_exporters()
    stops.stage("export")  # the decisions and sweep.json: a second signal never cuts them
    if live:
        runner.out = out  # the screen has closed: the rest goes to the terminal
    result = runner.conclude(result)
    tables = runner.tables(result) if result.cells else None
    if tables:
        print("\n" + tables, file=out)
    print(f"sweep written to {Path(artifact_dir) / SWEEP_JSON}", file=out, flush=True)
    if result.stopped:  # q, or 128 + the signal that stopped it (README, "Exit status")
        return stops.exit_status(128 + signal.SIGINT)
    return 1 if any(cell.error for cell in result.cells) else 0


PROGRESS_LOG = "sweep-progress.log"  # the live view's copy of the headless lines


def _progress_log(artifact_dir: str) -> TextIO:
    """Where the runner's progress lines go while the screen is up (not over it)."""
    Path(artifact_dir).mkdir(parents=True, exist_ok=True)
    return open(Path(artifact_dir) / PROGRESS_LOG, "a", encoding="utf-8")


def run_live(runner: Any, theme: str | None = None) -> Any:
    """The sweep on its thread under the live view; returns its SweepResult once the user
    has quit (q stops it; a finished sweep stays on screen until q)."""
    from specmon.sources.sweep import SweepResult
    from specmon.sources.sweep_control import SweepControl
    from specmon.tui.sweep_app import SweepApp

    control = SweepControl(runner)
    control.start()
    try:
        SweepApp(control, theme_name=theme).run()
    finally:
        control.stop()
        control.join()
        log = runner.out
        if log is not sys.stdout and hasattr(log, "close"):
            log.close()
    if control.error is not None:
        raise control.error
    return control.result or SweepResult(runner.ordered_cells(), True)


# `specmon demo --sweep` ------------------------------------------------------------------
# One `specmon sim` per k with the roofline latency model (its formula: `specmon sim --help`):
# the step floor holds at low load, the verify cost per token wins at high load, so the best
# k falls as concurrency grows. Sized to finish in under 3 minutes on 2 cores.
DEMO_SIM = (
    "{python} -m specmon sim --port {port} --latency-model roofline --step-floor-ms 4"
    " --compute-ms-per-token 0.05 --draft-ms-per-token 0.2 --ttft-ms 5"
)
DEMO_KS = [1, 2, 3, 4, 5, 6]
DEMO_CONCURRENCY = [1, 4, 16, 64]
DEMO_REPEATS = 3
DEMO_SEGMENT_DURATION_S = 1.0
DEMO_WARMUP = 4
DEMO_DEFAULTS = {"streaming": True, "output_tokens_mean": 64, "prompt_source": "synthetic"}


def demo_templates(acceptance: str, seed: int) -> tuple[str, str]:
    """(--serve, --baseline-serve) for the demo simulators."""
    tail = f" --acceptance {acceptance} --seed {seed}"
    return DEMO_SIM + " --num-spec-tokens {k}" + tail, DEMO_SIM + " --num-spec-tokens 0" + tail


def demo_sweep(args: argparse.Namespace) -> int:
    """`specmon demo --sweep`: the whole k x concurrency sweep against the simulator."""
    from specmon.sources.sweep import SweepSettings, load_settings_of

    config = build_config(args, defaults=DEMO_DEFAULTS)
    if config.random_seed is None:
        config.random_seed = DEFAULT_SEED
    from specmon.commands.demo import ACCEPTANCE_DEST

    acceptance = vars(args).get(ACCEPTANCE_DEST) or "0.7"
    serve, baseline = demo_templates(acceptance, config.random_seed)
    settings = SweepSettings(
        ks=list(DEMO_KS),
        concurrencies=list(DEMO_CONCURRENCY),
        serve=serve,
        baseline_serve=baseline,
        repeats=DEMO_REPEATS,
        segment_duration=DEMO_SEGMENT_DURATION_S,
        warmup_request_count=DEMO_WARMUP,
        ready_timeout=60.0,
        load=load_settings_of(config),
    )
    return execute(settings, config, config.artifact_dir or _default_dir())
