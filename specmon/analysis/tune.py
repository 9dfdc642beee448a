"""The readers and the analysis behind `specmon tune` (and the advice lines of `specmon
compare`): one run's histogram, k, step time, load and segments from its exports (specmon's
or AIPerf's) or a server's /metrics, the draft cost, the estimate's text, and a sweep
directory's decisions.

The recommendation is specmon.decision's, the same the monitor gives on the same data: per
load (the run's client concurrency, from specmon's `input_config.concurrency` or AIPerf's
`input_config.loadgen.concurrency`), over the run's load segments when its summary has them
(one measurement per segment, with its request and error counts as its health), each line
naming the load it answers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specmon import decision
from specmon.analysis.compare import (
    HISTOGRAM_KEY,
    PER_CATEGORY_KEY,
    RECORDS_FILE,
    SUMMARY_FILE,
    RecordScan,
    counters_k,
    find_run_dirs,
    no_speculation,
    read_summary,
    scan_records,
    single_k,
    unique_labels,
)
from specmon.analysis.segments import measurement_of_row
from specmon.constants import DEFAULT_DRAFT_COST
from specmon.decision import acceptance as tuning
from specmon.decision.cells import Decision, decide, decision_lines, trust_lines, trust_of
from specmon.decision.slo import Slo, percentiles_of_summary, slo_option
from specmon.decision.sweep_types import SWEEP_JSON, Cell
from specmon.errors import UserError
from specmon.formatting import fmt_number, format_table
from specmon.server.scrape import CounterSample, counter_delta, fetch_counters, metrics_url


@dataclass
class TuneInput:
    label: str
    source: str  # the file (or /metrics URL) the histogram came from
    histogram: dict[int, int]
    k: int
    step_time_ms: float | None  # ITL avg x token-weighted AL, when the summary has both
    notes: list[str] = field(default_factory=list)
    concurrency: int | None = None  # the run's client concurrency, when its config says
    segments: list[decision.Measurement] = field(default_factory=list)  # the summary's rows
    requests: int | None = None
    errors: int = 0
    latency: dict[str, dict[str, float]] = field(default_factory=dict)  # TTFT/TPOT percentiles
    blocks: tuple[dict[int, int], ...] = ()  # the run's request blocks, for P(best)
    throughput: float | None = None  # output tokens/s (the measured answer's figure)
    rate_blocks: tuple[tuple[float, float], ...] = ()  # its noise (decision/measured.py)

    @property
    def baseline(self) -> bool:
        """A run at k=0 (no speculation): nothing to estimate, the arm others are read
        against."""
        return self.k == 0

    def measurements(self) -> list[decision.Measurement]:
        """One per load segment when the run has them, else the whole run."""
        if self.segments:
            return list(self.segments)
        return [
            decision.Measurement(
                k=self.k,
                concurrency=self.concurrency,
                histogram=self.histogram,
                step_ms=self.step_time_ms,
                label=self.label,
                requests=self.requests,
                errors=self.errors,
                latency=self.latency,
                blocks=self.blocks,
                throughput=self.throughput,
                rate_blocks=self.rate_blocks,
            )
        ]


def is_sweep_dir(text: str) -> bool:
    return not is_url(text) and (Path(text) / SWEEP_JSON).is_file()


def sweep_decisions(path: Path, slo: Slo | None) -> tuple[list[Decision], dict]:
    """A sweep's decisions from its sweep.json cells, by the sweep's own rule
    (decision/cells.py), under `slo` or else the objective the sweep was run with; and
    their trust verdict (`trust_of`: the one the sweep's artifacts carry)."""
    try:
        doc = json.loads((path / SWEEP_JSON).read_text())
        cells = [Cell.from_dict(c) for c in doc.get("cells") or []]
        stored = (doc.get("settings") or {}).get("slo")
        complete = doc.get("complete", True) is not False
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise UserError(f"{path / SWEEP_JSON}: cannot read its cells ({exc})") from None
    decisions = decide(cells, slo if slo is not None else slo_option(stored))
    if not decisions:
        raise UserError(f"{path / SWEEP_JSON}: no measured cell")
    return decisions, trust_of(decisions, complete)


def render_sweeps(paths: list[Path], slo: Slo | None, as_json: bool) -> str:
    """Each sweep's decisions per load and its trust verdict with the cells excluded (text,
    or JSON), as `tune` and `compare` print them."""
    made = [(p, *sweep_decisions(p, slo)) for p in paths]
    if as_json:
        out = [
            {"sweep": str(p), "decisions": [d.to_dict() for d in ds], **trust}
            for p, ds, trust in made
        ]
        return json.dumps(out[0] if len(out) == 1 else out, indent=2)
    lines = []
    for p, ds, trust in made:
        lines.append(f"sweep {p}: the sweep's decision per load")
        lines += decision_lines(ds) + trust_lines(trust)
    return "\n".join(lines)


def load_name(concurrency: int | None) -> str:
    return "load unknown" if concurrency is None else f"concurrency {concurrency}"


def combined_lines(per_load: dict[int | None, decision.KChoice], runs: int) -> list[str]:
    """Per load: 'recommendation for this run at concurrency 4: measured best k=3 ...' and,
    indented under it, the model's proposal ('next: measure k=5, ...') when it has one."""
    over = f"over {runs} runs" if runs > 1 else "for this run"
    lines = []
    for c, choice in per_load.items():
        where = f"recommendation {over} at {load_name(c)}:"
        first, *rest = choice.lines()
        lines.append(f"{where} {first}")
        lines += [f"{' ' * len(where)} {line}" for line in rest]
    return lines


def estimate_report(
    est: tuning.TuningEstimate,
    choice: decision.KChoice,
    per_load: dict[int | None, decision.KChoice],
) -> dict:
    """The run's estimate, its plain recommended_k replaced by the decision at the most
    measured load (the histogram's own pick stays as histogram_best_k), and the decision
    at every load under `recommendations`."""
    out = tuning.estimate_to_dict(est)
    out["histogram_best_k"] = out["recommended_k"]
    out["recommended_k"] = choice.k
    out["recommendation"] = choice.to_dict()
    out["recommendations"] = [c.to_dict() for c in per_load.values()]
    return out


def is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def gather_inputs(raw: list[str], flag_k: int | None) -> list[TuneInput]:
    """One TuneInput per run, in the order given (a URL reads the server's counters)."""
    entries: list[Path | str] = []
    for text in raw:
        entries += [text] if is_url(text) else expand_paths([text])
    paths = [e for e in entries if isinstance(e, Path)]
    # a file is labelled by its run dir: "k4", not "profile_export.jsonl"
    labels = dict(zip(paths, unique_labels([p if p.is_dir() else p.parent for p in paths])))
    return [
        load_server(e, flag_k) if isinstance(e, str) else load_input(e, flag_k, labels[e])
        for e in entries
    ]


def load_server(url: str, flag_k: int | None) -> TuneInput:
    """The server-wide histogram derived from /metrics counters since the server started."""
    sample = fetch_counters(url)
    if not sample.present:
        raise UserError(
            f"{url}: no vllm:spec_decode_* counters on /metrics (speculative "
            "decoding off, or --disable-log-stats)"
        )
    delta = counter_delta(CounterSample({}, sample.taken_s), sample)
    if delta.drafts == 0 or not delta.per_pos:
        raise UserError(f"{url}: the server has counted no verify steps yet")
    if flag_k is not None and flag_k != delta.num_spec_tokens:
        raise UserError(
            f"--num-spec-tokens {flag_k} contradicts the server's "
            f"{delta.num_spec_tokens} per-position counters"
        )
    notes = [
        f"server-wide counters since the server started ({delta.label_sets} engine "
        "label set(s), every client and warm-up included)"
    ]
    if not delta.consistent:
        raise UserError(
            f"{url}: per-position counters do not sum to the accepted-token "
            "counter; cannot derive a histogram"
        )
    hist = dict(enumerate(delta.histogram()))
    return TuneInput(url, metrics_url(url), hist, delta.num_spec_tokens, None, notes)


def split_by_category(inp: TuneInput) -> list[TuneInput]:
    """One input per category of the run's summary (docs/metrics.md
    §12), each with that category's pooled histogram and step time; same k."""
    source = Path(inp.source)
    summary_path = source if source.name == SUMMARY_FILE else source.with_name(SUMMARY_FILE)
    if is_url(inp.source) or not summary_path.is_file():
        raise UserError(f"{inp.label}: --by-category needs the run's {SUMMARY_FILE}")
    per_category = read_summary(summary_path).get(PER_CATEGORY_KEY)
    if not isinstance(per_category, dict) or not per_category:
        raise UserError(
            f"{summary_path}: no {PER_CATEGORY_KEY} block (no request carried a category; "
            "run with --dataset)"
        )
    out = []
    for name, block in per_category.items():
        if not isinstance(block, dict) or not block.get(HISTOGRAM_KEY):
            continue  # a category without spec-decode records has nothing to tune
        hist = _histogram_from_summary(block, summary_path)
        label = f"{inp.label} · {name}"
        out.append(TuneInput(label, str(summary_path), hist, inp.k, step_time_ms(block)))
    if not out:
        raise UserError(f"{summary_path}: no category has spec-decode records")
    return out


def expand_paths(raw: list[str]) -> list[Path]:
    out: list[Path] = []
    for text in raw:
        path = Path(text)
        if path.is_dir():
            out += find_run_dirs(path) if not (path / RECORDS_FILE).is_file() else [path]
        elif path.exists():
            out.append(path)
        else:
            raise UserError(f"{path}: no such file or directory")
    return out


def load_input(path: Path, flag_k: int | None, label: str | None = None) -> TuneInput:
    """Histogram, k and step time for one run (a k=0 baseline: k 0 and no histogram; a run
    without per-request stats: the server-wide histogram its /metrics counters gave);
    UserError when there is nothing to tune."""
    if path.is_dir():
        summary_path, records_path = path / SUMMARY_FILE, path / RECORDS_FILE
        use_records = not summary_path.is_file()
    else:
        summary_path, records_path = path.with_name(SUMMARY_FILE), path.with_name(RECORDS_FILE)
        use_records = path.suffix == ".jsonl"
        if use_records:
            records_path = path
        else:
            summary_path = path
    if use_records and not records_path.is_file():
        raise UserError(f"{path}: no {SUMMARY_FILE} or {RECORDS_FILE} here")
    summary = read_summary(summary_path) if summary_path.is_file() else {}
    scan = scan_records(records_path) if records_path.is_file() else None  # read once
    notes: list[str] = []
    if scan is not None and scan.implausible:
        notes.append(
            f"{scan.implausible} record(s) with an implausible num_spec_tokens left out "
            f"({scan.first_implausible})"
        )
    rec_k = single_k(scan, records_path) if scan is not None else None
    kind = _kind(summary, scan, use_records)
    histogram: dict[int, int]
    if kind == "baseline":
        histogram, source, k = {}, summary_path, _baseline_k(flag_k, summary_path, notes)
    else:
        if kind == "server-wide":
            histogram, source = _histogram_from_counters(summary, summary_path, notes)
            rec_k = counters_k(summary)
        elif use_records and scan is not None:  # use_records implies the file exists
            histogram, source = _histogram_from_records(scan, records_path, notes), records_path
        else:
            histogram, source = _histogram_from_summary(summary, summary_path), summary_path
        k = _choose_k(histogram, rec_k, flag_k, notes, source)
    name = label or str(path)
    return TuneInput(
        name,
        str(source),
        histogram,
        k,
        step_time_ms(summary),
        notes,
        _concurrency(summary),
        _segment_measurements(summary, name, k),
        _count(summary, "request_count"),
        _count(summary, "error_request_count") or 0,
        percentiles_of_summary(summary),
        _run_blocks(summary),
        _throughput(summary),
        _run_rate_blocks(summary),
    )


def _kind(summary: dict, scan: RecordScan | None, use_records: bool) -> str:
    """What the run holds: "requests" (per-request spec-decode stats), "server-wide" (none,
    but the server's /metrics counters counted verify steps: its histogram stands in) or
    "baseline" (a server at k=0: compare.no_speculation)."""
    if use_records or summary.get(HISTOGRAM_KEY) or (scan is not None and scan.histogram):
        return "requests"
    if counters_k(summary) is not None:
        return "server-wide"
    return "baseline" if no_speculation(summary) else "requests"


def _baseline_k(flag_k: int | None, path: Path, notes: list[str]) -> int:
    if flag_k is not None:
        raise UserError(
            f"--num-spec-tokens {flag_k} contradicts {path}: no request carried a "
            "spec-decode record and the server's /metrics counted no verify step (k=0)"
        )
    notes.append(
        "k=0 (no speculation): no request carried a spec-decode record and the server's "
        "/metrics counted no verify step; the baseline the other runs are read against"
    )
    return 0


def _histogram_from_counters(
    summary: dict, path: Path, notes: list[str]
) -> tuple[dict[int, int], Path]:
    """The histogram derived from the server's /metrics counters over the run (the
    export's server_metrics), for a run whose requests carried no spec-decode stats."""
    raw: Any = (summary.get("server_metrics") or {}).get("histogram")
    try:
        hist = {int(j): int(n) for j, n in raw.items()}
    except (AttributeError, TypeError, ValueError):
        raise UserError(f"{path}: server_metrics.histogram is not a map of counts") from None
    if not any(hist.values()) or any(j < 0 or n < 0 for j, n in hist.items()):
        raise UserError(f"{path}: server_metrics.histogram has no verify steps")
    notes.append(
        "server-wide: no request carried spec-decode stats; the histogram is derived from "
        "the server's /metrics counters over the run (every client on it included)"
    )
    return hist, path


def _throughput(summary: dict) -> float | None:
    value = (summary.get("output_token_throughput") or {}).get("avg")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _run_rate_blocks(summary: dict) -> tuple[tuple[float, float], ...]:
    """The run's (output tokens, request seconds) blocks: its segments', in order."""
    rows = summary.get("segments")
    if not isinstance(rows, list):
        return ()
    try:
        return tuple(
            (float(t), float(s))
            for row in rows
            if isinstance(row, dict)
            for t, s in row.get("rate_blocks") or ()
        )
    except (TypeError, ValueError):
        return ()


def _concurrency(summary: dict) -> int | None:
    """The client concurrency from the export's input config: specmon writes it at
    `input_config.concurrency`, AIPerf under `input_config.loadgen.concurrency`."""
    config = summary.get("input_config") or {}
    loadgen = config.get("loadgen") if isinstance(config, dict) else None
    for value in (
        config.get("concurrency") if isinstance(config, dict) else None,
        loadgen.get("concurrency") if isinstance(loadgen, dict) else None,
    ):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _run_blocks(summary: dict) -> tuple[dict[int, int], ...]:
    """The whole run's request blocks: its segments' (the SegmentSink rows), in order, so a
    one-segment run resamples exactly what the live table did; none when any row has none."""
    rows = summary.get("segments")
    if not isinstance(rows, list) or not rows:
        return ()
    out = []
    for row in rows:
        m = measurement_of_row(row, "") if isinstance(row, dict) else None
        if m is not None and not m.blocks:
            return ()
        out += [] if m is None else [dict(b) for b in m.blocks]
    return tuple(out)


def _count(summary: dict, tag: str) -> int | None:
    value = (summary.get(tag) or {}).get("avg") if isinstance(summary.get(tag), dict) else None
    return int(value) if isinstance(value, (int, float)) else None


def _segment_measurements(summary: dict, label: str, k: int) -> list[decision.Measurement]:
    """The summary's load segments (SegmentSink rows) as measurements, each with its
    measured throughput (a one-segment run's row too: it is the run's measurement, with
    the rate blocks the live table decided on); a row of a run without per-request stats
    takes the run's k (`k`, from the server's counters)."""
    rows = summary.get("segments")
    if not isinstance(rows, list):
        return []
    out = []
    for row in rows:
        m = measurement_of_row(row, label) if isinstance(row, dict) else None
        if m is not None and m.k == 0 and k > 0:
            m = None  # requests without records on a speculating server: not a k=0 arm
        if m is not None:
            out.append(m)
    return out


def _histogram_from_summary(summary: dict, path: Path) -> dict[int, int]:
    raw = summary.get(HISTOGRAM_KEY)
    if not raw:
        raise UserError(
            f"{path}: no {HISTOGRAM_KEY} (no response carried per-request spec-decode stats)"
        )
    try:
        hist = {int(j): int(n) for j, n in raw.items()}
    except (AttributeError, TypeError, ValueError):
        raise UserError(f"{path}: {HISTOGRAM_KEY} is not a map of counts") from None
    if any(j < 0 or n < 0 for j, n in hist.items()):
        raise UserError(f"{path}: {HISTOGRAM_KEY} has negative keys or counts")
    return hist


def _histogram_from_records(scan: RecordScan, path: Path, notes: list[str]) -> dict[int, int]:
    if scan.bad_lines:
        notes.append(f"{scan.bad_lines} unreadable line(s) in {path.name} skipped")
    if scan.warmup_skipped:
        notes.append(f"{scan.warmup_skipped} warmup record(s) left out")
    if not scan.histogram:
        raise UserError(
            f"{path}: no record carries spec_decode_acceptance with verify steps "
            f"({scan.records} records read)"
        )
    return scan.histogram


def _choose_k(
    histogram: dict[int, int], rec_k: int | None, flag_k: int | None, notes: list[str], source: Path
) -> int:
    if rec_k is not None and flag_k is not None and rec_k != flag_k:
        raise UserError(
            f"--num-spec-tokens {flag_k} contradicts the records' num_spec_tokens {rec_k}"
        )
    k = rec_k if rec_k is not None else flag_k
    top = max((j for j, n in histogram.items() if n), default=0)
    if k is None:
        k = top
        notes.append(
            f"k not recorded: assuming k = {k}, the largest accepted count in the "
            "histogram (pass --num-spec-tokens if the server used more)"
        )
    if top > k:
        raise UserError(
            f"{source}: the histogram has steps that accepted {top} drafts, more than k = {k}"
        )
    return k


def step_time_ms(summary: dict) -> float | None:
    """Verify-step time ≈ TPOT x tokens per step = ITL avg x token-weighted AL."""
    itl = (summary.get("inter_token_latency") or {}).get("avg")
    al = (summary.get("spec_decode_token_weighted_acceptance_length") or {}).get("avg")
    if isinstance(itl, (int, float)) and isinstance(al, (int, float)) and itl > 0 and al > 0:
        return float(itl) * float(al)
    return None


def choose_draft_cost(flag: float | None, inputs: list[TuneInput]) -> tuple[float, str]:
    if flag is not None:
        return flag, "--draft-cost"
    points = [(i.k, i.step_time_ms) for i in inputs if i.step_time_ms is not None]
    fitted = tuning.estimate_draft_cost(points)
    if fitted is not None:
        ks = ", ".join(str(k) for k, _ in points)
        return fitted, f"fitted from step times (ITL x AL) of runs at k = {ks}"
    return DEFAULT_DRAFT_COST, "assumed; pass --draft-cost C or give runs at several k"


def render_estimate(inp: TuneInput, est: tuning.TuningEstimate) -> str:
    lines = [
        f"{inp.label}: k = {est.num_spec_tokens}, {est.steps:,} verify steps (from {inp.source})"
    ]
    lines += [f"note: {n}" for n in inp.notes + est.notes]
    lines += ["", _positions_table(est), ""]
    alpha = "-" if est.flat_alpha is None else f"{est.flat_alpha:.3f}"
    lines.append(f"flat-alpha fit A/(A+R) = {alpha}: {_flat_fit_verdict(est)}")
    if est.predictions:
        lines += ["", _predictions_table(est)]
    best = {None: "-", 0: "0 (speculation off)"}.get(est.recommended_k, str(est.recommended_k))
    lines += ["", f"histogram-only best k = {best}", f"caveat: {est.caveat}"]
    return "\n".join(lines)


def render_baseline(inp: TuneInput) -> str:
    """A k=0 run's block: nothing to estimate, its measured throughput the baseline."""
    tput = "-" if inp.throughput is None else f"{inp.throughput:,.1f} output tok/s"
    lines = [f"{inp.label}: k=0 (no speculation), {tput} (from {inp.source})"]
    lines += [f"note: {n}" for n in inp.notes]
    return "\n".join(lines)


def baseline_report(inp: TuneInput) -> dict:
    """A k=0 run in `tune --json`: its k and measured figure (no estimate)."""
    return {
        "label": inp.label,
        "num_spec_tokens": 0,
        "speculation": False,
        "output_token_throughput": inp.throughput,
        "notes": list(inp.notes),
    }


def _flat_fit_verdict(est: tuning.TuningEstimate) -> str:
    if est.flat_alpha is None:
        return "undefined"
    bad = tuning.positions_rejecting_flat_alpha(est.flat_alpha, est.positions)
    if not bad:
        return "inside every a_i interval (a flat acceptance fits)"
    shown = ", ".join(map(str, bad))
    return (
        f"outside the a_i interval at position(s) {shown}: acceptance varies by position, "
        "so prefer E(k') by truncation to the flat model"
    )


def _positions_table(est: tuning.TuningEstimate) -> str:
    rows = []
    for p in est.positions:
        ci = "-" if p.ci95 is None else f"[{p.ci95[0]:.3f}, {p.ci95[1]:.3f}]"
        rows.append(
            [
                str(p.position),
                fmt_number(p.unconditional, 3),
                fmt_number(p.conditional, 3),
                ci,
                f"{p.trials:,}",
            ]
        )
    return format_table(["position", "S_i", "a_i", "a_i 95% CI", "trials"], rows, [True] * 5)


def _predictions_table(est: tuning.TuningEstimate) -> str:
    rows = []
    for p in est.predictions:
        band = "" if p.low is None else f"[{p.low:.3f}, {p.high:.3f}]"
        marks = []
        if p.k == est.num_spec_tokens:
            marks.append("measured k")
        if p.extrapolated:
            marks.append("extrapolated")
        if p.k == est.recommended_k:
            marks.append("best")
        rows.append(
            [
                str(p.k),
                fmt_number(p.acceptance_length, 3),
                band,
                fmt_number(p.flat_alpha_length, 3),
                fmt_number(p.speedup, 3),
                ", ".join(marks),
            ]
        )
    return format_table(
        ["k'", "E(k')", "band", "flat-alpha E", "speedup", "marks"],
        rows,
        [True, True, True, True, True, False],
    )


def advice(
    paths: list[Path], labels: list[str], slo: Slo | None = None
) -> dict[int | None, decision.KChoice]:
    """The decision per load over every run (a k=0 baseline is an arm like any other; a run
    with nothing to read is left out)."""
    measured = []
    for path, label in zip(paths, labels):
        try:
            measured += load_input(path, None, label).measurements()
        except UserError:
            continue
    return decision.advise_per_load(measured, None, slo) if measured else {}
