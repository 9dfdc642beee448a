"""`specmon sweep` against `specmon sim` picks the k the simulator's own formula says is best.

The simulator's documented timing (`specmon sim --help`, docs/tuning.md): a request's first
token after ttft_ms, then one verify step per step_time(k, B), each emitting the accepted
drafts plus one token; position i is accepted with conditional probability a_i, so a full
step emits E(k) = 1 + sum_i prod_{j<=i} a_j tokens on average. Step time, written here from
the help text (not from specmon.sim.model):

    linear:   T(k, B) = step_ms (1 + batch_slope (B - 1)(k + 1)) + draft_ms_per_token k
    roofline: T(k, B) = max(step_floor_ms, compute_ms_per_token B (k + 1)) + draft_ms_per_token k

Truncation: with max_tokens L (sent with ignore_eos, so every request is exactly L tokens) a
step near the end drafts min(k, remaining - 1), so a request takes N(L, k) steps, computed
below exactly, a little more than (L - 1) / E(k). Under closed-loop concurrency B the
server's output throughput is B L / (ttft + N(L, k) T(k, B)); for large L this is
proportional to B E(k) / T(k, B). The simulator steps its running batch together, so a
request's first token leaves at the first step boundary after its prefill: under closed-loop
load (B > 1, ttft < T) the next request's first token comes one step after the previous
request's last, (N + 1) T per request. The parameters are chosen so all three forms agree on
the best k (asserted), that it falls with load, and that the runner-up is more than 2%
behind, so a wrong pick is visible.

Margin: the comparison assumes the simulator holds its formula within 2% (docs/simulator.md). When the
sweep flags the selected or the analytic-best cell as off its formula (sweep.json
`server_behind`: the simulator's own lag, `server_lag_share`, or the per-token time the
client measured against the formula ITL of the same requests, `per_token_off_share`, more
than 2% off), a miss at that load is not counted as the decision's: it is named in the
output instead, and the test fails if that happened at every load. Not covered: the time a
request takes to reach the simulator (a closed-loop client on a machine loaded far beyond
its cores sends late, and every k loses throughput unevenly, with its per-token time intact).

The schedule test at the end runs a hand-written schedule (the best k per load) as a
`--variant` arm; its margin is derived there.

Each sweep: k in {0, 1, 2, 4, 6} (0 = `--num-spec-tokens 0` baseline), concurrency 1, 4, 16,
three repeats of SEGMENT_S seconds per cell.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from specmon.sim.model import expected_tokens_per_step

pytestmark = [pytest.mark.e2e, pytest.mark.acceptance]  # minutes of real-time load

KS = [1, 2, 4, 6]  # plus the k=0 baseline
CONCURRENCY = [1, 4, 16]
ACCEPTANCE = [0.85, 0.8, 0.75, 0.7, 0.65, 0.6]  # a_1..a_6, falling with position
OUTPUT_TOKENS = 48
TTFT_MS = 5.0
SEGMENT_S = 2.0  # profiling seconds per repeat (in-flight requests then finish)
REPEATS = 3
TOLERANCE = 0.02  # the bar: selected k within 2% of the analytic best throughput
LINEAR = {"step_ms": 10.0, "batch_slope": 0.03, "draft_ms_per_token": 0.3}
# compute 0.6 (not 0.5): at concurrency 4 the runner-up (k=6) is 21% behind k=4, not 6%. At
# 0.5, under one busy core, k=4's median came in 8% under its formula and k=6's 2% (its
# per-token time intact): late arrivals leave k=4's batch part-empty at the step floor, where
# a part-empty batch does not step faster, while k=6's compute-bound step does; a 6% gap
# was then decided by that, not by the decision
ROOFLINE = {"step_floor_ms": 12.0, "compute_ms_per_token": 0.6, "draft_ms_per_token": 0.1}
SWEEP_TIMEOUT_S = 480  # generous: a busy 2-core machine


# --- the simulator's formula, written from its documentation --------------------------


def step_ms(model: str, k: int, batch: int, p: dict[str, float]) -> float:
    if model == "roofline":
        verify = max(p["step_floor_ms"], p["compute_ms_per_token"] * batch * (k + 1))
        return verify + p["draft_ms_per_token"] * k
    return p["step_ms"] * (1 + p["batch_slope"] * (batch - 1) * (k + 1)) + (
        p["draft_ms_per_token"] * k
    )


def expected_steps(length: int, k: int, acceptance: list[float]) -> float:
    """Mean verify steps for a request of `length` tokens (the first comes from prefill);
    a step drafts min(k, remaining - 1) and accepts j of d with prob. prod(a_1..a_j)(1-a_{j+1})."""

    steps = [0.0] * length  # steps[r]: mean steps to emit r more tokens (bottom-up)
    for remaining in range(1, length):
        drafted = min(k, remaining - 1)
        total, survive = 1.0, 1.0
        for j in range(drafted + 1):
            p_exactly_j = survive * (1 - acceptance[j] if j < drafted else 1.0)
            total += p_exactly_j * steps[remaining - j - 1]
            if j < drafted:
                survive *= acceptance[j]
        steps[remaining] = total
    return steps[length - 1]


def request_throughput(model: str, k: int, batch: int, p: dict[str, float]) -> float:
    """Output tokens/s of B closed-loop clients, each running L-token requests back to back."""
    per_request_ms = TTFT_MS + expected_steps(OUTPUT_TOKENS, k, ACCEPTANCE) * step_ms(
        model, k, batch, p
    )
    return batch * OUTPUT_TOKENS * 1000.0 / per_request_ms


def stepped_throughput(model: str, k: int, batch: int, p: dict[str, float]) -> float:
    """B closed-loop clients on a batched engine: (N + 1) steps per request (see above)."""
    steps = expected_steps(OUTPUT_TOKENS, k, ACCEPTANCE) + 1
    return batch * OUTPUT_TOKENS * 1000.0 / (steps * step_ms(model, k, batch, p))


def steady_throughput(model: str, k: int, batch: int, p: dict[str, float]) -> float:
    return batch * expected_tokens_per_step(ACCEPTANCE, k) * 1000.0 / step_ms(model, k, batch, p)


def analytic(model: str, p: dict[str, float]) -> dict[int, dict[int, float]]:
    """concurrency -> k -> analytic output tokens/s."""
    return {c: {k: request_throughput(model, k, c, p) for k in [0, *KS]} for c in CONCURRENCY}


def arrivals(doc: dict, c: int) -> dict[int, list[tuple[float | None, ...]]]:
    """k -> per repeat (arrival delay share, per-token off share, lag share), for -s."""

    def r3(v: float | None) -> float | None:
        return None if v is None else round(v, 3)

    return {
        cell["k"]: [
            (r3(r["arrival_delay_share"]), r3(r["per_token_off_share"]), r3(r["server_lag_share"]))
            for r in cell["repeats"]
        ]
        for cell in doc["cells"]
        if cell["concurrency"] == c
    }


def argmax(rates: dict[int, float]) -> int:
    return max(rates, key=lambda k: (rates[k], -k))


# --- hand checks of the formula above -------------------------------------------------


def test_expected_steps_by_hand() -> None:
    # k = 0: one token per step after the prefill token
    assert expected_steps(48, 0, ACCEPTANCE) == 47
    # k = 1, L = 3: remaining 2, draft 1: accepted (0.85) -> done in 1 step; rejected ->
    # 1 left, a non-spec step: 1 + 0.15 * 1
    assert expected_steps(3, 1, ACCEPTANCE) == pytest.approx(1.15)
    # long requests: steps -> (L - 1) / E(k) (truncation adds less than a step or two)
    e4 = 1 + 0.85 + 0.85 * 0.8 + 0.85 * 0.8 * 0.75 + 0.85 * 0.8 * 0.75 * 0.7
    assert 2000 / e4 < expected_steps(2001, 4, ACCEPTANCE) < 2000 / e4 + 2


@pytest.mark.parametrize(
    ("model", "params", "expected"),
    [("linear", LINEAR, {1: 6, 4: 4, 16: 2}), ("roofline", ROOFLINE, {1: 6, 4: 4, 16: 1})],
)
def test_parameters_make_a_visible_choice(model: str, params: dict, expected: dict) -> None:
    """The chosen parameters move the best k with load and leave a > 2% gap to the runner-up,
    and the truncation-aware and the steady-state formulas agree on the best k."""
    table = analytic(model, params)
    for c, rates in table.items():
        best = argmax(rates)
        assert best == expected[c]
        assert best == argmax({k: steady_throughput(model, k, c, params) for k in rates})
        assert best == argmax({k: stepped_throughput(model, k, c, params) for k in rates})
        runner_up = max(v for k, v in rates.items() if k != best)
        assert runner_up < (1 - TOLERANCE) * rates[best]


# --- the sweep ------------------------------------------------------------------------


def sim_command(model: str, params: dict[str, float], k: str, log: Path | None = None) -> str:
    """The sim's command line; the sim at k takes a_1..a_k (cut from the list by the shell
    that runs the --serve template), the baseline (k = 0) none. `log`: its --log file (the
    template's {k} in the name, one file per k)."""
    flags = " ".join(f"--{name.replace('_', '-')} {value}" for name, value in params.items())
    acceptance = ",".join(str(a) for a in ACCEPTANCE)
    per_k = f" --acceptance $(echo {acceptance} | cut -d, -f1-{k})" if k != "0" else ""
    log_flag = f" --log {log}" if log is not None else ""
    return (
        f"{{python}} -m specmon sim --port {{port}} --num-spec-tokens {k} --latency-model "
        f"{model} {flags} --ttft-ms {TTFT_MS} --seed 11{per_k}{log_flag}"
    )


def run_sweep(
    tmp_path: Path,
    model: str,
    params: dict[str, float],
    grid: tuple[list[int], list[int]] = (KS, CONCURRENCY),
    repeats: int = REPEATS,
    warmup: int = 2,
    log: Path | None = None,
    extra: tuple[str, ...] = (),
) -> subprocess.CompletedProcess:
    ks, concurrency = grid
    argv = [
        sys.executable,
        "-m",
        "specmon",
        "sweep",
        "--serve",
        sim_command(model, params, "{k}", log),
        "--baseline-serve",
        sim_command(model, params, "0", log),
        "--num-spec-tokens",
        ",".join(map(str, ks)),
        "--concurrency",
        ",".join(map(str, concurrency)),
        "--repeats",
        str(repeats),
        "--segment-duration",
        str(SEGMENT_S),
        "--warmup-request-count",
        str(warmup),
        "--output-tokens-mean",
        str(OUTPUT_TOKENS),
        "--prompt-source",
        "synthetic",
        "--synthetic-input-tokens-mean",
        "32",
        "--artifact-dir",
        str(tmp_path),
        *extra,
    ]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=SWEEP_TIMEOUT_S,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )


