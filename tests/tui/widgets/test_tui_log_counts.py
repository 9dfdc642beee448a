"""The request log and the header count the same requests (issue 20 item 5: "the header
said 116 done while the log said 57 shown with rows up to #130"), and an acceptance alarm
is a log line right after the request it started with (item 7: "They show in the header
and log"). Counts worked out by hand from the captures fed."""

from __future__ import annotations

import re

from support.tui_fixtures import make_capture
from support.tui_screen import screen_text, until

from specmon.capture import RawCapture
from specmon.session import RunSession
from specmon.sinks.alarms import AlarmSink
from specmon.tui.app import SpecmonApp
from specmon.tui.requests import LogCounts, log_title
from specmon.tui.widgets.request_log import RequestLog

GARBLED = [10, 0, 0, 0]  # ten steps, no draft accepted: acceptance length 1.0


def captures() -> list[dict]:
    """30 requests; before every 4th one an attempt the load loop sent again (a connection
    error marked retried, as LoadGenerator._record_retry does); then one cut by the stop."""
    out = []
    for i in range(1, 31):
        if i % 4 == 0:
            retry = make_capture(900 + i, None, start_ms=100.0 * i - 50, error="connection_error")
            retry["error"]["retried"] = True
            out.append(retry)
        out.append(make_capture(i, GARBLED, start_ms=100.0 * i))
    cut = make_capture(999, None, start_ms=3200.0, error="cancelled")
    out.append(cut)
    return out


def live_session(tmp_path) -> RunSession:
    """A session with the AlarmSink as run/assemble.make_session registers it."""
    session = RunSession(tmp_path / "run", "records", {})
    session.add_sink(AlarmSink("s1", None, None, log=session.accumulator.results))
    for capture in captures():
        session.add(RawCapture.from_dict(capture))
    return session


def test_log_title_counts_requests_as_the_header_does():
    # 38 rows: 30 requests + 7 retried attempts + 1 cancelled
    counts = LogCounts(rows=38, retried=7, cancelled=1)
    assert counts.requests == 30
    assert log_title(counts) == "30 requests + 7 retried attempts + 1 cancelled shown · following"
    assert log_title(LogCounts(rows=60)) == "60 shown · following"  # nothing but requests
    filtered = LogCounts(rows=38, retried=7, cancelled=1, shown=6, pending=2)
    assert log_title(filtered, "math") == (
        "6 shown · filter 'math' of 38 (30 requests + 7 retried attempts + 1 cancelled)"
        " · 2 new (end follows)"
    )
    assert (
        log_title(LogCounts(rows=5, retried=1))
        == "4 requests + 1 retried attempt shown · following"
    )


async def test_header_and_log_agree_and_the_alarm_is_a_log_line(tmp_path):
    session = live_session(tmp_path)
    acc = session.accumulator
    # 30 valid + 7 retried connection errors + 1 cancelled = 38 rows; the header's done is
    # completed + errors - retries = 30 + 7 - 7 = 30
    assert (acc.request_count, acc.error_count, acc.cancelled_count) == (30, 7, 1)
    app = SpecmonApp(session, None, None, source="replay", freeze_elapsed=15.0)
    async with app.run_test(size=(120, 48)) as pilot:
        await pilot.press("5")  # the log maximized: every row in view
        log = app.query_one(RequestLog)
        # 38 rows and the alarm's line (placed at a refresh tick once its request is in)
        await until(pilot, lambda: log.line_count == 39, "38 rows and the alarm line")
        await pilot.pause()
        text = screen_text(app)
    header = "\n".join(text.splitlines()[:3])
    assert re.search(r"\b30 done\b", header), header
    assert "30 requests + 7 retried attempts + 1 cancelled shown" in text
    lines = text.splitlines()
    rows = [line for line in lines if re.match(r"\W*\s+\d+ req-", line)]
    assert sum("retried connection_error" in row for row in rows) == 7
    # garbled_drafter starts with the 20th valid request: 20 + the 5 retried attempts before
    # it (before requests 4, 8, 12, 16 and 20) = row 25, and its line comes right after it
    (alarm,) = session.sinks[-1].monitor.alarms
    assert (alarm.name, alarm.since_request, alarm.log_index) == ("garbled_drafter", 20, 24)
    at = next(i for i, line in enumerate(lines) if re.search(r"\s25 req-0020\s", line))
    assert "! ALARM garbled_drafter at #25: acceptance length 1.00" in lines[at + 1]
    assert re.search(r"\s26 req-0021\s", lines[at + 2])  # the rows go on after it


async def test_the_title_counts_the_rows_of_the_same_paint(tmp_path):
    """The title is written with the rows it counts: requests landing while the monitor
    runs, one refresh, and the title already says so (no message to wait for; a busy
    machine showed '57 shown' over rows up to #130)."""
    session = RunSession(tmp_path / "run", "records", {})
    app = SpecmonApp(session, None, None, source="replay", freeze_elapsed=15.0)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        for i in range(1, 13):
            session.add(RawCapture.from_dict(make_capture(i, GARBLED, start_ms=100.0 * i)))
        app.screen.refresh_data()  # one tick, no await: no message has been handled since
        title = str(app.screen.query_one("#panel-log").border_title)
        assert app.query_one(RequestLog).shown_count == 12
        assert title.endswith(" · 12 shown · following"), title


async def test_a_filter_keeps_the_alarm_line_and_it_opens_its_request(tmp_path):
    session = live_session(tmp_path)
    app = SpecmonApp(session, None, None, source="replay", freeze_elapsed=15.0)
    async with app.run_test(size=(120, 36)) as pilot:
        log = app.query_one(RequestLog)
        await until(pilot, lambda: log.line_count == 39, "38 rows and the alarm line")
        log.set_filter("alarm")  # no request row says "alarm": only the note is left
        await pilot.pause()
        text = screen_text(app)
        assert log.shown_count == 0 and log.line_count == 1
        assert "! ALARM garbled_drafter at #25" in text
        assert "0 shown · filter 'alarm' of 38 (30 requests + 7 retried attempts" in text
        log.cursor = 0
        assert log.selected_index() == 24  # the note stands for its request (row #25)
        log.set_filter("")
        await pilot.pause()
        assert log.line_count == 39 and log.shown_count == 38  # 38 rows and the note


async def test_a_source_set_after_a_paint_still_gets_its_alarm_line(tmp_path):
    """A refresh tick can paint before the screen's mount sets the log's source (which
    starts the log's notes afresh); the next ticks, with nothing new to paint, must still
    place the alarm's line (it never showed on some starts)."""
    session = live_session(tmp_path)
    app = SpecmonApp(session, None, None, source="replay", freeze_elapsed=15.0)
    async with app.run_test(size=(120, 36)) as pilot:
        log = app.query_one(RequestLog)
        await until(pilot, lambda: log.line_count == 39, "38 rows and the alarm line")
        log.set_source(session.accumulator.results)  # as the mount does, after a paint
        assert log.line_count == 38
        app.screen.refresh_data()  # the same figures as painted: only the log moves
        assert log.line_count == 39
