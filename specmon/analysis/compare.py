"""Runs side by side: artifact loaders, the comparison rows and their rendering.

Reads specmon's or AIPerf's artifact dirs: `profile_export_aiperf.json` (required) and
`profile_export.jsonl` (optional: it gives k). Used by `specmon compare`
(commands/compare.py), `specmon tune` and the end of a multi-server run.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specmon.errors import UserError
from specmon.formatting import fmt_number, fmt_signed, format_table
from specmon.specdecode.method import SpecMethod
from specmon.specdecode.record import k_contradiction

SUMMARY_FILE = "profile_export_aiperf.json"
RECORDS_FILE = "profile_export.jsonl"
HISTOGRAM_KEY = "pooled_spec_decode_acceptance_histogram"


def _averages(section: str, labels: Mapping[str, str]) -> list[tuple[str, str, str, str]]:
    """One row per {tag: label}, each compared on its avg."""
    return [(section, tag, "avg", label) for tag, label in labels.items()]


# (section, tag, stat, label); stat "avg" for derived metrics.
SPEC_ROWS = _averages(
    "spec decode",
    {
        "spec_decode_acceptance_length": "Acceptance Length",
        "spec_decode_token_weighted_acceptance_length": "Token-Wtd Accept Len",
        "spec_decode_draft_acceptance_rate": "Draft Accept Rate",
        "spec_decode_overall_draft_acceptance_rate": "Overall Draft Accept Rate",
        "spec_decode_accepted_per_verified": "Accepted / Verified",
        "spec_decode_steps": "Spec Decode Steps / request",
        "total_spec_decode_steps": "Total Spec Decode Steps",
        "total_accepted_draft_tokens": "Total Accepted Draft",
        "total_draft_tokens": "Total Draft",
        "spec_decode_zero_step_requests": "Zero-Step Requests",
    },
)
LATENCY_ROWS = [
    ("latency", tag, stat, f"{label} {stat}")
    for tag, label in (
        ("time_to_first_token", "TTFT"),
        ("inter_token_latency", "TPOT"),
        ("request_latency", "Request Latency"),
    )
    for stat in ("p50", "p90", "p99")
]
# Per category (the summary's per_category block, docs/metrics.md §12):
# one section per category, its acceptance and speed figures against the baseline's.
CATEGORY_ROWS = [
    ("request_count", "avg", "Requests"),
    ("spec_decode_token_weighted_acceptance_length", "avg", "Token-Wtd Accept Len"),
    ("spec_decode_overall_draft_acceptance_rate", "avg", "Overall Draft Accept Rate"),
    ("output_token_throughput", "avg", "Output Token Throughput"),
    ("time_to_first_token", "p50", "TTFT p50"),
]
PER_CATEGORY_KEY = "per_category"
THROUGHPUT_ROWS = _averages(
    "throughput",
    {
        "output_token_throughput": "Output Token Throughput",
        "output_token_throughput_per_user": "Output Tokens/s/user (avg)",
        "request_throughput": "Request Throughput",
        "request_count": "Request Count",
        "error_request_count": "Error Request Count",
        "benchmark_duration": "Benchmark Duration",
    },
)


# ---------------------------------------------------------------- loading artifacts


def read_summary(path: Path) -> dict:
    """profile_export_aiperf.json as a dict; one-line UserError when missing or not JSON."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise UserError(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object (an AIPerf summary export)")
    return data


@dataclass
class RecordScan:
    """What a profile_export.jsonl holds for tuning: the pooled histogram and k values."""

    histogram: dict[int, int] = field(default_factory=dict)
    k_values: Counter = field(default_factory=Counter)
    records: int = 0
    spec_records: int = 0
    warmup_skipped: int = 0
    bad_lines: int = 0
    # records whose declared k their own counts deny (record.k_contradiction): left out of
    # the histogram and of the k values, so one such record never blocks the run
    implausible: int = 0
    first_implausible: str = ""


def scan_records(path: Path) -> RecordScan:
    """Pool the per-request histograms (profiling phase only) and collect num_spec_tokens."""
    scan = RecordScan()
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    _scan_line(line, scan)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read ({exc})") from None
    return scan


