"""The headless progress line and run description (pure formatting)."""

from __future__ import annotations

import io
from dataclasses import replace
from types import SimpleNamespace

from specmon.config import RunConfig
from specmon.pipeline import RequestResult
from specmon.run.headless import HeadlessProgress, describe_run, format_progress
from specmon.sinks.progress import TAG
from specmon.sources.load.generator import LoadProgress


class FakeSession:
    """A session as HeadlessProgress reads it: the sinks added to it, and its accumulator's
    running request throughput."""

    def __init__(self, request_throughput: float | None = None) -> None:
        self.sinks: list = []
        self.accumulator = SimpleNamespace(request_throughput=request_throughput)

    def add_sink(self, sink) -> None:
        self.sinks.append(sink)

    def land(self, *acceptance_lengths: float | None, phase: str = "profiling") -> None:
        for al in acceptance_lengths:
            values = {} if al is None else {TAG: al}
            result = RequestResult(None, values=values, phase=phase)
            for sink in self.sinks:
                sink.on_result(result, None)


def progress_of(progress: LoadProgress, *sessions: FakeSession, duration=None):
    runs = [SimpleNamespace(label=f"s{i}", session=s) for i, s in enumerate(sessions)]
    multi = SimpleNamespace(
        runs=runs, progress=lambda: progress,
        config=SimpleNamespace(benchmark_duration=duration),
    )  # fmt: skip
    return HeadlessProgress(multi)  # type: ignore[arg-type]


def test_progress_line_reads_well_when_piped():
    progress = LoadProgress(
        sent=60, completed=50, total=200, in_flight=10, errors=2, loop_lag_ms=1.25, elapsed_s=10.0,
        loop_busy=0.426,
    )  # fmt: skip
    session = FakeSession(48 / 9.6)  # 48 valid over a 9.6 s benchmark duration
    printer = progress_of(progress, session)
    # the running mean of the per-request acceptance length: warm-up and errors left out
    session.land(2.0, 2.912, None)  # (2.0 + 2.912) / 2 = 2.456
    session.land(9.0, phase="warmup")
    line = printer.line()
    # req/s is AIPerf's request_throughput (the TUI's and the exports' figure): 48 / 9.6 = 5.00,
    # not completed / elapsed. 50 of 200 in 10 s: 25%, 150 left at 5/s -> ETA 30 s
    assert line == (
        "[   10.0s] done 50/200 (25%, ETA 00:30)  errors 2  5.00 req/s  in-flight 10  "
        "accept-len 2.46  loop-lag 1.2 ms busy 43%"
    )
    assert "\r" not in line and "\x1b" not in line


def test_progress_line_of_a_duration_run_has_percent_and_eta():
    """--benchmark-duration 30, 12 s in: 40% done, 18 s to go (issue 20 item 4)."""
    progress = LoadProgress(30, 25, None, 5, 0, 0.5, elapsed_s=12.0)
    line = format_progress(progress, None, None, duration_s=30.0)
    assert line.startswith("[   12.0s] done 25 (40%, ETA 00:18)  errors 0")
    assert "ETA" not in format_progress(progress, None, None)  # unbounded: no ETA


def test_progress_line_without_total_or_spec_and_in_warmup():
    progress = LoadProgress(0, 0, None, 4, 0, 0.0, phase="warmup", elapsed_s=0.0)
    line = progress_of(progress, FakeSession()).line()
    assert "[warmup] done 0  errors 0  n/a req/s" in line and "accept-len n/a" in line


def test_progress_line_of_several_servers_adds_rates_and_names_each_al():
    progress = LoadProgress(20, 20, 40, 0, 0, 0.5, elapsed_s=4.0)
    a, b = FakeSession(3.0), FakeSession(2.0)
    printer = progress_of(progress, a, b)
    a.land(2.5)
    line = printer.line()
    assert "5.00 req/s" in line  # 3 + 2: the servers' throughputs add up
    assert "accept-len s0=2.50 s1=n/a" in line


def test_describe_run_names_the_load():
    config = RunConfig(
        url=["http://h:1"],
        model="m",
        request_rate=5,
        concurrency=8,
        request_rate_mode="constant",
        benchmark_duration=30,
        warmup_request_count=3,
    )
    assert describe_run(config) == (
        "specmon: http://h:1 model m, chat non-streaming, "
        "request-rate 5/s constant, concurrency cap 8, 30 s, 3 warmup"
    )


class FinishedRun:
    """A runner that has already ended; its last progress is given."""

    def __init__(self, last: LoadProgress) -> None:
        self.last = last

    def join(self, timeout=None) -> bool:
        return True

    def progress(self) -> LoadProgress:
        return self.last


class NoLine:
    def line(self) -> str:
        raise AssertionError("a run that has ended prints no progress line here")


def test_a_run_too_short_for_the_sustained_window_still_warns_at_the_end():
    # 0.93 busy over the run's last second (or all of a shorter run) is >= 0.9: the client
    # was the bottleneck; the warning names both signs (93%, 4 ms)
    from specmon.run.headless import wait_printing

    out = io.StringIO()
    busy = LoadProgress(9, 9, 9, 0, 0, 4.0, "done", loop_busy=0.93)
    wait_printing(FinishedRun(busy), 30.0, out, NoLine())
    assert out.getvalue() == (
        "specmon: warning: client saturated (event loop busy 93%, lag 4 ms): latencies "
        "include the client's own delay (try --workers 2)\n"
    )
    out = io.StringIO()
    wait_printing(FinishedRun(replace(busy, loop_busy=0.89)), 30.0, out, NoLine())
    assert out.getvalue() == ""  # below the line: nothing to say
