"""docs/architecture.md's module map names every module of the tree, and nothing stale."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "specmon"


def module_map() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = text.index("## Module map")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_every_module_is_in_the_map() -> None:
    section = module_map()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        rel = path.relative_to(PACKAGE)
        folder = "" if rel.parent == Path(".") else f"{rel.parent.as_posix()}/"
        named = f"`{rel.as_posix()}`" in section or (
            (not folder or folder in section) and f"`{path.name}`" in section
        )
        if not named:
            missing.append(rel.as_posix())
    assert missing == []


def test_every_path_in_the_map_exists() -> None:
    stale = [
        p for p in re.findall(r"`([\w/]+\.py)`", module_map()) if "/" in p
        and not (PACKAGE / p).is_file() and not (ROOT / p).is_file()
    ]  # fmt: skip
    assert stale == []
