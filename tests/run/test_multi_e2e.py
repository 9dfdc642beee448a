"""Several servers, segments, the server's /metrics and SGLang's request flag, end to end:
real `specmon sim` processes (uvicorn) and `specmon run` / `specmon demo` subprocesses over
loopback. Ground truth is each simulator's --log (one JSON line per request it served)."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import threading
import urllib.request
from pathlib import Path

import pytest
from support.cli import specmon

from specmon.sim.process import start_sim

pytestmark = pytest.mark.e2e
KS = (2, 4, 6)


def run_specmon(*argv: str, timeout: float = 240) -> subprocess.CompletedProcess:
    proc = specmon(*argv, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def served(log: Path) -> list[dict]:
    """The simulator's log lines of requests it answered (200)."""
    return [e for e in read_jsonl(log) if e.get("status") == 200]


@contextlib.contextmanager
def three_sims(tmp_path: Path, extra: list[str] = ()):
    with contextlib.ExitStack() as stack:
        sims = {}
        for k in KS:
            log = tmp_path / f"sim{k}.log"
            sim = stack.enter_context(
                start_sim(
                    [
                        "--num-spec-tokens",
                        str(k),
                        "--seed",
                        "5",
                        "--acceptance",
                        "0.7",
                        "--log",
                        str(log),
                        *extra,
                    ]
                )
            )
            sims[k] = (sim, log)
        yield sims


def assert_records_equal_log(records: list[dict], log_entries: list[dict], k: int | None) -> None:
    """Each specmon record is the request the simulator logged, with the same spec counts."""
    by_id = {e["x_request_id"]: e for e in log_entries}
    assert sorted(by_id) == sorted(r["metadata"]["x_request_id"] for r in records)
    for rec in records:
        truth = by_id[rec["metadata"]["x_request_id"]]["stats"][0]
        spec = rec["spec_decode_acceptance"]
        assert (
            spec["num_spec_steps"],
            spec["num_accepted_draft_tokens"],
            spec["num_draft_tokens"],
        ) == (truth["steps"], truth["accepted"], truth["drafted"])
        if k is not None:
            assert spec["num_spec_tokens"] == k


def test_split_across_three_servers_each_records_its_own_log(tmp_path):
    out = tmp_path / "run"
    with three_sims(tmp_path) as sims:
        urls = [arg for k in KS for arg in ("--url", f"k{k}={sims[k][0].url}")]
        proc = run_specmon(
            *urls, "--split", "--headless", "--request-count", "30", "--concurrency", "6",
            "--output-tokens-mean", "16", "--random-seed", "11", "--artifact-dir", str(out),
        )  # fmt: skip
    assert "3 servers (split)" in proc.stdout
    prompts = []
    for k in KS:
        records = read_jsonl(out / f"k{k}" / "profile_export.jsonl")
        assert len(records) == 10  # 30 requests over 3 servers
        assert {r["metadata"]["server"] for r in records} == {f"k{k}"}
        log = served(sims[k][1])
        assert_records_equal_log(records, log, k)
        prompts.append([e["received"]["messages"] for e in log])
        doc = json.loads((out / f"k{k}" / "profile_export_aiperf.json").read_text())
        assert doc["input_config"]["concurrency"] == 2  # 6 over 3
        assert doc["server_metrics"]["reconciliation"]["equal"] is True
    assert prompts[0] != prompts[1]  # split: each server has its own prompt stream
    for k in KS:
        assert f"=== server k{k} (" in proc.stdout
    assert "Servers side by side" in proc.stdout


def test_mirror_sends_identical_prompts_in_the_same_order(tmp_path):
    out = tmp_path / "run"
    with three_sims(tmp_path) as sims:
        urls = [arg for k in KS for arg in ("--url", f"k{k}={sims[k][0].url}")]
        proc = run_specmon(
            *urls, "--mirror", "--headless", "--request-count", "8", "--concurrency", "1",
            "--output-tokens-stddev", "4", "--output-tokens-mean", "16", "--artifact-dir",
            str(out),
        )  # fmt: skip
    assert "3 servers (mirrored)" in proc.stdout
    sent = {}
    for k in KS:
        log = served(sims[k][1])
        assert_records_equal_log(read_jsonl(out / f"k{k}" / "profile_export.jsonl"), log, k)
        # concurrency 1: the log order is the send order
        sent[k] = [(e["received"]["messages"], e["received"]["max_tokens"]) for e in log]
    assert len(sent[2]) == 8
    # vLLM-shaped servers are not asked for SGLang's per-request flag
    assert not any("return_spec_tokens_details" in e["received"] for e in served(sims[2][1]))
    assert sent[2] == sent[4] == sent[6]
    assert len({max_tokens for _, max_tokens in sent[2]}) > 1  # the lengths varied, in step


