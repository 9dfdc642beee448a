"""`specmon tune PATH`: per-position acceptance, E(k') and predicted speedup at other k.

PATH is an artifact dir, a profile_export.jsonl or a profile_export_aiperf.json (specmon's
or AIPerf's), or a server URL (its /metrics counters since start, server-wide). k comes
from the records' num_spec_tokens, else --num-spec-tokens, else the histogram's largest
key (said so). Several runs at different k (several PATHs, or a dir of
per-server subfolders) also give the draft cost c from their step times (ITL x AL).

The readers and the analysis live in specmon/analysis/tune.py (compare calls them too);
this is the CLI: the arguments and the printing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specmon import decision
from specmon.analysis.tune import (
    baseline_report,
    choose_draft_cost,
    combined_lines,
    estimate_report,
    gather_inputs,
    is_sweep_dir,
    render_baseline,
    render_estimate,
    render_sweeps,
    split_by_category,
)
from specmon.commands import add_runs_argument, add_slo_argument
from specmon.config import non_negative
from specmon.constants import DEFAULT_DRAFT_COST
from specmon.decision import acceptance as tuning
from specmon.decision.slo import slo_option
from specmon.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_runs_argument(
        parser,
        "paths",
        "artifact dir, profile_export.jsonl, profile_export_aiperf.json or a server URL "
        "(reads /metrics); several runs at different k also give the draft cost",
    )
    parser.add_argument(
        "--draft-cost",
        type=non_negative,
        default=None,
        metavar="C",
        help="draft step time / target step time (default: fitted from runs at "
        f"several k, else {DEFAULT_DRAFT_COST})",
    )
    parser.add_argument(
        "--num-spec-tokens",
        type=int,
        default=None,
        metavar="K",
        help="k the run used, when its records do not say",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (a list of them for several runs)",
    )
    add_slo_argument(
        parser,
        "recommend per load the best k predicted to meet this latency objective "
        "(TTFT seconds, TPOT ms, at percentile p, default 90); says so when none does",
    )
    parser.add_argument(
        "--by-category",
        action="store_true",
        help="one estimate per prompt category (the summary's per_category histograms)",
    )


def main(args: argparse.Namespace) -> int:
    if args.draft_cost is not None and not args.draft_cost >= 0:
        raise UserError(f"--draft-cost {args.draft_cost}: must be a number >= 0")
    if args.num_spec_tokens is not None and args.num_spec_tokens < 1:
        raise UserError(f"--num-spec-tokens {args.num_spec_tokens}: must be >= 1")
    slo = slo_option(args.slo)
    sweeps = [Path(p) for p in args.paths if is_sweep_dir(p)]
    if sweeps:
        if len(sweeps) != len(args.paths):
            raise UserError("a sweep directory is decided on its own: give it alone")
        print(render_sweeps(sweeps, slo, args.json))
        return 0
    inputs = gather_inputs(args.paths, args.num_spec_tokens)
    if args.by_category:
        inputs = [part for inp in inputs for part in split_by_category(inp)]
    cost, cost_note = choose_draft_cost(args.draft_cost, inputs)
    # a k=0 run is the baseline arm: no histogram to estimate from, its throughput measured
    estimates = [None if i.baseline else tuning.analyze(i.histogram, i.k, cost) for i in inputs]
    # the decision over every run's measurements, per load (specmon.decision, as the TUI)
    measured = [m for i in inputs for m in i.measurements()]
    per_load = decision.advise_per_load(measured, args.draft_cost, slo)
    choice = decision.advise(measured, None, args.draft_cost, slo)  # the most measured load
    if args.json:
        reports = [
            baseline_report(i) if e is None else estimate_report(e, choice, per_load)
            for i, e in zip(inputs, estimates)
        ]
        if args.by_category:  # which category each estimate is of
            reports = [{"label": i.label, **r} for i, r in zip(inputs, reports)]
        print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2))
        for inp in inputs:
            for note in inp.notes:
                print(f"specmon tune: note: {inp.label}: {note}", file=sys.stderr)
        return 0
    blocks = [
        render_baseline(inp) if est is None else render_estimate(inp, est)
        for inp, est in zip(inputs, estimates)
    ]
    print(("\n\n").join(blocks))
    if any(i.k > 0 for i in inputs):
        print(f"\ndraft cost c = {cost:.3f} ({cost_note})")
    print()
    for line in combined_lines(per_load, len(inputs)):
        print(line)
    return 0
