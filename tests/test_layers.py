"""The packages form a pipeline: every import, at any depth (function-level and TYPE_CHECKING ones too),
points down it. A cycle between packages cannot come back unnoticed.

The order is the pipeline of the docs (docs/development.md): the vocabulary and the hardware facts at the
bottom, then config/ (text to document) -> deepspeed/ (what DeepSpeed reads) -> lint/ -> rules/ -> model/
-> memory/ -> throughput/ -> advisor/ -> fix/ -> report/, the resolved inputs and the public API over them,
and the command line on top.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE = REPO / "zeroadvisor"

# Lowest first; a unit may import itself and anything before it. Several names on one rung are peers that
# import none of each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("units", "vocab", "version", "jsontypes"),
    ("hardware",),
    ("config",),
    ("deepspeed",),
    ("schemas",),
    ("lint",),
    ("rules",),
    ("model",),
    ("memory",),
    ("throughput",),
    ("advisor",),
    ("fix",),
    ("report",),
    ("inputs",),
    ("flows",),
    ("api",),
    ("integrations",),
    ("cli",),
    ("__main__",),
)
RANK = {unit: rank for rank, rung in enumerate(LAYERS) for unit in rung}
# zeroadvisor/__init__.py is the facade over the API (lazy re-exports); it is above everything.
FACADE = "__init__"


def _unit(module: str) -> str:
    """The layer unit of a dotted module name inside the package: its first component below zeroadvisor."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else FACADE


def _module_name(path: Path, root: Path = REPO) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1] if len(parts) > 1 else parts
    return ".".join(parts)


def _imports(path: Path, root: Path = REPO) -> list[tuple[int, str]]:
    """(line, imported module) for every import of the package's own modules in one file."""
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("zeroadvisor")]
        elif isinstance(node, ast.ImportFrom):
            target = _from_target(node, package)
            if target == "zeroadvisor":  # from zeroadvisor import vocab, units, ...: a module, or the facade's name
                found += [(node.lineno, f"zeroadvisor.{alias.name}" if _is_module(root, alias.name) else target)
                          for alias in node.names]
            elif target.startswith("zeroadvisor."):
                found.append((node.lineno, target))
    return found


def _from_target(node: ast.ImportFrom, package: str) -> str:
    """The module a ``from ... import`` names, a relative one resolved against ``package``."""
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_module(root: Path, name: str) -> bool:
    package = root / "zeroadvisor"
    return (package / name).is_dir() or (package / f"{name}.py").is_file()


def _edges() -> list[tuple[str, str, str]]:
    """(importing unit, imported unit, where) for every import between two units."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _unit(_module_name(path))
        for line, target in _imports(path):
            unit = _unit(target)
            if unit != source:
                out.append((source, unit, f"{path.relative_to(REPO)}:{line} imports {target}"))
    return out


def test_every_unit_has_a_layer():
    units = {_unit(_module_name(p)) for p in PACKAGE.rglob("*.py")} - {FACADE}
    assert units <= set(RANK), f"place these in LAYERS: {sorted(units - set(RANK))}"


def test_imports_only_point_down_the_pipeline():
    upward = [where for source, target, where in _edges()
              if FACADE not in (source, target) and RANK[target] >= RANK[source]]
    assert not upward, "imports that point up (or sideways) the pipeline:\n" + "\n".join(upward)


def test_nothing_imports_the_facade():
    """zeroadvisor/__init__.py re-exports the API; a module importing a name from it would import everything.
    (Its two constants, __version__ and DEEPSPEED_TARGET, are read through a module of their own.)"""
    offenders = [where for source, target, where in _edges() if target == FACADE and source != FACADE]
    assert not offenders, "\n".join(offenders)


def test_the_package_graph_has_no_cycle():
    graph: dict[str, set[str]] = {}
    for source, target, _ in _edges():
        graph.setdefault(source, set()).add(target)
    seen: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(node: str, path: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if seen.get(nxt) == 1:
                pytest.fail("import cycle: " + " -> ".join([*path[path.index(nxt):], nxt]))
            if nxt not in seen:
                visit(nxt, [*path, nxt])
        seen[node] = 2

    for node in sorted(graph):
        if node not in seen:
            visit(node, [node])


def test_the_checker_sees_function_level_and_type_checking_imports(tmp_path):
    """The walk is over the whole tree of each file, so an import hidden in a function counts."""
    sample = tmp_path / "zeroadvisor" / "memory" / "x.py"
    sample.parent.mkdir(parents=True)
    sample.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from zeroadvisor.report import a\n"
                      "def f():\n    from zeroadvisor.advisor.search import b\n    import zeroadvisor.cli\n")
    assert [target for _, target in _imports(sample, tmp_path)] == ["zeroadvisor.report", "zeroadvisor.advisor.search",
                                                                      "zeroadvisor.cli"]


# -- files -----------------------------------------------------------------------------------------------------------

def _file_module(name: str, root: Path = REPO) -> str | None:
    """The package's own module (file) a dotted name stands for: itself where it is a file or a package, else
    None (a name inside a module: ``from zeroadvisor.rules.registry import LINT`` names a module's attribute)."""
    path = root.joinpath(*name.split("."))
    return name if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file() else None


def _file_imports(path: Path, root: Path = REPO) -> list[tuple[int, str]]:
    """(line, imported module) for every import of one of the package's files from ``path``, at any depth: ``from
    zeroadvisor.rules import registry`` imports the file rules/registry.py, ``from zeroadvisor.rules.registry
    import LINT`` too. (Importing a module also runs its package's __init__.py; those are edges of their own
    only where the __init__ imports something, which its own imports then say.) An ``if TYPE_CHECKING:`` block
    is left out: it never runs, and two modules whose types name each other import nothing from each other."""
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text("utf-8"), str(path))
    typing_only = {id(inner) for block in ast.walk(tree) if _is_type_checking_block(block)
                   for stmt in block.body for inner in ast.walk(stmt)}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("zeroadvisor.")]
        elif isinstance(node, ast.ImportFrom):
            target = _from_target(node, package)
            if target != "zeroadvisor" and not target.startswith("zeroadvisor."):
                continue
            for alias in node.names:
                inner = _file_module(f"{target}.{alias.name}", root)
                found.append((node.lineno, inner or target))
    return found


