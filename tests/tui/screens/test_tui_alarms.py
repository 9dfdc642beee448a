"""The monitor's header names the shown server's active acceptance alarms (Pilot), and
names none when there are none."""

from __future__ import annotations

from types import SimpleNamespace

from sinks.test_alarm_sink import result
from support.tui_fixtures import accumulate, run_captures
from support.tui_screen import screen_text

from specmon.sinks.alarms import AlarmSink, active_alarms
from specmon.tui.app import SpecmonApp


def session_with(accepted: int) -> SimpleNamespace:
    """A session view whose AlarmSink saw 25 requests of 10 steps, `accepted` drafts each."""
    sink = AlarmSink("s1")
    for _ in range(25):
        sink.on_result(result(accepted), None)
    return SimpleNamespace(
        accumulator=accumulate(run_captures(30)), artifact_dir=None, sinks=[sink], spec_method=None
    )


async def test_the_header_shows_an_active_alarm() -> None:
    session = session_with(0)  # acceptance length 1.0: garbled_drafter
    assert active_alarms(session) == ("garbled_drafter",)
    app = SpecmonApp(session, None, None, source="replay", freeze_elapsed=15.0)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        app.screen.refresh_data()  # a second tick: still one notification
        await pilot.pause()
        text = screen_text(app)
    header = text.splitlines()[:3]
    assert any("ALARM garbled_drafter" in line for line in header), header
    # one notification (Textual keeps the app's in `_notifications`), not one a tick
    assert [n.message for n in app._notifications].count(
        "acceptance alarm: garbled_drafter (docs/monitoring.md)"
    ) == 1


async def test_a_steady_session_shows_no_alarm() -> None:
    session = session_with(15)  # acceptance length 2.5
    assert active_alarms(session) == ()
    app = SpecmonApp(session, None, None, source="replay", freeze_elapsed=15.0)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        text = screen_text(app)
    assert "ALARM" not in text
