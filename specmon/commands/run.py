"""`specmon run` (the default command): drive a server, monitor acceptance, write exports.

Headless: a progress line every few seconds (reads well when piped), then the console
tables and the exports. Ctrl-C and SIGTERM stop the load and still write complete exports.
Without --headless the Textual monitor runs on the main thread over the same runner/session.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from specmon import stops
from specmon.config import RunConfig, add_run_arguments, build_config, save_config
from specmon.errors import ServerUnreachable, UserError
from specmon.formatting import saturation_text, server_down_text
from specmon.sinks.prometheus import close_exporters
from specmon.sources.load.loop_health import BUSY_WARN

PROGRESS_EVERY_S = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)


def main(args: argparse.Namespace) -> int:
    config = build_config(args)
    return execute(config, save_config_path=getattr(args, "save_config", None))


def execute(config: RunConfig, *, save_config_path: str | None = None, out: Any = None) -> int:
    """Check every input, preflight, then one session + runner per server, headless or with
    the TUI. Nothing touches the artifact dir before the inputs and the servers passed."""
    from specmon.sources.load.multi import MultiRun

    out = out or sys.stdout
    try:
        stops.stage("setup", interruptible=True)  # a signal from here on stops at once
        check_inputs(config)
    except stops.Stopped as stop:
        return _empty_run(config, stop.signum, out)
    stops.stage("setup")  # building the sessions: a signal now is seen before the load
    config.artifact_dir = choose_artifact_dir(config, out)
    if config.random_seed is None:  # record the seed actually used, so a run can be repeated
        config.random_seed = int(time.time_ns() % 2**31)
    if save_config_path:
        save_config(config, save_config_path)
    # Every request allocates many short-lived objects, and the results it leaves are kept;
    # at the default gen-0 threshold (700) the collector runs thousands of times a second
    # under load. Larger thresholds cut specmon's CPU per request by about 10% (measured with
    # benchmarks/bench_load.py), for a little garbage that lives longer.
    gc.set_threshold(10_000, 50, 1_000)
    try:
        multi = MultiRun(config, make_session, make_runner)
        if not config.headless:
            if not sys.stdout.isatty():
                print("specmon: stdout is not a terminal: running headless", file=out)
            elif (monitor := _load_monitor(out)) is not None:
                return _run_with_monitor(monitor, config, multi, out)
        return run_headless(config, multi, out)
    finally:
        close_exporters()


def check_inputs(config: RunConfig) -> None:
    """Every input, before anything is written: theme, prompt file or dataset, the servers
    and the model (preflight). A failure is a UserError; the artifact dir is untouched."""
    from specmon.sources.load.runner import preflight

    check_theme_early(config)
    if config.dataset:
        from specmon.sources.datasets import prepare_run

        prepare_run(config)
    elif config.effective_prompt_source == "file" and config.input_file:
        from specmon.sources.load.datasets import load_jsonl_prompts

        load_jsonl_prompts(config.input_file)
    config.model = preflight(config)


def choose_artifact_dir(config: RunConfig, out: Any) -> str:
    """The dir this run writes to: --artifact-dir (or the default), unless it holds an earlier
    run, which is kept: then DIR-2, DIR-3, ... (--overwrite replaces it). Says which."""
    from specmon.session import holds_run, remove_run

    wanted = Path(config.artifact_dir or config.default_artifact_dir(config.model or "unknown"))
    if config.overwrite or not holds_run(wanted):
        if config.overwrite and holds_run(wanted):
            print(f"specmon: replacing the earlier run in {wanted} (--overwrite)", file=out)
            remove_run(wanted)
        return str(wanted)
    n = 2
    while holds_run(candidate := wanted.with_name(f"{wanted.name}-{n}")):
        n += 1
    print(
        f"specmon: {wanted} holds an earlier run, kept; writing to {candidate} "
        f"(--overwrite replaces it)",
        file=out,
        flush=True,
    )
    return str(candidate)


def _empty_run(config: RunConfig, signum: int, out: Any) -> int:
    """A stop before the load: an empty, complete run (was_cancelled) in the artifact dir."""
    stops.stage("export")
    print(f"specmon: stopped ({stops.name(signum)}) before the first request", file=out)
    config.artifact_dir = choose_artifact_dir(config, out)
    session = make_session(config)
    session.finish(was_cancelled=True)
    print(f"exports written to {config.artifact_dir}", file=out, flush=True)
    return 128 + signum


def check_theme_early(config: RunConfig) -> None:
    """A misspelt --theme fails before any server is contacted, not after the load started."""
    if config.headless or not config.theme:
        return
    try:
        from specmon.tui.themes import check_theme
    except ImportError:  # no Textual: the run goes headless and ignores the theme
        return
    check_theme(config.theme)


def make_session(config: RunConfig) -> Any:
    from specmon.session import RunSession
    from specmon.sinks import prometheus

    input_config = config.model_dump(exclude={"api_key"})
    engine = None if config.engine == "auto" else config.engine  # --engine restricts detection
    session = RunSession(config.artifact_dir, config.export_level, input_config, engine=engine)
    prometheus.attach(session, config.prometheus_port, config.prometheus_host)
    return session


def make_runner(config: RunConfig, session: Any) -> Any:
    if config.workers > 1:
        from specmon.sources.load.workers import WorkerPool

        return WorkerPool(config, session)
    from specmon.sources.load.runner import LoadRunner

    return LoadRunner(config, session)


def _load_monitor(out: Any) -> Callable | None:
    try:
        from specmon.tui.app import run_monitor
    except ImportError as exc:
        print(f"specmon: the live monitor is unavailable ({exc}); running headless", file=out)
        return None
    return run_monitor


def _run_with_monitor(monitor: Callable, config: RunConfig, multi: Any, out: Any) -> int:
    """The TUI gets the MultiRun as its runner (same interface; `.servers` for side by side)
    and the first server's session. q, Ctrl-C (a key in the TUI), SIGTERM, SIGHUP and SIGINT
    quit the screen (the app registers with specmon.stops); the load drains, then exports."""
    stops.stage("load")
    started = stops.requested() is None
    if started:
        multi.start()
    try:
        if started:
            monitor(config, multi, multi.primary.session)
    finally:
        multi.stop()
        if started:
            _drain(multi, out)
        _write_exports(multi, config, out)
    print(f"exports written to {config.artifact_dir}", file=out, flush=True)
    _print_results(multi, out)  # the headless run's console tables, once the screen is gone
    return stops.exit_status(_exit_status(multi, out))


def _drain(multi: Any, out: Any) -> None:
    """Wait for the load to end after a stop: in-flight requests get --drain-timeout."""
    in_flight = multi.progress().in_flight
    if in_flight and not multi.finished:
        print(
            f"specmon: waiting up to {multi.config.drain_timeout:g} s for {in_flight} "
            f"in-flight request(s)",
            file=out,
            flush=True,
        )
    while not multi.join(0.2):
        pass


def _write_exports(multi: Any, config: RunConfig, out: Any) -> None:
    """The exports, never interrupted by a signal (specmon/stops.py, stage "export")."""
    stops.stage("export")
    print(f"specmon: writing exports to {config.artifact_dir}", file=out, flush=True)
    multi.finish()


# headless ---------------------------------------------------------------------------


def run_headless(config: RunConfig, multi: Any, out: Any) -> int:
    print(describe_run(config), file=out, flush=True)
    printer = HeadlessProgress(multi)
    stops.stage("load")
    if stops.requested() is None:  # a signal while the sessions were built: nothing to run
        multi.start()
        _wait_printing(multi, out, printer)
    print(printer.line(), file=out, flush=True)
    _write_exports(multi, config, out)
    _print_results(multi, out)
    print(f"exports written to {config.artifact_dir}", file=out, flush=True)
    if stops.failure() is not None:  # disk full: the files hold what was written
        print(f"specmon: error: {stops.failure()}", file=sys.stderr, flush=True)
    return stops.exit_status(_exit_status(multi, out))


class HeadlessProgress:
    """The progress line over a MultiRun: the load's progress, and each server's running
    acceptance length from an AcceptanceTally sink registered on its session (before the
    load starts)."""

    def __init__(self, multi: Any) -> None:
        from specmon.sinks.progress import AcceptanceTally

        self.multi = multi
        self.tallies: dict[str, AcceptanceTally] = {}
        for run in multi.runs:
            tally = self.tallies[run.label] = AcceptanceTally()
            run.session.add_sink(tally)

    def line(self) -> str:
        """With several servers, each one's running acceptance length."""
        progress = self.multi.progress()
        rates = [_request_throughput(run.session) for run in self.multi.runs]
        known = [r for r in rates if r is not None]
        rate = sum(known) if known else None  # several servers: their throughputs add up
        if len(self.tallies) == 1:
            (tally,) = self.tallies.values()
            return format_progress(progress, tally.mean(), rate)
        line = format_progress(progress, None, rate)
        per_server = []
        for label, tally in self.tallies.items():
            al = tally.mean()
            per_server.append(f"{label}={al:.2f}" if al is not None else f"{label}=n/a")
        return line.replace("accept-len n/a", "accept-len " + " ".join(per_server))


