"""Load-path benchmark: specmon --headless (and AIPerf 0.13) against a near-instant nginx.

nginx (Debian's package: `apt-get install -y nginx-light` or `nginx` if it is missing) runs as
a child of this script with its own config in a temp dir: one worker, 127.0.0.1, a free port,
serving a fixed vLLM-0.32-like reply: a 32-event SSE stream for POST /v1/chat/completions
(role chunk, 29 content chunks, finish chunk, usage chunk carrying
`metrics.speculative_decoding`, then `data: [DONE]`) and the /v1/models JSON.

Default mode: for each concurrency, run `specmon run --headless` (and AIPerf, when its cached
venv from .ci/setup_aiperf.sh exists) twice, at a small and a large request count, and print:
requests/s and SSE events/s (from the tool's own export), "wall req/s" (the extra requests of
the large run over its extra wall time: an outside check of the export's figure), CPU seconds
per 1,000 requests and memory per request (the growth between the two runs, so start-up
cost cancels out), start-up CPU and peak RSS.

`--clients`: a bare-client microbenchmark at one concurrency comparing aiohttp (+uvloop or
plain asyncio) with httpx (one shared client, or one client per slot) on the same nginx:
the figures behind the load path's choice of HTTP client.

Examples:
  python benchmarks/bench_load.py                       # 1,16,64,256 x 4,000 requests
  python benchmarks/bench_load.py --concurrency 64 --request-count 20000 --no-aiperf
  python benchmarks/bench_load.py --clients --request-count 5000
  python benchmarks/bench_load.py --serve 600   # just the server, e.g. for py-spy by hand
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (
    BenchError,
    ChildUsage,
    die_with_parent,
    free_port,
    markdown_table,
    parse_int_list,
    run_measured,
    specmon_cmd,
    stop_group,
    wait_for_port,
)

MODEL = "bench-specdec"
CREATED = 1764489600
NUM_SPEC_TOKENS = 3
# Verify step i accepts (i % 4) drafts, so 28 steps give the histogram [7, 7, 7, 7]:
# accepted = 0*7 + 1*7 + 2*7 + 3*7 = 42, drafted = 28 * 3 = 84,
# completion tokens = 1 (prefill) + 28 (one per step) + 42 (accepted) = 71.
SPEC_STEPS = 28
EVENTS_PER_REPLY = 32  # role + prefill content + 28 step chunks + finish + usage
CLIENT_KINDS = ("aiohttp-uvloop", "aiohttp-asyncio", "httpx-shared", "httpx-per-slot")
TEMPLATE = Path(__file__).resolve().parent / "nginx.conf.template"


# ---------------------------------------------------------------- the fixed reply


def _chunk(choices: list, **extra) -> str:
    body = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "choices": choices,
        **extra,
    }
    return "data: " + json.dumps(body, separators=(",", ":")) + "\n\n"


def _delta(delta: dict, finish_reason: str | None = None) -> list:
    return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]


def spec_payload() -> dict:
    histogram = [0] * (NUM_SPEC_TOKENS + 1)
    for step in range(SPEC_STEPS):
        histogram[step % (NUM_SPEC_TOKENS + 1)] += 1
    accepted = sum(j * count for j, count in enumerate(histogram))
    drafted = SPEC_STEPS * NUM_SPEC_TOKENS
    return {
        "mean_acceptance_length": 1 + accepted / SPEC_STEPS,
        "draft_acceptance_rate": accepted / drafted,
        "acceptance_histogram": histogram,
        "num_spec_steps": SPEC_STEPS,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": NUM_SPEC_TOKENS,
    }


def sse_reply() -> bytes:
    """The chat stream vLLM 0.32 sends with include_usage: stats only on the usage chunk."""
    spec = spec_payload()
    events = [
        _chunk(_delta({"role": "assistant", "content": ""})),
        _chunk(_delta({"content": " The"})),
    ]  # the prefill token
    for step in range(SPEC_STEPS):
        tokens = step % (NUM_SPEC_TOKENS + 1) + 1  # the accepted drafts plus the bonus token
        events.append(_chunk(_delta({"content": " tok" * tokens})))
    events.append(_chunk(_delta({"content": ""}, "length")))
    completion = 1 + SPEC_STEPS + spec["num_accepted_draft_tokens"]
    usage = {"prompt_tokens": 16, "total_tokens": 16 + completion, "completion_tokens": completion}
    events.append(_chunk([], usage=usage, metrics={"speculative_decoding": spec}))
    assert len(events) == EVENTS_PER_REPLY
    return ("".join(events) + "data: [DONE]\n\n").encode()


def models_reply() -> bytes:
    model = {
        "id": MODEL,
        "object": "model",
        "created": CREATED,
        "owned_by": "vllm",
        "root": MODEL,
        "parent": None,
        "max_model_len": 4096,
    }
    return json.dumps({"object": "list", "data": [model]}).encode()


# ---------------------------------------------------------------- nginx


class Nginx:
    """nginx as a foreground child with a generated config; `with Nginx() as url: ...`."""

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or shutil.which("nginx") or _sbin("nginx")
        if not self.binary:
            raise BenchError(
                "nginx not found: install Debian's nginx "
                "(apt-get install -y nginx-light) or pass --nginx PATH"
            )
        self.prefix = Path(tempfile.mkdtemp(prefix="specmon-bench-nginx-"))
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> str:
        self._write_files()
        conf = self.prefix / "nginx.conf"
        self.proc = subprocess.Popen(
            [
                self.binary,
                "-p",
                str(self.prefix),
                "-e",
                str(self.prefix / "error.log"),
                "-c",
                str(conf),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        try:
            wait_for_port(self.port, 10.0, self.proc)
        except BenchError as exc:
            self.__exit__()
            raise BenchError(f"nginx did not start: {exc}: {self._log_tail()}") from None
        return self.url

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            stop_group(self.proc)
            self.proc = None
        shutil.rmtree(self.prefix, ignore_errors=True)

    def _write_files(self) -> None:
        www = self.prefix / "www" / "v1"
        (www / "chat").mkdir(parents=True)
        (self.prefix / "tmp").mkdir()
        (www / "chat" / "completions").write_bytes(sse_reply())
        (www / "models").write_bytes(models_reply())
        (self.prefix / "nginx.conf").write_text(
            TEMPLATE.read_text().format(prefix=self.prefix, port=self.port)
        )
        # nginx workers started by root run as `nobody`: let them read the files
        for path in [self.prefix, *self.prefix.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)

    def _log_tail(self) -> str:
        log = self.prefix / "error.log"
        return log.read_text(errors="replace").strip()[-300:] if log.exists() else "(no log)"


def _sbin(name: str) -> str | None:
    path = Path("/usr/sbin") / name
    return str(path) if path.exists() else None


# ---------------------------------------------------------------- one tool, one run


@dataclass
class RunResult:
    requests: int  # valid profiling requests in the tool's export
    errors: int
    req_per_s: float  # the tool's own request_throughput (profiling phase)
    acceptance_length: float | None  # proves the tool read the spec payload (2.5 expected)
    usage: ChildUsage


def _export_json(artifact_dir: Path) -> dict:
    found = sorted(artifact_dir.rglob("profile_export_aiperf.json"))
    if not found:
        raise BenchError(f"no profile_export_aiperf.json under {artifact_dir}")
    return json.loads(found[0].read_text())


def _metric(export: dict, tag: str, default: float | None = None) -> float:
    block = export.get(tag)
    if isinstance(block, dict) and block.get("avg") is not None:
        return float(block["avg"])
    if default is None:
        raise BenchError(f"export has no {tag}")
    return default


def _finish(usage: ChildUsage, artifact_dir: Path, label: str) -> RunResult:
    if usage.returncode != 0:
        raise BenchError(f"{label} exited with status {usage.returncode}: {usage.tail(4)}")
    export = _export_json(artifact_dir)
    acceptance = export.get("spec_decode_acceptance_length") or {}
    return RunResult(
        int(_metric(export, "request_count", 0)),
        int(_metric(export, "error_request_count", 0)),
        _metric(export, "request_throughput"),
        acceptance.get("avg"),
        usage,
    )


def run_specmon(
    url: str, concurrency: int, count: int, workers: int, work: Path, attempt: int = 0
) -> RunResult:
    artifact_dir = work / f"specmon-c{concurrency}-n{count}-{attempt}"
    cmd = [
        *specmon_cmd(),
        "run",
        "--url",
        url,
        "--headless",
        "--endpoint-type",
        "chat",
        "--streaming",
        "--concurrency",
        str(concurrency),
        "--request-count",
        str(count),
        "--export-level",
        "records",
        "--artifact-dir",
        str(artifact_dir),
    ]
    if workers > 1:
        cmd += ["--workers", str(workers)]
    usage = run_measured(cmd, timeout_s=120 + count / 20)
    return _finish(usage, artifact_dir, "specmon")


@dataclass
class AIPerf:
    binary: Path
    hf_home: Path
    tokenizer: str = "specmon/shakespeare-bpe"

    @classmethod
    def locate(cls) -> AIPerf | str:
        """The cached AIPerf of .ci/setup_aiperf.sh, or why it cannot be used."""
        cache = Path(os.environ.get("SPECMON_CACHE", Path.home() / ".cache" / "specmon"))
        binary, hf_home = cache / "aiperf-venv" / "bin" / "aiperf", cache / "aiperf-hf"
        if not binary.exists():
            return f"no AIPerf venv at {binary.parent.parent} (run .ci/setup_aiperf.sh)"
        tokenizer_dir = hf_home / "hub" / "models--specmon--shakespeare-bpe"
        if not list(tokenizer_dir.glob("snapshots/*/tokenizer.json")):
            return f"no offline tokenizer under {tokenizer_dir} (run .ci/setup_aiperf.sh)"
        return cls(binary, hf_home)

    def run(
        self, url: str, concurrency: int, count: int, work: Path, attempt: int = 0
    ) -> RunResult:
        artifact_dir = work / f"aiperf-c{concurrency}-n{count}-{attempt}"
        cmd = [
            str(self.binary),
            "profile",
            "--model",
            MODEL,
            "--tokenizer",
            self.tokenizer,
            "--url",
            url,
            "--endpoint-type",
            "chat",
            "--streaming",
            "--concurrency",
            str(concurrency),
            "--request-count",
            str(count),
            "--isl",
            "16",
            "--osl",
            "71",
            "--extra-inputs",
            "ignore_eos:true",
            "--random-seed",
            "42",
            "--export-level",
            "records",
            "--artifact-dir",
            str(artifact_dir),
            "--ui-type",
            "none",
            "--no-gpu-telemetry",
            "--no-server-metrics",
        ]
        env = {**os.environ, "HF_HOME": str(self.hf_home), "HF_HUB_OFFLINE": "1"}
        usage = run_measured(cmd, timeout_s=180 + count / 10, env=env, cwd=work)
        return _finish(usage, artifact_dir, "aiperf")


# ---------------------------------------------------------------- the load table


@dataclass
class Row:
    tool: str
    concurrency: int
    requests: int
    req_per_s: float
    wall_req_per_s: (
        float | None
    )  # (large - small requests) / (large - small wall time): start-up cancels
    cpu_per_1k: float
    startup_cpu: float
    peak_rss_mb: float
    kb_per_request: float
    errors: int
    acceptance_length: float | None

    def cells(self) -> list:
        return [
            self.tool,
            self.concurrency,
            self.requests,
            self.req_per_s,
            self.wall_req_per_s,
            self.req_per_s * EVENTS_PER_REPLY,
            self.cpu_per_1k,
            self.startup_cpu,
            self.peak_rss_mb,
            self.kb_per_request,
            self.errors,
            self.acceptance_length,
        ]


LOAD_HEADERS = [
    "tool",
    "concurrency",
    "requests",
    "req/s",
    "wall req/s",
    "SSE events/s",
    "CPU s/1k req",
    "start-up CPU s",
    "peak RSS MB",
    "KB/request",
    "errors",
    "accept. length",
]


def two_point_row(tool: str, concurrency: int, small: RunResult, large: RunResult) -> Row:
    """Marginal costs from two runs that differ only in request count."""
    extra = large.requests - small.requests
    if extra <= 0:
        raise BenchError(f"{tool}: the large run completed no more requests than the small one")
    cpu_per_request = (large.usage.cpu_s - small.usage.cpu_s) / extra
    kb_per_request = (large.usage.maxrss_mb - small.usage.maxrss_mb) * 1024 / extra
    startup = small.usage.cpu_s - cpu_per_request * small.requests
    extra_wall = large.usage.wall_s - small.usage.wall_s
    wall_rate = extra / extra_wall if extra_wall > 0 else None  # start-up noise swamped it
    return Row(
        tool,
        concurrency,
        large.requests,
        large.req_per_s,
        wall_rate,
        cpu_per_request * 1000,
        startup,
        large.usage.maxrss_mb,
        kb_per_request,
        large.errors + small.errors,
        large.acceptance_length,
    )


def load_table(args: argparse.Namespace, url: str, work: Path) -> tuple[list[Row], list[str]]:
    notes: list[str] = []
    aiperf = None if args.no_aiperf else AIPerf.locate()
    if isinstance(aiperf, str):
        notes.append(f"AIPerf columns skipped: {aiperf}")
        aiperf = None
    elif aiperf is None:
        notes.append("AIPerf columns skipped: --no-aiperf")
    small_count = max(1, args.request_count // 4)
    rows: list[Row] = []
    for concurrency in args.concurrency:
        tools = [
            ("specmon", lambda n, i, c=concurrency: run_specmon(url, c, n, args.workers, work, i))
        ]
        if aiperf is not None:
            tools.append(
                ("aiperf 0.13", lambda n, i, c=concurrency: aiperf.run(url, c, n, work, i))
            )
        for tool, run in tools:
            _progress(
                f"{tool} at concurrency {concurrency}: {small_count} then "
                f"{args.request_count} requests (x{args.repeat})"
            )
            try:
                small = run(small_count, 0)
                # best of --repeat: on a shared machine the least disturbed run is the truest
                large = max(
                    (run(args.request_count, i) for i in range(args.repeat)),
                    key=lambda result: result.req_per_s,
                )
                rows.append(two_point_row(tool, concurrency, small, large))
            except BenchError as exc:
                notes.append(f"{tool} at concurrency {concurrency} failed: {exc}")
    return rows, notes


def verdicts(rows: list[Row], target: float, target_concurrency: int) -> list[str]:
    lines = []
    ours = {r.concurrency: r for r in rows if r.tool == "specmon"}
    peer = {r.concurrency: r for r in rows if r.tool.startswith("aiperf")}
    if target_concurrency in ours:
        row = ours[target_concurrency]
        lines.append(
            f"target >= {target:,.0f} req/s at concurrency {target_concurrency}: "
            f"{'met' if row.req_per_s >= target else 'MISSED'} ({row.req_per_s:,.0f} req/s)"
        )
        if row.cpu_per_1k > 0:  # what one process could do with a whole core to itself
            lines.append(
                f"CPU-bound ceiling at concurrency {target_concurrency}: "
                f"{1000 / row.cpu_per_1k:,.0f} req/s per core ({row.cpu_per_1k:.2f} CPU s/1k req; "
                f"the target needs <= {1000 / target:.2f})"
            )
    for concurrency in sorted(set(ours) & set(peer)):
        ratio = ours[concurrency].req_per_s / peer[concurrency].req_per_s
        lines.append(
            f"concurrency {concurrency}: specmon/AIPerf = {ratio:.2f}x"
            + ("" if ratio >= 1 else "  (BELOW AIPerf)")
        )
    return lines


# ---------------------------------------------------------------- bare clients


def clients_table(args: argparse.Namespace, url: str) -> tuple[list[list], list[str]]:
    concurrency = args.concurrency[0] if args.concurrency_given else 64
    rows, notes = [], []
    for kind in args.client_kinds:
        _progress(f"bare client {kind} at concurrency {concurrency}: {args.request_count} requests")
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--_client",
            kind,
            "--url",
            url,
            "--concurrency",
            str(concurrency),
            "--request-count",
            str(args.request_count),
        ]
        try:
            usage = run_measured(cmd, timeout_s=120 + args.request_count / 20)
            if usage.returncode != 0:
                raise BenchError(f"exited with status {usage.returncode}: {usage.tail(3)}")
            figures = json.loads(usage.stdout.strip().splitlines()[-1])
        except (BenchError, ValueError, IndexError) as exc:
            notes.append(f"client {kind} failed: {exc}")
            continue
        done = figures["requests"]
        rows.append(
            [
                kind,
                concurrency,
                done,
                done / figures["elapsed_s"],
                figures["events"] / figures["elapsed_s"],
                figures["cpu_s"] / done * 1000,
                usage.maxrss_mb,
                figures["errors"],
            ]
        )
        if figures["events"] != done * EVENTS_PER_REPLY:
            notes.append(
                f"client {kind} parsed {figures['events']} events, expected "
                f"{done * EVENTS_PER_REPLY}"
            )
    return rows, notes


CLIENT_HEADERS = [
    "client",
    "concurrency",
    "requests",
    "req/s",
    "SSE events/s",
    "CPU s/1k req",
    "peak RSS MB",
    "errors",
]


class EventCounter:
    """Splits an SSE byte stream into events and decodes each JSON payload (as a client must)."""

    def __init__(self, loads) -> None:
        self.loads, self.tail, self.events, self.done = loads, b"", 0, False

    def feed(self, chunk: bytes) -> None:
        parts = (self.tail + chunk).split(b"\n\n")
        self.tail = parts.pop()
        for part in parts:
            payload = part[6:] if part.startswith(b"data: ") else None
            if payload == b"[DONE]":
                self.done = True
            elif payload is not None:
                self.loads(payload)
                self.events += 1


def client_worker(kind: str, url: str, concurrency: int, count: int) -> None:
    """Child process of --clients: run one client kind, print one JSON line of figures."""
    if kind not in CLIENT_KINDS:
        raise SystemExit(f"error: unknown client {kind!r}; choose from {', '.join(CLIENT_KINDS)}")
    if kind != "aiohttp-asyncio":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    send_factory = {
        "aiohttp-uvloop": _aiohttp_sender,
        "aiohttp-asyncio": _aiohttp_sender,
        "httpx-shared": _httpx_shared_sender,
        "httpx-per-slot": _httpx_slot_sender,
    }[kind]
    figures = asyncio.run(_drive(send_factory, url + "/v1/chat/completions", concurrency, count))
    print(json.dumps(figures))


async def _drive(send_factory, url: str, concurrency: int, count: int) -> dict:
    import orjson

    body = orjson.dumps(
        {
            "model": MODEL,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": 71,
            "messages": [{"role": "user", "content": "bench " * 16}],
        }
    )
    totals = {"requests": 0, "events": 0, "errors": 0}
    issued = 0
    async with send_factory(concurrency) as make_send:

        async def slot() -> None:
            nonlocal issued
            send = await make_send()
            while issued < count:
                issued += 1
                counter = EventCounter(orjson.loads)
                try:
                    await send(url, body, counter)
                except Exception:
                    totals["errors"] += 1
                    continue
                totals["requests"] += counter.done
                totals["errors"] += not counter.done
                totals["events"] += counter.events

        cpu0, wall0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(slot() for _ in range(concurrency)))
        totals["elapsed_s"] = time.perf_counter() - wall0
        totals["cpu_s"] = time.process_time() - cpu0
    return totals


HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


class _aiohttp_sender:
    """One ClientSession with a connector sized to the concurrency (as the load path uses)."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency

    async def __aenter__(self):
        import aiohttp

        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.concurrency, limit_per_host=0),
            timeout=aiohttp.ClientTimeout(total=60),
            auto_decompress=False,
        )

        async def send(url: str, body: bytes, counter: EventCounter) -> None:
            async with self.session.post(url, data=body, headers=HEADERS) as resp:
                async for chunk in resp.content.iter_any():
                    counter.feed(chunk)

        async def make_send():
            return send

        return make_send

    async def __aexit__(self, *exc) -> None:
        await self.session.close()


