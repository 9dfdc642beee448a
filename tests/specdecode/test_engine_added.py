"""A new engine is one registry entry, its adapter and its payload builder (issue 32 item 2):
tests/specdecode/toy_engine.py adds a made-up one that way, and a real `specmon sim
--shape toy` serves it to a real `specmon run`, whose exports carry the toy's record name
and the counts the simulator's own /metrics counted. And the held-out TensorRT-LLM payloads
through `specmon report`: every record says `tensorrt_llm`, AIPerf's name."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from support.cli import specmon

from specmon.server.process import ServerProcess
from specmon.sim.process import LISTEN_PREFIX, PARENT_FD_ENV

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures" / "payloads"
# `specmon ARGS` with the toy engine installed first, as a plugin's entry point would
LAUNCH = (
    f"import sys; sys.path.insert(0, {str(HERE)!r}); import toy_engine; toy_engine.install(); "
    "from specmon.cli import main; sys.exit(main(sys.argv[1:]))"
)
REQUESTS = 8


def _counter(page: str, name: str) -> int:
    """A counter's total over every engine label set, from a /metrics page."""
    found = re.findall(rf"^{re.escape(name)}_total\{{[^}}]*\}} (\S+)$", page, re.M)
    assert found, name
    return round(sum(float(v) for v in found))


@pytest.fixture
def toy_sim():
    sim = ServerProcess(
        [sys.executable, "-c", LAUNCH, "sim", "--port", "0", "--shape", "toy",
         "--num-spec-tokens", "3", "--acceptance", "0.6", "--seed", "5"],
        parent_pipe_env=PARENT_FD_ENV,
    )  # fmt: skip
    try:
        sim.url = sim.read_line(LISTEN_PREFIX, 30) or ""
        assert sim.wait_ready("specmon-sim", 30, None) is not None
        yield sim
    finally:
        sim.stop()


@pytest.mark.e2e
def test_a_toy_engine_is_served_by_the_simulator_and_read_end_to_end(toy_sim, tmp_path):
    models = json.loads(urllib.request.urlopen(toy_sim.url + "/v1/models", timeout=10).read())
    assert models["data"][0]["owned_by"] == "toy-owner"  # the entry's owner, on the card
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCH, "--url", toy_sim.url, "--headless",
         "--request-count", str(REQUESTS), "--concurrency", "2", "--output-tokens-mean", "24",
         "--no-streaming", "--artifact-dir", str(out)],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(line) for line in (out / "profile_export.jsonl").read_text().splitlines()]
    specs = [r["spec_decode_acceptance"] for r in records if r.get("spec_decode_acceptance")]
    assert len(records) == REQUESTS and len(specs) == REQUESTS
    assert {s["engine"] for s in specs} == {"toy_llm"}  # the record name, not the short one
    # the counts the client read are the ones the simulator counted (its vLLM-style /metrics)
    page = urllib.request.urlopen(toy_sim.url + "/metrics", timeout=10).read().decode()
    assert sum(s["num_draft_tokens"] for s in specs) == _counter(
        page, "vllm:spec_decode_num_draft_tokens"
    )
    assert sum(s["num_accepted_draft_tokens"] for s in specs) == _counter(
        page, "vllm:spec_decode_num_accepted_tokens"
    )
    summary = json.loads((out / "profile_export_aiperf.json").read_text())
    assert summary["acceptance_fidelity"]["engine"] == "toy_llm"
    assert summary["acceptance_fidelity"]["level"] == "counts"


@pytest.mark.e2e
def test_held_out_trtllm_payloads_through_report_say_tensorrt_llm(tmp_path):
    files = sorted(FIXTURES.glob("trtllm_*.json"))
    captures = [json.loads(f.read_text()) for f in files]
    raw = tmp_path / "raw.jsonl"
    raw.write_text("".join(json.dumps(c) + "\n" for c in captures))
    out = tmp_path / "report"
    proc = specmon("report", "-i", str(raw), "--artifact-dir", str(out), timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(line) for line in (out / "profile_export.jsonl").read_text().splitlines()]
    engines = [r["spec_decode_acceptance"]["engine"] for r in records]
    # each fixture is one request carrying one payload: one record each
    assert len(engines) == len(files) and set(engines) == {"tensorrt_llm"}
    summary = json.loads((out / "profile_export_aiperf.json").read_text())
    assert summary["acceptance_fidelity"]["engine"] == "tensorrt_llm"