def _is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING"))


def _file_graph(root: Path = REPO) -> dict[str, dict[str, str]]:
    """importing module -> {imported module: where}, every file of the package."""
    graph: dict[str, dict[str, str]] = {}
    for path in sorted((root / "zeroadvisor").rglob("*.py")):
        source = _module_name(path, root)
        edges = graph.setdefault(source, {})
        for line, target in _file_imports(path, root):
            if target != source:
                edges.setdefault(target, f"{path.relative_to(root)}:{line}")
    return graph


def _reachable(graph: dict[str, dict[str, str]], start: str) -> set[str]:
    """The modules ``start`` imports, directly or through others (itself only round a loop)."""
    found: set[str] = set()
    todo = list(graph.get(start, {}))
    while todo:
        node = todo.pop()
        if node not in found:
            found.add(node)
            todo += graph.get(node, {})
    return found


def _cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """One closed path through each set of modules that all reach each other (a strongly connected set)."""
    reach = {node: _reachable(graph, node) for node in graph}
    done: set[str] = set()
    found = []
    for node in sorted(graph):
        if node in done or node not in reach[node]:  # on a loop exactly when it reaches itself
            continue
        members = {other for other in reach[node] if node in reach.get(other, set())}
        done |= members
        found.append(_closed_path(graph, members))
    return found


def _closed_path(graph: dict[str, dict[str, str]], members: set[str]) -> list[str]:
    """A cycle inside one strongly connected set: from its first member, follow edges inside the set until a
    module comes round again."""
    path = [min(members)]
    while True:
        nxt = min(target for target in graph.get(path[-1], {}) if target in members)
        if nxt in path:
            return [*path[path.index(nxt):], nxt]
        path.append(nxt)


def test_the_file_graph_has_no_cycle():
    """No two files of the package import each other, directly or round a loop, at any depth (a function-level
    import hides a cycle from Python's import order, not from the design)."""
    graph = _file_graph()
    found = _cycles(graph)
    assert not found, "file-level import cycles:\n" + "\n".join(
        " -> ".join(cycle) + "\n    " + "; ".join(graph[a][b] for a, b in itertools.pairwise(cycle))
        for cycle in found)


def test_the_cycle_check_finds_a_function_level_loop(tmp_path):
    """The file graph sees an import hidden in a function, and the cycle it closes is reported as a path."""
    package = tmp_path / "zeroadvisor" / "rules"
    package.mkdir(parents=True)
    (tmp_path / "zeroadvisor" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from zeroadvisor.rules import b\n")
    (package / "b.py").write_text("def f():\n    from zeroadvisor.rules.c import g\n")
    (package / "c.py").write_text("import zeroadvisor.rules.a\n")
    (package / "d.py").write_text("from zeroadvisor.rules.a import x\n")  # into the loop, not part of it
    # types only: a and e name each other's types, which closes no loop
    (package / "e.py").write_text("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from zeroadvisor.rules import a\n")
    (package / "a.py").write_text("from zeroadvisor.rules import b, e\n")
    assert _cycles(_file_graph(tmp_path)) == [["zeroadvisor.rules.a", "zeroadvisor.rules.b", "zeroadvisor.rules.c",
                                               "zeroadvisor.rules.a"]]
