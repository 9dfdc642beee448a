"""What a headless run prints: the run's description, a progress line every few seconds
(reads well when piped), the saturation warning, then per server the console tables and
the server's own view, the comparison and the segments table."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TextIO

from specmon import stops
from specmon.analysis.segments import SATURATED_SHARE
from specmon.config import RunConfig
from specmon.formatting import saturation_text, server_down_text
from specmon.interfaces import LoadProgress, RunLifecycle
from specmon.run.multi import MultiRun, ServerRun
from specmon.session import RunSession
from specmon.sinks.progress import AcceptanceTally
from specmon.sources.load.loop_health import BUSY_WARN, SaturationLog

PROGRESS_EVERY_S = 2.0


class HeadlessProgress:
    """The progress line over a MultiRun: the load's progress, and each server's running
    acceptance length from an AcceptanceTally sink registered on its session (before the
    load starts)."""

    def __init__(self, multi: MultiRun) -> None:
        self.multi = multi
        self.tallies: dict[str, AcceptanceTally] = {}
        for run in multi.runs:
            tally = self.tallies[run.label] = AcceptanceTally()
            run.session.add_sink(tally)

    def line(self) -> str:
        """With several servers, each one's running acceptance length."""
        progress = self.multi.progress()
        rates = [run.session.accumulator.request_throughput for run in self.multi.runs]
        known = [r for r in rates if r is not None]
        rate = sum(known) if known else None  # several servers: their throughputs add up
        duration = self.multi.config.benchmark_duration
        if len(self.tallies) == 1:
            (tally,) = self.tallies.values()
            return format_progress(progress, tally.mean(), rate, duration)
        line = format_progress(progress, None, rate, duration)
        per_server = []
        for label, tally in self.tallies.items():
            al = tally.mean()
            per_server.append(f"{label}={al:.2f}" if al is not None else f"{label}=n/a")
        return line.replace("accept-len n/a", "accept-len " + " ".join(per_server))


