"""TUI cost benchmark: specmon's CPU use and request rate with the monitor on and --headless.

Starts `specmon sim` with every latency at 0 (specmon.sim.process.start_sim), then runs
`specmon run --url SIM --benchmark-duration D --concurrency C --streaming` twice:

  headless  as a plain child of this script;
  tui       inside a private tmux server, in a 100x30 pane, under a small wrapper (this script
            with --_measure) that waits for specmon and writes its wait4 usage to a file. After
            the duration (plus start-up grace) the script presses q, as a user would;
  charts    the same, with panel 3 maximized (key 3) as soon as the monitor shows: the time
            series as four plotext charts instead of the one-row sparklines (--no-charts
            skips it).

For each run it prints the requests completed, the achieved rate (the export's
request_throughput), specmon's CPU seconds (user + system, wait4), its share of one core,
CPU milliseconds per request, peak RSS and the simulator's CPU over the same run (read from
/proc/<pid>/stat), then the TUI/headless ratios. On 2 cores specmon and the simulator share
the machine, so CPU the TUI takes shows up as a lower request rate.

Needs tmux (apt-get install -y tmux).

  python benchmarks/bench_tui.py                        # 15 s each, concurrency 16
  python benchmarks/bench_tui.py --duration 30 --concurrency 64
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import BenchError, markdown_table, run_measured, specmon_cmd

ZERO_LATENCY = [
    "--ttft-ms",
    "0",
    "--step-ms",
    "0",
    "--draft-ms-per-token",
    "0",
    "--batch-slope",
    "0",
]
PANE = (100, 30)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class TuiRun:
    mode: str
    requests: int
    req_per_s: float
    cpu_s: float
    wall_s: float
    maxrss_mb: float
    server_cpu_s: float

    def cells(self) -> list:
        per_request_ms = self.cpu_s / self.requests * 1000 if self.requests else None
        return [
            self.mode,
            self.requests,
            self.req_per_s,
            self.cpu_s,
            self.wall_s,
            100 * self.cpu_s / self.wall_s,
            per_request_ms,
            self.maxrss_mb,
            self.server_cpu_s,
        ]


HEADERS = [
    "mode",
    "requests",
    "req/s",
    "specmon CPU s",
    "wall s",
    "CPU % of a core",
    "CPU ms/request",
    "peak RSS MB",
    "sim CPU s",
]


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a live process, from /proc/<pid>/stat (psutil is not a dependency)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # fields 14 and 15 of proc(5)


def run_args(url: str, args: argparse.Namespace, artifact_dir: Path) -> list[str]:
    return [
        "run",
        "--url",
        url,
        "--endpoint-type",
        "chat",
        "--streaming",
        "--concurrency",
        str(args.concurrency),
        "--benchmark-duration",
        str(args.duration),
        "--export-level",
        "records",
        "--artifact-dir",
        str(artifact_dir),
        "--refresh-hz",
        str(args.refresh_hz),
    ]


def export_figures(artifact_dir: Path) -> tuple[int, float]:
    path = artifact_dir / "profile_export_aiperf.json"
    if not path.exists():
        raise BenchError(f"specmon wrote no {path.name} in {artifact_dir}")
    export = json.loads(path.read_text())
    count = int((export.get("request_count") or {}).get("avg") or 0)
    rate = float((export.get("request_throughput") or {}).get("avg") or 0.0)
    return count, rate


def run_headless(url: str, args: argparse.Namespace, work: Path, sim_pid: int) -> TuiRun:
    artifact_dir = work / "headless"
    sim_cpu0 = proc_cpu_s(sim_pid)
    usage = run_measured(
        [*specmon_cmd(), *run_args(url, args, artifact_dir), "--headless"],
        timeout_s=args.duration + 120,
    )
    sim_cpu = proc_cpu_s(sim_pid) - sim_cpu0
    if usage.returncode != 0:
        raise BenchError(f"headless run exited with status {usage.returncode}: {usage.tail(4)}")
    count, rate = export_figures(artifact_dir)
    return TuiRun("headless", count, rate, usage.cpu_s, usage.wall_s, usage.maxrss_mb, sim_cpu)


class Tmux:
    """A private tmux server (own socket), so no one else's sessions are touched."""

    def __init__(self) -> None:
        if not shutil.which("tmux"):
            raise BenchError("tmux not found: apt-get install -y tmux")
        self.socket = f"specmon-bench-{os.getpid()}"

    def __call__(self, *argv: str, check: bool = True) -> str:
        result = subprocess.run(
            ["tmux", "-L", self.socket, *argv], capture_output=True, text=True, timeout=10
        )
        if check and result.returncode != 0:
            raise BenchError(f"tmux {argv[0]} failed: {result.stderr.strip()}")
        return result.stdout

    def kill(self) -> None:
        self("kill-server", check=False)