def _wait_printing(runner: Any, out: Any, printer: HeadlessProgress) -> None:
    """Join the runner, printing progress; a stop signal (specmon.stops flags it) stops
    sending and lets the in-flight requests drain."""
    lag_warned = stopping = False
    next_print = time.monotonic() + PROGRESS_EVERY_S
    while not runner.join(0.2):
        why = _stop_reason()
        if not stopping and why is not None:
            stopping = True
            print(
                f"specmon: stopping ({why}): no new requests; in-flight ones "
                f"may finish for up to {runner.config.drain_timeout:g} s",
                file=out,
                flush=True,
            )
            runner.stop()
        if time.monotonic() >= next_print:
            next_print += PROGRESS_EVERY_S
            print(printer.line(), file=out, flush=True)
        lag_warned = _warn_lag(runner.progress(), lag_warned, out)
    final = runner.progress()
    if final.loop_busy >= BUSY_WARN:  # the last second (or a run shorter than the sustained
        final = replace(final, lag_warning=True)  # window, all of it) never let the loop idle
    _warn_lag(final, lag_warned, out)


def _stop_reason() -> str | None:
    """Why the run must stop now: a stop signal, or the first failed write (stops.fail)."""
    signum = stops.requested()
    if signum is not None:
        return stops.name(signum)
    return stops.failure()


