"""`specmon compare BASE NEW --fail-on ...`: the regression gate between two runs.

A clause such as `al<-3%` fails when the relative change of that metric from BASE to NEW
is past its threshold in the named direction AND the bootstrap interval of the change
excludes zero: a move the noise could make is reported, never failed. The interval comes
from resampling blocks of consecutive requests (each run on its own), so neighbouring
requests that share a batch stay together. Both specmon's and AIPerf's artifact dirs work:
every figure is read from the per-request records of `profile_export.jsonl` (AIPerf's
record format: `metadata` + `metrics.{tag}.value`). docs/metrics.md §13 has the formulas.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from specmon.errors import UserError
from specmon.stats import percentile

RECORDS_FILE = "profile_export.jsonl"
MIN_REQUESTS = 20  # fewer records than this cannot give an interval worth gating on
DEFAULT_DRAWS = 1000
DEFAULT_CONFIDENCE = 0.95


@dataclass
class Rows:
    """The per-request figures of one run's profiling phase (errors and warm-up left out),
    in request start order."""

    path: Path
    start_ns: list[int] = field(default_factory=list)
    end_ns: list[int] = field(default_factory=list)
    output_tokens: list[float] = field(default_factory=list)
    accepted: list[float] = field(default_factory=list)
    drafted: list[float] = field(default_factory=list)
    steps: list[float] = field(default_factory=list)
    ttft_ms: list[float] = field(default_factory=list)
    itl_ms: list[float] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)
    # the wall time each request's end added to its run: end minus the previous request's
    # end (the run's first request: end minus its start), so runs read together add up
    span_ns: list[float] = field(default_factory=list)
    skipped: int = 0  # unreadable lines, errors and warm-up requests

    def __len__(self) -> int:
        return len(self.start_ns)


# A statistic over a list of request indices (a resample): None when it is undefined there.
Stat = Callable[[Rows, Sequence[int]], float | None]


def _ratio(num: Callable[[Rows], list[float]], den: Callable[[Rows], list[float]]) -> Stat:
    def stat(rows: Rows, idx: Sequence[int]) -> float | None:
        n, d = num(rows), den(rows)
        bottom = sum(d[i] for i in idx)
        return sum(n[i] for i in idx) / bottom if bottom > 0 else None

    return stat


def _acceptance_length(rows: Rows, idx: Sequence[int]) -> float | None:
    """Token-weighted acceptance length: 1 + accepted drafts per verify step, pooled."""
    steps = sum(rows.steps[i] for i in idx)
    return 1 + sum(rows.accepted[i] for i in idx) / steps if steps > 0 else None


def _throughput(rows: Rows, idx: Sequence[int]) -> float | None:
    """Output tokens per second of wall time: each request brings its tokens and the wall
    time its end added to the run (`Rows.span_ns`)."""
    wall = sum(rows.span_ns[i] for i in idx)
    return sum(rows.output_tokens[i] for i in idx) / (wall / 1e9) if wall > 0 else None


def _percentile(values: Callable[[Rows], list[float]], q: float) -> Stat:
    def stat(rows: Rows, idx: Sequence[int]) -> float | None:
        column = values(rows)
        picked = sorted(v for v in (column[i] for i in idx) if not math.isnan(v))
        return percentile(picked, q) if picked else None  # AIPerf's, as the exports

    return stat


def _metrics() -> dict[str, tuple[str, Stat]]:
    table: dict[str, tuple[str, Stat]] = {
        "al": ("acceptance length (token-weighted)", _acceptance_length),
        "acc": (
            "draft acceptance (overall)",
            _ratio(lambda r: r.accepted, lambda r: r.drafted),
        ),
        "tok/s": ("output token throughput", _throughput),
    }
    for name, label, get in (
        ("ttft", "TTFT", lambda r: r.ttft_ms),
        ("tpot", "TPOT", lambda r: r.itl_ms),
        ("latency", "request latency", lambda r: r.latency_ms),
    ):
        for q in (50, 90, 99):
            table[f"{name}_p{q}"] = (f"{label} p{q}", _percentile(get, q))
    return table


METRICS = _metrics()
CLAUSE = re.compile(r"^\s*([a-z0-9_/]+)\s*([<>])\s*([+-]?\d+(?:\.\d+)?)\s*%\s*$")


@dataclass(frozen=True)
class Threshold:
    """One clause of --fail-on: fail when `metric` moves `direction` past `limit_pct`."""

    metric: str
    direction: str  # "<": a drop fails (al<-3%); ">": a rise fails (ttft_p90>+10%)
    limit_pct: float

    def __str__(self) -> str:
        return f"{self.metric}{self.direction}{self.limit_pct:+g}%"


def parse_fail_on(text: str) -> list[Threshold]:
    """'al<-3%,ttft_p90>+10%' as thresholds; a one-line UserError naming a bad clause."""
    out = []
    for clause in text.split(","):
        m = CLAUSE.match(clause)
        if not m:
            raise UserError(
                f"--fail-on: cannot read {clause.strip()!r} (expected METRIC<-N% or "
                f"METRIC>+N%, e.g. al<-3%,ttft_p90>+10%)"
            )
        metric, direction, limit = m.group(1), m.group(2), float(m.group(3))
        if metric not in METRICS:
            raise UserError(f"--fail-on: unknown metric {metric!r} (known: {', '.join(METRICS)})")
        out.append(Threshold(metric, direction, limit))
    if not out:
        raise UserError("--fail-on: no clause given")
    return out


COLUMNS = ("start_ns", "end_ns", "output_tokens", "accepted", "drafted", "steps",
           "ttft_ms", "itl_ms", "latency_ms", "span_ns")  # fmt: skip


def read_rows(*run_dirs: Path) -> Rows:
    """The profiling-phase, error-free records of one or more runs (specmon's or AIPerf's
    JSONL; a sweep cell's repeats are read together), each run in request start order."""
    rows = Rows(run_dirs[0])
    for run_dir in run_dirs:
        one = _read_one(run_dir / RECORDS_FILE)
        for name in COLUMNS:
            getattr(rows, name).extend(getattr(one, name))
        rows.skipped += one.skipped
    return rows


def _read_one(path: Path) -> Rows:
    rows = Rows(path)
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip() and not _add_record(rows, line):
                    rows.skipped += 1
    except FileNotFoundError:
        raise UserError(f"{path}: no such file (the gate needs the per-request records)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read ({exc})") from None
    previous = min(rows.start_ns, default=0)
    for i in sorted(range(len(rows)), key=lambda i: rows.end_ns[i]):
        rows.span_ns[i] = float(max(rows.end_ns[i] - previous, 0))
        previous = rows.end_ns[i]
    order = sorted(range(len(rows)), key=lambda i: rows.start_ns[i])
    for name in COLUMNS:
        column = getattr(rows, name)
        setattr(rows, name, [column[i] for i in order])
    return rows


def _value(metrics: dict[str, object], tag: str) -> float:
    entry = metrics.get(tag)
    value = entry.get("value") if isinstance(entry, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return math.nan
    return float(value)


def _add_record(rows: Rows, line: str) -> bool:
    try:
        rec = json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        return False
    if not isinstance(rec, dict) or rec.get("error"):
        return False
    meta, metrics = rec.get("metadata"), rec.get("metrics")
    if not isinstance(meta, dict) or not isinstance(metrics, dict):
        return False
    if meta.get("benchmark_phase") == "warmup" or meta.get("was_cancelled"):
        return False
    start, end = meta.get("request_start_ns"), meta.get("request_end_ns")
    if not isinstance(start, int) or not isinstance(end, int) or end < start:
        return False
    rows.start_ns.append(start)
    rows.end_ns.append(end)
    rows.output_tokens.append(_zero_if_nan(_value(metrics, "output_sequence_length")))
    rows.accepted.append(_zero_if_nan(_value(metrics, "spec_decode_accepted_draft_tokens")))
    rows.drafted.append(_zero_if_nan(_value(metrics, "spec_decode_draft_tokens")))
    rows.steps.append(_zero_if_nan(_value(metrics, "spec_decode_steps")))
    rows.ttft_ms.append(_value(metrics, "time_to_first_token"))
    rows.itl_ms.append(_value(metrics, "inter_token_latency"))
    rows.latency_ms.append(_value(metrics, "request_latency"))
    rows.span_ns.append(0.0)  # set once the run is read (_read_one)
    return True


def _zero_if_nan(value: float) -> float:
    return 0.0 if math.isnan(value) else value


@dataclass
class Verdict:
    """One clause's outcome: the relative change (%), its interval, and whether it fails."""

    clause: str
    metric: str
    label: str
    base: float | None
    new: float | None
    change_pct: float | None
    low_pct: float | None
    high_pct: float | None
    failed: bool
    reason: str

    def line(self) -> str:
        if self.change_pct is None or self.low_pct is None or self.high_pct is None:
            return f"{'FAIL' if self.failed else 'ok  '} {self.clause:<16} {self.reason}"
        word = "FAIL" if self.failed else "ok  "
        return (
            f"{word} {self.clause:<16} {self.label}: {_fmt(self.base)} -> {_fmt(self.new)} "
            f"({self.change_pct:+.1f}% [{self.low_pct:+.1f}..{self.high_pct:+.1f}]) {self.reason}"
        )


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"


def blocks_of(n: int) -> list[range]:
    """Consecutive request blocks: about sqrt(n) of them, at least 10 when n allows."""
    count = max(min(n, 10), min(int(math.sqrt(n)), 100))
    edges = [round(i * n / count) for i in range(count + 1)]
    return [range(a, b) for a, b in zip(edges, edges[1:]) if b > a]


def _resample(blocks: list[range], rng: random.Random) -> list[int]:
    return [i for _ in blocks for i in blocks[rng.randrange(len(blocks))]]


def change_interval(
    stat: Stat, base: Rows, new: Rows, confidence: float, draws: int, seed: int
) -> tuple[float, float, float] | None:
    """The relative change new/base - 1 (%) and its bootstrap percentile interval."""
    b_all, n_all = range(len(base)), range(len(new))
    b0, n0 = stat(base, b_all), stat(new, n_all)
    if b0 is None or n0 is None or b0 == 0 or math.isnan(b0) or math.isnan(n0):
        return None
    rng = random.Random(seed)
    b_blocks, n_blocks = blocks_of(len(base)), blocks_of(len(new))
    changes = []
    for _ in range(draws):
        b, n = stat(base, _resample(b_blocks, rng)), stat(new, _resample(n_blocks, rng))
        if b and n is not None and not math.isnan(b) and not math.isnan(n):
            changes.append((n / b - 1) * 100)
    if len(changes) < draws // 2:
        return None
    changes.sort()
    tail = (1 - confidence) / 2
    lo = changes[int(tail * (len(changes) - 1))]
    hi = changes[math.ceil((1 - tail) * (len(changes) - 1))]
    return (n0 / b0 - 1) * 100, lo, hi


def evaluate(
    base: Rows,
    new: Rows,
    thresholds: list[Threshold],
    confidence: float = DEFAULT_CONFIDENCE,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
) -> list[Verdict]:
    for rows in (base, new):
        if len(rows) < MIN_REQUESTS:
            raise UserError(
                f"{rows.path}: {len(rows)} usable requests; the gate needs at least "
                f"{MIN_REQUESTS} for an interval"
            )
    return [_verdict(t, base, new, confidence, draws, seed) for t in thresholds]


def _verdict(t: Threshold, base: Rows, new: Rows, conf: float, draws: int, seed: int) -> Verdict:
    label, stat = METRICS[t.metric]
    b, n = stat(base, range(len(base))), stat(new, range(len(new)))
    found = change_interval(stat, base, new, conf, draws, seed)
    if found is None:
        reason = "not measured in both runs (no figure to compare)"
        return Verdict(str(t), t.metric, label, b, n, None, None, None, False, reason)
    change, lo, hi = found
    past = change < t.limit_pct if t.direction == "<" else change > t.limit_pct
    beyond_noise = hi < 0 if t.direction == "<" else lo > 0
    failed = past and beyond_noise
    if failed:
        reason = f"past {t.limit_pct:+g}% and beyond the noise"
    elif past:
        reason = f"past {t.limit_pct:+g}% but the {conf:.0%} interval holds 0: within the noise"
    else:
        reason = f"within {t.limit_pct:+g}%"
    return Verdict(str(t), t.metric, label, b, n, change, lo, hi, failed, reason)


def verdicts_json(verdicts: list[Verdict]) -> dict[str, object]:
    return {
        "failed": any(v.failed for v in verdicts),
        "verdicts": [asdict(v) for v in verdicts],
    }


SWEEP_FILE = "sweep.json"


def sweep_cells(sweep_dir: Path) -> dict[tuple[int, int], list[Path]]:
    """{(k, concurrency): the repeats' artifact dirs} of a sweep's measured cells."""
    path = sweep_dir / SWEEP_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: cannot read ({exc})") from None
    cells = doc.get("cells") if isinstance(doc, dict) else None
    if not isinstance(cells, list):
        raise UserError(f"{path}: no cells (is this a specmon sweep directory?)")
    out: dict[tuple[int, int], list[Path]] = {}
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("error"):
            continue
        k, c = cell.get("k"), cell.get("concurrency")
        dirs = [_repeat_dir(sweep_dir, r) for r in cell.get("repeats") or []]
        found = [d for d in dirs if d is not None]
        if isinstance(k, int) and isinstance(c, int) and found:
            out[(k, c)] = found
    return out


def _repeat_dir(sweep_dir: Path, repeat: object) -> Path | None:
    where = repeat.get("artifact_dir") if isinstance(repeat, dict) else None
    if not isinstance(where, str):
        return None
    path = Path(where)
    for candidate in (path, sweep_dir / path, sweep_dir / path.name):
        if (candidate / RECORDS_FILE).is_file():
            return candidate
    return None


def gate_sweeps(
    base_dir: Path, new_dir: Path, thresholds: list[Threshold], seed: int = 0
) -> list[tuple[str, list[Verdict]]]:
    """The gate per (k, concurrency) cell measured in both sweeps."""
    base, new = sweep_cells(base_dir), sweep_cells(new_dir)
    shared = sorted(set(base) & set(new))
    if not shared:
        raise UserError(f"{base_dir} and {new_dir}: no (k, concurrency) cell measured in both")
    return [
        (
            f"k={k} c={c}",
            evaluate(read_rows(*base[(k, c)]), read_rows(*new[(k, c)]), thresholds, seed=seed),
        )
        for k, c in shared
    ]


@dataclass
class GateReport:
    """The gate over every compared pair: the text lines, the JSON and the exit status."""

    sections: list[tuple[str, list[Verdict]]]

    @property
    def failed(self) -> bool:
        return any(v.failed for _, verdicts in self.sections for v in verdicts)

    @property
    def exit_status(self) -> int:
        return 1 if self.failed else 0

    def lines(self) -> list[str]:
        out = [f"regression gate: {'FAILED' if self.failed else 'passed'}"]
        for title, verdicts in self.sections:
            out.append(f"  {title}")
            out += [f"    {v.line()}" for v in verdicts]
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "failed": self.failed,
            "sections": [{"name": t, **verdicts_json(v)} for t, v in self.sections],
        }


def gate(dirs: list[Path], thresholds: list[Threshold], sweeps: bool) -> GateReport:
    """Each dir against the first (runs: the run dirs; sweeps: per (k, concurrency) cell)."""
    base = dirs[0]
    sections: list[tuple[str, list[Verdict]]] = []
    for other in dirs[1:]:
        if sweeps:
            for cell, verdicts in gate_sweeps(base, other, thresholds):
                sections.append((f"{other} vs {base}, {cell}", verdicts))
        else:
            verdicts = evaluate(read_rows(base), read_rows(other), thresholds)
            sections.append((f"{other} vs {base}", verdicts))
    return GateReport(sections)
