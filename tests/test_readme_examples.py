"""The console examples of README.md and docs/*.md are what the tool prints (tools/readme_examples.py
regenerates them), and the README shows every command ``zeroadvisor --help`` lists."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest

from conftest import REPO

_spec = importlib.util.spec_from_file_location("readme_examples", REPO / "tools" / "readme_examples.py")
readme_examples = importlib.util.module_from_spec(_spec)
sys.modules["readme_examples"] = readme_examples  # dataclasses look their module up there
_spec.loader.exec_module(readme_examples)

EXAMPLES = [example for page in readme_examples.pages()
            for example in readme_examples.parse(page.read_text("utf-8"), page.relative_to(REPO).as_posix())]


def test_the_pages_have_their_examples():
    pages = {e.page for e in EXAMPLES}
    assert "README.md" in pages and any(p.startswith("docs/") for p in pages), pages
    assert all(e.shown for e in EXAMPLES), [e.where for e in EXAMPLES if not e.shown]


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"{e.where} {' '.join(e.args[:2])}" for e in EXAMPLES])
def test_example_is_the_real_output(example, monkeypatch):
    monkeypatch.chdir(REPO)
    assert readme_examples.run(example) == example.shown, (
        f"stale example at {example.where} ({example.command.splitlines()[0]}): run python tools/readme_examples.py")


def _listed_commands() -> list[str]:
    """The command names in the Commands panel of ``zeroadvisor --help``, as a user reads them."""
    help_text = readme_examples.run(readme_examples.Example("-", 0, 0, "", ["--help"], None, ""))
    panel = help_text.split("Commands", 1)[1]
    return re.findall(r"^\W\s([a-z][\w-]*)\s{2,}\S", panel, re.MULTILINE)


def test_the_readme_shows_every_command_the_help_lists():
    commands = _listed_commands()
    assert len(commands) >= 4, commands  # the help's layout changed: fix the parser above
    shown = {e.args[0] for e in EXAMPLES if e.page == "README.md" and e.args}
    assert set(commands) <= shown, f"commands without a README example: {sorted(set(commands) - shown)}"


def test_a_fence_is_longer_than_any_backtick_run_inside():
    assert readme_examples.fence("plain") == "```"
    assert readme_examples.fence('{"a": 1}\n```') == "````"
    assert readme_examples.fence("x ````` y") == "``````"


def test_a_rewritten_block_holding_a_fence_stays_one_block():
    """An output with a fence of its own (a markdown report's diff) must not close the example early."""
    from markdown_it import MarkdownIt

    page = "intro\n\n```console\n$ zeroadvisor rules\nold\n```\n\nafter\n"
    [example] = readme_examples.parse(page, "page.md")
    new = readme_examples.rewrite(page, example, "```diff\n-a\n+b\n```\n")
    fences = [t for t in MarkdownIt("commonmark").parse(new) if t.type == "fence"]
    assert len(fences) == 1 and fences[0].content == "$ zeroadvisor rules\n```diff\n-a\n+b\n```\n"
    assert new.endswith("\n\nafter\n") and readme_examples.parse(new, "page.md")[0].shown == "```diff\n-a\n+b\n```\n"
