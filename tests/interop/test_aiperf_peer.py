"""AIPerf 0.13 as a side-by-side peer: on the same responses, specmon's spec-decode numbers
must equal AIPerf's (ints exactly, floats to 1e-9 relative), pooled histogram and
per-request `spec_decode_acceptance` structs included.

AIPerf's raw export (every response it received, with the request payload) is turned into a
specmon raw capture by specmon.interop.aiperf and run through `specmon report`.
- live: `aiperf profile` against a real `specmon sim` process (skips only when AIPerf cannot
  be installed here, with the setup script's reason), streaming and not; AIPerf's records are
  also checked one by one against what the simulator logged sending;
- recorded: the same comparison on AIPerf runs committed under tests/peer/fixtures/
  (tests/peer/capture_aiperf.py), so it runs on every machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from peer.aiperf_peer import (
    HISTOGRAM_LINE,
    SPEC_SECTION_TITLE,
    assert_same_numbers,
    report_on,
    run_aiperf,
    server_payloads,
    spec_section,
)
from support.paths import TESTS

from specmon.interop.aiperf import read_records_export, read_summary_export, spec_decode_summary
from specmon.sim.process import start_sim

pytestmark = pytest.mark.xdist_group("aiperf")

FIXTURES = TESTS / "peer" / "fixtures"
MODEL = "peer-specdec"
SIM_ARGS = [
    "--model", MODEL, "--seed", "23", "--num-spec-tokens", "3", "--acceptance", "0.8,0.6,0.4",
    "--ttft-ms", "5", "--step-ms", "2",
]  # fmt: skip


@pytest.fixture(scope="module")
def sim_log(tmp_path_factory) -> Path:
    """What the simulator logs sending, one JSON line per request (its --log)."""
    return tmp_path_factory.mktemp("sim") / "sim.jsonl"


@pytest.fixture(scope="module")
def sim(sim_log):
    with start_sim([*SIM_ARGS, "--log", str(sim_log)]) as process:
        yield process


def assert_each_record_is_the_sims_payload(aiperf_dir: Path, sim_log: Path, requests: int) -> None:
    """AIPerf keeps one record per request, equal to the payload the simulator logged sending;
    it silently drops a request whose payload arrives twice, so this also proves the payload
    is sent exactly once. Read from both files directly (independently of specmon.interop)."""
    truth = {e["x_request_id"]: e for e in map(json.loads, sim_log.read_text().splitlines())}
    export = next(aiperf_dir.rglob("profile_export.jsonl"))
    records = [json.loads(line) for line in export.read_text().splitlines()]
    assert len(records) == requests
    for record in records:
        sent = truth[record["metadata"]["x_request_id"]]["payload"]
        seen = record["spec_decode_acceptance"]  # absent if AIPerf dropped the payload
        assert seen["num_spec_steps"] == sent["num_spec_steps"]
        assert seen["num_accepted_draft_tokens"] == sent["num_accepted_draft_tokens"]
        assert seen["num_draft_tokens"] == sent["num_draft_tokens"]
        assert seen["mean_acceptance_length"] == sent["mean_acceptance_length"]
        dense = sent["acceptance_histogram"]
        assert seen["acceptance_histogram"] == {str(j): h for j, h in enumerate(dense) if h}
        assert seen["per_step_accepted"] == sent["per_step_accepted"]


def assert_totals_match_payloads(aiperf_dir: Path, requests: int) -> None:
    """Hand check: run totals are plain sums of the server's per-request payloads."""
    payloads = server_payloads(aiperf_dir)
    assert len(payloads) == requests
    assert all(p["num_spec_steps"] > 0 for p in payloads)  # no zero-step: see last test
    summary = read_summary_export(aiperf_dir)
    steps = sum(p["num_spec_steps"] for p in payloads)
    assert summary["total_spec_decode_steps"]["avg"] == steps
    assert summary["total_draft_tokens"]["avg"] == sum(p["num_draft_tokens"] for p in payloads)
    pooled = [sum(p["acceptance_histogram"][j] for p in payloads) for j in range(4)]
    assert summary["pooled_spec_decode_acceptance_histogram"] == {
        str(j): n for j, n in enumerate(pooled) if n
    }


@pytest.mark.e2e
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "nonstream"])
def test_live_aiperf_and_specmon_agree(aiperf_ready, sim, sim_log, tmp_path, streaming):
    aiperf_dir = tmp_path / "aiperf"
    proc = run_aiperf(sim.url, MODEL, aiperf_dir, streaming=streaming, requests=10, osl=32)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    section = spec_section(proc.stdout)
    assert SPEC_SECTION_TITLE in section and HISTOGRAM_LINE in section, proc.stdout[-3000:]
    assert "Acceptance Length (ratio)" in section
    assert_each_record_is_the_sims_payload(aiperf_dir, sim_log, 10)
    assert_totals_match_payloads(aiperf_dir, 10)
    assert_same_numbers(aiperf_dir, report_on(aiperf_dir, tmp_path))


@pytest.mark.e2e  # `specmon report` as a process
@pytest.mark.parametrize("case", ["chat_stream", "chat_nonstream"])
def test_recorded_aiperf_runs_agree(tmp_path, case):
    aiperf_dir = FIXTURES / case
    assert SPEC_SECTION_TITLE in (aiperf_dir / "spec_section.txt").read_text()
    assert_totals_match_payloads(aiperf_dir, 12)
    assert_same_numbers(aiperf_dir, report_on(aiperf_dir, tmp_path))


@pytest.mark.e2e  # `specmon report` as a process
def test_recorded_zero_step_run_is_a_known_divergence(tmp_path):
    """AIPerf 0.13.0 keeps zero-step requests (max_tokens 1: histogram [0,0,0,0]) in its
    distributions: 4 values of AL 1.0 and rate 0 %. specmon follows issue 2 item 5 (and newer
    AIPerf): they stay verbatim in the per-request trace but leave every distribution, and
    are counted in spec_decode_zero_step_requests. Pinned so a change on either side shows."""
    aiperf_dir = FIXTURES / "zero_step_stream"
    theirs = read_summary_export(aiperf_dir)
    assert theirs["spec_decode_acceptance_length"]["count"] == 4
    assert theirs["spec_decode_acceptance_length"]["avg"] == 1.0
    assert theirs["total_spec_decode_steps"]["avg"] == 0
    ours_dir = report_on(aiperf_dir, tmp_path)
    ours = spec_decode_summary(read_summary_export(ours_dir))
    assert ours == {"spec_decode_zero_step_requests": {"unit": "requests", "avg": 4.0}}
    their_records = read_records_export(aiperf_dir)
    our_records = {r["metadata"]["x_request_id"]: r for r in read_records_export(ours_dir)}
    for their in their_records:
        our = our_records[their["metadata"]["x_request_id"]]
        assert our["spec_decode_acceptance"] == their["spec_decode_acceptance"]
        assert our["spec_decode_acceptance"]["num_spec_steps"] == 0