def test_demo_three_k_side_by_side(tmp_path):
    out = tmp_path / "demo"
    proc = run_specmon(
        "demo", "--num-spec-tokens", "2,4,6", "--headless", "--request-count", "12",
        "--ttft-ms", "0", "--step-ms", "0", "--output-tokens-mean", "16",
        "--artifact-dir", str(out),
    )  # fmt: skip
    assert "3 servers (mirrored)" in proc.stdout
    for k in KS:
        assert f"=== server k{k} (" in proc.stdout
        doc = json.loads((out / f"k{k}" / "profile_export_aiperf.json").read_text())
        assert doc["request_count"]["avg"] == 12
        assert max(int(j) for j in doc["pooled_spec_decode_acceptance_histogram"]) <= k
    table = proc.stdout.split("Servers side by side", 1)[1]
    k_row = next(line for line in table.splitlines() if line.startswith("k (num_spec_tokens)"))
    assert k_row.split()[2:] == ["2", "4", "+2", "+100.00%", "6", "+4", "+200.00%"]


def test_scripted_segments_recommended_k_falls_with_concurrency(tmp_path):
    """The simulator's step time (sim --help): step_ms (1 + slope (B-1)(k+1)) + draft k.
    step 10 ms, draft 0.5 ms/token, slope 0.1, acceptance 0.8 per position:
      B=1:  t(k) = 10 + 0.5k        -> c = 0.5/10 = 0.05: E(k)/(1+0.05k) peaks at k=8
      B=4:  t(k) = 13 + 3.5k ... c = (10*0.1*3 + 0.5) / (10*1.3) = 0.27 -> k=3
      B=16: c = (10*0.1*15 + 0.5) / (10*2.5) = 0.62 -> k=1
    (E(k) = (1 - 0.8^(k+1)) / 0.2). So the best k must fall as concurrency rises."""
    out = tmp_path / "seg"
    proc = run_specmon(
        "demo", "--num-spec-tokens", "2,4,6", "--headless", "--segments", "concurrency=1,4,16",
        "--segment-requests", "16", "--output-tokens-mean", "24", "--ttft-ms", "0",
        "--step-ms", "10", "--draft-ms-per-token", "0.5", "--batch-slope", "0.1",
        "--acceptance", "0.8", "--random-seed", "3", "--artifact-dir", str(out),
    )  # fmt: skip
    doc = json.loads((out / "k6" / "profile_export_aiperf.json").read_text())
    rows = doc["segments"]
    assert [r["settings"]["concurrency"] for r in rows] == [1, 4, 16]
    assert [r["request_count"] for r in rows] == [16, 16, 16]
    best = [r["recommended_k"] for r in rows]
    assert all(b is not None for b in best), rows
    assert best == sorted(best, reverse=True) and best[-1] < best[0], best
    # servers at several k over several loads: the batch-aware model (issue 11 item 4)
    assert all(r["recommended_from"] == "model" for r in rows), rows
    # the per-segment spec counts are the simulator's, summed over that segment's requests
    records = read_jsonl(out / "k6" / "profile_export.jsonl")
    for row in rows:
        mine = [
            r["spec_decode_acceptance"]
            for r in records
            if r["metadata"]["segment"] == row["segment"]
        ]
        steps = sum(s["num_spec_steps"] for s in mine)
        accepted = sum(s["num_accepted_draft_tokens"] for s in mine)
        assert (row["steps"], row["accepted"]) == (steps, accepted)
        assert row["acceptance_length"] == pytest.approx(1 + accepted / steps)
    # the printed table says the same
    table = proc.stdout.split("Segments", 1)[1].splitlines()[1:]
    k6_rows = [line.split() for line in table if len(line.split()) > 2 and line.split()[1] == "k6"]
    assert [int(cells[-2]) for cells in k6_rows] == best