@pytest.mark.parametrize(("model", "params"), [("linear", LINEAR), ("roofline", ROOFLINE)])
def test_sweep_selects_the_analytic_best_k(tmp_path: Path, model: str, params: dict) -> None:
    proc = run_sweep(tmp_path, model, params)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    doc = json.loads((tmp_path / "sweep.json").read_text())
    assert {(c["k"], c["concurrency"]) for c in doc["cells"]} == {
        (k, c) for k in [0, *KS] for c in CONCURRENCY
    }
    table = analytic(model, params)
    decisions = {d["concurrency"]: d for d in doc["decisions"]}
    behind = {
        (cell["k"], cell["concurrency"]): cell["server_behind"]
        for cell in doc["cells"]
        if cell.get("server_behind")
    }
    misses, not_compared = [], []
    for c, rates in table.items():
        best = argmax(rates)
        selected = decisions[c]["selected_k"]
        measured = {
            s["k"]: round(s["median_output_token_throughput"]) for s in decisions[c]["candidates"]
        }
        ratio = {k: round(measured[k] / rates[k], 3) for k in measured}  # shown with -s
        print(
            f"{model} c={c}: selected {selected}, analytic best {best}, measured/analytic {ratio}"
        )
        print("  arrival delay share, per-token off, lag share per k:", arrivals(doc, c))
        # the two cells the comparison rests on: the one picked and the analytic best
        flagged = {k: behind[(k, c)] for k in {selected, best} if (k, c) in behind}
        missed = selected is None or rates[selected] < (1 - TOLERANCE) * rates[best]
        if missed and flagged:  # the oracle was off its own formula: not the decision's miss
            not_compared.append(f"concurrency {c} (selected k={selected}): {flagged}")
        elif missed:
            misses.append(
                f"concurrency {c}: selected k={selected}, analytic best k={best}; analytic "
                f"{ {k: round(v) for k, v in rates.items()} } measured {measured}"
            )
    if not_compared:
        print("not compared, the simulator ran behind its model:", *not_compared, sep="\n  ")
    assert len(not_compared) < len(table), (
        "the simulator ran behind its own step model at every load:\n" + "\n".join(not_compared)
    )
    assert not misses, "\n".join(misses + not_compared) + "\n" + out

    # the model's leave-one-out error: printed, and in sweep.json per cell and overall
    assert "leave-one-out error" in proc.stdout
    fitted = doc["model"]
    assert fitted is not None, doc.get("model_error")
    assert isinstance(fitted["loo_mean_abs_error"], float)
    assert f"model error {fitted['loo_mean_abs_error'] * 100:.0f}%" in proc.stdout
    loo = [cell["loo_error"] for cell in fitted["cells"]]
    assert len(loo) == len(doc["cells"]) and all(isinstance(e, float) for e in loo)
    mean_abs = sum(abs(e) for e in loo) / len(loo)
    assert fitted["loo_mean_abs_error"] == pytest.approx(mean_abs)
    for e in loo:  # each printed as a signed percentage in the leave-one-out table
        assert f"{e * 100:+.1f}%" in proc.stdout