def run_tui(
    url: str, args: argparse.Namespace, work: Path, sim_pid: int, charts: bool = False
) -> tuple[TuiRun, str]:
    """The monitor in a 100x30 tmux pane (with `charts`, panel 3 maximized); returns the run
    and the last screen it showed."""
    name = "charts" if charts else "tui"
    artifact_dir, usage_file = work / name, work / f"{name}-usage.json"
    wrapper = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--_measure",
        str(usage_file),
        "--",
        *specmon_cmd(),
        *run_args(url, args, artifact_dir),
        "--no-headless",
    ]
    tmux = Tmux()
    sim_cpu0 = proc_cpu_s(sim_pid)
    env = ["-e", f"PATH={os.environ.get('PATH', '')}"]
    try:
        tmux(
            "new-session",
            "-d",
            "-s",
            "bench",
            "-x",
            str(PANE[0]),
            "-y",
            str(PANE[1]),
            *env,
            subprocess.list2cmdline(wrapper),
        )
        shown = _maximize_series(tmux, usage_file) if charts else ""
        screen = shown or _press_q_when_done(tmux, usage_file, args)
        if charts:
            _press_q_when_done(tmux, usage_file, args)
    finally:
        tmux.kill()
    sim_cpu = proc_cpu_s(sim_pid) - sim_cpu0
    if not usage_file.exists():
        raise BenchError(f"the TUI run left no usage file; last screen:\n{screen}")
    usage = json.loads(usage_file.read_text())
    if usage["returncode"] != 0:
        raise BenchError(
            f"TUI run exited with status {usage['returncode']}; last screen:\n{screen}"
        )
    count, rate = export_figures(artifact_dir)
    mode = "tui 100x30, 3 (charts)" if charts else "tui 100x30"
    return TuiRun(
        mode, count, rate, usage["cpu_s"], usage["wall_s"], usage["maxrss_mb"], sim_cpu
    ), screen


def _maximize_series(tmux: Tmux, usage_file: Path) -> str:
    """Press 3 once the monitor shows its series panel (its title); returns the first screen
    with the charts drawn (their time axis), the run's screen for --show-screen."""
    deadline, pressed = time.monotonic() + 60, False
    while time.monotonic() < deadline and not usage_file.exists():
        screen = tmux("capture-pane", "-p", "-t", "bench", check=False)
        if pressed and "time since start" in screen:
            return screen
        if not pressed and "3 Time series" in screen:
            tmux("send-keys", "-t", "bench", "3", check=False)
            pressed = True
        time.sleep(0.2)
    raise BenchError("the monitor never drew panel 3's charts (key 3)")


def _press_q_when_done(tmux: Tmux, usage_file: Path, args: argparse.Namespace) -> str:
    """Press q once the header says the load is done (or after the duration plus start-up
    grace), as a user would; then wait for the wrapper's usage file."""
    quit_at = time.monotonic() + args.duration + args.grace
    # a loaded machine may not have drawn the monitor by then: wait (at most a minute more)
    # until it has, so the screen shown is the monitor's, never a blank pane
    drawn_by = quit_at + 60
    screen = ""
    while not usage_file.exists():
        now = time.monotonic()
        if now >= drawn_by or (now >= quit_at and _drawn(screen)):
            break
        time.sleep(0.25)
        screen = tmux("capture-pane", "-p", "-t", "bench", check=False) or screen
        if _load_done(screen):
            break
    for key in ("q", "C-c"):
        if usage_file.exists():
            break
        tmux("send-keys", "-t", "bench", key, check=False)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not usage_file.exists():
            time.sleep(0.2)
    return screen


def _drawn(screen: str) -> bool:
    """The monitor has painted its headline (the acceptance figures)."""
    return "tok-wtd AL" in screen


def _load_done(screen: str) -> bool:
    """The monitor's header shows `done` once a bounded load has finished."""
    return any(" done" in line for line in screen.splitlines()[:3])