def post_json(url: str, body: dict) -> dict:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def test_metrics_reconcile_equal_then_unequal_with_another_client(tmp_path, sims):
    log = tmp_path / "sim.log"
    sim = sims(["--num-spec-tokens", "3", "--seed", "2", "--step-ms", "1", "--log", str(log)])
    run_specmon(
        "--url", sim.url, "--headless", "--request-count", "20", "--concurrency", "4",
        "--warmup-request-count", "3", "--output-tokens-mean", "16", "--artifact-dir",
        str(tmp_path / "alone"),
    )  # fmt: skip
    alone = json.loads((tmp_path / "alone" / "profile_export_aiperf.json").read_text())
    entries = served(log)
    assert len(entries) == 23
    # the 3 warmup requests all finish before profiling starts, so they log first; the
    # window restarts after them
    truth_steps = sum(e["stats"][0]["steps"] for e in entries[3:])
    # the run was alone: server delta == per-request totals == the simulator's log
    sm = alone["server_metrics"]
    assert sm["reconciliation"] == {
        "equal": True,
        "diffs": {},
        "reasons": [],
        "text": "server counters match the per-request totals",
    }
    assert sm["drafts"] == alone["total_spec_decode_steps"]["avg"] == truth_steps
    assert sum(int(n) for n in sm["histogram"].values()) == truth_steps

    stop = threading.Event()
    other = []

    def other_client() -> None:  # a second client on the same server during the run
        while not stop.is_set():
            post_json(
                sim.url + "/v1/completions",
                {"model": sim.model, "prompt": "other", "max_tokens": 8},
            )
            other.append(1)

    thread = threading.Thread(target=other_client, daemon=True)
    thread.start()
    try:
        proc = run_specmon(
            "--url", sim.url, "--headless", "--request-count", "40", "--concurrency", "2",
            "--output-tokens-mean", "16", "--artifact-dir", str(tmp_path / "shared"),
        )  # fmt: skip
    finally:
        stop.set()
        thread.join(30)
    shared = json.loads((tmp_path / "shared" / "profile_export_aiperf.json").read_text())
    rec = shared["server_metrics"]["reconciliation"]
    assert other and rec["equal"] is False
    assert rec["diffs"]["steps"] > 0  # the server counted the other client's steps too
    assert any("other clients" in reason for reason in rec["reasons"])
    assert "server counters differ from the per-request totals" in proc.stdout


def test_counters_alone_when_responses_carry_no_stats(tmp_path, sims):
    log = tmp_path / "sim.log"
    sim = sims(["--num-spec-tokens", "3", "--seed", "4", "--shape", "none", "--log", str(log)])
    proc = run_specmon(
        "--url", sim.url, "--headless", "--request-count", "10", "--output-tokens-mean", "16",
        "--artifact-dir", str(tmp_path / "r"),
    )  # fmt: skip
    entries = served(log)
    steps = sum(e["stats"][0]["steps"] for e in entries)
    accepted = sum(e["stats"][0]["accepted"] for e in entries)
    sm = json.loads((tmp_path / "r" / "profile_export_aiperf.json").read_text())["server_metrics"]
    assert sm["acceptance_source"] == "server-wide"
    assert (sm["drafts"], sm["accepted"]) == (steps, accepted)
    assert sm["acceptance_length"] == pytest.approx(1 + accepted / steps)
    assert "acceptance figures are server-wide" in proc.stdout
    assert f"acceptance length {1 + accepted / steps:.2f}" in proc.stdout


def test_counter_watch_skips_a_server_without_metrics_quietly(tmp_path, sims):
    from specmon.server.server_view import CounterWatch

    with socket.socket() as sock:  # a port nobody listens on: /metrics unreachable
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    log = tmp_path / "sim.log"
    sim = sims(["--num-spec-tokens", "2", "--seed", "4", "--log", str(log)])
    watch = CounterWatch({"up": sim.url, "down": dead}, interval_s=0.2)
    watch.start()
    post_json(sim.url + "/v1/completions", {"model": sim.model, "prompt": "x", "max_tokens": 8})
    views = watch.stop()
    assert list(watch.pollers) == ["up"] and list(views) == ["up"]
    assert "ConnectError" in watch.absent["down"]
    # the window saw exactly the one request the simulator logged
    (truth,) = [e["stats"][0] for e in served(log)]
    delta = views["up"].delta
    assert truth["steps"] > 0
    assert (delta.drafts, delta.accepted, delta.draft_tokens) == (
        truth["steps"],
        truth["accepted"],
        truth["drafted"],
    )