def wait_printing(
    runner: RunLifecycle, drain_timeout: float, out: TextIO, printer: HeadlessProgress
) -> None:
    """Join the runner, printing progress; a stop signal (specmon.stops flags it) stops
    sending and lets the in-flight requests drain for up to `drain_timeout` seconds."""
    lag_warned = stopping = False
    next_print = time.monotonic() + PROGRESS_EVERY_S
    while not runner.join(0.2):
        why = _stop_reason()
        if not stopping and why is not None:
            stopping = True
            print(
                f"specmon: stopping ({why}): no new requests; in-flight ones "
                f"may finish for up to {drain_timeout:g} s",
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
    """The run's first line: servers, model, endpoint, load and length."""
    targets = ", ".join(base for _, base in config.targets())
    if len(config.url) > 1:
        mode = "split" if config.split else "mirrored" if config.mirror else "each the full load"
        targets = f"{len(config.url)} servers ({mode}): " + ", ".join(
            f"{label}={base}" for label, base in config.targets()
        )
    stream = "streaming" if config.streaming else "non-streaming"
    warm = f", {config.warmup_request_count} warmup" if config.warmup_request_count else ""
    if config.dataset:
        warm += f", {config.dataset} prompts from {config.input_file}"
    return (
        f"specmon: {targets} model {config.model}, {config.endpoint_type} {stream}, "
        f"{_load_text(config)}, {_bound_text(config)}{warm}"
    )


def _bound_text(config: RunConfig) -> str:
    if config.segments:
        each = (
            f"{config.segment_requests} requests"
            if config.segment_requests
            else f"{config.segment_duration:g} s"
        )
        return f"segments {config.segments}, {each} each"
    if config.request_count:
        return f"{config.request_count} requests"
    if config.benchmark_duration:
        return f"{config.benchmark_duration:g} s"
    return "until stopped (Ctrl-C)"


def _load_text(config: RunConfig) -> str:
    if config.request_rate is None:
        return f"concurrency {config.effective_concurrency}"
    load = f"request-rate {config.request_rate:g}/s {config.request_rate_mode}"
    return load + (f", concurrency cap {config.concurrency}" if config.concurrency else "")


def format_progress(
    progress: LoadProgress, al: float | None, rate: float | None, duration_s: float | None = None
) -> str:
    """One line: elapsed, done/total with percent and ETA when the run is bounded (by
    --request-count, or --benchmark-duration given as `duration_s`), errors, req/s (AIPerf's
    request_throughput, the figure the TUI shows), running acceptance length, lag."""
    total = f"/{progress.total}" if progress.total else ""
    total += _eta_text(progress, duration_s)
    rate_text = "n/a" if rate is None else f"{rate:.2f}"
    al_text = f"{al:.2f}" if al is not None else "n/a"
    phase = "" if progress.phase in ("profiling", "done", "stopping") else f" [{progress.phase}]"
    down = server_down_text(progress.down_since)
    return (
        f"[{progress.elapsed_s:7.1f}s]{phase} done {progress.completed}{total}  "
        f"errors {progress.errors}  {rate_text} req/s  in-flight {progress.in_flight}  "
        f"accept-len {al_text}  loop-lag {progress.loop_lag_ms:.1f} ms "
        f"busy {progress.loop_busy * 100:.0f}%" + (f"  {down}" if down else "")
    )


def _eta_text(progress: LoadProgress, duration_s: float | None) -> str:
    """ " (42%, ETA 00:17)" for a bounded run, the TUI header's arithmetic (run_progress)."""
    from specmon.formatting import fmt_duration, run_progress

    if progress.phase in ("warmup", "done") or not (progress.total or duration_s):
        return ""
    prog = run_progress(progress.completed, progress.elapsed_s, progress.total, duration_s)
    if prog.fraction is None:
        return ""
    return f" ({prog.fraction * 100:.0f}%, ETA {fmt_duration(prog.eta_s)})"


def _warn_lag(progress: LoadProgress, already: bool, out: TextIO) -> bool:
    if progress.lag_warning and not already:
        print(
            f"specmon: warning: {saturation_text(progress)}: latencies include the "
            f"client's own delay (try --workers 2)",
            file=out,
            flush=True,
        )
        return True
    return already


def print_results(multi: MultiRun, out: TextIO) -> None:
    """Per server: console tables and the server's own view; then the comparison and segments."""
    from specmon.analysis.segments import advice_lines, render_segment_table
    from specmon.export.console import output_width
    from specmon.server.server_view import server_metrics_lines
    from specmon.sinks.server_counters import NOT_POLLED

    several = len(multi.runs) > 1
    for run in multi.runs:
        if several:
            print(f"\n=== server {run.label} ({run.url}) ===", file=out)
        _print_tables(run.session, out, multi.config.metric_percentiles)
        line = saturation_summary(getattr(run.runner, "saturation", lambda: None)())
        if line:
            print(line, file=out)
        if run.server_metrics is not None and run.counter_view is not None:
            for line in server_metrics_lines(run.counter_view, run.server_metrics):
                print(line, file=out)
        elif run.metrics_unavailable not in (None, NOT_POLLED):
            print(f"server metrics unavailable: {run.metrics_unavailable}", file=out)
    if several:
        from specmon.analysis.compare import render_server_comparison

        summaries = {r.label: r.session.accumulator.summary() for r in multi.runs}
        ks = {r.label: _server_k(r) for r in multi.runs}
        print("\nServers side by side", file=out)
        print(render_server_comparison(summaries, ks, width=output_width(out)), file=out)
    rows = multi.segment_rows_final
    if len({r["segment"] for r in rows}) > 1 or multi.config.segments:
        print("\n" + render_segment_table(rows, width=output_width(out)), file=out)
    # the answer of specmon.decision, as the monitor shows it, per segment with its basis
    print("", file=out)
    for line in advice_lines(rows):
        print(wrap_for(out, line), file=out)
    out.flush()


def saturation_summary(log: SaturationLog | None) -> str:
    """The final tables' line on the client's saturation ('' when it never was)."""
    if log is None or log.saturated_s <= 0:
        return ""
    return (
        f"client saturated {100 * log.share:.0f}% of the run ({log.saturated_s:.1f} of "
        f"{log.observed_s:.1f} s, worst loop lag {log.worst_lag_ms:.0f} ms): latencies in "
        "those spells include the client's own delay (try --workers 2); a segment "
        f"saturated for {SATURATED_SHARE:.0%} or more of its window is left out of the advice "
        "(all of a load's saturated: they answer, flagged uncertain)"
    )


def _server_k(run: ServerRun) -> int | None:
    """The server's k: its records', else its /metrics counters' (compare.load_run's rule on
    the same figures), 0 for a server that does not speculate."""
    from specmon.analysis.compare import NO_COUNTERS, counters_k

    acc = run.session.accumulator
    if acc.num_spec_tokens is not None:
        return acc.num_spec_tokens
    metrics = run.server_metrics or {"available": False, "reason": run.metrics_unavailable}
    k = counters_k(metrics)
    quiet = acc.request_count > 0 and not acc.spec_request_count and not acc.zero_step_requests
    if k is None and quiet:
        no_counters = metrics.get("available") is False and metrics.get("reason") == NO_COUNTERS
        return 0 if no_counters or metrics.get("drafts") == 0 else None
    return k


def wrap_for(out: TextIO, line: str) -> str:
    """On a terminal, a long line wrapped at word boundaries to its width (the terminal
    itself would cut it mid-word: "m" / "odel error 12%"); a file or pipe keeps it whole."""
    import textwrap

    from specmon.export.console import output_width

    if not out.isatty():
        return line
    wrapped = textwrap.wrap(
        line,
        output_width(out),
        subsequent_indent="  ",
        break_long_words=False,
        break_on_hyphens=False,
    )
    return "\n".join(wrapped)


def _print_tables(session: RunSession, out: TextIO, percentiles: str) -> None:
    from specmon.config import parse_percentiles
    from specmon.export.console import print_console
    from specmon.specdecode.fidelity import fidelity_line

    acc = session.accumulator
    hist = acc.pooled_histogram_sorted() if acc.spec_request_count else None
    print_console(
        acc.summary(),
        hist,
        error_summary=acc.snapshot().error_summary,
        file=out,
        percentiles=parse_percentiles(percentiles),
        fidelity=fidelity_line(acc.fidelity_counts, acc.engine, tuple(acc.verification_notes)),
    )
