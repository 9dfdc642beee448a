"""The declared seams (specmon/interfaces.py): every runner implements RunControl with the
declared signatures, the monitor reads nothing by probing, and the shared progress / knob
helpers give the figures worked out by hand."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from specmon.config import RunConfig
from specmon.interfaces import (
    LandingCount,
    LoadProgress,
    MonitorConfig,
    MonitoredRun,
    RunControl,
    RunView,
)
from specmon.session import RunSession
from specmon.sources.load.control import knob_shares, merge_progress
from specmon.sources.load.multi import MultiRun
from specmon.sources.load.runner import LoadRunner
from specmon.sources.load.workers import WorkerPool
from specmon.sources.replay import ReplayFeeder, ReplaySource

ROOT = Path(__file__).resolve().parent.parent
RUNNER_CLASSES = (LoadRunner, WorkerPool, MultiRun, ReplayFeeder)


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


def test_the_protocol_declares_the_run_control_surface():
    assert set(protocol_members(RunControl)) == {
        "finished",
        "stopped_early",
        "error",
        "drives_load",
        "start",
        "stop",
        "join",
        "progress",
        "set_concurrency",
        "set_request_rate",
        "set_output_tokens",
    }


@pytest.mark.parametrize("klass", RUNNER_CLASSES, ids=lambda k: k.__name__)
def test_every_runner_has_each_member_with_the_declared_signature(klass):
    for name, declared in protocol_members(RunControl).items():
        assert hasattr(klass, name) or name == "error", f"{klass.__name__} lacks {name}"
        if isinstance(declared, property):
            continue  # a property or a plain attribute both satisfy a read-only member
        actual = getattr(klass, name)
        assert callable(actual), f"{klass.__name__}.{name} is not a method"
        assert parameters(actual) == parameters(declared), f"{klass.__name__}.{name}"


def test_every_runner_instance_is_a_run_control():
    runners = instances()
    for runner in runners:
        assert isinstance(runner, RunControl), type(runner).__name__
        assert runner.error is None and not runner.finished
    load, pool, multi, feeder = runners
    assert load.drives_load and pool.drives_load and multi.drives_load
    assert not feeder.drives_load  # a replay's load was fixed when it was recorded
    # what the monitor drives: MultiRun (live) and ReplayFeeder (replay)
    assert isinstance(multi, MonitoredRun) and isinstance(feeder, MonitoredRun)
    assert isinstance(multi, RunView) and not isinstance(load, RunView)
    # the live /metrics verdict's client count: LoadRunner and WorkerPool say it
    assert isinstance(load, LandingCount) and isinstance(pool, LandingCount)


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
    files = sorted((ROOT / "specmon" / "tui").rglob("*.py"))
    files.append(ROOT / "specmon" / "server" / "server_view.py")
    assert len(files) > 10  # the walk found the package
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in files
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if PROBE.search(line)
    ]
    assert hits == []
