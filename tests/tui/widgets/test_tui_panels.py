"""Panels are declared once (specmon/tui/panels.py): a new entry gets its place in the
layout, a key that maximizes it, its title and a help line, with no other edit."""

from __future__ import annotations

from support.tui_fixtures import accumulate, session_view, small_captures
from support.tui_screen import screen_text
from textual.widgets import Static

from specmon.tui.app import SpecmonApp
from specmon.tui.panels import PANELS, PanelSpec, keyed, panel_bindings

DUMMY = PanelSpec(
    "panel-dummy",
    "0 Dummy panel",
    ("row-mid",),
    lambda: [Static("DUMMY-BODY", id="dummy-body")],
    key="0",
    name="Dummy",
    help="maximize the dummy panel (a test's)",
)


class DummyApp(SpecmonApp):
    PANEL_SPECS = (*PANELS, DUMMY)


def dummy_app(app_type: type[SpecmonApp] = DummyApp) -> SpecmonApp:
    session = session_view(accumulate(small_captures()))
    return app_type(session, None, None, source="replay", freeze_elapsed=1.0)


def test_every_panel_key_is_bound_once():
    keys = [p.key for p in keyed(PANELS)]
    assert keys == [str(n) for n in range(1, 10)]
    bindings = panel_bindings(PANELS)
    assert [b.key for b in bindings] == keys
    assert [b.show for b in bindings] == [True] + [False] * 8  # one footer entry


async def test_the_layout_nests_panels_in_their_places():
    app = dummy_app(SpecmonApp)
    async with app.run_test(size=(160, 48)):
        screen = app.screen

        def ids(selector: str) -> list[str | None]:
            return [c.id for c in screen.query_one(selector).children]

        assert [c.id for c in screen.children] == [
            "header",
            "panel-head",
            "panel-servers",
            "row-top",
            "row-tune",
            "row-mid",
            "panel-log",
            None,  # the footer
        ]
        assert ids("#row-tune") == ["panel-whatif", "panel-segments", "slot-sweep"]
        assert ids("#col-hist") == ["panel-hist", "slot-health"]
        assert ids("#slot-health") == ["panel-health"]


async def test_a_new_entry_gets_a_key_a_title_a_help_line_and_maximizes():
    app = dummy_app()
    async with app.run_test(size=(160, 48)) as pilot:
        panel = app.query_one("#panel-dummy")
        assert panel.border_title == "0 Dummy panel" and panel.parent is not None
        assert panel.parent.id == "row-mid"
        await pilot.press("0")
        assert app.screen.maximized is panel
        assert "DUMMY-BODY" in screen_text(app)
        await pilot.press("escape")
        assert app.screen.maximized is None
        await pilot.press("question_mark")
        await pilot.pause()
        assert "maximize the dummy panel (a test's)" in screen_text(app)


async def test_without_the_entry_the_key_does_nothing():
    app = dummy_app(SpecmonApp)
    async with app.run_test(size=(160, 48)) as pilot:
        assert not app.query("#panel-dummy")
        await pilot.press("0")
        assert app.screen.maximized is None
