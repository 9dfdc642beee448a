"""The live sweep view's arm rows (issue 20 item 6, issue 17 item 7's --verify-schedule and
--variant): a scripted SweepRunner on the SweepControl thread finishes cells one by one
through its own recording path, and at 80x24 the k x concurrency grid and then each arm's
row (median ± MAD) and its "vs best k" row fill in as they finish; figures by hand."""

from __future__ import annotations

import io
import re
import threading

from support.tui_screen import screen_text, until

from specmon.config import RunConfig
from specmon.decision.sweep_types import Cell, RepeatMeasurement
from specmon.run.assemble import make_repeat
from specmon.run.sweep.control import SweepControl
from specmon.run.sweep.measure import SweepNow
from specmon.run.sweep.runner import SweepRunner
from specmon.run.sweep.settings import ARM_K, SweepSettings
from specmon.tui.sweep_app import SweepApp

SERVE = "{python} -m specmon sim --port {port} --num-spec-tokens {k}"


def repeats(*tputs: float) -> list[RepeatMeasurement]:
    return [RepeatMeasurement(t, 1.0, 8, acceptance_length=2.0) for t in tputs]


# (row, concurrency, throughputs of the three repeats): the grid first, then the arms
SCRIPT: list[tuple[int | str, int, tuple[float, ...]]] = [
    (0, 1, (100, 110, 90)),  # median 100, MAD 10
    (0, 4, (300, 300, 300)),
    (2, 1, (150, 152, 148)),  # median 150, MAD 2: the best fixed k at 1
    (2, 4, (400, 400, 400)),  # the best fixed k at 4
    ("schedule", 1, (148, 150, 152)),  # 150 vs 150: +0.0%
    ("schedule", 4, (420, 420, 420)),  # 420 vs 400: +5.0%
    ("adaptive", 1, (120, 120, 120)),  # 120 vs 150: -20.0%
    ("adaptive", 4, (500, 500, 500)),  # 500 vs 400: +25.0%
]


class ScriptedRunner(SweepRunner):
    """Records SCRIPT's cells one at a time, each when the test says `step()`, through
    SweepRunner._record (the hooks the live view reads), on the sweep's own thread."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.go = threading.Semaphore(0)

    def step(self) -> None:
        self.go.release()

    def _run_serve(self) -> None:
        for row, c, tputs in SCRIPT:
            k, arm = (row, None) if isinstance(row, int) else (None, row)
            self.now = SweepNow("measuring", k, c, 2, 3, arm=arm)
            self.go.acquire()
            if self.stopping.is_set():
                return
            cell = Cell(row if isinstance(row, int) else ARM_K, c, repeats(*tputs))
            self._record(cell, row)


def scripted(tmp_path) -> tuple[SweepControl, ScriptedRunner]:
    settings = SweepSettings(
        ks=[2],
        concurrencies=[1, 4],
        serve=SERVE,
        baseline_serve="{python} -m specmon sim --port {port} --num-spec-tokens 0",
        repeats=3,
        segment_requests=8,
        verify_schedule=True,
        variants={"adaptive": SERVE + " --adaptive"},
    )
    runner = ScriptedRunner(
        settings, RunConfig(), tmp_path / "sweep", make_repeat=make_repeat, out=io.StringIO()
    )
    return SweepControl(runner), runner


def row_cells(text: str, label: str) -> list[str]:
    """The figures of the grid row `label` (cells are two or more spaces apart)."""
    line = next(line for line in text.splitlines() if re.search(rf"│\s*{re.escape(label)}\s", line))
    inner = line.split("│")[1].strip()
    return re.split(r"\s{2,}", inner)[1:]


async def shows(pilot, app, label: str, cells: list[str]) -> None:
    await until(pilot, lambda: row_cells(screen_text(app), label) == cells, f"{label} {cells}")


async def test_arm_rows_fill_in_as_cells_finish_at_80x24(tmp_path):
    control, runner = scripted(tmp_path)
    control.start()
    app = SweepApp(control)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "▶ repeat 2/3" in screen_text(app), "the first cell")
            text = screen_text(app)
            # both arms are rows from the start, pending until measured
            assert row_cells(text, "arm schedule") == ["·", "·"]
            assert row_cells(text, "arm adaptive") == ["·", "·"]
            for _ in range(4):  # the grid: k=0 and k=2 at both loads
                runner.step()
            # the schedule arm's first cell is being measured, in its own row
            await shows(pilot, app, "arm schedule", ["▶ repeat 2/3", "·"])
            text = screen_text(app)
            assert "4/8 cells" in text
            assert row_cells(text, "k=0") == ["100 ± 10.0", "300 ± 0.0"]  # compact: < 100 cols
            assert row_cells(text, "k=2") == ["150 ± 2.0 *", "400 ± 0.0 *"]
            runner.step()
            await shows(pilot, app, "arm schedule", ["150 ± 2.0", "▶ repeat 2/3"])
            assert row_cells(screen_text(app), "vs best k") == ["+0.0% (k=2)", "·"]
            for _ in range(3):
                runner.step()
            await until(pilot, lambda: "sweep finished · 8/8 cells" in screen_text(app), "done")
            text = screen_text(app)
            assert row_cells(text, "arm schedule") == ["150 ± 2.0", "420 ± 0.0"]
            assert row_cells(text, "arm adaptive") == ["120 ± 0.0", "500 ± 0.0"]
            vs = [line for line in text.splitlines() if "vs best k" in line]
            assert [re.split(r"\s{2,}", v.split("│")[1].strip())[1:] for v in vs] == [
                ["+0.0% (k=2)", "+5.0% (k=2)"],
                ["-20.0% (k=2)", "+25.0% (k=2)"],
            ]
            lines = text.splitlines()
            assert "…" not in "\n".join(lines[1:])  # only the header's folder path may be cut
            await pilot.press("q")
    finally:
        for _ in SCRIPT:
            runner.step()
        control.stop()
        control.join(30)
    assert control.result is not None
    assert [name for name in control.result.arms] == ["schedule", "adaptive"]
