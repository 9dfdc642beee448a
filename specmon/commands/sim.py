"""`specmon sim`: serve a simulated vLLM (OpenAI API + spec-decode stats) on uvicorn.

The first stdout line is `specmon sim listening on http://HOST:PORT` (with --port 0 the port
is picked by the OS), so a parent process can read where it listens.
"""

from __future__ import annotations

import argparse
import logging
import socket

from specmon.errors import UserError
from specmon.sim.config import (
    LEVELS,
    SHAPES,
    SimConfig,
    parse_acceptance,
    parse_category_acceptance,
    validate,
)
from specmon.sim.model import LATENCY_MODELS

LATENCY_HELP = """latency models (ms; B = requests running on all engines incl. this one, k drafts):
  linear (default):
    step_time = step_ms * (1 + batch_slope * (B - 1) * (k + 1)) + draft_ms_per_token * k
  roofline:
    step_time = max(step_floor_ms, compute_ms_per_token * B * (k + 1))
                + draft_ms_per_token * k
  The first token arrives after ttft_ms; then one verify step per step_time, each emitting
  the accepted drafts plus one token (k = 0: one token per step, no speculation). Steps run
  against absolute monotonic deadlines, so the mean step equals the formula. With every
  latency at 0 the server answers at once. batch_slope (linear) or the compute term
  (roofline) makes verifying k+1 tokens for many requests costly, so the best k falls as
  concurrency grows.
capacity: at most --max-num-seqs requests run per engine, the rest wait (FIFO); KV usage =
  tokens held (prompt + generated) / --kv-cache-tokens; a step that would overflow it
  preempts the newest running request (it waits, then recomputes and resumes)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = LATENCY_HELP
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port; 0 picks a free one")
    parser.add_argument("--model", default="specmon-sim", help="served model id")
    parser.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY'")
    parser.add_argument(
        "--num-spec-tokens",
        type=int,
        default=3,
        metavar="K",
        help="drafts per verify step (k, default 3; 0 = no speculation)",
    )
    parser.add_argument(
        "--acceptance",
        default="0.7",
        help="conditional acceptance per position: one value or K values "
        "(e.g. 0.8,0.7,0.6; default 0.7)",
    )
    parser.add_argument(
        "--category-acceptance",
        default="",
        help="per X-Specmon-Category acceptance, e.g. code=0.9,chat=0.5 "
        "(per position: code=0.9:0.8:0.7)",
    )
    parser.add_argument("--ttft-ms", type=float, default=0.0, help="time to first token")
    parser.add_argument("--step-ms", type=float, default=0.0, help="target step time at batch 1")
    parser.add_argument(
        "--draft-ms-per-token", type=float, default=0.0, help="draft cost per drafted token"
    )
    parser.add_argument(
        "--batch-slope",
        type=float,
        default=0.0,
        help="step-time growth per extra verified token in flight",
    )
    parser.add_argument(
        "--latency-model",
        choices=LATENCY_MODELS,
        default="linear",
        help="step-time formula (see below; default linear)",
    )
    parser.add_argument(
        "--step-floor-ms", type=float, default=0.0, help="roofline: memory-bound step floor"
    )
    parser.add_argument(
        "--compute-ms-per-token",
        type=float,
        default=0.0,
        help="roofline: cost per verified token in the batch (B * (k + 1) of them)",
    )
    parser.add_argument(
        "--max-num-seqs", type=int, default=1_000_000, help="running requests per engine"
    )
    parser.add_argument(
        "--kv-cache-tokens", type=int, default=1_000_000_000, help="KV-cache capacity per engine"
    )
    parser.add_argument(
        "--shape",
        choices=SHAPES,
        default="vllm",
        help="where and how the per-request stats are sent (default vllm)",
    )
    parser.add_argument(
        "--level",
        choices=LEVELS,
        default="detailed",
        help="summary omits per-step arrays (default detailed)",
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="same seed + same requests -> same answers"
    )
    parser.add_argument(
        "--log",
        default=None,
        metavar="FILE",
        help="append one JSON line per request (ground truth)",
    )
    parser.add_argument(
        "--engines", type=int, default=1, help="split /metrics counters over N engine label sets"
    )
    parser.add_argument(
        "--default-max-tokens", type=int, default=64, help="max_tokens when a request gives none"
    )
    parser.add_argument(
        "--enable-force-include-usage",
        action="store_true",
        help="send the usage chunk (and its stats) on every stream, as vLLM's flag",
    )
    parser.add_argument(
        "--enable-per-request-metrics",
        action="store_true",
        help="fill metrics' timing keys (ttft, generation time, ITL, tokens/s)",
    )
    parser.add_argument("--error-rate", type=float, default=0.0, help="share of HTTP 500 answers")
    parser.add_argument(
        "--malformed-rate",
        type=float,
        default=0.0,
        help="share of payloads with a self-contradicting histogram",
    )
    parser.add_argument(
        "--disconnect-rate", type=float, default=0.0, help="share of responses cut mid-way"
    )


def config_from_args(args: argparse.Namespace) -> SimConfig:
    k = args.num_spec_tokens
    if k < 0:
        raise UserError("--num-spec-tokens must be 0 (no speculation) or more")
    cfg = SimConfig(
        model=args.model,
        num_spec_tokens=k,
        acceptance=parse_acceptance(args.acceptance, k),
        category_acceptance=parse_category_acceptance(args.category_acceptance, k),
        ttft_ms=args.ttft_ms,
        step_ms=args.step_ms,
        draft_ms_per_token=args.draft_ms_per_token,
        batch_slope=args.batch_slope,
        shape=args.shape,
        level=args.level,
        seed=args.seed,
        log_path=args.log,
        api_key=args.api_key,
        engines=args.engines,
        error_rate=args.error_rate,
        malformed_rate=args.malformed_rate,
        disconnect_rate=args.disconnect_rate,
        default_max_tokens=args.default_max_tokens,
        force_include_usage=args.enable_force_include_usage,
        per_request_metrics=args.enable_per_request_metrics,
        latency_model=args.latency_model,
        step_floor_ms=args.step_floor_ms,
        compute_ms_per_token=args.compute_ms_per_token,
        max_num_seqs=args.max_num_seqs,
        kv_cache_tokens=args.kv_cache_tokens,
    )
    return validate(cfg)


def _bind(host: str, port: int) -> socket.socket:
    if not 0 <= port <= 65535:
        raise UserError(f"--port {port} is not a port number (0..65535)")
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

    from specmon.sim.server import build_app

    cfg = config_from_args(args)
    try:
        app = build_app(cfg)
    except OSError as exc:
        raise UserError(f"cannot open --log {cfg.log_path}: {exc.strerror}") from None
    sock = _bind(args.host, args.port)
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
