"""`specmon compare DIR DIR ...`: two or more runs side by side, with deltas against the first.

The loaders, rows and rendering live in specmon/analysis/compare.py; this is the CLI. The
last lines are specmon.decision's advice per load over the compared runs, read as `specmon
tune` reads them (the same data, the same k, basis and numbers). Sweep directories print
each sweep's own decision per load, as `specmon tune SWEEP_DIR` does.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from specmon.analysis.compare import (
    build_rows,
    find_run_dirs,
    load_run,
    method_lines,
    render_rows,
    rows_to_json,
    unique_labels,
)
from specmon.analysis.gate import gate, parse_fail_on
from specmon.analysis.tune import advice, combined_lines, is_sweep_dir, render_sweeps
from specmon.commands import add_runs_argument, add_slo_argument
from specmon.decision.slo import slo_option
from specmon.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_runs_argument(
        parser,
        "dirs",
        "artifact dirs (specmon or AIPerf); a dir of per-server subfolders expands to them",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--fail-on",
        metavar="CLAUSES",
        help="regression gate for CI, e.g. 'al<-3%%,acc<-3%%,tok/s<-5%%,ttft_p90>+10%%': exit 1 "
        "when a metric moves past its threshold from the first DIR AND the bootstrap interval "
        "of the change excludes zero (docs/metrics.md, the regression gate)",
    )
    add_slo_argument(
        parser,
        "the advice per load: the best k predicted to meet this latency objective "
        "(as specmon tune --slo)",
    )


def main(args: argparse.Namespace) -> int:
    slo = slo_option(args.slo)
    thresholds = parse_fail_on(args.fail_on) if args.fail_on else []
    sweeps = [Path(d) for d in args.dirs if is_sweep_dir(d)]
    if sweeps:  # a sweep's answer is its own decision per load (decision/cells.py), as tune's
        if len(sweeps) != len(args.dirs):
            raise UserError("compare sweeps with sweeps: give only sweep directories")
        if not thresholds:
            print(render_sweeps(sweeps, slo, args.json))
            return 0
        sweep_gate = gate(sweeps, thresholds, sweeps=True)
        if args.json:  # one JSON object: the gate's (the decisions are `specmon tune --json`'s)
            print(json.dumps(sweep_gate.to_json(), indent=2))
        else:
            print(render_sweeps(sweeps, slo, False))
            print("\n".join(["", *sweep_gate.lines()]))
        return sweep_gate.exit_status
    paths = [p for d in args.dirs for p in find_run_dirs(Path(d))]
    if len(paths) < 2:
        raise UserError("compare needs at least two runs (give two or more artifact dirs)")
    labels = unique_labels(paths)
    runs = [load_run(p, label) for p, label in zip(paths, labels)]
    rows = build_rows([r.summary for r in runs], [r.num_spec_tokens for r in runs])
    per_load = advice(paths, labels, slo)
    report = gate(paths, thresholds, sweeps=False) if thresholds else None
    if args.json:
        doc = rows_to_json(labels, runs, rows)
        doc["recommendations"] = [c.to_dict() for c in per_load.values()]
        if report is not None:
            doc["gate"] = report.to_json()
        print(json.dumps(doc, indent=2))
    else:
        print(f"baseline: {labels[0]} ({runs[0].path}); Δ = run − baseline")
        for line in method_lines(labels, runs):
            print(line)
        print(render_rows(labels, rows))
        if per_load:
            print()
            print("\n".join(combined_lines(per_load, len(paths))))
        if report is not None:
            print("\n".join(["", *report.lines()]))
    return report.exit_status if report is not None else 0
