"""Nothing in specmon/ is defined and never named again: a function, method or class that
no code, test or benchmark names is dead weight a reader must still understand (the round-3
review found six: helpers left behind when their callers moved, two of them properties).
A name only tests use is not caught here: that is a test of an API, or of an oracle.

A name counts as used when it appears as a word anywhere else: in specmon/ (a call, an
attribute, a string looked up), tests/, benchmarks/ or pyproject.toml. A definition under a
decorator that registers it (Textual's `@on`, pydantic's validators) is used by that; so
are the framework hooks named by convention (Textual's on_/action_/watch_/compose/render,
dunders). The same for a module: one nothing imports (by an import, or by its dotted name
as a string, as cli.py names the commands) is left over."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from support.paths import ROOT

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


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path, root: Path) -> set[str]:
    """The specmon modules a file imports or names: `import a.b`, `from a import b` (a.b
    and a), relative imports resolved, and string literals 'specmon.x.y'."""
    here = _module_name(path, root)
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = here.split(".") if path.name == "__init__.py" else here.split(".")[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join(package + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.startswith("specmon."):
                out.add(node.value)
    return out


def unimported_modules(root: Path) -> list[str]:
    """Modules of root/specmon that no file of specmon/, tests/ or benchmarks/ imports (a
    package counts as imported with any of its modules)."""
    sources = sorted((root / "specmon").rglob("*.py"))
    readers = [*sources, *(root / "tests").rglob("*.py"), *(root / "benchmarks").rglob("*.py")]
    named: set[str] = set()
    for path in readers:
        for name in _imported(path, root):
            parts = name.split(".")
            named.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    entry = {"specmon", "specmon.__main__"}  # python -m specmon; the package itself
    modules = (_module_name(p, root) for p in sources)
    return sorted(m for m in modules if m not in named and m not in entry)


def test_the_rule_finds_a_module_nothing_imports(tmp_path):
    (tmp_path / "specmon" / "sub").mkdir(parents=True)
    for name, text in {
        "__init__.py": "",
        "a.py": "from specmon.sub import b\nfrom . import c\n",
        "c.py": "",
        "named.py": "",
        "left.py": "",
        "sub/__init__.py": "",
        "sub/b.py": "COMMANDS = {'x': 'specmon.named'}\n",
    }.items():
        (tmp_path / "specmon" / name).write_text(text)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("import specmon.a\n")
    assert unimported_modules(tmp_path) == ["specmon.left"]


def test_no_module_in_specmon_is_left_unimported():
    assert unimported_modules(ROOT) == []