def _scan_line(line: str, scan: RecordScan) -> None:
    try:
        rec = json.loads(line)
    except (json.JSONDecodeError, RecursionError):  # RecursionError: nested past the stack
        scan.bad_lines += 1
        return
    if not isinstance(rec, dict):
        scan.bad_lines += 1
        return
    scan.records += 1
    meta_obj = rec.get("metadata")
    meta = meta_obj if isinstance(meta_obj, dict) else {}
    spec = rec.get("spec_decode_acceptance")
    if not isinstance(spec, dict):
        return
    if meta.get("benchmark_phase") == "warmup":
        scan.warmup_skipped += 1
        return
    try:
        hist = {int(j): int(n) for j, n in (spec.get("acceptance_histogram") or {}).items()}
    except (AttributeError, TypeError, ValueError):
        scan.bad_lines += 1
        return
    problem = _k_problem(spec, hist)
    if problem is not None:
        scan.implausible += 1
        scan.first_implausible = scan.first_implausible or f"record {scan.records}: {problem}"
        return
    scan.spec_records += 1
    if isinstance(spec.get("num_spec_tokens"), int):
        scan.k_values[spec["num_spec_tokens"]] += 1
    if not spec.get("num_spec_steps"):
        return  # zero-step records stay out of the pooled histogram (AIPerf)
    for j, n in hist.items():
        if n:
            scan.histogram[j] = scan.histogram.get(j, 0) + n


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _k_problem(spec: dict, hist: dict[int, int]) -> str | None:
    """Why the record's num_spec_tokens cannot be true (record.k_contradiction), or None."""
    drafted = _count(spec.get("num_draft_tokens")) or 0
    per_step = spec.get("per_step_drafted")
    most_drafted = (
        max((v for v in per_step if _count(v) is not None), default=0)
        if isinstance(per_step, list)
        else 0
    )
    return k_contradiction(
        _count(spec.get("num_spec_tokens")),
        drafted,
        _count(spec.get("num_spec_steps")),
        max((j for j, n in hist.items() if n), default=0),
        most_drafted,
    )


def record_k(path: Path | None) -> int | None:
    """The single num_spec_tokens the records carry, None when absent; UserError when mixed."""
    if path is None or not path.is_file():
        return None
    return single_k(scan_records(path), path)


def single_k(scan: RecordScan, path: Path) -> int | None:
    values = scan.k_values
    if len(values) > 1:
        shown = ", ".join(str(k) for k in sorted(values))
        raise UserError(
            f"{path}: records mix num_spec_tokens {shown}; one k per run "
            "(multi-server runs write one subfolder per server)"
        )
    return next(iter(values), None)


@dataclass
class RunArtifacts:
    label: str
    path: Path
    summary: dict
    num_spec_tokens: int | None


def find_run_dirs(path: Path) -> list[Path]:
    """`path` itself when it holds a summary, else its subfolders that do (multi-server runs)."""
    if not path.exists():
        raise UserError(f"{path}: no such file or directory")
    if not path.is_dir():
        raise UserError(f"{path}: expected an artifact directory")
    if (path / SUMMARY_FILE).is_file():
        return [path]
    subdirs = sorted(p for p in path.iterdir() if (p / SUMMARY_FILE).is_file())
    if not subdirs:
        raise UserError(f"{path}: no {SUMMARY_FILE} here (is this an artifact directory?)")
    return subdirs


def load_run(path: Path, label: str | None = None) -> RunArtifacts:
    summary = read_summary(path / SUMMARY_FILE)
    records = path / RECORDS_FILE
    k = record_k(records if records.is_file() else None)
    if k is None:
        k = 0 if no_speculation(summary) else counters_k(summary)
    return RunArtifacts(label or path.name or str(path), path, summary, k)


NO_COUNTERS = "no spec-decode counters on /metrics"  # server_view.CounterWatch's reason


