"""`specmon sim`: serve a simulated vLLM (OpenAI API + spec-decode stats) on uvicorn.

The first stdout line is `specmon sim listening on http://HOST:PORT` (with --port 0 the port
is picked by the OS), so a parent process can read where it listens.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import time

from specmon.errors import UserError
from specmon.sim import presets
from specmon.sim.config import SIM_OPTIONS, SimConfig, with_preset

LATENCY_HELP = """latency models (ms; B = requests running on all engines incl. this one, k drafts):
  linear (default):
    step_time = step_ms * (1 + batch_slope * (B - 1) * (k + 1)) + draft_ms_per_token * k
  roofline:
    step_time = max(step_floor_ms, compute_ms_per_token * B * (k + 1))
                + draft_ms_per_token * k
  One loop per engine steps every running request together: each step lasts step_time for
  the batch that ran and emits each request's accepted drafts plus one token (k = 0: one
  token per step, no speculation); a request's first token leaves at the first step
  boundary after its ttft_ms prefill. Steps end on absolute monotonic deadlines, so the mean
  step equals the formula; /metrics carries the loop's own lag (specmon_sim_step_*). With
  every latency at 0 the server answers at once. --spec-schedule picks k per step from B. batch_slope (linear) or the compute term
  (roofline) makes verifying k+1 tokens for many requests costly, so the best k falls as
  concurrency grows.
capacity: at most --max-num-seqs requests run per engine, the rest wait (FIFO); KV usage =
  tokens held (prompt + generated) / --kv-cache-tokens; a step that would overflow it
  preempts the newest running request (it waits, then recomputes and resumes)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every SimConfig option (flags > SPECMON_SIM_* env > --config FILE > defaults)."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = LATENCY_HELP + "\n" + presets.help_text()
    SIM_OPTIONS.add_arguments(parser)


def config_from_args(args: argparse.Namespace) -> SimConfig:
    cfg, preset, implicit = with_preset(SIM_OPTIONS.build(args))
    if preset is not None and implicit:  # say which model a first sweep is measuring
        print(
            f"specmon sim: no --preset and no latency option given: using preset "
            f"{preset.name} ({preset.summary}); --preset zero answers at once",
            file=sys.stderr,
            flush=True,
        )
    return cfg


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserError(
            f"cannot listen on {host}:{port}: {exc.strerror}; "
            "pick another --port (0 = any free one)"
        ) from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


class _QuietCut(logging.Filter):
    """Hide uvicorn's error line for responses the simulator cuts on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "without completing response" not in record.getMessage()


def main(args: argparse.Namespace) -> int:
    import uvicorn

    from specmon.sim.process import exit_with_parent
    from specmon.sim.server import build_app

    exit_with_parent()  # started by a client (specmon demo): never outlive it
    cfg = config_from_args(args)
    if args.sim_save_config:
        SIM_OPTIONS.save(cfg, args.sim_save_config)
    try:
        app = build_app(cfg)
    except OSError as exc:
        raise UserError(f"cannot open --log {cfg.log_path}: {exc.strerror}") from None
    # a model load: nothing listens until it is over, so readiness fails as a real server's
    time.sleep(cfg.startup_delay)
    sock = _bind(cfg.host, cfg.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"specmon sim listening on http://{shown}:{port}", flush=True)
    # loop/http "auto": uvloop and httptools when installed (one event loop, C parser)
    config = uvicorn.Config(
        app,
        loop="auto",
        http="auto",
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=3,
    )
    logging.getLogger("uvicorn.error").addFilter(_QuietCut())
    uvicorn.Server(config).run(sockets=[sock])
    return 0
