"""Hostile responses are never lost and never crash a run (issue 10 item 5): a real hostile
server (tests/support/hostile_server.py), `specmon run --headless --export-level raw` as a process,
then `specmon report` over its raw file; plus the encoder's replacements checked by hand."""

from __future__ import annotations

import json
import subprocess
import sys

import orjson
import pytest
from support.cli import specmon
from support.hostile_server import CASES, I64_MAX, HostileServer

from specmon.export.safe_json import MAX_DEPTH, OUT_OF_RANGE, TOO_DEEP, dumps_safe

SPECMON = [sys.executable, "-m", "specmon"]


def test_dumps_safe_is_orjson_when_orjson_can():
    obj = {"a": [1, 2.5, None, True, "x"], "b": {"c": 2**64 - 1, "d": -(2**63)}}
    assert dumps_safe(obj) == orjson.dumps(obj)


def test_dumps_safe_replaces_only_the_offending_parts():
    too_big = {"total": 2 * I64_MAX + 5, "huge": 10**400, "keep": 7}
    assert orjson.loads(dumps_safe(too_big)) == {
        "total": float(2 * I64_MAX + 5),  # the nearest double
        "huge": OUT_OF_RANGE,  # no double near it
        "keep": 7,
    }
    deep: list = []
    for _ in range(300):
        deep = [deep]
    doc = orjson.loads(dumps_safe({"meta": 1, "x": deep}))
    assert doc["meta"] == 1
    node, levels = doc["x"], 1  # doc is level 0, doc["x"] level 1
    while isinstance(node, list):
        node, levels = node[0], levels + 1
    assert node == TOO_DEEP and levels == MAX_DEPTH


def _run(url: str, out, count: int, *extra: str) -> subprocess.CompletedProcess:
    command = [
        *SPECMON, "run", "--url", url, "--headless", "--export-level", "raw",
        "--request-count", str(count), "--warmup-request-count", "0", "--concurrency", "2",
        "--artifact-dir", str(out), *extra,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=180)


def _jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.e2e
@pytest.mark.parametrize("streaming", [False, True])
def test_every_hostile_request_is_in_every_export(tmp_path, streaming):
    out, count = tmp_path / "run", 3 * len(CASES)  # each case three times: totals overflow
    with HostileServer() as server:
        proc = _run(server.url, out, count, "--streaming" if streaming else "--no-streaming")
        served = list(server.sent)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(served) == sorted(list(CASES) * 3)
    raw = _jsonl(out / "profile_export_raw.jsonl")
    records = _jsonl(out / "profile_export.jsonl")
    assert len(raw) == len(records) == count
    assert {c["x_request_id"] for c in raw} == {r["metadata"]["x_request_id"] for r in records}
    errors = [c for c in raw if c["error"]]
    # 1e400 and 2,000 levels are not JSON orjson reads: counted invalid_json, still a line
    assert {c["error"]["type"] for c in errors} == {"invalid_json"}
    assert len(errors) == 6
    doc = json.loads((out / "profile_export_aiperf.json").read_text())
    assert doc["request_count"]["avg"] == count - 6
    assert doc["error_request_count"]["avg"] == 6
    assert (out / "profile_export_aiperf.csv").read_text().startswith("Metric,")
    # the too-deep parts became markers; the request's other keys were kept
    deep = [c for c in raw if TOO_DEEP in json.dumps(c["responses"])]
    assert len(deep) >= 6  # nested_1000 (orjson reads it, cannot write it) x3, histogram x3

    report = tmp_path / "report"
    again = specmon("report", "-i", str(out / "profile_export_raw.jsonl"), "--artifact-dir", str(report), "--export-level", "raw", timeout=120)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert f"{count} captures read, 0 bad lines skipped" in again.stdout
    redo = json.loads((report / "profile_export_aiperf.json").read_text())
    assert redo["request_count"] == doc["request_count"]
    assert redo["error_request_count"] == doc["error_request_count"]


@pytest.mark.e2e
def test_report_skips_bad_lines_with_their_numbers_and_goes_on(tmp_path):
    good = {
        "endpoint": "chat", "streaming": False, "request": {"model": "m"}, "status": 200,
        "responses": [orjson.loads(CASES["good"])], "start_ns": 1_000, "response_ns": [5_000],
        "end_ns": 6_000, "error": None,
    }  # fmt: skip
    lines = [
        good,
        {**good, "start_ns": 2**64 - 1},  # line 2
        {**good, "response_ns": [-1]},  # line 3
        {**good, "end_ns": 10},  # line 4: before its start
        good,
    ]
    path = tmp_path / "raw.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    proc = specmon("report", "-i", str(path), "--artifact-dir", str(tmp_path / "r"), timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    skipped = [line for line in proc.stderr.splitlines() if "skipped" in line]
    assert [line.split(f"{path}:")[1].split(":")[0] for line in skipped] == ["2", "3", "4"]
    assert "'start_ns' out of range: 18446744073709551615" in skipped[0]
    assert "2 captures read, 3 bad lines skipped" in proc.stdout
    doc = json.loads((tmp_path / "r" / "profile_export_aiperf.json").read_text())
    assert doc["request_count"]["avg"] == 2
