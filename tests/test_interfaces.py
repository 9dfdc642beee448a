"""The declared seams (specmon/interfaces.py): every runner has RunLifecycle with the
declared signatures through the one shared implementation (sources/lifecycle.py), only the
runners that send requests have LoadKnobs, the monitor reads nothing by probing, and the
shared progress / knob helpers give the figures worked out by hand."""

from __future__ import annotations

import inspect
import re
import threading
from pathlib import Path

import pytest

from specmon.config import RunConfig
from specmon.interfaces import (
    LandingCount,
    LoadKnobs,
    LoadProgress,
    MonitorConfig,
    MonitoredRun,
    RunLifecycle,
    RunView,
    knobs_of,
)
from specmon.run.load.control import knob_shares, merge_progress
from specmon.run.load.runner import LoadRunner
from specmon.run.load.workers import WorkerPool
from specmon.run.multi import MultiRun
from specmon.run.sweep.control import SweepControl
from specmon.run.watch.runner import WatchRun
from specmon.session import RunSession
from specmon.sources.lifecycle import BackgroundRun
from specmon.sources.replay import ReplayFeeder, ReplaySource

ROOT = Path(__file__).resolve().parent.parent
LOAD_CLASSES = (LoadRunner, WorkerPool, MultiRun)  # they send requests
NO_LOAD_CLASSES = (ReplayFeeder, SweepControl, WatchRun)
RUNNER_CLASSES = LOAD_CLASSES + NO_LOAD_CLASSES


def protocol_members(protocol: type) -> dict[str, object]:
    """Name -> declaration (function or property) of everything the protocol declares."""
    out: dict[str, object] = {}
    for klass in reversed(protocol.__mro__):
        if klass is object or klass.__name__ in ("Protocol", "Generic"):
            continue
        for name, value in vars(klass).items():
            if not name.startswith("_") and (callable(value) or isinstance(value, property)):
                out[name] = value
    return out


def parameters(fn: object) -> list[tuple[str, object, object]]:
    sig = inspect.signature(fn)  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


def config() -> RunConfig:
    return RunConfig(url=["http://127.0.0.1:1"], model="m", request_count=4)


def make_session(cfg: RunConfig) -> RunSession:
    return RunSession(None, "summary")


def instances() -> list[object]:
    multi = MultiRun(
        config(), make_session, lambda cfg, s: LoadRunner(cfg, s), detect=lambda *a: None
    )
    source = ReplaySource(Path("x.jsonl"), "raw capture", [])
    return [
        LoadRunner(config(), None),
        WorkerPool(config(), None),
        multi,
        ReplayFeeder(source, None),
    ]


def test_the_protocols_declare_the_lifecycle_and_the_knobs_apart():
    assert set(protocol_members(RunLifecycle)) == {
        "finished",
        "stopped_early",
        "error",
        "start",
        "stop",
        "join",
        "progress",
    }
    assert set(protocol_members(LoadKnobs)) == {
        "set_concurrency",
        "set_request_rate",
        "set_output_tokens",
    }


def assert_declared(klass: type, protocol: type) -> None:
    for name, declared in protocol_members(protocol).items():
        assert hasattr(klass, name) or name == "error", f"{klass.__name__} lacks {name}"
        if isinstance(declared, property):
            continue  # a property or a plain attribute both satisfy a read-only member
        actual = getattr(klass, name)
        assert callable(actual), f"{klass.__name__}.{name} is not a method"
        assert parameters(actual) == parameters(declared), f"{klass.__name__}.{name}"


@pytest.mark.parametrize("klass", RUNNER_CLASSES, ids=lambda k: k.__name__)
def test_every_runner_has_the_lifecycle_with_the_declared_signatures(klass):
    assert_declared(klass, RunLifecycle)


@pytest.mark.parametrize("klass", LOAD_CLASSES, ids=lambda k: k.__name__)
def test_the_runners_that_send_requests_have_the_knobs(klass):
    assert_declared(klass, LoadKnobs)


@pytest.mark.parametrize("klass", NO_LOAD_CLASSES, ids=lambda k: k.__name__)
def test_a_runner_that_drives_no_load_has_no_knobs(klass):
    assert not any(hasattr(klass, name) for name in protocol_members(LoadKnobs))


@pytest.mark.parametrize(
    "klass", [k for k in RUNNER_CLASSES if k is not MultiRun], ids=lambda k: k.__name__
)
def test_one_lifecycle_implementation_is_shared(klass):
    """start / stop / join / finished are BackgroundRun's in every runner with a thread;
    MultiRun has none of its own and joins its runners."""
    assert issubclass(klass, BackgroundRun)
    for name in ("start", "stop", "join", "finished", "_body"):
        assert getattr(klass, name) is getattr(BackgroundRun, name), f"{klass.__name__}.{name}"


def test_every_runner_instance_has_the_lifecycle():
    runners = instances()
    for runner in runners:
        assert isinstance(runner, RunLifecycle), type(runner).__name__
        assert runner.error is None and not runner.finished
    load, pool, multi, feeder = runners
    assert all(knobs_of(r) is r for r in (load, pool, multi))
    assert knobs_of(feeder) is None  # a replay's load was fixed when it was recorded
    # what the monitor drives: MultiRun (live) and ReplayFeeder (replay)
    assert isinstance(multi, MonitoredRun) and isinstance(feeder, MonitoredRun)
    assert isinstance(multi, RunView) and not isinstance(load, RunView)
    # the live /metrics verdict's client count: LoadRunner and WorkerPool say it
    assert isinstance(load, LandingCount) and isinstance(pool, LandingCount)


