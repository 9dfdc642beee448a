"""Theme files (themes/*.toml) -> Textual themes, and resolving --theme NAME."""

from __future__ import annotations

import importlib.util
import os
import tomllib
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from textual.app import App
from textual.color import Color
from textual.theme import Theme

from specmon.errors import UserError


def bundled_theme_dir() -> Path:
    """themes/ at the repository root; installed, it is the package `specmon.themes`.

    A checkout (also an editable install) reads the repository's folder directly; a wheel or
    `pip install .` carries the same files as `specmon.themes` (setup.py maps the folder).
    """
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file() and (checkout / "themes").is_dir():
        return checkout / "themes"
    spec = importlib.util.find_spec("specmon.themes")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return checkout / "themes"  # absent: load_themes finds nothing, errors name the choices


THEME_DIR = bundled_theme_dir()
USER_THEME_DIR = (
    Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "specmon" / "themes"
)
DEFAULT_THEME = "specmon-dark"
MONOCHROME_THEME = "specmon-monochrome"
COLOR_KEYS = (
    "primary",
    "secondary",
    "warning",
    "error",
    "success",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)
ALLOWED = {"name", "dark", "variables", *COLOR_KEYS}
# WCAG 2 AA for text: every text colour a widget draws must reach this contrast ratio
# against every background a theme paints (docs/themes: "one palette").
TEXT_CONTRAST = 4.5
# The backgrounds text is drawn on: the screen, the header and panels, the headline strip.
BACKGROUND_KEYS = ("background", "surface", "panel")


def theme_from_toml(path: Path) -> Theme:
    """One theme file; a bad file is a one-line UserError naming the file and the key."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"theme file {path}: {exc}") from None
    unknown = sorted(set(data) - ALLOWED)
    if unknown:
        raise UserError(
            f"theme file {path}: unknown key '{unknown[0]}' (allowed: {', '.join(sorted(ALLOWED))})"
        )
    if not isinstance(data.get("primary"), str):
        raise UserError(f"theme file {path}: 'primary' colour is required")
    name = data.get("name", path.stem)
    colors = {k: data[k] for k in COLOR_KEYS if k in data}
    try:
        theme = Theme(
            name=str(name),
            dark=bool(data.get("dark", True)),
            variables=dict(data.get("variables", {})),
            **colors,
        )
        theme.to_color_system()  # parses every colour now, not at first paint
    except Exception as exc:  # textual raises ColorParseError and friends
        raise UserError(f"theme file {path}: {exc}") from None
    theme.variables = {**solid_text_variables(theme), **theme.variables}
    return theme


@runtime_checkable
class Restyles(Protocol):
    """A widget that styles its content from component classes when it paints, and keeps
    what it painted: after a theme change it must paint again (restyle())."""

    def forget_shown(self) -> None: ...


def restyle(app: App[Any]) -> None:
    """After a theme change, every Restyles widget on every screen forgets what it showed."""
    for screen in app.screen_stack:
        for widget in screen.walk_children(with_self=False):
            if isinstance(widget, Restyles):
                widget.forget_shown()


def relative_luminance(color: Color) -> float:
    """WCAG 2 relative luminance of an opaque colour (0 black .. 1 white)."""

    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(color.r) + 0.7152 * channel(color.g) + 0.0722 * channel(color.b)


def contrast_ratio(a: Color, b: Color) -> float:
    """WCAG 2 contrast ratio, 1 (same) .. 21 (black on white)."""
    la, lb = relative_luminance(a), relative_luminance(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def solid_text_variables(theme: Theme) -> dict[str, str]:
    """`text` and `text-muted` as solid colours of this theme.

    Textual's defaults are "auto 87%" / "auto 60%": a contrast colour chosen against the
    background at paint time. A widget that styles a span from a component class
    (get_component_rich_style(partial=True)) gets no background to contrast with, and
    "auto" falls back to white: --theme light drew every headline label white on white.
    Solid colours from the theme's own foreground avoid that; muted is the foreground
    blended towards the background as far as the text contrast still holds on every
    background the theme paints.
    """
    fg = Color.parse(theme.foreground or ("#e0e0e0" if theme.dark else "#1e1e1e"))
    backs = [Color.parse(c) for k in BACKGROUND_KEYS if (c := getattr(theme, k, None))]
    backs = backs or [Color.parse("#000000" if theme.dark else "#ffffff")]
    muted = fg
    for step in range(1, 10):  # 10% .. 90% of the way to the background
        candidate = fg.blend(backs[0], step / 10)
        if min(contrast_ratio(candidate, b) for b in backs) < TEXT_CONTRAST + 0.3:
            break
        muted = candidate
    # the scrollbar thumb is muted text on the panel colour: it keeps the 3:1 of graphics
    panel = theme.panel or backs[-1].hex
    return {
        "text": fg.hex,
        "text-muted": muted.hex,
        "scrollbar": muted.hex,
        "scrollbar-hover": fg.hex,
        "scrollbar-active": fg.hex,
        "scrollbar-background": panel,
        "scrollbar-background-hover": panel,
        "scrollbar-background-active": panel,
    }


def load_themes(dirs: tuple[Path, ...] = (THEME_DIR, USER_THEME_DIR)) -> list[Theme]:
    """Every *.toml theme in the bundled and the user's theme folders (user files win)."""
    found: dict[str, Theme] = {}
    for folder in dirs:
        if folder.is_dir():
            for path in sorted(folder.glob("*.toml")):
                theme = theme_from_toml(path)
                found[theme.name] = theme
    return list(found.values())


def resolve_theme(requested: str | None, available: list[str], no_color: bool) -> str:
    """--theme NAME (with or without the 'specmon-' prefix); NO_COLOR forces monochrome.
    The error lists the short names (dark, light, monochrome), as the README does."""
    if no_color and MONOCHROME_THEME in available:
        return MONOCHROME_THEME
    if not requested:
        return DEFAULT_THEME if DEFAULT_THEME in available else available[0]
    for candidate in (requested, f"specmon-{requested}"):
        if candidate in available:
            return candidate
    names = sorted(name.removeprefix("specmon-") for name in available)
    raise UserError(f"unknown theme '{requested}' (available: {', '.join(names)})")


def check_theme(requested: str | None) -> str | None:
    """Validate --theme before any load starts (a one-line UserError naming the choices)."""
    if not requested:
        return None
    return resolve_theme(requested, [theme.name for theme in load_themes()], no_color=False)
