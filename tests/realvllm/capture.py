"""Capture a real vLLM's responses as raw-capture JSONL fixtures (tests/fixtures/vllm032/).

Raw capture format: docs/architecture.md. Regenerate the committed fixtures with
    .ci/setup_realvllm.sh && python tests/realvllm/capture.py [--out tests/fixtures/vllm032]
It starts one server per level (summary, detailed), sends the cases below, writes
<level>_<case>.jsonl per case plus <level>_metrics_spec_decode.prom (the server's spec-decode
counter lines after the cases), and stops the server.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, as pytest does
from realvllm.server import MODEL_ID, start_server

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm032"
PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
# Repetitive code-like prompts: the ngram drafter finds matches, the random model loops.
PROMPTS = [
    "def foo(self): return self.foo(self) def foo(self): return self.foo(self) def foo(self):",
    "import os\nimport sys\nimport os\nimport sys\nimport os\n",
]


def body(endpoint: str, prompt, streaming: bool, **extra) -> dict:
    req: dict = {"model": MODEL_ID, "max_tokens": 32, "temperature": 0}
    if endpoint == "chat":
        req["messages"] = [{"role": "user", "content": prompt}]
    else:
        req["prompt"] = prompt
    if streaming:
        req["stream"] = True
        req["stream_options"] = {"include_usage": True}
    req.update(extra)
    return req


def cases() -> dict[str, list[tuple[str, dict]]]:
    """Case name -> [(endpoint, request body)]; two prompts for the plain matrix."""
    out: dict[str, list[tuple[str, dict]]] = {}
    for endpoint in ("chat", "completions"):
        for streaming in (False, True):
            name = f"{endpoint}_{'stream' if streaming else 'nonstream'}"
            out[name] = [(endpoint, body(endpoint, p, streaming)) for p in PROMPTS]
    p0 = PROMPTS[0]
    # vLLM refuses n > 1 with greedy sampling (400), so n=2 samples (seeded).
    sampled = {"n": 2, "temperature": 0.8, "seed": 7}
    out["chat_n2_nonstream"] = [("chat", body("chat", p0, False, **sampled))]
    out["chat_n2_stream"] = [("chat", body("chat", p0, True, **sampled))]
    out["completions_promptlist2_nonstream"] = [
        ("completions", body("completions", PROMPTS, False))
    ]
    out["chat_max_tokens1_nonstream"] = [("chat", body("chat", p0, False, max_tokens=1))]
    out["chat_max_tokens1_stream"] = [("chat", body("chat", p0, True, max_tokens=1))]
    no_usage = body("chat", p0, True)
    no_usage["stream_options"] = {"include_usage": False}
    out["chat_stream_no_usage"] = [("chat", no_usage)]
    out["chat_temp08_nonstream"] = [("chat", body("chat", p0, False, temperature=0.8, seed=7))]
    return out


def send(client: httpx.Client, url: str, endpoint: str, req: dict) -> dict:
    """One request -> one raw capture dict (timings from perf_counter_ns, as specmon does)."""
    cap = {
        "endpoint": endpoint,
        "streaming": bool(req.get("stream")),
        "request": req,
        "status": 0,
        "responses": [],
        "start_ns": 0,
        "response_ns": [],
        "end_ns": 0,
        "error": None,
        "x_request_id": str(uuid.uuid4()),
        "wall_start_ns": time.time_ns(),
    }
    cap["start_ns"] = time.perf_counter_ns()
    with client.stream("POST", url + PATHS[endpoint], json=req) as resp:
        cap["status"] = resp.status_code
        if cap["streaming"] and resp.status_code == 200:
            for line in resp.iter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    continue
                cap["response_ns"].append(time.perf_counter_ns())
                cap["responses"].append(json.loads(data))
        else:
            raw = resp.read()
            cap["response_ns"].append(time.perf_counter_ns())
            cap["responses"].append(json.loads(raw))
    cap["end_ns"] = time.perf_counter_ns()
    if cap["status"] >= 400:
        cap["error"] = {"type": "http_error", "message": f"HTTP {cap['status']}"}
    return cap


def spec_decode_prom_lines(url: str) -> str:
    text = httpx.get(url + "/metrics", timeout=10).text
    return "".join(
        line + "\n"
        for line in text.splitlines()
        if line.startswith(
            ("vllm:spec_decode", "# HELP vllm:spec_decode", "# TYPE vllm:spec_decode")
        )
    )


def capture_level(level: str, out: Path, log_dir: Path) -> None:
    # summary: no --enable-per-request-metrics (timing keys arrive as null);
    # detailed: with it (real timing floats), so both body variants are covered.
    server = start_server(level, log_dir, timing_metrics=(level == "detailed"))
    try:
        with httpx.Client(timeout=120) as client:
            for name, reqs in cases().items():
                caps = [send(client, server.url, ep, req) for ep, req in reqs]
                with open(out / f"{level}_{name}.jsonl", "w") as fh:
                    for cap in caps:
                        fh.write(json.dumps(cap) + "\n")
        (out / f"{level}_metrics_spec_decode.prom").write_text(spec_decode_prom_lines(server.url))
    finally:
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=FIXTURES)
    parser.add_argument("--levels", default="summary,detailed")
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp/specmon-realvllm-logs"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for level in args.levels.split(","):
        capture_level(level, args.out, args.log_dir)
        print(f"captured level={level} into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