class Held(BackgroundRun):
    """A run whose thread waits until released (or stopped); `fail` makes it raise."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.release = threading.Event()
        self.fail = fail
        self.calls: list[str] = []

    def _launch(self) -> None:
        self.calls.append("launch")

    def _started(self) -> None:
        self.calls.append("started")

    def _main(self) -> None:
        self.release.wait(30)
        if self.fail:
            raise ValueError("boom")

    def _request_stop(self) -> None:
        self.calls.append("stop")
        self.release.set()


def test_the_shared_lifecycle_by_its_rules():
    run = Held()
    assert run.join(5) is False and run.calls == []  # not started: no wait, not finished
    run.start()
    run.start()  # idempotent: one launch, one thread
    assert run.calls == ["launch", "started"]
    assert run.join(0.01) is False and not run.finished
    run.stop()  # before the end: stopped early
    assert run.join(30) and run.finished and run.stopped_early and run.error is None
    run.stop()  # after the end: still one early stop, the hook called again harmlessly
    assert run.calls == ["launch", "started", "stop", "stop"]


def test_the_shared_lifecycle_keeps_what_the_thread_raised():
    run = Held(fail=True)
    run.start()
    run.release.set()
    assert run.join(30)
    assert isinstance(run.error, ValueError) and str(run.error) == "boom"
    run.stop()  # a stop after the end is no early stop
    assert not run.stopped_early


def test_load_runner_unlanded_is_sent_minus_landed():
    runner = LoadRunner(config(), None)
    # 2 in flight + 5 completed + 1 warmup = 8 sent; 6 landed -> 2 not recorded yet
    progress = LoadProgress(7, 5, 10, 2, 0, 0.0, "profiling", warmup_completed=1)
    assert runner.unlanded(6, progress) == 2
    assert runner.unlanded(9, progress) is None  # more landed than sent: not an instant's


def test_replay_feeder_progress_counts_fed_records(tmp_path):
    source = ReplaySource(tmp_path / "x.jsonl", "raw capture", [])
    feeder = ReplayFeeder(source, None)
    assert feeder.progress() == LoadProgress(0, 0, 0, 0, 0, 0.0, "starting")
    feeder.start()
    assert feeder.join(10)
    assert feeder.progress().phase == "done"
    assert list(feeder.servers) == ["run"] and feeder.segment_rows() is None
    feeder.stop()  # after the end (the monitor quits): not stopped early
    assert not feeder.stopped_early


def test_merge_progress_by_hand():
    a = LoadProgress(5, 4, 10, 1, 1, 3.0, "profiling", 2, False, 8.0)
    b = LoadProgress(3, 2, 6, 1, 0, 9.5, "warmup", 1, True, 2.0)
    merged = merge_progress([a, b])
    # sums: sent 8, completed 6, total 16, in flight 2, errors 1, warmup 3; worst lag 9.5,
    # longest elapsed 8.0; one part still warming up -> the run is in warmup
    assert merged == LoadProgress(8, 6, 16, 2, 1, 9.5, "warmup", 3, True, 8.0)
    assert merge_progress([a, b], total=20).total == 20
    unbounded = LoadProgress(1, 1, None, 0, 0, 0.0, "done")
    assert merge_progress([a, unbounded]).total is None
    assert merge_progress([a, unbounded]).phase == "profiling"
    assert merge_progress([], total=7) == LoadProgress(0, 0, 7, 0, 0, 0.0, "starting")


def test_knob_shares_by_hand():
    assert knob_shares("concurrency", 10, 3) == [4, 3, 3]
    assert knob_shares("concurrency", 2, 3) == [1, 1, 1]  # never below one slot
    assert knob_shares("concurrency", None, 2) == [None, None]
    assert knob_shares("request_rate", 9.0, 3) == [3.0, 3.0, 3.0]
    assert knob_shares("output_tokens", 256, 2) == [256, 256]
    assert knob_shares("request_rate", 9.0, 0) == []


def test_monitor_config_of_a_run_config():
    cfg = RunConfig(url=["a=http://127.0.0.1:1", "http://127.0.0.1:2"], model="m", concurrency=3)
    shown = MonitorConfig.of_run(cfg)
    assert shown.targets == ["http://127.0.0.1:1", "http://127.0.0.1:2"]
    assert (shown.model, shown.concurrency, shown.effective_concurrency) == ("m", 3, 3)


PROBE = re.compile(r"getattr|hasattr|callable\(")


def test_no_probing_in_the_monitor_or_the_live_verdict():
    """issue 9: the TUI and server_view.py read runners and sessions through the declared
    protocols, never by probing for attributes."""
    # themes.py reads a Textual Theme's optional colour fields: no runner or session there
    files = sorted(p for p in (ROOT / "specmon" / "tui").rglob("*.py") if p.name != "themes.py")
    files.append(ROOT / "specmon" / "server" / "server_view.py")
    assert len(files) > 10  # the walk found the package
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in files
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if PROBE.search(line)
    ]
    assert hits == []


def test_a_multi_run_reports_its_runners_error_without_being_joined():
    """The monitor polls `finished` and never joins: the load's error (a --max-outage stop)
    must show as soon as every runner has ended, not only after join()."""
    from specmon.errors import ServerUnreachable

    class Ended:
        finished = True
        error = ServerUnreachable("server unreachable since 10:00:00; stopped after 5 s")

    multi = MultiRun(
        config(), make_session, lambda cfg, s: LoadRunner(cfg, s), detect=lambda *a: None
    )
    assert multi.error is None  # nothing ran yet
    multi.runs[0].runner = Ended()  # type: ignore[assignment]
    assert isinstance(multi.error, ServerUnreachable)