async def _httpx_send(client, url: str, body: bytes, counter: EventCounter) -> None:
    async with client.stream("POST", url, content=body, headers=HEADERS) as resp:
        async for chunk in resp.aiter_raw():
            counter.feed(chunk)


class _httpx_shared_sender:
    """One httpx.AsyncClient whose pool holds every connection."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency

    async def __aenter__(self):
        import httpx

        limits = httpx.Limits(
            max_connections=self.concurrency, max_keepalive_connections=self.concurrency
        )
        self.client = httpx.AsyncClient(limits=limits, timeout=60)

        async def make_send():
            return lambda url, body, counter: _httpx_send(self.client, url, body, counter)

        return make_send

    async def __aexit__(self, *exc) -> None:
        await self.client.aclose()


class _httpx_slot_sender:
    """One httpx.AsyncClient (one connection) per concurrency slot."""

    def __init__(self, concurrency: int) -> None:
        self.clients: list = []

    async def __aenter__(self):
        import httpx

        async def make_send():
            client = httpx.AsyncClient(limits=httpx.Limits(max_connections=1), timeout=60)
            self.clients.append(client)
            return lambda url, body, counter: _httpx_send(client, url, body, counter)

        return make_send

    async def __aexit__(self, *exc) -> None:
        for client in self.clients:
            await client.aclose()


# ---------------------------------------------------------------- main


def _serve(seconds: float) -> None:
    """Keep the server up; Ctrl-C or SIGTERM ends it early and still stops nginx."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        time.sleep(seconds)
    except KeyboardInterrupt:
        pass


