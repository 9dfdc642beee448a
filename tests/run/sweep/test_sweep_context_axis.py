"""The sweep's context axis without servers (run/sweep/context.py): each length's sweep is
a stand-in that writes the sweep.json and schedule an ordinary sweep writes; the 2-D table,
where k differs, the schedule kept, a stop, and the one-line errors."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from specmon.config import build_config
from specmon.decision.schedule import SCHEDULE_NAME
from specmon.errors import UserError
from specmon.run.sweep.context import (
    CONTEXT_SCHEMA,
    chosen_context,
    read_context_sweep,
    run_context_sweep,
)
from specmon.run.sweep.settings import SCHEMA, SweepSettings

# selected k per (length, concurrency) the stand-in sweeps decide
PICKS = {512: {1: 4, 16: 2}, 8192: {1: 1, 16: 2}, 32768: {1: 1, 16: 0}}


def settings() -> SweepSettings:
    return SweepSettings(
        ks=[1, 2, 4], concurrencies=[1, 16], serve="sim --port {port} --k {k}", segment_requests=8
    )


def stand_in(
    seen: list[tuple[int, str]], stop_after: int | None = None, resumed: list | None = None
):
    resumed = [] if resumed is None else resumed

    def run_one(one: SweepSettings, config, where: str, cells) -> int:
        length = one.load["synthetic_input_tokens_mean"]
        assert one.load["prompt_source"] == config.prompt_source == "synthetic"
        assert config.synthetic_input_tokens_mean == length
        assert config.synthetic_input_tokens_stddev == 0.0
        seen.append((length, where))
        resumed.append(cells)
        path = Path(where)
        path.mkdir(parents=True, exist_ok=True)
        decisions = [
            {"concurrency": c, "selected_k": k, "best_k": k, "selected_median": 100.0 * (k + 1)}
            for c, k in PICKS[length].items()
        ]
        doc = {"schema": SCHEMA, "cells": [{"k": 1, "length": length}], "decisions": decisions}
        (path / "sweep.json").write_text(json.dumps(doc))
        ks = PICKS[length]
        entries = [[1, 15, ks[1]], [16, 16, ks[16]]]
        (path / SCHEDULE_NAME).write_text(
            json.dumps({"num_speculative_tokens_per_batch_size": entries})
        )
        return 130 if stop_after is not None and len(seen) > stop_after else 0

    return run_one


def test_the_table_says_where_k_differs_and_keeps_the_median_lengths_schedule(tmp_path):
    seen: list[tuple[int, str]] = []
    out = io.StringIO()
    config = build_config(overrides={})
    lengths = [512, 8192, 32768]
    status = run_context_sweep(
        settings(), config, str(tmp_path), lengths, None, stand_in(seen), out
    )
    assert status == 0
    assert seen == [(n, str(tmp_path / f"ctx{n}")) for n in lengths]
    doc = read_context_sweep(tmp_path)
    assert doc is not None and doc["schema"] == CONTEXT_SCHEMA
    assert doc["context"] == 8192  # the median of three
    table = {(r["concurrency"], r["input_tokens"]): r["selected_k"] for r in doc["table"]}
    assert table == {(c, n): PICKS[n][c] for n in lengths for c in (1, 16)}
    assert doc["k_differs_by_context"] == [
        {"concurrency": 1, "selected_k": {"512": 4, "8192": 1, "32768": 1}},
        {"concurrency": 16, "selected_k": {"512": 2, "8192": 2, "32768": 0}},
    ]
    kept = json.loads((tmp_path / SCHEDULE_NAME).read_text())
    assert kept["num_speculative_tokens_per_batch_size"] == [[1, 15, 1], [16, 16, 2]]
    text = out.getvalue()
    assert "1 * | k=4 (500 tok/s) | k=1 (200 tok/s) | k=1 (200 tok/s)" in text
    assert "from input length 8192" in text


def test_a_stop_leaves_the_other_lengths_out(tmp_path):
    seen: list[tuple[int, str]] = []
    config = build_config(overrides={})
    status = run_context_sweep(
        settings(), config, str(tmp_path), [512, 8192], 512, stand_in(seen, 0), io.StringIO()
    )
    assert status == 130 and [n for n, _ in seen] == [512]
    doc = read_context_sweep(tmp_path)
    assert doc is not None
    assert [r["selected_k"] for r in doc["table"] if r["input_tokens"] == 8192] == [None, None]
    assert doc["schedule"]["file"] == SCHEDULE_NAME  # 512's, measured before the stop


def test_a_second_run_hands_each_length_its_earlier_cells(tmp_path):
    config = build_config(overrides={})
    run_context_sweep(
        settings(), config, str(tmp_path), [512, 8192], 512, stand_in([], 0), io.StringIO()
    )
    seen: list[tuple[int, str]] = []
    resumed: list = []
    status = run_context_sweep(
        settings(),
        config,
        str(tmp_path),
        [512, 8192],
        512,
        stand_in(seen, None, resumed),
        io.StringIO(),
    )
    assert status == 0 and [n for n, _ in seen] == [512, 8192]
    assert resumed == [[{"k": 1, "length": 512}], None]  # 8192 had not started


def test_chosen_context():
    assert chosen_context([512, 8192], None) == 512  # even count: the lower middle
    assert chosen_context([512, 8192, 32768], 32768) == 32768
    with pytest.raises(UserError, match="--context 4096: give one of the --input-tokens"):
        chosen_context([512, 8192], 4096)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--context", "512"], "--context L picks one of the --input-tokens lengths"),
        (["--input-tokens", "512", "--context", "99"], "--context 99: give one of"),
        (["--input-tokens", "0,512"], "--input-tokens values must be at least 1"),
    ],
)
def test_bad_context_flags_are_one_line(tmp_path, extra, message):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "specmon",
            "sweep",
            "--serve",
            "x {k} {port}",
            "--num-spec-tokens",
            "1",
            *extra,
        ]
        + ["--artifact-dir", str(tmp_path / "s"), "--headless"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