def describe_run(config: RunConfig) -> str:
    targets = ", ".join(base for _, base in config.targets())
    if len(config.url) > 1:
        mode = "split" if config.split else "mirrored" if config.mirror else "each the full load"
        targets = f"{len(config.url)} servers ({mode}): " + ", ".join(
            f"{label}={base}" for label, base in config.targets()
        )
    if config.segments:
        each = (
            f"{config.segment_requests} requests"
            if config.segment_requests
            else f"{config.segment_duration:g} s"
        )
        bound = f"segments {config.segments}, {each} each"
    elif config.request_count:
        bound = f"{config.request_count} requests"
    elif config.benchmark_duration:
        bound = f"{config.benchmark_duration:g} s"
    else:
        bound = "until stopped (Ctrl-C)"
    if config.request_rate is not None:
        load = f"request-rate {config.request_rate:g}/s {config.request_rate_mode}"
        load += f", concurrency cap {config.concurrency}" if config.concurrency else ""
    else:
        load = f"concurrency {config.effective_concurrency}"
    stream = "streaming" if config.streaming else "non-streaming"
    warm = f", {config.warmup_request_count} warmup" if config.warmup_request_count else ""
    if config.dataset:
        warm += f", {config.dataset} prompts from {config.input_file}"
    return (
        f"specmon: {targets} model {config.model}, {config.endpoint_type} {stream}, "
        f"{load}, {bound}{warm}"
    )


def progress_line(progress: Any, session: Any) -> str:
    """The progress line with the running acceptance length from a session's snapshot."""
    return format_progress(
        progress, _running_acceptance_length(session), _request_throughput(session)
    )


