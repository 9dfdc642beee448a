"""What the whole suite shares: the process fixtures and the `e2e` rule of the fast loop.

Fixtures (each stops what it started, by PID, at its scope's end):
- `sim`: the one simulator a test declares with a mark: `@pytest.mark.sim("--seed", "3")`
  (`log=True` adds `--log` in the test's tmp_path, read back as `sim.log_path`); without the
  mark, the `shared_sim` settings in a process of the test's own.
- `sims`: start more than one, or with settings known only inside the test: `sims(["--seed", "3"])`;
  `module_sims` the same for a module-scoped fixture.
- `shared_sim`: one fast simulator per test module, for tests that need a server but none of
  its settings and read no absolute server counters (each run reads deltas from its own start).
- `tmux_pane`: open a tmux pane on a private socket: `tmux_pane("specmon demo", 100, 30)`.
- `realvllm_ready`, `vllm_detailed`: the real vLLM (tests/realvllm/); `aiperf_ready`: AIPerf
  0.13 beside specmon (tests/peer/). Defined once here, so each is set up once a session.

The fast inner loop is `python -m pytest -m "not e2e and not realvllm"`: every test that
starts a process is marked `e2e`, by hand (`pytestmark`, `@pytest.mark.e2e`) or here, for any
test that uses one of the fixtures above. In that loop a test outside the marks that still
starts a process fails at teardown with the command it ran, so the loop stays free of them.
"""

from __future__ import annotations

import gc
import json
import multiprocessing.util
import os
import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from peer.aiperf_peer import aiperf_ready  # noqa: F401  (fixture)
from realvllm.fixtures import realvllm_ready, vllm_detailed  # noqa: F401  (fixtures)
from realvllm.server import STATUS_ENV, ensure_installed
from support.tmux_pane import Pane

from specmon.server.process import ServerProcess
from specmon.sim.process import start_sim

pytest_plugins = ["pytester"]  # tests/project/test_suite_rules.py runs an inner pytest

# Every simulator a test starts (directly, through demo, or as a sweep's --serve) answers at
# once unless the test gives latency options: `specmon sim` without options otherwise uses a
# GPU-like preset (specmon/sim/presets.py), which would slow the suite. Tests of that default
# remove this variable from their child's environment.
SIM_PRESET_ENV = "SPECMON_SIM_PRESET"
os.environ[SIM_PRESET_ENV] = "zero"

# Bytecode in a cache outside the clone, whatever PYTHONDONTWRITEBYTECODE says. Some machines
# set it (this project's build machines do); then every xdist worker rewrites the asserts of
# every test module again (6 of its 8 CPU-s of collection) and each of the fast tier's ~700
# child processes (specmon run, sim, sweep...) compiles specmon from source again (0.1 CPU-s
# each). Workers and children inherit both from here.
PYCACHE = Path(os.environ.get("TMPDIR", "/tmp")) / f"specmon-pycache-{os.getuid()}"
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
sys.dont_write_bytecode = False
sys.pycache_prefix = str(PYCACHE)

# The settings of `shared_sim`: quick answers (a run of a few requests takes well under 1 s).
SHARED_SIM_ARGS = ["--seed", "1", "--ttft-ms", "20", "--step-ms", "2"]
PROCESS_FIXTURES = {
    "sim",
    "sims",
    "module_sims",
    "shared_sim",
    "tmux_pane",
    "realvllm_ready",
    "vllm_detailed",
    "aiperf_ready",
}
UNMARKED_PROCESS = (
    "{nodeid} started a process ({command}) but is not marked e2e: mark it "
    '(pytestmark = pytest.mark.e2e) so that `pytest -m "not e2e and not realvllm"` stays fast'
)


REALVLLM_TESTS = Path(__file__).resolve().parent / "realvllm"


