"""Datasets end to end against a real `specmon sim` (its --log is the ground truth):
MT-Bench's two turns with the model's own answer in turn 2, every SpecBench question sent
once by `specmon --headless`, and a bad file refused before anything is touched."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from support.cli import specmon
from support.load import drive

from sources.datasets.test_datasets import spec_bench_file
from specmon.config import build_config
from specmon.export.common import RAW_NAME
from specmon.session import RunSession
from specmon.sources.datasets import prepare_run

pytestmark = pytest.mark.e2e
FAST_SIM = ["--ttft-ms", "0", "--step-ms", "0", "--draft-ms-per-token", "0", "--seed", "3"]


def read_log(path: Path) -> dict[str, dict]:
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {entry["x_request_id"]: entry for entry in entries}


def joined_text(responses: list) -> str:
    """What the sim sent back, read straight from the raw capture's response bodies."""
    out = []
    for r in responses:
        for choice in r.get("choices") or []:
            out.append((choice.get("delta") or choice.get("message") or {}).get("content") or "")
            out.append(choice.get("text") or "")
    return "".join(out)


@pytest.mark.sim(*FAST_SIM, log=True)
@pytest.mark.parametrize(
    ("endpoint", "streaming"), [("chat", True), ("chat", False), ("completions", True)]
)
def test_mt_bench_second_turn_holds_the_first_answer(tmp_path, endpoint, streaming, sim):
    config = build_config(
        overrides={
            "url": [sim.url],
            "model": "specmon-sim",
            "dataset": "mt_bench",
            "input_file": str(spec_bench_file()),
            "dataset_category": "writing,coding",
            "dataset_turns": "all",
            "concurrency": 4,
            "endpoint_type": endpoint,
            "streaming": streaming,
            "output_tokens_mean": 12,
            "random_seed": 1,
        }
    )
    prepare_run(config)
    assert config.request_count == 40  # 20 questions x 2 turns
    session = RunSession(tmp_path / "art", "raw", config.model_dump())
    captures, _ = drive(config, session)
    truth = read_log(sim.log_path)
    assert len(truth) == 40 and all(c["error"] is None for c in captures)
    by_turn = {(c["question_id"], c["turn"]): c for c in captures}
    rows = {json.loads(line)["question_id"]: json.loads(line) for line in spec_bench_file().open()}
    assert {qid for qid, _ in by_turn} == {
        qid for qid, row in rows.items() if row["category"] in ("writing", "coding")
    }
    for (qid, turn), capture in by_turn.items():
        if turn != 2:
            continue
        first = by_turn[(qid, 1)]
        first_log, second_log = truth[first["x_request_id"]], truth[capture["x_request_id"]]
        answer = joined_text(first["responses"])
        # the sim made 12 tokens of one word each for turn 1 ...
        assert first_log["usage"]["completion_tokens"] == 12 and len(answer.split()) == 12
        received = second_log["received"]
        q1, q2 = rows[qid]["turns"]
        if endpoint == "chat":  # ... and turn 2 reached it with that answer as history
            assert received["messages"] == [
                {"role": "user", "content": q1},
                {"role": "assistant", "content": answer},
                {"role": "user", "content": q2},
            ]
        else:
            assert (
                received["prompt"]
                == f"User: {q1}\n\nAssistant: {answer}\n\nUser: {q2}\n\nAssistant:"
            )
        assert second_log["time"] >= first_log["time"]
        assert second_log["category"] == rows[qid]["category"]
    # category, question id and turn in the raw capture and the JSONL metadata
    raw = [json.loads(line) for line in (tmp_path / "art" / RAW_NAME).open()]
    records = [json.loads(line) for line in (tmp_path / "art" / "profile_export.jsonl").open()]
    assert Counter((r["metadata"]["category"], r["metadata"]["turn"]) for r in records) == {
        ("writing", 1): 10,
        ("writing", 2): 10,
        ("coding", 1): 10,
        ("coding", 2): 10,
    }
    assert {r["metadata"]["question_id"] for r in records} == {qid for qid, _ in by_turn}
    assert {(r["question_id"], r["turn"]) for r in raw} == set(by_turn)
    assert {r["category"] for r in raw} == {"writing", "coding"}


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]], ids=["one-process", "workers-2"])
def test_headless_spec_bench_sends_each_question_once(tmp_path, workers, sims):
    """With --workers 2 each worker takes every other row, so still each question once."""
    log, out = tmp_path / "sim.log", tmp_path / "run"
    path = spec_bench_file()
    sim = sims([*FAST_SIM, "--log", str(log)])
    proc = specmon(
        "--url", sim.url, "--headless", "--dataset", "spec_bench", "--input-file", str(path),
        "--request-count", "480", "--concurrency", "16", "--artifact-dir", str(out), *workers,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    first_turns = Counter(json.loads(line)["turns"][0] for line in path.open())
    entries = list(read_log(log).values())
    sent = Counter(e["received"]["messages"][-1]["content"] for e in entries)
    assert len(entries) == 480 and sent == first_turns  # each question once, its first turn
    assert {len(e["received"]["messages"]) for e in entries} == {1}
    assert {e["received"]["max_tokens"] for e in entries} == {256}  # spec_bench's default
    assert Counter(e["category"] for e in entries) == Counter(
        json.loads(line)["category"] for line in path.open()
    )
    records = [json.loads(line) for line in (out / "profile_export.jsonl").open()]
    assert sorted(r["metadata"]["question_id"] for r in records) == sorted(
        json.loads(line)["question_id"] for line in path.open()
    )


def test_bad_dataset_file_fails_before_the_server_and_the_artifact_dir(tmp_path):
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"question_id": 1, "category": "qa", "turns": ["ok"]}\n{"question_id": 2}\n')
    out = tmp_path / "run"
    proc = specmon(
        "--url", "http://127.0.0.1:9", "--headless", "--dataset", "spec_bench",
        "--input-file", str(bad), "--artifact-dir", str(out), timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"input file {bad} line 2: 'category' must be" in lines[0]
    assert not out.exists()


def test_split_sends_each_question_once_across_two_servers(tmp_path, sims):
    """--split: server a takes rows 0, 2, 4, ..., server b rows 1, 3, 5, ...; --mirror
    would send both the same (tests/run/load/test_dataset_shards.py)."""
    logs, out = [tmp_path / "a.log", tmp_path / "b.log"], tmp_path / "run"
    path = spec_bench_file()
    a = sims([*FAST_SIM, "--log", str(logs[0])])
    b = sims([*FAST_SIM, "--log", str(logs[1])])
    proc = subprocess.run(
        [sys.executable, "-m", "specmon", "--url", f"a={a.url}", "--url", f"b={b.url}"]
        + ["--split", "--headless", "--dataset", "spec_bench", "--input-file", str(path)]
        + ["--concurrency", "8", "--output-tokens-mean", "16", "--artifact-dir", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    questions = [json.loads(line)["turns"][0] for line in path.open()]
    sent = [
        Counter(e["received"]["messages"][-1]["content"] for e in read_log(log).values())
        for log in logs
    ]
    assert sent[0] == Counter(questions[0::2]) and sent[1] == Counter(questions[1::2])
