"""README.md and docs/*.md render as written: every code fence closes where it should, and every
relative link (and the anchor it names, in a markdown page) points to something that exists.

The pages are parsed with markdown-it-py as CommonMark (what GitHub renders, less its extensions).
"""

from __future__ import annotations

import re
from functools import cache
from itertools import pairwise
from pathlib import Path
from urllib.parse import unquote

import pytest
from markdown_it import MarkdownIt

from conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def _tokens(text: str):
    return MarkdownIt("commonmark").parse(text)


def fence_problems(text: str) -> list[str]:
    """Fences that do not pair: one that runs to the end of the document (never closed), or one that
    holds a line opening a fence at least as long as its own: the author meant a new block there, and
    an earlier fence closed too soon or too late (an output holding a fence needs a longer one)."""
    lines = text.splitlines()
    problems = []
    for token in _tokens(text):
        if token.type != "fence":
            continue
        start, end = token.map
        char, length = token.markup[0], len(token.markup)
        closing = lines[end - 1].strip() if end - 1 > start else ""
        if not (closing and set(closing) == {char} and len(closing) >= length):
            problems.append(f"line {start + 1}: the fence {token.markup}{token.info} is never closed")
            continue
        for offset, line in enumerate(token.content.splitlines(), start=start + 2):
            inner = _FENCE_LINE.match(line)
            if inner and inner[1][0] == char and len(inner[1]) >= length and inner[2].strip():
                problems.append(f"line {offset}: {line.strip()!r} opens a fence inside the block of line {start + 1}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_fence_closes_where_it_should(page):
    problems = fence_problems(page.read_text("utf-8"))
    assert not problems, f"{page.relative_to(REPO)}: " + "; ".join(problems)


def test_the_fence_check_finds_what_github_would_break():
    assert fence_problems("# t\n\n```console\n$ x\n") == ["line 3: the fence ```console is never closed"]
    # the README's old stray fence: a bare ``` opened a block that swallowed the next example's opening
    stray = "text\n\n```\n\nprose\n\n```console\n$ zeroadvisor x\n```\n"
    assert fence_problems(stray) == ["line 7: '```console' opens a fence inside the block of line 3"]
    # docs/rules.md's old ZA001 example: the example's own ``` closed the json block early
    early = "```json\n{}\n```\n```\n\nPasses:\n\n```json\n{}\n```\n"
    assert fence_problems(early)
    assert fence_problems("````json\n{}\n```\n````\n") == []
    assert fence_problems("```text\na\n```\n\n~~~\nb\n~~~\n") == []


def _slug(text: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _heading_text(inline) -> str:
    return "".join(child.content for child in inline.children or [] if child.type in ("text", "code_inline"))


@cache
def anchors(page: Path) -> frozenset[str]:
    tokens = _tokens(page.read_text("utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for before, token in pairwise(tokens):
        if before.type == "heading_open" and token.type == "inline":
            slug = _slug(_heading_text(token))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            out.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(out)


def links(page: Path) -> list[str]:
    out = []
    for token in _tokens(page.read_text("utf-8")):
        for child in token.children or []:
            if child.type == "link_open":
                out.append(str(child.attrs["href"]))
            elif child.type == "image":
                out.append(str(child.attrs["src"]))
    return out


def _is_relative(target: str) -> bool:
    return not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) and not target.startswith("//")


LINKS = [(page, target) for page in PAGES for target in links(page) if _is_relative(target)]


def test_the_pages_link_to_each_other():
    assert len(LINKS) > 50
    linked = {(page.parent / target.split("#")[0]).resolve() for page, target in LINKS if target.split("#")[0]}
    orphans = [p.relative_to(REPO).as_posix() for p in PAGES[1:] if p.resolve() not in linked]
    assert not orphans, f"pages no other page links to: {orphans}"
    index = {(REPO / "docs" / t.split("#")[0]).resolve() for t in links(REPO / "docs" / "index.md") if _is_relative(t)}
    missing = [p.relative_to(REPO).as_posix() for p in PAGES[1:] if p.name != "index.md" and p.resolve() not in index]
    assert not missing, f"docs/index.md does not link to {missing}"


@pytest.mark.parametrize("page,target", LINKS, ids=[f"{p.relative_to(REPO)}->{t}" for p, t in LINKS])
def test_relative_link_resolves(page, target):
    path, _, anchor = unquote(target).partition("#")
    resolved = (page.parent / path).resolve() if path else page.resolve()
    where = f"{page.relative_to(REPO)}: link {target}"
    assert resolved.exists(), f"{where}: no file {resolved}"
    assert resolved.is_relative_to(REPO), f"{where}: outside the repository"
    if anchor and resolved.suffix == ".md":
        assert anchor in anchors(resolved), f"{where}: no heading with anchor #{anchor} in {resolved.name}"


def test_the_slugs_are_githubs():
    assert _slug("ZA001 invalid-syntax") == "za001-invalid-syntax"
    assert _slug("Checked against real runs: the field suite") == "checked-against-real-runs-the-field-suite"
    assert _slug("Step time (throughput)") == "step-time-throughput"
