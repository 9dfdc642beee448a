"""`specmon demo`: start `specmon sim` on a free loopback port and run against it.

Takes every run flag plus the simulator flags that matter for a demo. Headless when
--headless is given or stdout is not a terminal. The simulators stop when the run ends.
`--num-spec-tokens 2,4,6` starts one simulator per k (same seed and latency model) and runs
them side by side, mirrored unless --split is given.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time

from specmon.commands import run as run_command
from specmon.config import add_run_arguments, build_config
from specmon.errors import UserError

# Categories draft differently on a real server; the demo shows that (code and translation
# are predictable, open writing and chat less so).
DEMO_CATEGORY_ACCEPTANCE = (
    "code=0.9:0.85:0.8,translation=0.85:0.8:0.7,math=0.8:0.7:0.6,"
    "summarization=0.75:0.65:0.55,qa=0.7:0.6:0.5,reasoning=0.7:0.6:0.5,"
    "chat=0.55:0.45:0.35,writing=0.5:0.4:0.3"
)
DEMO_DEFAULTS = {"concurrency": 16, "streaming": True}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    sim = parser.add_argument_group("simulator options")
    sim.add_argument(
        "--num-spec-tokens",
        type=parse_ks,
        default=[3],
        metavar="K[,K...]",
        help="drafts per verify step of the simulated server (default 3); "
        "several (2,4,6) start one simulator each, side by side",
    )
    sim.add_argument(
        "--acceptance",
        default=None,
        help="conditional acceptance per position, one value or K values "
        "(default: per category, 0.5-0.9)",
    )
    sim.add_argument(
        "--category-acceptance",
        default=None,
        help="per-category acceptance, e.g. code=0.9,chat=0.5",
    )
    sim.add_argument(
        "--ttft-ms", type=float, default=15.0, help="simulated time to first token (default 15)"
    )
    sim.add_argument(
        "--step-ms", type=float, default=3.0, help="simulated verify step time (default 3)"
    )
    sim.add_argument(
        "--draft-ms-per-token",
        type=float,
        default=0.0,
        help="simulated draft cost per drafted token (default 0)",
    )
    sim.add_argument(
        "--batch-slope",
        type=float,
        default=0.0,
        help="simulated step-time growth with requests in flight (default 0)",
    )
    sim.add_argument(
        "--error-rate", type=float, default=0.0, help="share of simulated HTTP 500 answers"
    )
    sim.add_argument(
        "--sim-log",
        default=None,
        metavar="FILE",
        help="the simulator's per-request ground-truth log",
    )
    sim.add_argument(
        "--sweep",
        action="store_true",
        help="measure k 0-6 x concurrency 1,4,16,64 (one simulator per k) and pick k per load",
    )


def parse_ks(text: str) -> list[int]:
    """'2,4,6' -> [2, 4, 6]; argparse turns the ValueError into a one-line error."""
    try:
        ks = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not K or K,K,... (whole numbers)") from None
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"'{text}': every k must be at least 1")
    if len(set(ks)) != len(ks):
        raise argparse.ArgumentTypeError(f"'{text}' repeats a k")
    return ks


def sim_arguments(args: argparse.Namespace, seed: int | None, k: int | None = None) -> list[str]:
    k = k if k is not None else args.num_spec_tokens[0]
    argv = [
        "--num-spec-tokens",
        str(k),
        "--ttft-ms",
        str(args.ttft_ms),
        "--step-ms",
        str(args.step_ms),
        "--draft-ms-per-token",
        str(args.draft_ms_per_token),
        "--batch-slope",
        str(args.batch_slope),
        "--error-rate",
        str(args.error_rate),
    ]
    if args.acceptance is not None:
        argv += ["--acceptance", args.acceptance]
    else:
        argv += ["--acceptance", "0.7"]
    category = args.category_acceptance
    if category is None and args.acceptance is None and k == 3:
        category = DEMO_CATEGORY_ACCEPTANCE  # the built-in per-category profile is for k = 3
    if category:
        argv += ["--category-acceptance", category]
    if seed is not None:
        argv += ["--seed", str(seed)]
    if args.sim_log:
        log = args.sim_log if len(args.num_spec_tokens) == 1 else f"{args.sim_log}.k{k}"
        argv += ["--log", log]
    return argv


def main(args: argparse.Namespace) -> int:
    from specmon.sim.process import start_sim

    if getattr(args, "url", None):
        raise UserError(
            "demo runs its own simulated server; use `specmon run --url URL` for a real one"
        )
    if args.sweep:
        from specmon.commands.sweep import demo_sweep

        return demo_sweep(args)
    ks = args.num_spec_tokens
    defaults = (
        dict(DEMO_DEFAULTS, mirror=True)
        if len(ks) > 1 and not getattr(args, "split", False)
        else DEMO_DEFAULTS
    )
    config = build_config(args, defaults=defaults)
    if not sys.stdout.isatty():
        config.headless = True
    run_command.check_theme_early(config)  # before the simulators start
    if config.random_seed is None:  # one seed for every simulator and the prompts
        config.random_seed = int(time.time_ns() % 2**31)
    with contextlib.ExitStack() as stack:
        sims = [
            stack.enter_context(start_sim(sim_arguments(args, config.random_seed, k))) for k in ks
        ]
        config.url = [sim.url if len(ks) == 1 else f"k{k}={sim.url}" for k, sim in zip(ks, sims)]
        config.model = config.model or sims[0].model
        return run_command.execute(config, save_config_path=getattr(args, "save_config", None))
