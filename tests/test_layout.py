"""The manual's layout tree is the package tree: one line per package, in the code and in the docs.

The tree is the code block after ``<!-- example: layout -->`` in docs/ (docs/development.md); the
packages are read from the file system, so the check follows the code as packages come and go.
"""

from __future__ import annotations

import re
import tomllib
from itertools import pairwise

from markdown_it import MarkdownIt

from conftest import REPO

MARKER = "<!-- example: layout -->"


def _layout_blocks() -> list[tuple[str, str]]:
    """(page, text) of every code block marked as the layout, in README.md and docs/."""
    found = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        tokens = MarkdownIt("commonmark").parse(page.read_text("utf-8"))
        for before, token in pairwise(tokens):
            if token.type == "fence" and before.type == "html_block" and before.content.strip() == MARKER:
                found.append((page.relative_to(REPO).as_posix(), token.content))
    return found


def _documented_packages() -> list[str]:
    blocks = _layout_blocks()
    assert len(blocks) == 1, f"expected one block marked {MARKER} in README.md or docs/, found {blocks}"
    return [m.group(1) for m in re.finditer(r"^zeroadvisor/(\w+)/\s+\S", blocks[0][1], re.MULTILINE)]


def _code_packages() -> list[str]:
    root = REPO / "zeroadvisor"
    return sorted(p.name for p in root.iterdir() if (p / "__init__.py").is_file())


def test_the_layout_lives_in_the_development_page():
    assert [page for page, _ in _layout_blocks()] == ["docs/development.md"]


def test_layout_lists_every_package_once():
    listed = _documented_packages()
    assert len(listed) == len(set(listed)), listed
    assert sorted(listed) == _code_packages(), "docs/development.md's layout tree and zeroadvisor/ differ"


def _all_packages() -> set[str]:
    """Every package under zeroadvisor/, nested ones included, as dotted names."""
    return {".".join(init.parent.relative_to(REPO).parts) for init in (REPO / "zeroadvisor").rglob("__init__.py")}


def test_every_package_ships():
    """pyproject's package list is the tree too (a package missing there is missing from the wheel)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    shipped = set(config["tool"]["setuptools"]["packages"])
    assert shipped == _all_packages()
