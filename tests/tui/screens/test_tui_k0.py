"""k=0 is a named arm on screen (issue 31 item 4): a server whose answered requests carried
no spec-decode record and whose /metrics counted no verify step is "k=0 (no speculation)"
in the header, on its card and "k=0" in the narrow strip, never "k=?"; a server with the
same requests whose counters did count verify steps shows the counters' k instead."""

from __future__ import annotations

from types import SimpleNamespace

from support.tui_screen import screen_text
from support.tui_tuning_fixtures import (
    H2,
    StubMulti,
    StubPoller,
    capture_k,
    delta_of,
    run_config,
    session_of,
)

from specmon.formatting import k_label
from specmon.tui.app import SpecmonApp
from specmon.tui.model.figures import shown_k
from specmon.tui.tuning_view import CounterStatus

WIDE = (160, 48)


def test_k_names():
    assert k_label(0) == "k=0 (no speculation)"
    assert k_label(0, short=True) == "k=0"
    assert k_label(None) == "k=?" and k_label(4) == "k=4" and k_label(4, short=True) == "k=4"


def test_shown_k_rules():
    quiet = SimpleNamespace(
        request_count=5, fidelity=None, zero_step_requests=0, num_spec_tokens=None
    )
    assert shown_k(quiet, None) == 0  # no counters on /metrics: no speculation
    assert shown_k(quiet, CounterStatus([], None, None, no_drafts=True)) == 0
    # counters not sampled yet: not known, not k=0
    assert shown_k(quiet, CounterStatus([], None, None)) is None
    assert shown_k(quiet, CounterStatus([], {0: 1, 1: 1}, 3)) == 3  # counters-only k=3
    waiting = SimpleNamespace(
        request_count=0, fidelity=None, zero_step_requests=0, num_spec_tokens=None
    )
    assert shown_k(waiting, None) is None  # nothing answered yet


def k0_app(pollers=None) -> SpecmonApp:
    sessions = {
        "k0": session_of([capture_k(1, None, 0), capture_k(2, None, 0)]),
        "k2": session_of([capture_k(1, H2, 2)]),
    }
    runner = StubMulti(sessions, pollers)
    return SpecmonApp(sessions["k0"], runner, run_config(), freeze_elapsed=1.0)


async def test_a_k0_server_is_named_on_its_card_header_and_strip():
    app = k0_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "▶ k0 · k=0 (no speculation)" in text and "k2 · k=2" in text
        assert "k=0,2 · showing k0" in text
        assert "k=?" not in text
    app = k0_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        line = next(x for x in screen_text(app).splitlines() if "k2 k=2" in x)
        assert "▶k0 k=0 AL" in line and "k=?" not in line


async def test_a_counters_only_server_shows_its_counters_k_not_0():
    # the same payload-less requests, but /metrics counted k=3 steps: h = [1, 1, 1, 1]
    app = k0_app({"k0": StubPoller(delta_of([1, 1, 1, 1]))})
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "k0 · k=3 · server-wide" in text
        assert "no speculation" not in text


def test_counters_without_steps_say_yet_only_before_any_answer():
    from specmon.tui.tuning_view import counter_status

    view = StubPoller(delta_of([0, 0, 0])).latest()  # k=2 counters, no verify step counted
    before = counter_status(view, SimpleNamespace(request_count=0))
    after = counter_status(view, SimpleNamespace(request_count=12))
    assert before.no_drafts and after.no_drafts
    assert before.lines[0].endswith("no verify steps yet")
    assert after.lines[0].endswith("no verify steps: no speculation on this server")
