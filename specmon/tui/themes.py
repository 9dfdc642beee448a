"""Theme files (themes/*.toml) -> Textual themes, and resolving --theme NAME."""

from __future__ import annotations

import importlib.util
import os
import tomllib
from pathlib import Path

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
    return theme


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
    """--theme NAME (with or without the 'specmon-' prefix); NO_COLOR forces monochrome."""
    if no_color and MONOCHROME_THEME in available:
        return MONOCHROME_THEME
    if not requested:
        return DEFAULT_THEME if DEFAULT_THEME in available else available[0]
    for candidate in (requested, f"specmon-{requested}"):
        if candidate in available:
            return candidate
    raise UserError(f"unknown theme '{requested}' (available: {', '.join(sorted(available))})")


def check_theme(requested: str | None) -> str | None:
    """Validate --theme before any load starts (a one-line UserError naming the choices)."""
    if not requested:
        return None
    return resolve_theme(requested, [theme.name for theme in load_themes()], no_color=False)
