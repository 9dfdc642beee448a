"""Imports only point down (issue 16 item 6; docs/architecture.md, "Layers").

The graph is built with ast from every `import` in specmon/: at module level, inside
functions (lazy imports) and under `if TYPE_CHECKING:` alike, since each one is a module
knowing another. The checks: no import cycle, type-only ones included (a cycle closed under
`if TYPE_CHECKING:` does not fail at run time, but it is still two modules that cannot be
understood one without the other), the named forbidden edges absent,
and no import (type-only ones included) from a lower layer up to a higher one except the
allow-list (at most 3 entries, each one present in the code and named in
docs/architecture.md).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "specmon"
DOC = ROOT / "docs" / "architecture.md"

# Top (0) to bottom; a module is in the layer of its longest matching prefix. The same
# table is the diagram's in docs/architecture.md.
LAYERS: dict[str, int] = {
    "specmon.__main__": 0,  # entry points
    "specmon.cli": 0,
    "specmon.commands": 0,
    "specmon.tui": 1,  # the screen
    "specmon.run": 2,  # the run assembly
    "specmon.sources": 3,  # sources, sinks, analysis, exports, server counters, simulator
    "specmon.sinks": 3,
    "specmon.analysis": 3,
    "specmon.server": 3,
    "specmon.export": 3,
    "specmon.interop": 3,
    "specmon.session": 3,
    "specmon.sim": 3,
    "specmon.decision": 3,  # the decision package: the k choice, gates, step cost
    "specmon.pipeline": 4,  # pipeline, adapters, statistics, the declared interfaces
    "specmon.capture": 4,
    "specmon.checks": 4,
    "specmon.specdecode": 4,
    "specmon.accumulator": 4,
    "specmon.results_window": 4,
    "specmon.stats": 4,
    "specmon.formatting": 4,
    "specmon.interfaces": 4,
    "specmon.decision.acceptance": 4,  # per-position acceptance math: plain statistics
    # the JSONL record is the pipeline's own format: the results window reads it back
    "specmon.export.jsonl_export": 4,
    "specmon": 5,  # plain foundations: options, errors, constants, stops, small helpers
    "specmon.config": 5,
    "specmon.export.safe_json": 5,
    # the engine registry is plain declarations (names, signatures) the options read
    "specmon.specdecode.engines": 5,
    "specmon.specdecode.fidelity": 5,
    "specmon.specdecode.method": 5,
}

# (importer prefix, imported prefix): edges that must never exist
FORBIDDEN = [
    ("specmon.sources", "specmon.commands"),
    ("specmon.sources", "specmon.run"),
    ("specmon.server", "specmon.sources.load"),
    ("specmon.config", "specmon.sources"),
    ("specmon.config", "specmon.analysis"),
    ("specmon.run", "specmon.tui"),  # the screen is handed to the run, never imported
    # the screen model is plain data under the widgets: it names none of them
    ("specmon.tui.model", "specmon.tui.widgets"),
    ("specmon.tui.model", "specmon.tui.screens"),
    ("specmon.tui.model", "specmon.tui.main_screen"),
    ("specmon.tui.model", "specmon.tui.app"),
    # the main screen and its widgets paint the model's slices: no session, no runner
    ("specmon.tui.main_screen", "specmon.session"),
    ("specmon.tui.widgets", "specmon.session"),
    ("specmon.tui.main_screen", "specmon.analysis"),
]

# (importer, imported): the upward imports allowed, each justified in docs/architecture.md
ALLOWED_UPWARD = [
    ("specmon.interfaces", "specmon.server.scrape"),
]
MOST_UPWARD = 3


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def type_only_nodes(tree: ast.Module) -> set[int]:
    """The ids of the import statements under `if TYPE_CHECKING:`."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return found


def imported_names(
    tree: ast.Module, name: str, is_package: bool, runtime_only: bool = False
) -> set[str]:
    """Every specmon name this module imports (`from a import b` gives a.b, or a when b is
    not a module: the resolver below keeps the longest module prefix); with `runtime_only`,
    not those under `if TYPE_CHECKING:`."""
    package = name if is_package else name.rpartition(".")[0]
    skip = type_only_nodes(tree) if runtime_only else set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {n for n in found if n == "specmon" or n.startswith("specmon.")}


def build_graph(package: Path = PACKAGE, runtime_only: bool = False) -> dict[str, set[str]]:
    files = {module_name(p, package.parent): p for p in package.rglob("*.py")}

    def resolve(target: str) -> str:
        while target not in files:
            target = target.rpartition(".")[0]
        return target

    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = imported_names(tree, name, path.name == "__init__.py", runtime_only)
        graph[name] = {resolve(t) for t in targets} - {name}
    return graph


def layer_of(module: str) -> int:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


def matches(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path a -> ... -> a, or None (depth-first, three colours)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)) is not None:
            return cycle
    return None


