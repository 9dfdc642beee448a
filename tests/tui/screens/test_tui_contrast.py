"""Every shipped theme is readable (issue 20 item 2): every widget rendered in every theme,
and wherever text is drawn its colour reaches the WCAG 2 AA contrast ratio (4.5) against the
background it is drawn on; panel borders and chart blocks (graphics) reach 3.

The colours are read from the composed screen (the segments Textual would send to the
terminal), so a hard-coded colour or an "auto" colour that resolves wrongly (white headline
labels on the light theme's near-white background) fails here. The contrast formula is
checked by hand first.
"""

from __future__ import annotations

import pytest
from support.tui_fixtures import accumulate, run_captures, session_view
from support.tui_tuning_fixtures import three_server_app
from support.watch_fixtures import watch_app
from textual.color import Color
from textual.geometry import Region
from textual.screen import ModalScreen

from specmon.tui.app import SpecmonApp
from specmon.tui.themes import (
    TEXT_CONTRAST,
    contrast_ratio,
    load_themes,
    relative_luminance,
    solid_text_variables,
)

THEMES = ("dark", "light", "monochrome")
GRAPHICS_CONTRAST = 3.0  # WCAG 2.1 1.4.11, non-text contrast (borders, bars)


def test_contrast_formula_by_hand():
    white, black = Color(255, 255, 255), Color(0, 0, 0)
    assert relative_luminance(white) == pytest.approx(1.0)
    assert relative_luminance(black) == 0.0
    assert contrast_ratio(white, black) == pytest.approx(21.0)
    assert contrast_ratio(black, white) == pytest.approx(21.0)
    # #777777: channel 119/255 = 0.4667 -> ((0.4667 + 0.055) / 1.055) ** 2.4 = 0.1845
    # ratio (1 + 0.05) / (0.1845 + 0.05) = 4.478 (the well-known "just fails AA" grey)
    assert contrast_ratio(Color(0x77, 0x77, 0x77), white) == pytest.approx(4.478, abs=0.002)


def test_every_shipped_theme_has_solid_text_colours():
    """No theme leaves text to Textual's "auto" (which is white without a background)."""
    themes = {t.name: t for t in load_themes()}
    assert {f"specmon-{n}" for n in THEMES} <= set(themes)
    for theme in themes.values():
        for key in ("text", "text-muted"):
            assert not theme.variables[key].startswith("auto"), (theme.name, key)


def test_muted_text_is_derived_for_a_theme_without_one():
    """A user theme with only the base colours gets a muted colour that still reads: the
    light theme's foreground #1F2328 on #FAFAF7 blended towards the background."""
    light = next(t for t in load_themes() if t.name == "specmon-light")
    light.variables = {}
    muted = Color.parse(solid_text_variables(light)["text-muted"])
    assert muted != Color.parse("#1F2328")  # it is muted
    for back in ("#FAFAF7", "#F0F1EC", "#E3E6DF"):
        assert contrast_ratio(muted, Color.parse(back)) >= TEXT_CONTRAST


GRAPHIC_RANGES = ((0x2500, 0x259F), (0x2800, 0x28FF), (0x25A0, 0x25FF))  # box, blocks, braille


def _is_graphic(ch: str) -> bool:
    return any(lo <= ord(ch) <= hi for lo, hi in GRAPHIC_RANGES)


def _readable_region(app) -> Region:
    """A modal screen dims the screen under it on purpose: only its own dialog is read."""
    screen = app.screen
    if not isinstance(screen, ModalScreen) or not screen.children:
        return screen.region
    return Region.from_union([child.region for child in screen.children])


