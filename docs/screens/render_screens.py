"""Render the PNGs in this folder: the monitor on the tests' recorded run (tests/support/tui_fixtures)
in the light and dark themes at 80x24 and 160x48, its charts (3: the time series, 2: the
histogram, maximized) at 160x48, and the sweep view at 80x24 (the grid done, the schedule
arm measured at concurrency 1 and being measured at 4).

    python docs/screens/render_screens.py            # needs rsvg-convert (librsvg2-bin)
    python docs/screens/render_screens.py series     # only the PNGs whose names start so

Textual saves an SVG screenshot; rsvg-convert turns it into a PNG.
"""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests"))

from support.tui_fixtures import accumulate, run_captures, session_view  # noqa: E402
from support.tui_tuning_fixtures import H2, capture_k, session_of  # noqa: E402

from specmon.config import RunConfig  # noqa: E402
from specmon.decision.sweep_types import Cell, RepeatMeasurement  # noqa: E402
from specmon.run.assemble import make_repeat  # noqa: E402
from specmon.run.sweep.control import SweepControl  # noqa: E402
from specmon.run.sweep.runner import ARM_K, SweepNow, SweepRunner, SweepSettings  # noqa: E402
from specmon.tui.app import SpecmonApp  # noqa: E402
from specmon.tui.sweep_app import SweepApp  # noqa: E402


async def save(app, size: tuple[int, int], name: str, keys: tuple[str, ...] = ()) -> None:
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        await pilot.pause()
        svg = HERE / f"{name}.svg"
        app.save_screenshot(filename=svg.name, path=str(HERE))
    subprocess.run(["rsvg-convert", str(svg), "-o", str(HERE / f"{name}.png")], check=True)
    svg.unlink()
    print(HERE / f"{name}.png")


def monitor(theme: str) -> SpecmonApp:
    session = session_view(accumulate(run_captures(60)))
    return SpecmonApp(session, None, None, source="replay", freeze_elapsed=15.0, theme_name=theme)


def sweep(theme: str) -> SweepApp:
    settings = SweepSettings(
        ks=[2, 4],
        concurrencies=[1, 4],
        serve="{python} -m specmon sim --port {port} --num-spec-tokens {k}",
        baseline_serve="{python} -m specmon sim --port {port} --num-spec-tokens 0",
        repeats=3,
        segment_requests=8,
        verify_schedule=True,
    )
    out = Path(tempfile.mkdtemp())
    runner = SweepRunner(
        settings, RunConfig(), out / "sweep", make_repeat=make_repeat, out=io.StringIO()
    )
    control = SweepControl(runner)
    assert runner.on_cell is not None and runner.on_arm_cell is not None
    grid = (
        (0, 1, (100, 110, 90)),
        (2, 1, (150, 152, 148)),
        (4, 1, (160, 171, 158)),
        (0, 4, (300, 300, 300)),
        (2, 4, (410, 402, 398)),
        (4, 4, (380, 391, 377)),
    )
    for k, c, tputs in grid:
        runner.on_cell(
            Cell(k, c, [RepeatMeasurement(t, 1.0, 8, acceptance_length=2.0) for t in tputs])
        )
    reps = [RepeatMeasurement(t, 1.0, 8, acceptance_length=2.1) for t in (163, 166, 160)]
    runner.on_arm_cell("schedule", Cell(ARM_K, 1, reps))
    session = session_of([capture_k(1, H2, 2)])
    runner.now = SweepNow("measuring", None, 4, 2, 3, session=session, arm="schedule")
    return SweepApp(control, theme_name=theme)


async def main(only: list[str]) -> None:
    shots = []
    for theme in ("light", "dark"):
        for w, h in ((80, 24), (160, 48)):
            shots.append((monitor, theme, (w, h), f"monitor-{theme}-{w}x{h}", ()))
        for key, what in (("3", "series"), ("2", "histogram")):
            shots.append((monitor, theme, (160, 48), f"{what}-chart-{theme}-160x48", (key,)))
        shots.append((sweep, theme, (80, 24), f"sweep-{theme}-80x24", ()))
    for make, theme, size, name, keys in shots:
        if not only or any(name.startswith(prefix) for prefix in only):
            await save(make(theme), size, name, keys)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