def test_no_server_metrics_flag_leaves_them_out(tmp_path, sims):
    sim = sims(["--num-spec-tokens", "2", "--seed", "4"])
    proc = run_specmon(
        "--url", sim.url, "--headless", "--request-count", "4", "--no-server-metrics",
        "--artifact-dir", str(tmp_path / "r"),
    )  # fmt: skip
    doc = json.loads((tmp_path / "r" / "profile_export_aiperf.json").read_text())
    assert doc["server_metrics"] == {"available": False, "reason": "not polled"}
    assert "server /metrics" not in proc.stdout


@pytest.mark.parametrize("engine_flag", [["--engine", "sglang"], []])
def test_sglang_flag_sent_and_records_say_sglang(tmp_path, engine_flag, sims):
    log = tmp_path / "sim.log"
    sim = sims(["--num-spec-tokens", "3", "--seed", "6", "--shape", "sglang", "--log", str(log)])
    run_specmon(
        "--url", sim.url, "--headless", "--request-count", "6", *engine_flag,
        "--output-tokens-mean", "16", "--artifact-dir", str(tmp_path / "r"),
    )  # fmt: skip
    entries = served(log)
    assert len(entries) == 6
    assert all(e["received"]["return_spec_tokens_details"] is True for e in entries)
    records = read_jsonl(tmp_path / "r" / "profile_export.jsonl")
    assert [r["spec_decode_acceptance"]["engine"] for r in records] == ["sglang"] * 6
    assert_records_equal_log(records, entries, None)  # SGLang's payload does not carry k


def test_changing_concurrency_mid_run_starts_a_segment(tmp_path, sims):
    """The TUI's path: a knob on the (multi) runner; later requests carry the new segment."""
    from specmon.config import RunConfig
    from specmon.run.assemble import make_runner, make_session
    from specmon.run.multi import MultiRun

    sim = sims(["--num-spec-tokens", "3", "--seed", "8", "--step-ms", "1"])
    config = RunConfig(
        url=[sim.url],
        model=sim.model,
        concurrency=1,
        request_count=60,
        output_tokens_mean=8,
        random_seed=1,
        artifact_dir=str(tmp_path / "r"),
    )
    multi = MultiRun(config, make_session, make_runner)
    multi.start()
    session = multi.primary.session
    while session.accumulator.request_count < 10 and not multi.finished:
        multi.join(0.02)
    multi.set_concurrency(1)  # no change: no new segment
    multi.set_concurrency(4)
    assert multi.join(120)
    multi.finish()
    rows = json.loads((tmp_path / "r" / "profile_export_aiperf.json").read_text())["segments"]
    assert [r["segment"] for r in rows] == [0, 1]
    assert [r["settings"]["concurrency"] for r in rows] == [1, 4]
    assert sum(r["request_count"] for r in rows) == 60
    assert rows[0]["request_count"] >= 10
    records = read_jsonl(tmp_path / "r" / "profile_export.jsonl")
    assert sum(1 for r in records if r["metadata"].get("segment") == 1) == rows[1]["request_count"]


def test_duration_segments_with_two_keys(tmp_path):
    out = tmp_path / "dur"
    proc = run_specmon(
        "demo", "--headless", "--segments", "concurrency=1,2;output_tokens=8,16",
        "--segment-duration", "0.3", "--ttft-ms", "0", "--step-ms", "2",
        "--draft-cost", "0.1", "--artifact-dir", str(out),
    )  # fmt: skip
    rows = json.loads((out / "profile_export_aiperf.json").read_text())["segments"]
    assert [(r["settings"]["concurrency"], r["settings"]["output_tokens"]) for r in rows] == [
        (1, 8),
        (2, 16),
    ]
    records = read_jsonl(out / "profile_export.jsonl")
    for row in rows:
        mine = [r for r in records if r["metadata"]["segment"] == row["segment"]]
        assert row["request_count"] == len(mine) > 0
        # every request of a segment asked for that segment's output length
        assert {r["metrics"]["output_sequence_length"]["value"] for r in mine} == {
            row["settings"]["output_tokens"]
        }
        # one k over two loads: the per-segment step time (issue 11 item 6)
        assert row["recommended_from"] == "segments" and row["recommended_k"] is not None
    assert "Segments" in proc.stdout
