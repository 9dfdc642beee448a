"""`specmon report --input RAW.jsonl`: a raw capture through the live pipeline, offline.

Every line goes through the same pipeline, accumulator and exporters as a live run, so
`specmon report` on a run's profile_export_raw.jsonl reproduces that run's numbers.
A line that is not JSON or not a capture is reported with its number and skipped.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specmon.capture import read_raw_capture
from specmon.errors import UserError
from specmon.export.console import print_console
from specmon.session import EXPORT_LEVELS, RunSession
from specmon.specdecode.fidelity import fidelity_line

MAX_REPORTED_BAD_LINES = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input",
        "-i",
        required=True,
        metavar="RAW.jsonl",
        help="raw capture file (one request per line; see docs/exports.md)",
    )
    parser.add_argument(
        "--artifact-dir",
        metavar="DIR",
        default=None,
        help="where to write the exports (default: artifacts/report-<input stem>/)",
    )
    parser.add_argument(
        "--export-level",
        choices=EXPORT_LEVELS,
        default="records",
        help="summary: json+csv; records: + profile_export.jsonl (default); "
        "raw: + profile_export_raw.jsonl",
    )


def default_artifact_dir(input_path: Path) -> Path:
    return Path("artifacts") / f"report-{input_path.stem}"


def run_report(
    input_path: Path, artifact_dir: Path, export_level: str = "records", out=None, err=None
) -> RunSession:
    """Process the file, write the exports, print the tables. Returns the session."""
    out = out or sys.stdout
    err = err or sys.stderr
    lines = read_raw_capture(input_path)  # raises UserError when the file is missing
    session = RunSession(
        artifact_dir, export_level, {"command": "report", "input": str(input_path)}, live=False
    )
    good = bad = 0
    for line_no, item in lines:
        if not isinstance(item, str):
            try:
                session.add(item)
                good += 1
                continue
            except Exception as exc:  # a hostile line never stops the report: skip, go on
                item = f"cannot process: {type(exc).__name__}: {str(exc)[:200]}"
        bad += 1
        if bad <= MAX_REPORTED_BAD_LINES:
            print(f"specmon: {input_path}:{line_no}: skipped: {item}", file=err)
    if bad > MAX_REPORTED_BAD_LINES:
        print(f"specmon: ... {bad - MAX_REPORTED_BAD_LINES} more bad lines skipped", file=err)
    if good == 0:
        session.finish()
        raise UserError(f"no valid capture line in {input_path} ({bad} bad lines)")
    paths = session.finish()
    acc = session.accumulator
    print_console(
        acc.summary(),
        acc.pooled_histogram_sorted(),
        error_summary=dict(acc.error_summary),
        file=out,
        fidelity=fidelity_line(acc.fidelity_counts, acc.engine, tuple(acc.verification_notes)),
    )
    print(
        f"{good} captures read, {bad} bad lines skipped; "
        f"{acc.request_count} valid, {acc.error_count} errors, {acc.warmup_count} warmup",
        file=out,
    )
    if acc.spec_reasons:
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(acc.spec_reasons.items()))
        print(
            f"spec-decode: {acc.spec_request_count} records, "
            f"{acc.zero_step_requests} zero-step; no record because {reasons}",
            file=out,
        )
    for name in ("json", "csv", "jsonl", "raw"):
        if name in paths:
            print(f"  {paths[name]}", file=out)
    return session


def main(args: argparse.Namespace) -> int:
    input_path = Path(args.input)
    if not input_path.is_file():
        raise UserError(f"raw capture file not found: {input_path}")
    artifact_dir = (
        Path(args.artifact_dir) if args.artifact_dir else default_artifact_dir(input_path)
    )
    run_report(input_path, artifact_dir, args.export_level)
    return 0
