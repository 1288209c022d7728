"""The README's console examples are what the tool prints (tools/readme_examples.py regenerates them)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from conftest import REPO

_spec = importlib.util.spec_from_file_location("readme_examples", REPO / "tools" / "readme_examples.py")
readme_examples = importlib.util.module_from_spec(_spec)
sys.modules["readme_examples"] = readme_examples  # dataclasses look their module up there
_spec.loader.exec_module(readme_examples)

EXAMPLES = [example for _, example in readme_examples.parse((REPO / "README.md").read_text("utf-8"))]


def test_the_readme_has_its_examples():
    assert len(EXAMPLES) >= 3 and all(e.shown for e in EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES, ids=[" ".join(e.args[:2]) for e in EXAMPLES])
def test_readme_example_is_the_real_output(example, monkeypatch):
    monkeypatch.chdir(REPO)
    assert readme_examples.run(example) == example.shown, (
        f"stale README example ({example.command.splitlines()[0]}): run python tools/readme_examples.py")
