"""`specmon demo --num-spec-tokens 0,2` (issue 20 item 5): k = 0 is the documented
no-speculation baseline of `specmon sim`, so the demo takes it, starts that simulator and
prints the others' speedups against it (the side-by-side table's Δ% column)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from specmon.commands.demo import parse_ks
from specmon.sim.config import parse_acceptance


def test_k_lists_take_the_baseline():
    assert parse_ks("0,2,4") == [0, 2, 4]
    with pytest.raises(Exception, match="every k must be at least 0"):
        parse_ks("-1,2")
    # the baseline's acceptance list is empty, and a child simulator must read it back
    assert parse_acceptance("", 0) == []


@pytest.mark.e2e
def test_demo_with_a_baseline_prints_its_speedup(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "specmon", "demo", "--headless", "--num-spec-tokens", "0,2"]
        + ["--request-count", "8", "--artifact-dir", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]
    table = proc.stdout[proc.stdout.index("Servers side by side") :]
    assert re.search(r"^metric\s+unit\s+k0\s+k2\s+Δ\s+Δ%", table, re.M)
    row = next(line for line in table.splitlines() if line.startswith("Output Token Throughput"))
    k0, k2, delta, pct = (float(v.replace(",", "").rstrip("%")) for v in row.split()[-4:])
    # Δ = k2 - k0 and Δ% = 100 Δ / k0, from the printed figures (2 decimals each)
    assert delta == pytest.approx(k2 - k0, abs=0.02)
    assert pct == pytest.approx(100 * (k2 - k0) / k0, abs=0.05)