def _progress(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Needs Debian's nginx (apt-get install -y nginx-light). AIPerf columns need the "
        "cached venv of .ci/setup_aiperf.sh (${SPECMON_CACHE:-~/.cache/specmon}/aiperf-venv).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--concurrency",
        default=None,
        help="comma-separated concurrencies (default 1,16,64,256; --clients: 64)",
    )
    parser.add_argument(
        "--request-count",
        type=int,
        default=4000,
        help="requests in the large run (the small run sends a quarter); default 4000",
    )
    parser.add_argument("--workers", type=int, default=1, help="specmon --workers (default 1)")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run the large count this many times and keep the fastest (default 1)",
    )
    parser.add_argument("--no-aiperf", action="store_true", help="leave AIPerf out")
    parser.add_argument(
        "--clients",
        action="store_true",
        help="bare-client microbenchmark instead of the tool comparison",
    )
    parser.add_argument(
        "--client-kinds",
        default=",".join(CLIENT_KINDS),
        help=f"clients for --clients (default {','.join(CLIENT_KINDS)})",
    )
    parser.add_argument(
        "--target",
        type=float,
        default=3000.0,
        help="req/s specmon must reach at --target-concurrency (default 3000)",
    )
    parser.add_argument("--target-concurrency", type=int, default=64)
    parser.add_argument(
        "--nginx", default=None, help="nginx binary (default: from PATH or /usr/sbin)"
    )
    parser.add_argument(
        "--serve",
        type=float,
        default=None,
        metavar="SECONDS",
        help="only serve the reply for SECONDS, printing the URL (to profile by hand)",
    )
    parser.add_argument("--_client", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--url", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.concurrency_given = args.concurrency is not None
    args.concurrency = parse_int_list(args.concurrency or "1,16,64,256")
    args.client_kinds = [k.strip() for k in args.client_kinds.split(",") if k.strip()]
    unknown = sorted(set(args.client_kinds) - set(CLIENT_KINDS))
    if unknown:
        parser.error(
            f"unknown client kind(s) {', '.join(unknown)}; choose from {', '.join(CLIENT_KINDS)}"
        )
    if args.repeat < 1 or args.workers < 1:
        parser.error("--repeat and --workers must be at least 1")
    if args.request_count < 4:
        parser.error("--request-count must be at least 4 (the small run sends a quarter)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args._client:
        client_worker(args._client, args.url, args.concurrency[0], args.request_count)
        return 0
    try:
        with Nginx(args.nginx) as url, tempfile.TemporaryDirectory(prefix="specmon-bench-") as work:
            _progress(f"nginx serving a {EVENTS_PER_REPLY}-event SSE reply at {url}")
            if args.serve is not None:
                print(url, flush=True)
                _serve(args.serve)
                return 0
            if args.clients:
                rows, notes = clients_table(args, url)
                print(markdown_table(CLIENT_HEADERS, rows))
            else:
                load_rows, notes = load_table(args, url, Path(work))
                print(markdown_table(LOAD_HEADERS, [row.cells() for row in load_rows]))
                notes += verdicts(load_rows, args.target, args.target_concurrency)
    except BenchError as exc:
        print(f"bench_load: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"\nmachine: {os.cpu_count()} CPUs; reply: {EVENTS_PER_REPLY} SSE events + [DONE], "
        f"{len(sse_reply()):,} bytes; specmon workers: {args.workers}"
    )
    for note in notes:
        print(f"note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
