"""`specmon demo`: start `specmon sim` on a free loopback port and run against it.

Takes every run flag plus the simulator's own option declarations (specmon/sim/config.py),
with the demo's defaults below. Headless when --headless is given or stdout is not a
terminal. The simulators stop when the run ends. `--num-spec-tokens 2,4,6` starts one
simulator per k (same seed and latency model) and runs them side by side, mirrored unless
--split is given.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from typing import Any

from specmon import stops
from specmon.commands import run as run_command
from specmon.config import add_run_arguments, build_config
from specmon.errors import UserError
from specmon.sim.config import SIM_OPTIONS, SimConfig, with_preset

# The demo's own defaults, in one place: a run with some load, and a simulator whose
# latency makes the TUI move. Everything else is the run's and the simulator's defaults.
DEMO_DEFAULTS: dict[str, Any] = {"concurrency": 16, "streaming": True}
DEMO_SIM_DEFAULTS: dict[str, Any] = {"ttft_ms": 15.0, "step_ms": 3.0}
# Simulator options the demo sets itself (so they are not demo flags); the demo's
# --num-spec-tokens takes a list of k, one simulator each; the run's --spec-method is the
# simulators' too (they report it back in /server_info).
DEMO_SETS_ITSELF = ("host", "port", "model", "api_key", "seed", "num_spec_tokens", "spec_method")
# Simulator flags that read differently next to the run flags.
DEMO_SIM_FLAGS = {"log_path": "--sim-log"}
ACCEPTANCE_DEST = "sim_acceptance"  # where argparse keeps the simulator's --acceptance
# Categories draft differently on a real server; the demo shows that (code and translation
# are predictable, open writing and chat less so). Used at k = 3 unless acceptance is given.
DEMO_CATEGORY_ACCEPTANCE = (
    "code=0.9:0.85:0.8,translation=0.85:0.8:0.7,math=0.8:0.7:0.6,"
    "summarization=0.75:0.65:0.55,qa=0.7:0.6:0.5,reasoning=0.7:0.6:0.5,"
    "chat=0.55:0.45:0.35,writing=0.5:0.4:0.3"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser, defaults=DEMO_DEFAULTS)
    SIM_OPTIONS.add_arguments(
        parser,
        exclude=DEMO_SETS_ITSELF,
        rename=DEMO_SIM_FLAGS,
        defaults=DEMO_SIM_DEFAULTS,
        config_flags=False,
    )
    parser.add_argument(
        "--num-spec-tokens",
        type=parse_ks,
        default=[3],
        metavar="K[,K...]",
        help="drafts per verify step of the simulated server (default 3); "
        "several (0,2,4) start one simulator each, side by side; 0 is the "
        "no-speculation baseline the others' speedups are read against",
    )
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="measure k 0-6 x concurrency 1,4,16,64 (one simulator per k, preset "
        "h200-8b-eagle) and pick k per load",
    )


def parse_ks(text: str) -> list[int]:
    """'2,4,6' -> [2, 4, 6]; argparse turns the ValueError into a one-line error."""
    try:
        ks = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not K or K,K,... (whole numbers)") from None
    if not ks or min(ks) < 0:  # 0: a simulator without speculation, the baseline
        raise argparse.ArgumentTypeError(f"'{text}': every k must be at least 0")
    if len(set(ks)) != len(ks):
        raise argparse.ArgumentTypeError(f"'{text}' repeats a k")
    return ks


def first_k_acceptance(raw: Any, ks: list[int], k: int) -> str | None:
    """--acceptance with one value per position of the largest k: simulator k takes the
    first k values (None: leave the flag to the simulator's own parsing)."""
    if raw is None or len(ks) < 2 or k == 0 or isinstance(raw, (int, float)):
        return None  # k = 0 drafts nothing: no acceptance to give it
    parts = [p.strip() for p in str(raw).strip("[]").split(",") if p.strip()]
    if len(parts) <= 1:
        return None
    if len(parts) < max(ks):
        raise UserError(
            f"--acceptance: {len(parts)} values for --num-spec-tokens "
            f"{','.join(map(str, ks))}; give 1 or {max(ks)} (one per position of the largest "
            "k; each simulator takes its first k)"
        )
    return ",".join(parts[:k])


def sim_config(args: argparse.Namespace, seed: int | None, k: int) -> SimConfig:
    """One simulator's settings: demo defaults < SPECMON_SIM_* env < flags < what demo sets."""
    ks = args.num_spec_tokens
    sim_log = getattr(args, "sim_log_path", None)
    overrides: dict[str, Any] = {"host": "127.0.0.1", "port": 0, "num_spec_tokens": k}
    overrides["seed"] = seed
    if getattr(args, "spec_method", None):
        overrides["spec_method"] = args.spec_method
    if sim_log:
        overrides["log_path"] = sim_log if len(ks) == 1 else f"{sim_log}.k{k}"
    per_position = first_k_acceptance(getattr(args, ACCEPTANCE_DEST, None), ks, k)
    if per_position is not None:  # this simulator's share of the flag, before it is parsed
        args = argparse.Namespace(**{**vars(args), ACCEPTANCE_DEST: per_position})
    # --preset replaces the demo's own latency defaults (a preset in the environment does not)
    defaults = {} if getattr(args, "sim_preset", None) else DEMO_SIM_DEFAULTS
    cfg, _, _ = with_preset(
        SIM_OPTIONS.build(args, overrides=overrides, defaults=defaults, rename=DEMO_SIM_FLAGS)
    )
    given = {"acceptance", "category_acceptance"} & cfg.model_fields_set
    if k == 3 and not given:  # the built-in per-category profile is for k = 3
        cfg.category_acceptance = DEMO_CATEGORY_ACCEPTANCE  # type: ignore[assignment]
    return cfg


def main(args: argparse.Namespace) -> int:
    from specmon.sim.process import start_sim

    if getattr(args, "url", None):  # --url is a run option; the demo's servers are its own
        raise UserError(
            "demo runs its own simulated server; use `specmon run --url URL` for a real one"
        )
    if args.sweep:
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
    run_command.check_slo_early(config)
    if config.random_seed is None:  # one seed for every simulator and the prompts
        config.random_seed = int(time.time_ns() % 2**31)
    sim_configs = [sim_config(args, config.random_seed, k) for k in ks]  # errors before starts
    with contextlib.ExitStack() as stack:
        sims = [stack.enter_context(start_sim(SIM_OPTIONS.to_argv(cfg))) for cfg in sim_configs]
        for sim in sims:  # a third stop signal force-quits: no simulator is left behind
            stops.on_abandon(sim.kill_now)
        config.url = [sim.url if len(ks) == 1 else f"k{k}={sim.url}" for k, sim in zip(ks, sims)]
        config.model = config.model or sims[0].model
        return run_command.execute(config, save_config_path=getattr(args, "save_config", None))


# `specmon demo --sweep` ------------------------------------------------------------------
# One `specmon sim` per k with a named preset (`specmon sim --help` lists them): its roofline
# step floor holds at low load, the verify cost per token wins at high load, so the best k
# falls as concurrency grows. Sized to finish in under 3 minutes on 2 cores.
DEMO_PRESET = "h200-8b-eagle"
DEMO_SIM = "{python} -m specmon sim --preset " + DEMO_PRESET + " --port {port}"
DEMO_KS = [1, 2, 3, 4, 5, 6]
DEMO_CONCURRENCY = [1, 4, 16, 64]
DEMO_REPEATS = 3
DEMO_SEGMENT_DURATION_S = 1.0
DEMO_WARMUP = 4
DEMO_SWEEP_DEFAULTS = {"streaming": True, "output_tokens_mean": 64, "prompt_source": "synthetic"}


def demo_templates(acceptance: str | None, seed: int) -> tuple[str, str]:
    """(--serve, --baseline-serve) for the demo simulators (acceptance None: the preset's)."""
    tail = (f" --acceptance {acceptance}" if acceptance else "") + f" --seed {seed}"
    return DEMO_SIM + " --num-spec-tokens {k}" + tail, DEMO_SIM + " --num-spec-tokens 0" + tail


def demo_sweep(args: argparse.Namespace) -> int:
    """`specmon demo --sweep`: the whole k x concurrency sweep against the simulator."""
    from specmon.commands.sweep import DEFAULT_SEED, default_dir, execute
    from specmon.run.sweep.settings import SweepSettings, load_settings_of

    config = build_config(args, defaults=DEMO_SWEEP_DEFAULTS)
    if config.random_seed is None:
        config.random_seed = DEFAULT_SEED
    acceptance = vars(args).get(ACCEPTANCE_DEST)
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
        verify_schedule=True,  # one more simulator: the schedule it wrote, beside the fixed k
        slo=config.slo,
    )
    return execute(settings, config, config.artifact_dir or default_dir())
