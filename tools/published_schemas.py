"""Where the generated JSON Schemas go, and the address they are published at.

Each schema is written twice, byte for byte: into the package (zeroadvisor/schemas/, the package data that
``pip install .`` ships and the linter reads) and into the top-level schemas/ folder, whose files are the ones
an editor fetches by their ``$id`` (a raw URL of this repository's main branch). The generators
(tools/gen_schema.py, tools/gen_model_schema.py) write both through ``write`` and compare both through
``stale``; tests/test_packaging.py fails when the two copies differ.
"""

from __future__ import annotations

import pathlib
import tomllib

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE_DIR = REPO_ROOT / "zeroadvisor" / "schemas"
PUBLISHED_DIR = REPO_ROOT / "schemas"
BRANCH = "main"
# Package data beside the schemas that is no JSON Schema and not published: how each DeepSpeed release differs from
# the latest (tools/gen_releases.py writes it; zeroadvisor/deepspeed/releases.py reads it).
PACKAGE_ONLY = ("ds_releases.json",)


def repository() -> str:
    """The repository's address, written once: pyproject.toml [project.urls] Repository."""
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text("utf-8"))
    return str(pyproject["project"]["urls"]["Repository"]).rstrip("/")


def schema_id(name: str) -> str:
    """The published address of schema ``name``: the raw file in schemas/ on the main branch."""
    owner_repo = repository().removeprefix("https://github.com/")
    return f"https://raw.githubusercontent.com/{owner_repo}/{BRANCH}/schemas/{name}"


def targets(name: str) -> tuple[pathlib.Path, pathlib.Path]:
    """The two copies of schema ``name``: the package's, then the published one."""
    return PACKAGE_DIR / name, PUBLISHED_DIR / name


def write(name: str, text: str) -> list[pathlib.Path]:
    """Write ``text`` as both copies of schema ``name``; the paths written."""
    written = []
    for path in targets(name):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def stale(name: str, text: str) -> list[pathlib.Path]:
    """The copies of schema ``name`` that are not ``text`` (missing ones included)."""
    return [path for path in targets(name) if not path.is_file() or path.read_text(encoding="utf-8") != text]
