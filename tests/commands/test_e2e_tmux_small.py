"""End to end at the small sizes (issue 36 items 3 and 8): `specmon demo` in a 40x12 and a
60x16 tmux pane keeps a one-line headline (AL, out tok/s, the recommended k) on screen,
its AL the export's, and the time series' current values inside their shown ranges."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest
from support.tmux_pane import Pane

pytestmark = pytest.mark.e2e

REQUESTS = 120
HEADLINE = re.compile(r"^ AL ([\d.]+) · ([\d,.]+) tok/s.* · (best k=\d+|\S.*)$", re.M)
# name, current, the sparkline without a blank inside (out tok/s may end in one: its newest
# tokens are not complete yet, model/series.py), min..max
SERIES_ROW = re.compile(r"^(AL|out tok/s)\s+([\d,.]+)\s+\S+\s+([\d,.]+)\.\.([\d,.]+)", re.M)


def headline(text: str) -> tuple[str, str] | None:
    m = HEADLINE.search(text)
    return (m[1], m[2]) if m else None


@pytest.mark.parametrize("size", [(40, 12), (60, 16)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_small_pane_keeps_the_headline(tmp_path: Path, size):
    art = tmp_path / "art"
    cmd = (
        f"{shlex.quote(sys.executable)} -m specmon demo --request-count {REQUESTS} "
        f"--concurrency 4 --step-ms 4 --artifact-dir {shlex.quote(str(art))}; "
        f"echo SPECMON-EXITED $?; sleep 60"
    )
    pane = Pane(cmd, width=size[0], height=size[1])
    try:
        pane.wait_for(lambda t: headline(t) is not None, "the one-line headline")
        pane.wait_for(lambda t: f"{REQUESTS}/{REQUESTS}" in t, "the finished run", 120)
        last = pane.settled(headline, "the final headline")
        pane.keys("q")
        pane.wait_for(lambda t: "SPECMON-EXITED 0" in t, "a clean exit", 60)
    finally:
        pane.close()
    lines = last.splitlines()
    assert len(lines) <= size[1] and all(len(line) <= size[0] for line in lines)
    al, _ = headline(last)
    doc = json.loads((art / "profile_export_aiperf.json").read_text())
    assert f"{doc['spec_decode_acceptance_length']['avg']:,.2f}" == al
    rows = SERIES_ROW.findall(last)
    assert [name for name, *_ in rows] == ["AL", "out tok/s"], last
    for name, current, lo, hi in rows:
        value, low, high = (float(x.replace(",", "")) for x in (current, lo, hi))
        assert low <= value <= high, (name, current, lo, hi)
