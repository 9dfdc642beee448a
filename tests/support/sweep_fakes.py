"""A tiny stand-in for specmon.analysis.sweep / kmodel, for the sweep-runner tests only.

`install()` puts it in sys.modules ONLY when the real modules are absent, so once the real
decision code is merged the same tests run against it. `sweep_argv(args)` is the command
line that runs `specmon sweep` in a child process with the stand-in installed.

The stand-in follows the documented rule (score = median - 1.4826 * MAD of output token
throughput, unstable above relative MAD 0.1, ties within 1% to the smaller k) so the tests'
own hand computation can check it; the runner under test only stores what it returns.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
import types
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


@dataclass
class Decision:
    concurrency: int
    best_k: int | None
    selected_k: int | None


def _mad(values: list[float]) -> float:
    med = statistics.median(values)
    return statistics.median(abs(v - med) for v in values)


def decide(cells: list) -> list[Decision]:
    out = []
    for c in sorted({cell.concurrency for cell in cells}):
        stats = {}
        for cell in cells:
            if cell.concurrency == c and cell.repeats:
                tput = [r.output_token_throughput for r in cell.repeats]
                stats[cell.k] = (statistics.median(tput), _mad(tput))
        best = max(stats, key=lambda k: stats[k][0]) if stats else None
        stable = {k: m - 1.4826 * d for k, (m, d) in stats.items() if m > 0 and d / m <= 0.1}
        selected = None
        if stable:
            top = max(stable.values())
            selected = min(k for k, s in stable.items() if s >= top * 0.99)
        out.append(Decision(c, best, selected))
    return out


class KModel:
    def to_dict(self) -> dict:
        return {"kind": "stand-in"}


def fit(cells: list) -> KModel:
    return KModel()


def build_schedule(decisions: list[Decision], model: object) -> dict:
    ranges, start = [], 1
    picked = [d for d in decisions if d.selected_k is not None]
    for i, d in enumerate(picked):
        end = picked[i + 1].concurrency - 1 if i + 1 < len(picked) else max(d.concurrency, start)
        ranges.append([start, end, d.selected_k])
        start = end + 1
    return {"num_speculative_tokens_per_batch_size": ranges}


def write_schedule(path: Path, schedule: dict) -> None:
    Path(path).write_text(json.dumps(schedule))


def render_sweep_tables(cells: list, decisions: list, schedule: dict, model: object) -> str:
    picks = " ".join(f"c{d.concurrency}:k{d.selected_k}" for d in decisions)
    return f"STAND-IN TABLES {picks}"


def install() -> None:
    if importlib.util.find_spec("specmon.analysis.sweep") is not None:
        return  # the real decision code is there: use it
    sweep = types.ModuleType("specmon.analysis.sweep")
    for name in ("Decision", "decide", "build_schedule", "write_schedule", "render_sweep_tables"):
        setattr(sweep, name, globals()[name])
    kmodel = types.ModuleType("specmon.analysis.kmodel")
    kmodel.KModel, kmodel.fit = KModel, fit
    import specmon.analysis as analysis

    sys.modules["specmon.analysis.sweep"] = sweep
    sys.modules["specmon.analysis.kmodel"] = kmodel
    analysis.sweep, analysis.kmodel = sweep, kmodel


LAUNCH = (
    "import sys; sys.path.insert(0, {tests!r}); from support import sweep_fakes; sweep_fakes.install(); "
    "{prelude}; from specmon.cli import main; sys.exit(main(sys.argv[1:]))"
)


# For a child whose sweep WIRING is under test (the schedule arm, its rows), not its figures:
# the simulator-fidelity bar (decision/sweep_types.py SERVER_LAG_LIMIT, 2%) lifted, so a busy
# machine's lag cannot gate out every k > 0. Seen under one busy core with 0.5 s segments:
# k=2 measured twice k=0's throughput, but ran +16% off its formula's per-token time, was
# excluded, k=0 was selected at every load and no schedule arm was measured.
NO_FIDELITY_GATE = "import specmon.decision.sweep_types as _t; _t.SERVER_LAG_LIMIT = float('inf'); "


def sweep_argv(args: list[str], command: str = "sweep", prelude: str = "pass") -> list[str]:
    """`python -c ... sweep ARGS`: `specmon sweep` with the stand-in (when needed);
    `prelude` is Python run first in the child (to adjust a module constant)."""
    code = LAUNCH.format(tests=str(TESTS), prelude=prelude)
    return [sys.executable, "-c", code, command, *args]
