"""The README's layout tree is the package tree: one line per package, in the code and in the docs."""

from __future__ import annotations

import re
import tomllib

from conftest import REPO


def _readme_packages() -> list[str]:
    text = (REPO / "README.md").read_text("utf-8")
    block = text.split("### Layout", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    return [m.group(1) for m in re.finditer(r"^zeroadvisor/(\w+)/\s+\S", block, re.M)]


def _code_packages() -> list[str]:
    root = REPO / "zeroadvisor"
    return sorted(p.name for p in root.iterdir() if (p / "__init__.py").is_file())


def test_readme_layout_lists_every_package_once():
    listed = _readme_packages()
    assert len(listed) == len(set(listed)), listed
    assert sorted(listed) == _code_packages()


def test_every_package_ships():
    """pyproject's package list is the tree too (a package missing there is missing from the wheel)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    shipped = set(config["tool"]["setuptools"]["packages"])
    assert shipped == {"zeroadvisor", *(f"zeroadvisor.{name}" for name in _code_packages())}
