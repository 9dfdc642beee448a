"""The monitor at every size (issue 36 items 3, 5, 6, 8): the headline on screen down to
40x12 (one line: AL, out tok/s, the recommended k), no header or panel that cuts a number
or a URL at 80x24, 100x30 and 160x48, the time series without blank columns and with the
current value inside its range, and the speculative method in the header."""

from __future__ import annotations

import re

import pytest
from support.tui_fixtures import accumulate, run_captures, session_view
from support.tui_screen import screen_text

from specmon.interfaces import MonitorConfig
from specmon.specdecode.method import SpecMethod
from specmon.tui.app import SpecmonApp
from specmon.tui.model.series import SERIES

URL = "http://gpu-node-17.example.internal:8000"
HEAD = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
BIG = [(80, 24), (100, 30), (160, 48)]
SMALL = [(40, 12), (60, 16)]


def live_app() -> SpecmonApp:
    """The recorded run as a live one would look: a long model id and host name."""
    session = session_view(accumulate(run_captures(60)))
    session.spec_method = SpecMethod("eagle3", HEAD, "server")
    config = MonitorConfig(
        targets=[URL], model="meta-llama/Llama-3.1-8B-Instruct", concurrency=16, request_count=1000
    )
    return SpecmonApp(session, None, config, source="live", freeze_elapsed=15.0)


async def shown(app: SpecmonApp, size: tuple[int, int]) -> str:
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.3)
        return screen_text(app)


def cut_values(text: str) -> list[str]:
    """Every place an ellipsis cuts a number, a unit after a number, or a URL."""
    return re.findall(r"\S*(?:\d|https?:/*|[a-z0-9-]+\.[a-z]+:?)…", text)


@pytest.mark.parametrize("size", BIG, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_no_cut_number_or_url(size):
    text = await shown(live_app(), size)
    assert cut_values(text) == [], text
    header = text.splitlines()[:2]
    assert URL.removeprefix("http://") in header[0]  # whole (http:// is dropped below 160)
    assert "elapsed 00:15" in header[1] and "60/1000" in header[1]
    assert "vllm EAGLE-3 k=3" in header[0]  # the method, as the server named it


@pytest.mark.parametrize("size", SMALL + BIG, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_headline_stays_on_screen(size):
    """AL 2.65 and 73.3 out tok/s are the recorded run's (the stats table's avg rows)."""
    text = await shown(live_app(), size)
    if size[0] < 80 or size[1] < 24:
        line = next(line for line in text.splitlines() if line.startswith(" AL 2.65 · "))
        assert "73.3 tok/s" in line and "measured k=3" in line
    else:
        assert re.search(r"^ AL 2\.65  tok-wtd AL 2\.66", text, re.M)
        assert re.search(r"^ out tok/s 73\.3 \(10 s: [\d.]+\)", text, re.M)


def series_rows(text: str) -> dict[str, tuple[float, str, float, float]]:
    """Each one-row series: its current value, sparkline and shown min..max."""
    rows = {}
    for spec in SERIES:
        m = re.search(
            rf"^{re.escape(spec.name)}\s+([\d,.]+) (.*?) ([\d,.]+)\.\.([\d,.]+)\s*$", text, re.M
        )
        assert m, f"no {spec.name} row in\n{text}"
        num = [float(m[i].replace(",", "")) for i in (1, 3, 4)]
        rows[spec.key] = (num[0], m[2].strip(), num[1], num[2])
    return rows


@pytest.mark.parametrize("size", [(40, 12), (80, 24), (100, 30)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_series_current_in_range_and_no_blank_column(size):
    """The recorded run ends a request every 250 ms: the columns are at least 5 ends long
    (1.25 s), so none is blank, and each current value lies in its row's min..max."""
    rows = series_rows(await shown(live_app(), size))
    for key, (current, spark, lo, hi) in rows.items():
        assert lo <= current <= hi, (key, current, lo, hi)
        assert " " not in spark and "×" not in spark, (key, spark)
        assert len(spark) >= 4  # at 40x12 the narrowest sparkline still shows 4 columns


@pytest.fixture
def _colour(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)


@pytest.mark.usefixtures("_colour")
@pytest.mark.parametrize("size", [(40, 12), *BIG], ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot(snap_compare, size):
    """The screens the tests above read, as SVG baselines (update with --snapshot-update
    after checking them by eye)."""
    assert snap_compare(live_app(), terminal_size=size)


async def test_segments_table_wraps_settings_not_figures():
    """A 76-column segments panel (its width at 160x48) with long settings: the settings
    wrap at words; every header and figure stays whole (it cut 'out tok…' and 'best…')."""
    from textual.app import App

    from specmon.tui.widgets.tuning import SegmentsView

    settings = "conc=16 rate=8.0/s osl=512 isl=1024"
    row = ("0", "gpu-a", settings, "4", "1,234", "3.21", "12.34", "12,345.6", "45.67", "5")

    class One(App[None]):
        def compose(self):
            yield SegmentsView(id="seg")

    app = One()
    async with app.run_test(size=(76, 12)) as pilot:
        app.query_one(SegmentsView).show([row], "")
        await pilot.pause(0.2)
        text = screen_text(app)
    assert "AL  TPOT ms  out tok/s  req/s  best k" in text, text
    assert "3.21    12.34   12,345.6  45.67       5" in text
    assert "…" not in text and "isl=1024" in text  # the settings wrapped, whole
