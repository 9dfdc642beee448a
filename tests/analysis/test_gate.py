"""The regression gate (`specmon compare BASE NEW --fail-on ...`, specmon/analysis/gate.py).

Figures are checked against values computed by hand from the records written here; the
verdicts against runs of a real `specmon sim` whose acceptance drops by 10%, and against
reruns of one configuration (five seeds), which must never fail.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from specmon.analysis.gate import (
    METRICS,
    Threshold,
    blocks_of,
    evaluate,
    parse_fail_on,
    read_rows,
)
from specmon.errors import UserError
from specmon.sim.process import start_sim

MS = 1_000_000


def record(start_ms: float, end_ms: float, **metrics: float) -> dict[str, object]:
    return {
        "metadata": {
            "request_start_ns": int(start_ms * MS),
            "request_end_ns": int(end_ms * MS),
            "benchmark_phase": "profiling",
            "was_cancelled": False,
        },
        "metrics": {tag: {"value": value, "unit": "x"} for tag, value in metrics.items()},
    }


def write_run(folder: Path, records: list[dict[str, object]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in records)
    (folder / "profile_export.jsonl").write_text(text, encoding="utf-8")
    return folder


def test_figures_match_the_hand_computed_values(tmp_path: Path) -> None:
    run = write_run(
        tmp_path / "run",
        [
            record(0, 100, output_sequence_length=10, spec_decode_accepted_draft_tokens=6,
                   spec_decode_draft_tokens=9, spec_decode_steps=4, time_to_first_token=10,
                   inter_token_latency=2.0, request_latency=100),
            record(50, 150, output_sequence_length=20, spec_decode_accepted_draft_tokens=10,
                   spec_decode_draft_tokens=15, spec_decode_steps=5, time_to_first_token=30,
                   inter_token_latency=4.0, request_latency=100),
            record(60, 400, output_sequence_length=30, spec_decode_accepted_draft_tokens=4,
                   spec_decode_draft_tokens=12, spec_decode_steps=4, time_to_first_token=20,
                   inter_token_latency=6.0, request_latency=340),
        ],
    )  # fmt: skip
    rows = read_rows(run)
    every = range(len(rows))
    # AL = 1 + (6 + 10 + 4) / (4 + 5 + 4) = 1 + 20/13
    assert METRICS["al"][1](rows, every) == pytest.approx(1 + 20 / 13)
    # overall draft acceptance = 20 / (9 + 15 + 12) = 20/36
    assert METRICS["acc"][1](rows, every) == pytest.approx(20 / 36)
    # 60 tokens over the run's wall time: first start 0 ms to last end 400 ms
    assert METRICS["tok/s"][1](rows, every) == pytest.approx(60 / 0.4)
    # p90 of TTFT {10, 20, 30}, linear interpolation: position 1.8 -> 20 + 0.8 * 10
    assert METRICS["ttft_p90"][1](rows, every) == pytest.approx(28.0)
    assert METRICS["tpot_p50"][1](rows, every) == pytest.approx(4.0)


def test_errors_warmup_and_broken_lines_are_left_out(tmp_path: Path) -> None:
    good = record(0, 10, output_sequence_length=5, spec_decode_steps=2,
                  spec_decode_accepted_draft_tokens=2, spec_decode_draft_tokens=4)  # fmt: skip
    warm = json.loads(json.dumps(good))
    warm["metadata"]["benchmark_phase"] = "warmup"
    failed = dict(good, error={"type": "http_error", "message": "500"})
    run = write_run(tmp_path / "run", [good, warm, failed])
    with (run / "profile_export.jsonl").open("a", encoding="utf-8") as fh:
        fh.write("{not json\n")
    rows = read_rows(run)
    assert len(rows) == 1
    assert rows.skipped == 3


def test_clauses_are_parsed_and_bad_ones_named() -> None:
    assert parse_fail_on("al<-3%, ttft_p90>+10%") == [
        Threshold("al", "<", -3.0),
        Threshold("ttft_p90", ">", 10.0),
    ]
    with pytest.raises(UserError, match="cannot read 'al<-3'"):
        parse_fail_on("al<-3")
    with pytest.raises(UserError, match="unknown metric 'speed'"):
        parse_fail_on("speed<-3%")


def test_blocks_cover_every_request_once() -> None:
    for n in (20, 21, 99, 400, 10_007):
        blocks = blocks_of(n)
        assert [i for b in blocks for i in b] == list(range(n))
        assert len(blocks) >= 10


def synthetic_run(folder: Path, accept_p: float, seed: int, n: int = 400) -> Path:
    """Requests of 4 verify steps x 3 drafts, each draft accepted with probability p."""
    rng = random.Random(seed)
    records = []
    for i in range(n):
        accepted = sum(rng.random() < accept_p for _ in range(12))
        records.append(
            record(i * 10, i * 10 + 50 + rng.random(), output_sequence_length=16,
                   spec_decode_accepted_draft_tokens=accepted, spec_decode_draft_tokens=12,
                   spec_decode_steps=4, time_to_first_token=5 + rng.random())
        )  # fmt: skip
    return write_run(folder, records)


def test_a_drop_beyond_the_noise_fails_and_one_within_it_does_not(tmp_path: Path) -> None:
    base = read_rows(synthetic_run(tmp_path / "base", 0.70, seed=1))
    dropped = read_rows(synthetic_run(tmp_path / "drop", 0.63, seed=2))
    same = read_rows(synthetic_run(tmp_path / "same", 0.70, seed=3))
    clause = [Threshold("acc", "<", -3.0)]
    (drop,) = evaluate(base, dropped, clause)
    assert drop.failed and drop.high_pct is not None and drop.high_pct < 0
    # the true change is -10%: the interval holds it
    assert drop.low_pct is not None and drop.low_pct <= -10 <= drop.high_pct
    (rerun,) = evaluate(base, same, clause)
    assert not rerun.failed
    # past the threshold but inside the noise: reported, not failed
    (loose,) = evaluate(base, same, [Threshold("acc", "<", 50.0)])
    assert not loose.failed and "within the noise" in loose.reason


def test_too_few_requests_is_one_line(tmp_path: Path) -> None:
    small = read_rows(synthetic_run(tmp_path / "small", 0.7, seed=1, n=5))
    with pytest.raises(UserError, match="at least 20"):
        evaluate(small, small, [Threshold("al", "<", -3.0)])


# ---------------------------------------------------------------- a real simulator

# Acceptance only: on a shared 2-core machine a rerun's latency and throughput move with
# the machine's other load (TTFT p90 +117% between two runs of one configuration was seen
# while other jobs ran), which no interval from within a run can see (docs/metrics.md).
CLAUSES = "al<-3%,acc<-3%"
# Requests per run: at 120 a same-configuration rerun's acceptance moved by 1.9% (one
# standard error of the difference), so a -3% clause with a 95% interval fired on about
# one rerun in ten (seen in CI: acc -4.5%, its interval just below 0). At 480 the standard
# error halves: a false fire needs a 3-sigma rerun, about 1 in 1,000 per clause.
REQUESTS = 480


def measure(url: str, folder: Path, seed: int) -> Path:
    command = [sys.executable, "-m", "specmon", "run", "--url", url, "--headless",
               "--request-count", str(REQUESTS), "--concurrency", "8", "--output-tokens-mean", "48",
               "--streaming",
               "--random-seed", str(seed), "--artifact-dir", str(folder)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return folder


def compare(base: Path, new: Path) -> tuple[int, dict[str, object]]:
    command = [sys.executable, "-m", "specmon", "compare", str(base), str(new),
               "--fail-on", CLAUSES, "--json"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    return done.returncode, json.loads(done.stdout)["gate"]


@pytest.mark.e2e
@pytest.mark.acceptance  # 15 real runs and 10 compares: a few minutes of real-time load
def test_the_gate_fires_on_a_10pct_acceptance_drop_and_never_on_a_rerun(tmp_path: Path) -> None:
    # paced by the simulator's step model (not the CPU), so throughput and TTFT are the
    # server's; no --seed: a rerun draws new acceptances, as a real rerun does
    sim_args = ["--num-spec-tokens", "3", "--step-ms", "4", "--ttft-ms", "5"]
    with start_sim([*sim_args, "--acceptance", "0.7"]) as base_sim, \
            start_sim([*sim_args, "--acceptance", "0.63"]) as drop_sim:  # fmt: skip
        for seed in range(1, 6):
            base = measure(base_sim.url, tmp_path / f"base{seed}", seed)
            rerun = measure(base_sim.url, tmp_path / f"rerun{seed}", seed + 100)
            drop = measure(drop_sim.url, tmp_path / f"drop{seed}", seed + 200)
            code, report = compare(base, rerun)
            assert code == 0, report
            code, report = compare(base, drop)
            assert code == 1, report
            (section,) = report["sections"]  # type: ignore[misc]
            failed = {v["metric"] for v in section["verdicts"] if v["failed"]}
            assert "acc" in failed
