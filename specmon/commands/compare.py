"""`specmon compare DIR DIR ...`: two or more runs side by side, with deltas against the first.

The loaders, rows and rendering live in specmon/analysis/compare.py; this is the CLI.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from specmon.analysis.compare import (
    build_rows,
    find_run_dirs,
    load_run,
    render_rows,
    rows_to_json,
    unique_labels,
)
from specmon.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dirs",
        nargs="+",
        metavar="DIR",
        help="artifact dirs (specmon or AIPerf); a dir of per-server subfolders expands to them",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def main(args: argparse.Namespace) -> int:
    paths = [p for d in args.dirs for p in find_run_dirs(Path(d))]
    if len(paths) < 2:
        raise UserError("compare needs at least two runs (give two or more artifact dirs)")
    labels = unique_labels(paths)
    runs = [load_run(p, label) for p, label in zip(paths, labels)]
    rows = build_rows([r.summary for r in runs], [r.num_spec_tokens for r in runs])
    if args.json:
        print(json.dumps(rows_to_json(labels, runs, rows), indent=2))
    else:
        print(f"baseline: {labels[0]} ({runs[0].path}); Δ = run − baseline")
        print(render_rows(labels, rows))
    return 0