# --- under load: every cell holds the formula's per-token time, or says it does not -----

LOADED_GRID = ([2, 6], [1, 16])  # k (plus the baseline) and concurrency: a short sweep
BUSY_LOOP = [sys.executable, "-c", "while True: pass"]


@contextlib.contextmanager
def cores_kept_busy(count: int) -> Iterator[None]:
    """`count` busy-loop processes beside the test (the machine's other work, made sure of);
    killed by their PIDs afterwards."""
    procs = [subprocess.Popen(BUSY_LOOP) for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def formula_itl_by_request(log: Path, k: int) -> dict[str, float]:
    """x_request_id -> ITL (ms) by the formula, from the simulator's --log (one per k, all
    concurrencies): the steps it ran (each checked to be T(k, B) for a batch B the sweep's
    loads could make) over L - 1 tokens."""
    top = max(LOADED_GRID[1])
    allowed = [step_ms("roofline", k, b, ROOFLINE) for b in range(1, top + 1)]
    out = {}
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        if entry["status"] != 200 or entry["fault"] is not None or not entry["stream"]:
            continue
        steps, tokens = entry["step_ms"], entry["usage"]["completion_tokens"]
        assert all(min(abs(t - a) for a in allowed) < 1e-9 for t in steps), steps
        out[entry["x_request_id"]] = sum(steps) / (tokens - 1)
    return out


def measured_itl_by_request(repeat_dir: Path) -> dict[str, float]:
    """x_request_id -> the ITL (ms) the client measured, from the repeat's export."""
    out = {}
    for path in repeat_dir.rglob("profile_export.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("error") or record["metadata"]["benchmark_phase"] != "profiling":
                continue
            out[record["metadata"]["x_request_id"]] = record["metrics"]["inter_token_latency"][
                "value"
            ]
    return out


def test_under_load_every_cell_holds_its_per_token_time_or_is_flagged(tmp_path: Path) -> None:
    """Both cores kept busy by other processes: each repeat's mean ITL as the client
    measured it is held against the formula ITL of the same requests (the simulator's
    --log); each cell's median of those is within 2%, or the cell is flagged in sweep.json.
    The flag's figure is that same comparison (computed here from the exports, there from
    /metrics)."""
    log = tmp_path / "sim-k{k}.jsonl"
    with cores_kept_busy(2):
        proc = run_sweep(tmp_path / "sweep", "roofline", ROOFLINE, LOADED_GRID, 2, 0, log)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert len(doc["cells"]) == 3 * len(LOADED_GRID[1])
    silent = []
    for cell in doc["cells"]:
        k, c = cell["k"], cell["concurrency"]
        formula = formula_itl_by_request(tmp_path / f"sim-k{k}.jsonl", k)
        offs = []
        for rep in cell["repeats"]:
            measured = measured_itl_by_request(Path(rep["artifact_dir"]))
            assert measured and set(measured) <= set(formula)
            off = (
                statistics.mean(measured.values())
                / statistics.mean(formula[rid] for rid in measured)
                - 1
            )
            assert rep["per_token_off_share"] == pytest.approx(off, abs=0.002)
            offs.append(off)
        # the cell's per-token time is the median of its repeats, as its throughput is
        off = statistics.median(offs)
        print(f"k={k} c={c}: per-token {off:+.2%} (repeats {offs}), flag {cell['server_behind']}")
        if abs(off) > TOLERANCE and not cell["server_behind"]:
            silent.append(f"k={k} concurrency {c}: {off:+.1%} off, not flagged")
    assert not silent, "\n".join(silent)


# --- a schedule runs each load at its best k -------------------------------------------

# the linear configuration's best k per load (test_parameters_make_a_visible_choice): 6 at
# batch 1, 4 at 4, 2 at 16; as vLLM's num_speculative_tokens_per_batch_size
HAND_SCHEDULE = [[1, 1, 6], [2, 4, 4], [5, 16, 2]]


def schedule_k(batch: int) -> int:
    return next(k for start, end, k in HAND_SCHEDULE if start <= batch <= end)


def test_the_hand_schedule_is_never_worse_than_the_best_fixed_k_at_any_batch() -> None:
    """By the formula: at every batch a load of concurrency C can run (1..C: requests end
    and arrive between steps), the schedule's k gives at least the tokens/s of the best
    fixed k at C (equal where the range holds it). So a schedule arm measured at C may not
    fall below that k's cell by more than the measurement's own noise."""
    for c, best in {1: 6, 4: 4, 16: 2}.items():
        for b in range(1, c + 1):
            ours = steady_throughput("linear", schedule_k(b), b, LINEAR)
            assert ours >= steady_throughput("linear", best, b, LINEAR) * (1 - 1e-12)
        assert schedule_k(c) == best


def _median(cell: dict) -> float:
    return statistics.median(r["output_token_throughput"] for r in cell["repeats"])


def _spread(cell: dict) -> float:
    """(max - min) / median of the cell's repeats: its own measurement noise."""
    tput = [r["output_token_throughput"] for r in cell["repeats"]]
    return (max(tput) - min(tput)) / statistics.median(tput)


def _flagged(cell: dict) -> bool:
    return bool(cell["server_behind"]) or any(r["client_saturated"] for r in cell["repeats"])


SCHEDULE_MARGIN = 0.03  # the formula's 2% bar for each of the two cells, plus rounding


def test_a_schedule_arm_measures_the_best_fixed_k_at_every_load(tmp_path: Path) -> None:
    """`--variant` with HAND_SCHEDULE beside the fixed k: at each concurrency its median is
    no more than SCHEDULE_MARGIN (or the two cells' own spread, if larger) below the best
    fixed k's (the formula says at least equal), except where either cell ran off the
    formula (flagged: not compared, and not at every load)."""
    variant = sim_command("linear", LINEAR, "6") + f" --spec-schedule '{json.dumps(HAND_SCHEDULE)}'"
    grid = ([2, 4, 6], CONCURRENCY)
    proc = run_sweep(tmp_path, "linear", LINEAR, grid, 3, 2, extra=("--variant", f"hand={variant}"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "sweep.json").read_text())
    cells = {(c["k"], c["concurrency"]): c for c in doc["cells"]}
    arms = {a["concurrency"]: a for a in doc["arm_cells"] if a["arm"] == "hand"}
    misses, not_compared = [], []
    for c, best in {1: 6, 4: 4, 16: 2}.items():
        fixed, arm = cells[(best, c)], arms[c]
        ratio = _median(arm) / _median(fixed)
        allowed = max(SCHEDULE_MARGIN, _spread(arm), _spread(fixed))
        print(f"c={c}: schedule / k={best}: {ratio:.3f} (allowed -{allowed:.1%})")
        if _flagged(arm) or _flagged(fixed):
            not_compared.append(
                f"concurrency {c}: {arm['server_behind'] or fixed['server_behind']}"
            )
        elif ratio < 1 - allowed:
            misses.append(f"concurrency {c}: schedule {ratio - 1:+.1%} vs k={best}")
        top = max(int(j) for r in arm["repeats"] for j in r["histogram"])
        assert top <= 6 and (c > 1 or top == 6)  # at batch 1 it drafts 6, as the schedule says
    assert len(not_compared) < 3, not_compared
    assert not misses, "\n".join(misses + not_compared)
