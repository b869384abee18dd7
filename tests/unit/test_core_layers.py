"""core's subpackages import each other in one direction, and core and plugins do not tangle.

Walks the source of core/ and plugins/ with ``ast`` (no broker, nothing imported): every import
of a ``strom.*`` module, at module level or inside a function, is an edge between subpackages
(``core.<sub>``, top-level modules of core such as ``core.config`` count as their own node, and
all of plugins is one node). Imports under ``if TYPE_CHECKING:`` are annotations only; they
obey the same layering and close no cycle either.

The layering (docs/architecture.md): records < log < replica < coordinator < server for the data
path; raft < metadata < controller for the metadata path (as in Kafka: the KRaft log knows no
metadata record type, the metadata loader consumes committed raft batches, the controller writes
through raft and replays through the loader); nothing below imports anything above it. The
plugins sit between core's foundations (the error roots, config) and the broker that loads them.
"""

from __future__ import annotations

import ast
import pathlib
from collections import defaultdict
from collections.abc import Iterator

import strom

ROOT = pathlib.Path(strom.__file__).resolve().parent  # strom/, whose folders link to the repository's
# Lowest first. An import may only go to the left of its own place.
DATA_PATH = ["core.records", "core.log", "core.replica", "core.coordinator", "core.server"]
METADATA_PATH = ["core.raft", "core.metadata", "core.controller"]
# What of core the plugins may use: the roots of the error model and the config.
FOUNDATIONS = {"core.exceptions", "core.errors", "core.config"}

Edge = tuple[str, str, str, str]  # (from node, to node, file, imported module)


def _node(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "strom" or len(parts) < 2:
        return None
    if parts[1] == "core":
        return ".".join(parts[1:3]) if len(parts) > 2 else "core"
    if parts[1] == "plugins":
        return "plugins"
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return ast.unparse(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _imports(tree: ast.AST, type_only: bool = False) -> Iterator[tuple[str, bool]]:
    """(imported module, under TYPE_CHECKING) for every absolute import in ``tree``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), True)
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), type_only)
            continue
        if isinstance(node, ast.Import):
            yield from ((alias.name, type_only) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module, type_only
            if node.module in ("strom.core", "strom"):  # "from strom.core import config": a module
                yield from ((f"{node.module}.{alias.name}", type_only) for alias in node.names)
        else:
            yield from _imports(node, type_only)


def _edges() -> tuple[list[Edge], list[Edge]]:
    runtime: list[Edge] = []
    annotations: list[Edge] = []
    for folder in ("core", "plugins"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT)
            source = _node("strom." + ".".join(relative.with_suffix("").parts))
            if source is None:
                continue
            for module, type_only in _imports(ast.parse(path.read_text(), str(relative))):
                target = _node(module)
                if target is None or target == source or target == "core":
                    continue
                (annotations if type_only else runtime).append((source, target, str(relative), module))
    return runtime, annotations


def _cycles(edges: list[Edge]) -> list[frozenset[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target, _, _ in edges:
        graph[source].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(set(graph)):
        if v not in index:
            visit(v)
    return found


def _explain(component: frozenset[str], edges: list[Edge]) -> str:
    return "\n".join(f"  {s} -> {t}: {f} imports {m}" for s, t, f, m in edges if s in component and t in component)


def test_no_import_cycle_between_core_subpackages_or_with_plugins() -> None:
    runtime, annotations = _edges()
    cycles = _cycles(runtime)
    assert not cycles, "import cycles:\n" + "\n".join(f"{sorted(c)}:\n{_explain(c, runtime)}" for c in cycles)
    # Annotations included: a type needed across a cycle is a Protocol of the lower layer.
    both = runtime + annotations
    cycles = _cycles(both)
    assert not cycles, "import cycles through TYPE_CHECKING imports:\n" + "\n".join(
        f"{sorted(c)}:\n{_explain(c, both)}" for c in cycles)


def _upward(layers: list[str], edges: list[Edge]) -> list[Edge]:
    rank = {node: i for i, node in enumerate(layers)}
    return [e for e in edges if e[0] in rank and e[1] in rank and rank[e[1]] > rank[e[0]]]


def test_the_metadata_path_imports_only_downwards() -> None:
    """raft < metadata < controller, at run time and in annotations alike."""
    runtime, annotations = _edges()
    upward = _upward(METADATA_PATH, runtime + annotations)
    assert not upward, "\n".join(f"{s} imports {t} ({f}: {m})" for s, t, f, m in upward)


def test_the_data_path_imports_only_downwards() -> None:
    """records < log < replica < coordinator < server, at run time and in annotations alike (the
    coordinators take a Protocol of what they use of the broker, not the Broker)."""
    runtime, annotations = _edges()
    upward = _upward(DATA_PATH, runtime + annotations)
    assert not upward, "\n".join(f"{s} imports {t} ({f}: {m})" for s, t, f, m in upward)


def test_plugins_import_nothing_of_core_above_its_foundations() -> None:
    """Plugins are below the broker: they may use core's shared foundations (errors, config),
    never the layers that call them, and those foundations import nothing of plugins, directly
    or through another part of core, so core -> plugins -> core never closes a loop."""
    runtime, annotations = _edges()
    both = runtime + annotations
    used = {t for s, t, _, _ in both if s == "plugins"}
    assert used <= FOUNDATIONS, f"plugins import core beyond its foundations: {sorted(used - FOUNDATIONS)}"
    graph: dict[str, set[str]] = defaultdict(set)
    for s, t, _, _ in both:
        graph[s].add(t)
    reached, todo = set(used), list(used)
    while todo:
        for t in graph[todo.pop()] - reached:
            reached.add(t)
            todo.append(t)
    assert "plugins" not in reached, "core's foundations reach plugins:\n" + "\n".join(
        f"  {s} -> {t}: {f} imports {m}" for s, t, f, m in both if s in reached and t in reached | {"plugins"})
