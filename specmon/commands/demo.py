"""`specmon demo`: start `specmon sim` on a free loopback port and run against it.

Takes every run flag plus the simulator flags that matter for a demo. Headless when
--headless is given or stdout is not a terminal. The simulator stops when the run ends.
"""

from __future__ import annotations

import argparse
import sys

from specmon.commands import run as run_command
from specmon.config import add_run_arguments, build_config
from specmon.errors import UserError

# Categories draft differently on a real server; the demo shows that (code and translation
# are predictable, open writing and chat less so).
DEMO_CATEGORY_ACCEPTANCE = ("code=0.9:0.85:0.8,translation=0.85:0.8:0.7,math=0.8:0.7:0.6,"
                            "summarization=0.75:0.65:0.55,qa=0.7:0.6:0.5,reasoning=0.7:0.6:0.5,"
                            "chat=0.55:0.45:0.35,writing=0.5:0.4:0.3")
DEMO_DEFAULTS = {"concurrency": 16, "streaming": True}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    sim = parser.add_argument_group("simulator options")
    sim.add_argument("--num-spec-tokens", type=int, default=3, metavar="K",
                     help="drafts per verify step of the simulated server (default 3)")
    sim.add_argument("--acceptance", default=None,
                     help="conditional acceptance per position, one value or K values "
                          "(default: per category, 0.5-0.9)")
    sim.add_argument("--category-acceptance", default=None,
                     help="per-category acceptance, e.g. code=0.9,chat=0.5")
    sim.add_argument("--ttft-ms", type=float, default=15.0, help="simulated time to first token (default 15)")
    sim.add_argument("--step-ms", type=float, default=3.0, help="simulated verify step time (default 3)")
    sim.add_argument("--error-rate", type=float, default=0.0, help="share of simulated HTTP 500 answers")
    sim.add_argument("--sim-log", default=None, metavar="FILE",
                     help="the simulator's per-request ground-truth log")


def sim_arguments(args: argparse.Namespace, seed: int | None) -> list[str]:
    k = args.num_spec_tokens
    argv = ["--num-spec-tokens", str(k), "--ttft-ms", str(args.ttft_ms), "--step-ms", str(args.step_ms),
            "--error-rate", str(args.error_rate)]
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
        argv += ["--log", args.sim_log]
    return argv


def main(args: argparse.Namespace) -> int:
    from specmon.sim.process import start_sim

    if getattr(args, "url", None):
        raise UserError("demo runs its own simulated server; use `specmon run --url URL` for a real one")
    config = build_config(args, defaults=DEMO_DEFAULTS)
    if not sys.stdout.isatty():
        config.headless = True
    with start_sim(sim_arguments(args, config.random_seed)) as sim:
        config.url = [sim.url]
        config.model = config.model or sim.model
        return run_command.execute(config, save_config_path=getattr(args, "save_config", None))

