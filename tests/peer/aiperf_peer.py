"""Run AIPerf 0.13 against a server, and compare its spec-decode numbers with specmon's.

The venv and offline tokenizer come from .ci/setup_aiperf.sh (cached outside the clone).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specmon.interop.aiperf import (
    read_raw_export,
    read_records_export,
    read_summary_export,
    spec_decode_summary,
    write_captures,
)

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("SPECMON_CACHE", Path.home() / ".cache" / "specmon"))
AIPERF = CACHE / "aiperf-venv" / "bin" / "aiperf"
HF_HOME = CACHE / "aiperf-hf"
TOKENIZER = "specmon/shakespeare-bpe"
SETUP_SCRIPT = REPO / ".ci" / "setup_aiperf.sh"
SPEC_SECTION_TITLE = "NVIDIA AIPerf | LLM Metrics: Spec Decode"
HISTOGRAM_LINE = "Accepted drafts per step (% of steps):"
# Fields that are counts of whole things: equal exactly. Every other float: 1e-9 relative
# (AIPerf sums values in arrival order, specmon in file order; the last bit may differ).
EXACT_FIELDS = ("count",)
EXACT_UNITS = ("count", "tokens")
EXACT_UNIT_FIELDS = ("min", "max", "sum")


@pytest.fixture(scope="session")
def aiperf_ready() -> str:
    """Installs the cached AIPerf venv when missing; skips, with the setup's one-line
    reason, only when it cannot be installed on this machine."""
    ready, line = ensure_installed()
    print(line, file=sys.stderr)  # visible in CI logs whether it runs or skips
    if not ready:
        pytest.skip(line)
    return line


def ensure_installed() -> tuple[bool, str]:
    # stderr is not captured: the script's progress lines (what it installs, how long that
    # usually takes) reach the terminal, or pytest's captured output, while it works.
    proc = subprocess.run(
        ["bash", str(SETUP_SCRIPT)], stdout=subprocess.PIPE, text=True, timeout=1800
    )
    line = (proc.stdout.strip().splitlines() or ["aiperf: setup printed nothing"])[-1]
    return line.startswith("aiperf: ready"), line


def run_aiperf(
    url: str,
    model: str,
    out_dir: Path,
    *,
    streaming: bool,
    requests: int,
    osl: int,
    isl: int = 64,
    concurrency: int = 4,
    seed: int = 42,
    extra_inputs: tuple[str, ...] = (),
):
    cmd = [
        str(AIPERF),
        "profile",
        "--model",
        model,
        "--tokenizer",
        TOKENIZER,
        "--url",
        url,
        "--endpoint-type",
        "chat",
        "--concurrency",
        str(concurrency),
        "--request-count",
        str(requests),
        "--isl",
        str(isl),
        "--osl",
        str(osl),
        "--extra-inputs",
        "ignore_eos:true",
        "--random-seed",
        str(seed),
        "--export-level",
        "raw",
        "--artifact-dir",
        str(out_dir),
        "--ui-type",
        "none",
        "--no-gpu-telemetry",
    ]
    for extra in extra_inputs:
        cmd += ["--extra-inputs", extra]
    if streaming:
        cmd.insert(cmd.index("--concurrency"), "--streaming")
    env = dict(os.environ, HF_HOME=str(HF_HOME), HF_HUB_OFFLINE="1", COLUMNS="160")
    return subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=600, stdin=subprocess.DEVNULL
    )


def specmon_report(raw_capture: Path, out_dir: Path):
    cmd = [
        sys.executable,
        "-m",
        "specmon",
        "report",
        "--input",
        str(raw_capture),
        "--artifact-dir",
        str(out_dir),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _close(a, b) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def summary_differences(theirs: dict, ours: dict) -> list[str]:
    """Every spec-decode key/field of AIPerf's summary that specmon's lacks or disagrees on."""
    diffs = []
    for tag, their in theirs.items():
        our = ours.get(tag)
        if our is None:
            diffs.append(f"{tag}: missing in specmon")
        elif tag == "pooled_spec_decode_acceptance_histogram":
            if our != their:
                diffs.append(f"{tag}: {our} != {their}")
        else:
            for fld, value in their.items():
                mine = our.get(fld)
                exact = (
                    fld in EXACT_FIELDS
                    or fld == "unit"
                    or (their.get("unit") in EXACT_UNITS and fld in EXACT_UNIT_FIELDS)
                )
                if mine is None or (mine != value if exact else not _close(mine, value)):
                    diffs.append(f"{tag}.{fld}: specmon {mine!r} != aiperf {value!r}")
    return diffs


def record_differences(theirs: list[dict], ours: list[dict]) -> list[str]:
    """Per request (by x_request_id): spec_decode_acceptance structs and spec metrics."""
    mine = {r["metadata"]["x_request_id"]: r for r in ours}
    diffs = []
    if len(mine) != len(theirs):
        diffs.append(f"{len(mine)} specmon records != {len(theirs)} AIPerf records")
    for their in theirs:
        rid = their["metadata"]["x_request_id"]
        our = mine.get(rid)
        if our is None:
            diffs.append(f"{rid}: no specmon record")
            continue
        if our.get("spec_decode_acceptance") != their.get("spec_decode_acceptance"):
            diffs.append(
                f"{rid}: struct {our.get('spec_decode_acceptance')} != "
                f"{their.get('spec_decode_acceptance')}"
            )
        for tag, metric in their["metrics"].items():
            if not tag.startswith("spec_decode_"):
                continue
            value = (our["metrics"].get(tag) or {}).get("value")
            if value is None or not _close(value, metric["value"]):
                diffs.append(f"{rid}: {tag} specmon {value!r} != aiperf {metric['value']!r}")
    return diffs


def spec_section(stdout: str) -> str:
    """The Spec Decode table and histogram line AIPerf printed ('' if none)."""
    start = stdout.find(SPEC_SECTION_TITLE)
    if start < 0:
        return ""
    table_end = stdout.find("\u2514", start)  # the table's bottom border
    table_end = stdout.find("\n", table_end) if table_end >= 0 else len(stdout)
    hist = stdout.find(HISTOGRAM_LINE, table_end)
    # the histogram line follows the table directly; AIPerf omits it when no step was taken
    if hist >= 0 and not stdout[table_end:hist].strip(" \n"):
        table_end = stdout.find("\n", hist) if stdout.find("\n", hist) >= 0 else len(stdout)
    return stdout[start:table_end]


def server_payloads(aiperf_dir: Path) -> list[dict]:
    """metrics.speculative_decoding of every response in AIPerf's raw export, read directly
    from the raw JSON (independently of specmon.interop)."""
    found = []
    for line in (aiperf_dir / "profile_export_raw.jsonl").read_text().splitlines():
        for resp in json.loads(line)["responses"]:
            texts = [p["value"] for p in resp.get("packets", []) if p["name"] == "data"]
            for text in texts or [resp.get("text", "")]:
                if text.startswith("{"):
                    spec = (json.loads(text).get("metrics") or {}).get("speculative_decoding")
                    if spec is not None:
                        found.append(spec)
    return found


def report_on(aiperf_dir: Path, tmp_path: Path) -> Path:
    """AIPerf raw export -> specmon raw capture -> `specmon report`; returns specmon's dir."""
    converted = read_raw_export(aiperf_dir)
    assert converted.skipped == []
    capture = tmp_path / "from_aiperf.jsonl"
    assert write_captures(converted.captures, capture) == len(converted.captures)
    ours = tmp_path / "specmon"
    proc = specmon_report(capture, ours)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return ours


def assert_same_numbers(aiperf_dir: Path, ours: Path) -> None:
    theirs_summary = spec_decode_summary(read_summary_export(aiperf_dir))
    ours_summary = spec_decode_summary(read_summary_export(ours))
    assert "pooled_spec_decode_acceptance_histogram" in theirs_summary
    assert summary_differences(theirs_summary, ours_summary) == []
    # specmon may add only its zero-step counter, and only as 0 when AIPerf saw none
    extra = set(ours_summary) - set(theirs_summary)
    assert extra <= {"spec_decode_zero_step_requests"}
    if extra:
        assert ours_summary["spec_decode_zero_step_requests"]["avg"] == 0
    assert record_differences(read_records_export(aiperf_dir), read_records_export(ours)) == []
