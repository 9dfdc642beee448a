"""Nothing in specmon/ is defined and never named again: a function, method or class that
no code, test or benchmark names is dead weight a reader must still understand (the round-3
review found six: helpers left behind when their callers moved, two of them properties).
A name only tests use is not caught here: that is a test of an API, or of an oracle.

A name counts as used when it appears as a word anywhere else: in specmon/ (a call, an
attribute, a string looked up), tests/, benchmarks/ or pyproject.toml. A definition under a
decorator that registers it (Textual's `@on`, pydantic's validators) is used by that; so
are the framework hooks named by convention (Textual's on_/action_/watch_/compose/render,
dunders)."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from paths import ROOT

PLAIN_DECORATORS = {"property", "classmethod", "staticmethod", "cached_property", "cache",
                    "overload", "dataclass"}  # fmt: skip
HOOK_PREFIXES = ("on_", "_on_", "action_", "watch_", "compose", "render", "validate_", "key_")
HOOKS = {"get_default_screen"}  # Textual's App hook: called by the framework, by name
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr
    return target.id if isinstance(target, ast.Name) else ""


def _registered(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
    return any(_decorator_name(d) not in PLAIN_DECORATORS for d in node.decorator_list)


def _exempt(name: str) -> bool:
    return (
        (name.startswith("__") and name.endswith("__"))
        or name.startswith(HOOK_PREFIXES)
        or name in HOOKS
    )


def unused_definitions(root: Path) -> list[str]:
    """'path:line name' of every definition in root/specmon named nowhere else."""
    sources = sorted((root / "specmon").rglob("*.py"))
    elsewhere = [
        *sorted((root / "tests").rglob("*.py")),
        *sorted((root / "benchmarks").rglob("*.py")),
    ]
    texts = [p.read_text(encoding="utf-8") for p in [*sources, *elsewhere]]
    pyproject = root / "pyproject.toml"
    if pyproject.exists():
        texts.append(pyproject.read_text(encoding="utf-8"))
    words = Counter(w for text in texts for w in WORD.findall(text))
    out = []
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if _exempt(node.name) or _registered(node) or words[node.name] > 1:
                continue
            out.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    return out


def test_the_rule_finds_a_definition_nothing_names(tmp_path):
    (tmp_path / "specmon").mkdir()
    (tmp_path / "specmon" / "m.py").write_text(
        "def used():\n    return 1\n\n\ndef dead_one():\n    return used()\n\n\n"
        "class C:\n    @property\n    def dead_two(self):\n        return 2\n\n"
        "    def on_mount(self):\n        return 3\n\n\nINSTANCE = C()\n"
    )
    assert unused_definitions(tmp_path) == ["specmon/m.py:5 dead_one", "specmon/m.py:11 dead_two"]


def test_nothing_in_specmon_is_defined_and_never_named():
    assert unused_definitions(ROOT) == []