def counters_k(summary: Mapping) -> int | None:
    """k from the export's server_metrics (the server's per-position counters), when its
    counters counted verify steps; else None."""
    sm = summary.get("server_metrics")
    if not isinstance(sm, Mapping) or sm.get("available") is False:
        return None
    k, drafts = sm.get("num_spec_tokens"), sm.get("drafts")
    ok = isinstance(k, int) and isinstance(drafts, int) and k > 0 and drafts > 0
    return k if ok else None


def no_speculation(summary: Mapping) -> bool:
    """A run against a server that does not speculate (k=0): requests answered, none with a
    spec-decode record (no pooled histogram), and the server's /metrics has no spec-decode
    counters or counted no verify step. Unknown (/metrics not polled) is not k=0."""
    if summary.get(HISTOGRAM_KEY) or not _stat(summary, "request_count", "avg")[0]:
        return False
    sm = summary.get("server_metrics")
    if not isinstance(sm, Mapping):
        return False
    if sm.get("available") is False:
        return sm.get("reason") == NO_COUNTERS
    return sm.get("drafts") == 0


def run_method(summary: Mapping) -> SpecMethod | None:
    """The speculative method a specmon summary records (input_config's `specmon` key:
    spec_method, drafter, source); None for AIPerf's or a run that did not know it."""
    config = summary.get("input_config")
    own = config.get("specmon") if isinstance(config, Mapping) else None
    if not isinstance(own, Mapping) or not isinstance(own.get("spec_method"), str):
        return None
    drafter = own.get("drafter")
    drafter = drafter if isinstance(drafter, str) else None
    return SpecMethod(own["spec_method"], drafter, str(own.get("source") or ""))


def _method_json(method: SpecMethod | None) -> dict[str, str | None] | None:
    return method.to_json() if method is not None else None


def method_lines(labels: Sequence[str], runs: Sequence[RunArtifacts]) -> list[str]:
    """One line per run naming its method and drafter (none where no run knows it)."""
    found = [run_method(run.summary) for run in runs]
    if not any(found):
        return []
    lines = []
    for label, method in zip(labels, found):
        lines.append(f"  {label}: {method.text if method else 'not recorded'}")
    return ["speculative method:", *lines]


def unique_labels(paths: Sequence[Path]) -> list[str]:
    names = [p.name or str(p) for p in paths]
    if len(set(names)) == len(names):
        return names
    names = [str(p) for p in paths]
    seen: Counter = Counter()
    out = []
    for name in names:
        seen[name] += 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


# ---------------------------------------------------------------- comparison rows


@dataclass
class Row:
    section: str
    tag: str
    stat: str
    label: str
    unit: str
    values: list[float | None]
    percent_points: bool = False  # histogram shares: deltas in percentage points

    @property
    def deltas(self) -> list[float | None]:
        base = self.values[0]
        return [None if base is None or v is None else v - base for v in self.values]

    @property
    def delta_pct(self) -> list[float | None]:
        base = self.values[0]
        return [
            None if base in (None, 0) or v is None else 100.0 * (v - base) / abs(base)
            for v in self.values
        ]


def _stat(summary: Mapping, tag: str, stat: str) -> tuple[float | None, str]:
    block = summary.get(tag)
    if not isinstance(block, Mapping):
        return None, ""
    value = block.get(stat)
    unit = str(block.get("unit") or "")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value), unit
    return None, unit


def histogram_shares(summary: Mapping) -> dict[int, float]:
    """Pooled histogram as % of steps per bucket (empty when the run had no spec decode)."""
    raw = summary.get(HISTOGRAM_KEY)
    if not isinstance(raw, Mapping):
        return {}
    try:
        counts = {int(j): int(n) for j, n in raw.items()}
    except (TypeError, ValueError):
        return {}
    total = sum(counts.values())
    return {j: 100.0 * n / total for j, n in sorted(counts.items())} if total else {}


