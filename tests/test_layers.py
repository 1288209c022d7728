"""The packages form a pipeline: every import, at any depth (function-level and TYPE_CHECKING ones too),
points down it. A cycle between packages cannot come back unnoticed.

The order is the pipeline of the docs (docs/development.md): the vocabulary and the hardware facts at the
bottom, then config/ (text to document) -> deepspeed/ (what DeepSpeed reads) -> lint/ -> rules/ -> model/
-> memory/ -> throughput/ -> advisor/ -> fix/ -> report/, the resolved inputs and the public API over them,
and the command line on top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE = REPO / "zeroadvisor"

# Lowest first; a unit may import itself and anything before it. Several names on one rung are peers that
# import none of each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("units", "vocab", "version"),
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
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "zeroadvisor":  # from zeroadvisor import vocab, units, ...: a module, or the facade's name
                found += [(node.lineno, f"zeroadvisor.{alias.name}" if _is_module(root, alias.name) else target)
                          for alias in node.names]
            elif target.startswith("zeroadvisor."):
                found.append((node.lineno, target))
    return found


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
              if source != FACADE and target != FACADE and RANK[target] >= RANK[source]]
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