def pytest_configure(config: pytest.Config) -> None:
    """Start from the default signal dispositions, however the suite was launched: under
    `nohup` SIGHUP arrives ignored, and a background job of a non-interactive shell gets
    SIGINT ignored. specmon keeps an inherited SIG_IGN (docs/stopping.md),
    so every process a test starts would ignore the signals the stop tests send (19 of them
    failed, run as `nohup ... &`). The nohup test sets SIG_IGN for its own child. Runs in
    the main process and in each xdist worker, before any test starts a process."""
    config.addinivalue_line("markers", "sim(*args, log=False): the `sim` fixture's settings")
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Prepare the cached vLLM venv before any test runs, with the set-up's progress shown
    live (a first install takes minutes; inside a fixture its lines would be captured, or
    lost in a pytest-xdist worker). Skipped when .ci/run has already done it, in workers, and
    when no real-vLLM test is selected."""
    config = session.config
    if (
        hasattr(config, "workerinput")
        or os.environ.get(STATUS_ENV)
        or not _selects_realvllm(config)
    ):
        return
    capture = config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print("\nrealvllm: preparing the cached vLLM venv for the real-vLLM tests", file=sys.stderr)
        _, line = ensure_installed()  # its progress lines go straight to the terminal
        print(line, file=sys.stderr)


def _selects_realvllm(config: pytest.Config) -> bool:
    """Whether the command line can select a real-vLLM test (test_realvllm*.py)."""
    markexpr = config.option.markexpr or ""
    if config.option.collectonly or "not realvllm" in markexpr or "not acceptance" in markexpr:
        return False
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if REALVLLM_TESTS.is_relative_to(path) or path.name.startswith("test_realvllm"):
            return True
    return False


# Seconds each test file took (`python -m pytest -n 2 --record-durations` rewrites it): under
# pytest-xdist the slowest files start first, so the two workers finish together instead of
# one waiting on a long file picked up last. A file not listed counts as the median.
DURATIONS = Path(__file__).resolve().parent / "durations.json"
_recorded: defaultdict[str, float] = defaultdict(float)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-durations",
        action="store_true",
        help=f"write each test file's total seconds to {DURATIONS.name} (the -n start order)",
    )


@pytest.hookimpl(tryfirst=True)  # before -m deselects, so the marks added here count
def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (modules, the test items, Textual's and specmon's classes) lives
    for the whole session: frozen out of the collector, and the collector run less often,
    as specmon run does for its requests (run/assemble.py). The Pilot tests allocate fast:
    the collector's full passes over that heap were a fifth of their CPU (measured on
    tests/tui/screens/test_tui_layout.py and test_tui_app.py: 41 -> 31 CPU-s)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 50, 100)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)
        if item.get_closest_marker("realvllm"):  # the real-vLLM group is the acceptance tier
            item.add_marker(pytest.mark.acceptance)
        if not item.get_closest_marker("xdist_group") and _shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: every worker sorts alike
        items[:] = slowest_files_first(items)


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a module- or package-scoped fixture. Such a file stays on one
    pytest-xdist worker (`--dist loadgroup`): spread over four, each worker would build the
    fixture again (simulators, Prometheus, whole demo runs), the suite's CPU spent four times."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        defs and defs[-1].scope in ("module", "package") for defs in info.name2fixturedefs.values()
    )


def slowest_files_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The items, file by file (each file's own order kept), the slowest files first."""
    known = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    median = sorted(known.values())[len(known) // 2] if known else 0.0
    first: dict[str, int] = {}  # where each file starts: files of equal weight stay whole
    for index, item in enumerate(items):
        first.setdefault(item.nodeid.split("::")[0], index)

    def rank(pair: tuple[int, pytest.Item]) -> tuple[float, int, int]:
        file = pair[1].nodeid.split("::")[0]
        return (-known.get(file, median), first[file], pair[0])

    return [item for _, item in sorted(enumerate(items), key=rank)]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _recorded[report.nodeid.split("::")[0]] += report.duration  # setup, call and teardown


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if config.getoption("record_durations") and not hasattr(config, "workerinput"):
        ranked = dict(sorted(_recorded.items(), key=lambda kv: -kv[1]))
        DURATIONS.write_text(
            json.dumps({k: round(v, 1) for k, v in ranked.items()}, indent=1) + "\n"
        )


def _starter() -> Iterator[Callable[..., ServerProcess]]:
    """start(args) starts a simulator, stopped when the fixture's scope ends."""
    started: list[ServerProcess] = []

    def start(args: Sequence[str] = (), timeout: float = 30) -> ServerProcess:
        sim = start_sim([str(a) for a in args], timeout)
        started.append(sim)
        return sim

    yield start
    for sim in started:
        sim.stop()


@pytest.fixture
def sims() -> Iterator[Callable[..., ServerProcess]]:
    yield from _starter()


@pytest.fixture(scope="module")
def module_sims() -> Iterator[Callable[..., ServerProcess]]:
    """`sims` for a module-scoped fixture: one simulator shared by the module's tests."""
    yield from _starter()


@pytest.fixture
def sim(
    request: pytest.FixtureRequest, sims: Callable[..., ServerProcess], tmp_path: Path
) -> ServerProcess:
    mark = request.node.get_closest_marker("sim")
    args = [str(a) for a in mark.args] if mark else list(SHARED_SIM_ARGS)
    log = tmp_path / "sim.log" if mark and mark.kwargs.get("log") else None
    server = sims([*args, "--log", str(log)] if log else args)
    server.log_path = log  # type: ignore[attr-defined]
    return server


@pytest.fixture(scope="module")
def shared_sim(module_sims: Callable[..., ServerProcess]) -> ServerProcess:
    return module_sims(SHARED_SIM_ARGS)


@pytest.fixture
def tmux_pane() -> Iterator[Callable[..., Pane]]:
    panes: list[Pane] = []

    def open_pane(command: str, width: int = 100, height: int = 30) -> Pane:
        pane = Pane(command, width, height)
        panes.append(pane)
        return pane

    yield open_pane
    for pane in panes:
        pane.close()


@pytest.fixture(autouse=True)
def _a_process_needs_the_e2e_mark(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """In a run that leaves e2e out (the fast loop), record every process an unmarked test
    starts (subprocess, asyncio's subprocesses and multiprocessing's spawn all go through
    these two calls) and fail it at teardown. The full run does not check, so a test added
    without its mark is caught by the fast loop, never by CI."""
    marked = request.node.get_closest_marker("e2e") or request.node.get_closest_marker("realvllm")
    if marked or "not e2e" not in (request.config.option.markexpr or ""):
        yield
        return
    started: list[str] = []
    execute_child = subprocess.Popen._execute_child
    spawnv_passfds = multiprocessing.util.spawnv_passfds

    def recorded_child(self: subprocess.Popen, args: object, *rest: object) -> object:
        started.append(args if isinstance(args, str) else " ".join(map(str, args)))
        return execute_child(self, args, *rest)

    def recorded_spawn(path: bytes, args: Sequence[str], passfds: object) -> int:
        command = " ".join(map(str, args))
        # multiprocessing's resource tracker starts once per process, with the first queue or
        # lock, and then serves every test: blaming whichever test came first would be noise
        if "multiprocessing.resource_tracker" not in command:
            started.append(command)
        return spawnv_passfds(path, args, passfds)

    monkeypatch.setattr(subprocess.Popen, "_execute_child", recorded_child)
    monkeypatch.setattr(multiprocessing.util, "spawnv_passfds", recorded_spawn)
    yield
    if started:
        pytest.fail(UNMARKED_PROCESS.format(nodeid=request.node.nodeid, command=started[0][:200]))