def upward_edges(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Edges from a lower layer (higher number) to a higher one."""
    return {(a, b) for a, targets in graph.items() for b in targets if layer_of(b) < layer_of(a)}


# --- the checker on graphs made by hand ------------------------------------------------


def test_the_checks_see_a_cycle_and_an_upward_edge_in_a_graph_made_by_hand():
    graph = {
        "specmon.config": {"specmon.analysis.segments"},
        "specmon.analysis.segments": {"specmon.formatting"},
        "specmon.formatting": {"specmon.config"},
        "specmon.tui.app": {"specmon.config"},
    }
    cycle = find_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1] and len(cycle) == 4
    # config (5) -> analysis (3) and formatting (4) -> config (5): only the first points up
    assert upward_edges(graph) == {("specmon.config", "specmon.analysis.segments")}
    assert find_cycle({"specmon.a": {"specmon.b"}, "specmon.b": set()}) is None


def test_imports_are_read_at_every_depth(tmp_path):
    pkg = tmp_path / "specmon"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import b\n"
        "if TYPE_CHECKING:\n    from specmon.sub.c import Thing\n"
        "def f():\n    import specmon.d\n"
    )
    for name in ("b", "c"):
        (pkg / "sub" / f"{name}.py").write_text("")
    (pkg / "d.py").write_text("")
    graph = build_graph(pkg)
    assert graph["specmon.sub.a"] == {"specmon.sub.b", "specmon.sub.c", "specmon.d"}
    assert build_graph(pkg, runtime_only=True)["specmon.sub.a"] == {"specmon.sub.b", "specmon.d"}


# --- specmon itself ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return build_graph()


def test_every_module_has_a_layer(graph):
    for module in graph:
        layer_of(module)  # max() of nothing raises: a new top-level name needs a layer


def test_no_import_cycle(graph):
    """Type-only imports included (issue 32: tui.model header -> state -> screen was one)."""
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_a_type_only_import_closes_a_cycle(tmp_path):
    pkg = tmp_path / "specmon"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from specmon import b\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from specmon.a import A\n"
    )
    assert find_cycle(build_graph(pkg, runtime_only=True)) is None  # at run time: none
    assert find_cycle(build_graph(pkg)) == ["specmon.a", "specmon.b", "specmon.a"]


def test_the_forbidden_edges_are_absent(graph):
    found = [
        (a, b)
        for a, targets in graph.items()
        for b in targets
        for src, dst in FORBIDDEN
        if matches(a, src) and matches(b, dst)
    ]
    assert found == []


def test_upward_imports_are_the_allowed_few(graph):
    assert len(ALLOWED_UPWARD) <= MOST_UPWARD
    assert upward_edges(graph) <= set(ALLOWED_UPWARD), sorted(
        upward_edges(graph) - set(ALLOWED_UPWARD)
    )
    # the list stays true: each entry exists in the code and is named in the doc
    doc = DOC.read_text(encoding="utf-8")
    for importer, imported in ALLOWED_UPWARD:
        assert imported in graph[importer]
        short = f"{importer.removeprefix('specmon.')} -> {imported.removeprefix('specmon.')}"
        assert short in doc, short


# names a runner class carries (run/: LoadRunner, WorkerPool, MultiRun, SweepControl, ...)
RUNNER_NAME = re.compile(r"(Runner|Run|Pool|Control)$")


def test_sources_hold_producers_and_no_runner_class():
    """sources/ is the producers' room (issue 32): a class named like a runner
    (…Runner, …Run, …Pool, …Control) belongs in run/; BackgroundRun, the lifecycle every
    runner shares, is the one base kept beside the feeders that use it."""
    found = []
    for path in (PACKAGE / "sources").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [
            f"{path.relative_to(ROOT)}:{node.name}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef)
            and RUNNER_NAME.search(node.name)
            and node.name != "BackgroundRun"
        ]
    assert found == []
    assert RUNNER_NAME.search("SweepRunner") and RUNNER_NAME.search("MultiRun")
    assert not RUNNER_NAME.search("LoadGenerator")


# the run's concrete classes: the screen model reads them through interfaces.py and hands
# each panel its slice (issue 32: RunSession in main_screen, ResultWindow in the log)
CONCRETE = {
    "RunSession",
    "ResultWindow",
    "RunAccumulator",
    "CategoryTable",
    "ContextTable",
    "GroupedTable",
    "SeriesBins",
}


def test_the_main_screen_and_the_widgets_name_no_concrete_run_class():
    found = []
    paths = [PACKAGE / "tui" / "main_screen.py", *(PACKAGE / "tui" / "widgets").glob("*.py")]
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        found += [f"{path.relative_to(ROOT)}:{name}" for name in sorted(names & CONCRETE)]
    assert found == []