def low_contrast(app) -> list[str]:
    """Each drawn character below its contrast floor, as 'row: text (ratio fg/bg)'."""
    bad = []
    region = _readable_region(app)
    for y, strip in enumerate(app.screen._compositor.render_strips()):
        if not region.y <= y < region.bottom:
            continue
        strip = strip.crop(region.x, region.right)
        for seg in strip:
            style = seg.style
            drawn = [ch for ch in seg.text if not ch.isspace()]
            if not drawn or style is None:
                continue
            assert style.color is not None and style.bgcolor is not None, (y, seg.text)
            fg, bg = Color(*style.color.get_truecolor()), Color(*style.bgcolor.get_truecolor())
            if style.reverse:
                fg, bg = bg, fg
            ratio = contrast_ratio(fg, bg)
            graphic = all(_is_graphic(ch) for ch in drawn)
            floor = GRAPHICS_CONTRAST if graphic else TEXT_CONTRAST
            if ratio < floor:
                text = seg.text.strip()[:24]
                bad.append(f"{y}: {text!r} ({ratio:.2f}: {fg.hex} on {bg.hex})")
    return bad


def recorded_app(theme: str) -> SpecmonApp:
    session = session_view(accumulate(run_captures(60)))
    return SpecmonApp(session, None, None, source="replay", freeze_elapsed=15.0, theme_name=theme)


async def _check_screens(app, size, steps) -> list[str]:
    """Render the app, then each step (keys pressed) from the main screen; collect faults."""
    faults: list[str] = []
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        faults += [f"{size} main: {f}" for f in low_contrast(app)]
        for keys, back in steps:
            await pilot.press(*keys)
            await pilot.pause()
            faults += [f"{size} {keys}: {f}" for f in low_contrast(app)]
            await pilot.press(*back)
            await pilot.pause()
    return faults


MAIN_STEPS = [((str(n),), (str(n),)) for n in range(1, 8)] + [
    (("question_mark",), ("escape",)),
    (("e",), ("escape",)),
    (("p",), ("p",)),
]


# the plotext charts (widgets/plot.py ThemedPlot): panel 2 and panel 3 maximized at 160x48
CHART_STEPS = [(("2",), ("escape",)), (("3",), ("escape",))]


@pytest.fixture(autouse=True)
def _colour(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)


@pytest.mark.parametrize("theme", THEMES)
async def test_monitor_text_contrast(theme):
    app = recorded_app(theme)
    faults = await _check_screens(app, (80, 24), MAIN_STEPS)
    faults += await _check_screens(recorded_app(theme), (160, 48), CHART_STEPS)
    faults += await _check_screens(
        recorded_app(theme), (120, 36), [(("home", "enter"), ("escape",))]
    )
    assert faults == []


async def test_no_color_monitor_contrast(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = recorded_app("light")  # NO_COLOR wins over the requested theme
    faults = await _check_screens(app, (80, 24), MAIN_STEPS[:3])
    assert app.theme == "specmon-monochrome"
    assert faults == []


async def test_theme_cycled_with_t_repaints_every_widget():
    """`t` from dark to light: widgets that drew before the change draw in the new colours
    (a cached dark label colour on the light background would fail)."""
    app = recorded_app("dark")
    faults: list[str] = []
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        for expected in ("specmon-light", "specmon-monochrome", "specmon-dark"):
            await pilot.press("t")
            await pilot.pause()
            await pilot.pause()
            assert app.theme == expected
            faults += [f"{expected}: {f}" for f in low_contrast(app)]
    assert faults == []


@pytest.mark.parametrize("theme", THEMES)
async def test_three_servers_and_watch_contrast(theme, tmp_path):
    app, _ = three_server_app()
    app.theme = f"specmon-{theme}"
    faults = await _check_screens(app, (160, 48), [(("8",), ("8",))])
    watch = watch_app(tmp_path)
    watch.theme = f"specmon-{theme}"
    faults += await _check_screens(watch, (100, 30), [])
    assert faults == []


@pytest.mark.parametrize("theme", THEMES)
async def test_sweep_view_contrast(theme, tmp_path):
    from specmon.tui.sweep_app import SweepApp
    from tui.screens.test_tui_sweep import fake_control, feed

    control, runner = fake_control(tmp_path)
    feed(runner)
    app = SweepApp(control, theme_name=theme)
    faults = await _check_screens(app, (80, 24), [])
    assert faults == []