def measure_wrapper(usage_file: str, cmd: list[str]) -> int:
    """Run `cmd` on this terminal; write its wait4 usage (JSON) to usage_file when it ends."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd)
    _, status, usage = os.wait4(proc.pid, 0)
    figures = {
        "returncode": os.waitstatus_to_exitcode(status),
        "wall_s": time.perf_counter() - start,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "maxrss_mb": usage.ru_maxrss / 1024.0,
    }
    tmp = usage_file + ".tmp"
    Path(tmp).write_text(json.dumps(figures))
    os.replace(tmp, usage_file)  # the parent polls for the file: it appears complete or not at all
    return 0


def chart_repaint_ms(repeats: int = 25) -> float:
    """CPU ms to draw panel 3's four charts once, as maximized at 160x48 (each about 78x21),
    on synthetic 40-column series: what one refresh of the charts costs (at most 1 Hz)."""
    import asyncio

    from textual.app import App, ComposeResult

    from specmon.tui.model.series import SERIES, TIME
    from specmon.tui.widgets.series_chart import SeriesChart, SeriesPanel

    data: dict[str, list[float | None]] = {TIME: [0.5 + i for i in range(40)]}
    for n, spec in enumerate(SERIES):
        data[spec.key] = [1.0 + n + (i % 7) / 3 for i in range(40)]

    class Charts(App[None]):
        def compose(self) -> ComposeResult:
            yield SeriesPanel()

        def on_mount(self) -> None:
            self.query_one(SeriesPanel).show(lambda columns, min_s: data)

    async def measure() -> float:
        app = Charts()
        async with app.run_test(size=(156, 43)) as pilot:
            await pilot.pause()
            charts = list(app.query(SeriesChart))
            start = time.process_time()
            for _ in range(repeats):
                for chart in charts:
                    chart.render()
            return (time.process_time() - start) / repeats * 1000

    return asyncio.run(measure())


def ratios(headless: TuiRun, tui: TuiRun) -> list[str]:
    lines = []
    if headless.req_per_s > 0:
        lines.append(f"request rate, tui/headless: {tui.req_per_s / headless.req_per_s:.2f}")
    if headless.requests and tui.requests and headless.cpu_s > 0:
        per_request = (tui.cpu_s / tui.requests) / (headless.cpu_s / headless.requests)
        lines.append(f"CPU per request, tui/headless: {per_request:.2f}")
    lines.append(
        f"CPU share of a core, tui/headless: "
        f"{(tui.cpu_s / tui.wall_s) / (headless.cpu_s / headless.wall_s):.2f}"
    )
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Needs tmux (apt-get install -y tmux).",
    )
    parser.add_argument(
        "--duration", type=float, default=15.0, help="seconds of load per run (default 15)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=16, help="closed-loop concurrency (default 16)"
    )
    parser.add_argument(
        "--refresh-hz", type=float, default=4.0, help="TUI refresh rate (default 4)"
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=5.0,
        help="seconds allowed for start-up before q is pressed (default 5)",
    )
    parser.add_argument("--show-screen", action="store_true", help="print the TUI's last screen")
    parser.add_argument(
        "--no-charts", action="store_true", help="skip the run with panel 3 maximized (charts)"
    )
    parser.add_argument("--_measure", default=None, help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args(argv)
    if args._measure:
        args.cmd = rest[1:] if rest[:1] == ["--"] else rest
        return args
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.duration <= 0 or args.concurrency < 1:
        parser.error("--duration must be > 0 and --concurrency >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args._measure:
        return measure_wrapper(args._measure, args.cmd)
    from specmon.sim.process import start_sim

    try:
        with (
            start_sim([*ZERO_LATENCY, "--level", "summary"]) as sim,
            tempfile.TemporaryDirectory(prefix="specmon-bench-tui-") as work,
        ):
            print(f"[bench] specmon sim (zero latency) at {sim.url}", file=sys.stderr, flush=True)
            headless = run_headless(sim.url, args, Path(work), sim.pid)
            tui, screen = run_tui(sim.url, args, Path(work), sim.pid)
            charts, chart_screen = None, ""
            if not args.no_charts:
                charts, chart_screen = run_tui(sim.url, args, Path(work), sim.pid, charts=True)
    except BenchError as exc:
        print(f"bench_tui: error: {exc}", file=sys.stderr)
        return 2
    runs = [headless, tui] + ([charts] if charts else [])
    print(markdown_table(HEADERS, [run.cells() for run in runs]))
    print(
        f"\nmachine: {os.cpu_count()} CPUs; load: {args.duration:g} s per run, concurrency "
        f"{args.concurrency}, streaming chat, sim with zero latencies; TUI {PANE[0]}x{PANE[1]} "
        f"at {args.refresh_hz:g} Hz"
    )
    for line in ratios(headless, tui):
        print(line)
    if charts is not None:
        print(f"specmon CPU s, charts/sparklines: {charts.cpu_s / tui.cpu_s:.2f}")
        print(f"request rate, charts/sparklines: {charts.req_per_s / tui.req_per_s:.2f}")
        print(f"panel 3's four charts at 160x48: {chart_repaint_ms():.1f} CPU ms per repaint")
    if args.show_screen:
        print("\nlast TUI screen:\n" + screen)
        if charts is not None:
            print("\nTUI screen with charts:\n" + chart_screen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
