"""`specmon run` (the default command): drive a server, monitor acceptance, write exports.

Headless: a progress line every few seconds (reads well when piped), then the console
tables and the exports. Ctrl-C and SIGTERM stop the load and still write complete exports.
Without --headless the Textual monitor runs on the main thread over the same runner/session.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from specmon.config import RunConfig, add_run_arguments, build_config, save_config
from specmon.errors import UserError
from specmon.formatting import server_down_text
from specmon.sinks.prometheus import close_exporters

PROGRESS_EVERY_S = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)


def main(args: argparse.Namespace) -> int:
    config = build_config(args)
    return execute(config, save_config_path=getattr(args, "save_config", None))


def execute(config: RunConfig, *, save_config_path: str | None = None, out: Any = None) -> int:
    """Preflight, build one session + runner per server, run headless or with the TUI."""
    from specmon.sources.load.multi import MultiRun
    from specmon.sources.load.runner import preflight

    out = out or sys.stdout
    check_theme_early(config)
    if config.dataset:  # a bad file fails here: no server contacted, no artifact dir made
        from specmon.sources.datasets import prepare_run

        prepare_run(config)
    config.model = preflight(config)
    if config.artifact_dir is None:
        config.artifact_dir = config.default_artifact_dir(config.model)
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
    session = RunSession(config.artifact_dir, config.export_level, input_config)
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
    and the first server's session."""

    def on_sigterm(*_: Any) -> None:
        multi.stop()
        # asyncio.run (under App.run) turns SIGINT into a clean cancel of the app's main task
        os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    multi.start()
    try:
        monitor(config, multi, multi.primary.session)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        multi.stop()
        multi.join()
        multi.finish()
    print(f"exports written to {config.artifact_dir}", file=out)
    _print_results(multi, out)  # the headless run's console tables, once the screen is gone
    return _exit_status(multi, out)


# headless ---------------------------------------------------------------------------


def run_headless(config: RunConfig, multi: Any, out: Any) -> int:
    print(describe_run(config), file=out, flush=True)
    printer = HeadlessProgress(multi)
    previous = signal.signal(signal.SIGTERM, lambda *_: multi.stop())
    try:
        multi.start()
        _wait_printing(multi, out, printer)
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(printer.line(), file=out, flush=True)
    multi.finish()
    _print_results(multi, out)
    print(f"exports written to {config.artifact_dir}", file=out, flush=True)
    return _exit_status(multi, out)


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
    """Join the runner, printing progress; Ctrl-C stops the load and keeps waiting."""
    lag_warned = False
    next_print = time.monotonic() + PROGRESS_EVERY_S
    while True:
        try:
            if runner.join(0.2):
                return
            if time.monotonic() >= next_print:
                next_print += PROGRESS_EVERY_S
                print(printer.line(), file=out, flush=True)
            lag_warned = _warn_lag(runner.progress(), lag_warned, out)
        except KeyboardInterrupt:
            print("specmon: stopping (Ctrl-C): cancelling in-flight requests", file=out, flush=True)
            runner.stop()


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
        f"accept-len {al_text}  loop-lag {progress.loop_lag_ms:.1f} ms"
        + (f"  {down}" if down else "")
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
            f"specmon: warning: event-loop lag {progress.loop_lag_ms:.0f} ms: the client is "
            f"saturated and latencies include its own delay (try --workers 2)",
            file=out,
            flush=True,
        )
        return True
    return already


def _print_results(multi: Any, out: Any) -> None:
    """Per server: console tables and the server's own view; then the comparison and segments."""
    from specmon.analysis.segments import render_segment_table
    from specmon.server.server_view import server_metrics_lines

    several = len(multi.runs) > 1
    for run in multi.runs:
        if several:
            print(f"\n=== server {run.label} ({run.url}) ===", file=out)
        _print_tables(run.session, out)
        if run.server_metrics is not None:
            for line in server_metrics_lines(run.counter_view, run.server_metrics):
                print(line, file=out)
    if several:
        from specmon.analysis.compare import render_server_comparison

        summaries = {r.label: r.session.accumulator.summary() for r in multi.runs}
        ks = {r.label: r.session.accumulator.num_spec_tokens for r in multi.runs}
        print("\nServers side by side", file=out)
        print(render_server_comparison(summaries, ks), file=out)
    rows = multi.segment_rows_final
    if len({r["segment"] for r in rows}) > 1 or multi.config.segments:
        print("\n" + render_segment_table(rows), file=out)
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