def build_rows(summaries: Sequence[Mapping], ks: Sequence[int | None]) -> list[Row]:
    rows = [
        Row(
            "spec decode",
            "num_spec_tokens",
            "",
            "k (num_spec_tokens)",
            "",
            [None if k is None else float(k) for k in ks],
        )
    ]
    for section, tag, stat, label in SPEC_ROWS + LATENCY_ROWS + THROUGHPUT_ROWS:
        cells = [_stat(s, tag, stat) for s in summaries]
        if all(v is None for v, _ in cells):
            continue
        unit = next((u for v, u in cells if u), "")
        rows.append(Row(section, tag, stat, label, unit, [v for v, _ in cells]))
    shares = [histogram_shares(s) for s in summaries]
    buckets = sorted({j for sh in shares for j in sh})
    for j in buckets:
        rows.append(
            Row(
                "histogram",
                HISTOGRAM_KEY,
                str(j),
                f"accepted {j} (% of steps)",
                "%",
                [sh.get(j, 0.0) if sh else None for sh in shares],
                percent_points=True,
            )
        )
    return rows + category_rows(summaries)


def _per_category(summary: Mapping) -> Mapping[str, Mapping]:
    block = summary.get(PER_CATEGORY_KEY)
    return block if isinstance(block, Mapping) else {}


def category_rows(summaries: Sequence[Mapping]) -> list[Row]:
    """One section per category any run has (first-seen order); a run without that
    category shows no value, so its delta is empty."""
    blocks = [_per_category(s) for s in summaries]
    names = list(dict.fromkeys(name for b in blocks for name in b))
    rows = []
    for name in names:
        per_run = [b.get(name, {}) for b in blocks]
        for tag, stat, label in CATEGORY_ROWS:
            cells = [_stat(c, tag, stat) for c in per_run]
            if all(v is None for v, _ in cells):
                continue
            unit = next((u for v, u in cells if u), "")
            rows.append(Row(f"category {name}", tag, stat, label, unit, [v for v, _ in cells]))
    return rows


# ---------------------------------------------------------------- rendering


COUNT_UNITS = {"", "count", "requests", "tokens"}


def _digits(row: Row) -> int:
    """Whole numbers (k, counts) print without decimals."""
    whole = all(v is None or float(v).is_integer() for v in row.values)
    return 0 if whole and row.unit in COUNT_UNITS and not row.percent_points else 2


def render_rows(labels: Sequence[str], rows: Sequence[Row], width: int | None = None) -> str:
    headers = ["metric", "unit", labels[0]]
    for label in labels[1:]:
        headers += [label, "Δ", "Δ%"]
    body, section = [], None
    for row in rows:
        if row.section != section:
            if section is not None:
                body.append([""] * len(headers))
            body.append([f"[{row.section}]"] + [""] * (len(headers) - 1))
            section = row.section
        digits = _digits(row)
        cells = [row.label, row.unit, fmt_number(row.values[0], digits)]
        for i in range(1, len(labels)):
            suffix = " pp" if row.percent_points else ""
            cells += [
                fmt_number(row.values[i], digits),
                fmt_signed(row.deltas[i], suffix, digits),
                "" if row.percent_points else fmt_signed(row.delta_pct[i], "%"),
            ]
        body.append(cells)
    return format_table(headers, body, [False, False] + [True] * (len(headers) - 2), width)


def render_server_comparison(
    summaries: Mapping[str, Mapping],
    ks: Mapping[str, int | None] | None = None,
    width: int | None = None,
) -> str:
    """The end-of-run table of a multi-server run: one column per server label."""
    if not summaries:
        return "no servers to compare"
    labels = list(summaries)
    ks = ks or {}
    rows = build_rows([summaries[label] for label in labels], [ks.get(label) for label in labels])
    return render_rows(labels, rows, width)


def rows_to_json(labels: Sequence[str], runs: Sequence[RunArtifacts], rows: Sequence[Row]) -> dict:
    return {
        "runs": [
            {
                "label": label,
                "path": str(run.path),
                "num_spec_tokens": run.num_spec_tokens,
                "spec_method": _method_json(run_method(run.summary)),
            }
            for label, run in zip(labels, runs)
        ],
        "metrics": [
            {
                "section": r.section,
                "tag": r.tag,
                "stat": r.stat,
                "label": r.label,
                "unit": r.unit,
                "values": r.values,
                "deltas": r.deltas,
                "delta_pct": None if r.percent_points else r.delta_pct,
                "delta_unit": "pp" if r.percent_points else r.unit,
            }
            for r in rows
        ],
    }