def format_progress(progress: Any, al: float | None, rate: float | None) -> str:
    """One line: elapsed, done/total, errors, req/s (AIPerf's request_throughput, the figure
    the TUI shows), running acceptance length, lag."""
    total = f"/{progress.total}" if progress.total else ""
    rate_text = "n/a" if rate is None else f"{rate:.2f}"
    al_text = f"{al:.2f}" if al is not None else "n/a"
    phase = "" if progress.phase in ("profiling", "done", "stopping") else f" [{progress.phase}]"
    down = server_down_text(getattr(progress, "down_since", None))
    return (
        f"[{progress.elapsed_s:7.1f}s]{phase} done {progress.completed}{total}  "
        f"errors {progress.errors}  {rate_text} req/s  in-flight {progress.in_flight}  "
        f"accept-len {al_text}  loop-lag {progress.loop_lag_ms:.1f} ms "
        f"busy {progress.loop_busy * 100:.0f}%" + (f"  {down}" if down else "")
    )


def _request_throughput(session: Any) -> float | None:
    try:
        value = (session.accumulator.snapshot().std_stats.get("request_throughput") or {}).get(
            "avg"
        )
    except Exception:
        return None
    return float(value) if value is not None else None


def _running_acceptance_length(session: Any) -> float | None:
    try:
        stats = session.accumulator.snapshot().spec_stats
    except Exception:
        return None
    value = (stats.get("spec_decode_acceptance_length") or {}).get("avg")
    return float(value) if value is not None else None


def _warn_lag(progress: Any, already: bool, out: Any) -> bool:
    if progress.lag_warning and not already:
        print(
            f"specmon: warning: {saturation_text(progress)}: latencies include the "
            f"client's own delay (try --workers 2)",
            file=out,
            flush=True,
        )
        return True
    return already


def _print_results(multi: Any, out: Any) -> None:
    """Per server: console tables and the server's own view; then the comparison and segments."""
    from specmon.analysis.segments import advice_lines, render_segment_table
    from specmon.server.server_view import server_metrics_lines
    from specmon.sinks.server_counters import NOT_POLLED

    several = len(multi.runs) > 1
    for run in multi.runs:
        if several:
            print(f"\n=== server {run.label} ({run.url}) ===", file=out)
        _print_tables(run.session, out)
        if run.server_metrics is not None:
            for line in server_metrics_lines(run.counter_view, run.server_metrics):
                print(line, file=out)
        elif run.metrics_unavailable not in (None, NOT_POLLED):
            print(f"server metrics unavailable: {run.metrics_unavailable}", file=out)
    if several:
        from specmon.analysis.compare import render_server_comparison

        summaries = {r.label: r.session.accumulator.summary() for r in multi.runs}
        ks = {r.label: r.session.accumulator.num_spec_tokens for r in multi.runs}
        print("\nServers side by side", file=out)
        print(render_server_comparison(summaries, ks), file=out)
    rows = multi.segment_rows_final
    if len({r["segment"] for r in rows}) > 1 or multi.config.segments:
        print("\n" + render_segment_table(rows), file=out)
    # the answer of specmon.decision, as the monitor shows it, per segment with its basis
    print("", file=out)
    for line in advice_lines(rows):
        print(line, file=out)
    out.flush()


def _print_tables(session: Any, out: Any) -> None:
    from specmon.export.console import print_console

    acc = session.accumulator
    hist = acc.pooled_histogram_sorted() if acc.spec_request_count else None
    print_console(acc.summary(), hist, error_summary=acc.snapshot().error_summary, file=out)


def _exit_status(runner: Any, out: Any) -> int:
    error = getattr(runner, "error", None)
    if error is not None and not isinstance(error, KeyboardInterrupt):
        if isinstance(error, UserError):
            raise error
        if isinstance(error, ServerUnreachable):  # --max-outage: the exports are complete
            print(f"specmon: {error}", file=sys.stderr, flush=True)
            return 1
        print(f"specmon: error: the load loop failed: {type(error).__name__}: {error}", file=out)
        return 1
    return _all_failed_status(runner, out)


def _all_failed_status(multi: Any, out: Any) -> int:
    """1 when requests were made and none succeeded (README, exit status), else 0."""
    accs = [run.session.accumulator for run in getattr(multi, "runs", [])]
    valid = sum(acc.request_count for acc in accs)
    errors = sum(acc.error_count for acc in accs)
    if valid == 0 and errors > 0:
        print(f"specmon: error: every request failed ({errors} errors)", file=out)
        return 1
    return 0
