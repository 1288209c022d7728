#!/usr/bin/env python3
"""Run the console examples of README.md and docs/*.md and write their real output back (``--check``: only compare).

A console block (a fence with info ``console``) whose first line is ``$ zeroadvisor ...`` is an
example; the command may go on over lines ending in ``\\`` and may end in ``| grep -E 'PATTERN'`` to
show an excerpt (the lines of the real output that match). The block's other lines are the output,
regenerated from the tool itself, never edited by hand. Commands run from the repository root, so
a page in docs/ names files as the README does (``sample_configs/...``).

The fences are found as CommonMark reads them (markdown-it-py, the test extra), and a rewritten
block gets a fence longer than any backtick run in its output, so an output that holds a fence of
its own (a markdown report) cannot close the block early. tests/test_readme_examples.py runs the
same comparison; tests/test_docs_examples.py checks every other code block of the same pages.

    python tools/readme_examples.py          # rewrite the stale examples
    python tools/readme_examples.py --check  # exit 1 naming each stale example
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROMPT = "$ zeroadvisor "


def pages() -> list[Path]:
    """The manual: the README and every page of docs/ (docs/rules.md included: it has no console block)."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def fence(body: str) -> str:
    """A backtick fence longer than any backtick run in ``body`` (at least three), as CommonMark allows:
    a closing fence must be at least as long as the opening one, so nothing inside can close it."""
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    return "`" * max(3, longest + 1)


@dataclass
class Example:
    page: str  # the page's path relative to the repository
    start: int  # the opening fence's line (0-based)
    end: int  # the line after the closing fence
    command: str  # as written, continuation lines included
    args: list[str]
    pattern: str | None
    shown: str  # the output lines on the page

    @property
    def where(self) -> str:
        return f"{self.page}:{self.start + 1}"


def parse(text: str, page: str = "README.md") -> list[Example]:
    from markdown_it import MarkdownIt

    out = []
    lines_of_page = text.splitlines()
    for token in MarkdownIt("commonmark").parse(text):
        if token.type != "fence" or token.info.strip() != "console" or not token.content.startswith(PROMPT):
            continue
        if not lines_of_page[token.map[0]].startswith(token.markup):  # in a list or a quote: not rewritable
            raise ValueError(f"{page}:{token.map[0] + 1}: a console example must be a top-level block")
        lines = token.content.splitlines(keepends=True)
        count = 1
        while lines[count - 1].rstrip("\n").endswith("\\") and count < len(lines):
            count += 1
        command_lines = lines[:count]
        flat = " ".join(line.rstrip("\n").rstrip("\\").strip() for line in command_lines)[2:]
        pattern = None
        if " | grep -E " in flat:
            flat, grep = flat.split(" | grep -E ", 1)
            pattern = shlex.split(grep)[0]
        start, end = token.map
        out.append(Example(page, start, end, "".join(command_lines), shlex.split(flat)[1:], pattern,
                           "".join(lines[count:])))
    return out


def execute(args: list[str]) -> tuple[int, str]:
    """Run one command line in this process as the pages show it: its exit code, and stdout then stderr."""
    from zeroadvisor import cli

    saved = {name: os.environ.get(name) for name in ("NO_COLOR", "COLUMNS")}
    os.environ["NO_COLOR"] = "1"
    os.environ["COLUMNS"] = "80"  # the text report wraps to the terminal: the pages show an 80-column one
    # UTF-8 streams, as on a terminal (a StringIO has no encoding: the report would draw in ASCII)
    stdout, stderr = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8") for _ in range(2))
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = cli.run(args)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    stdout.flush(), stderr.flush()
    return int(code), (stdout.buffer.getvalue() + stderr.buffer.getvalue()).decode("utf-8")


def run(example: Example) -> str:
    """The example's output as the page shows it: stdout then stderr, filtered by its grep."""
    lines = execute(example.args)[1].splitlines()
    if example.pattern is not None:
        lines = [line for line in lines if re.search(example.pattern, line)]
    return "".join(line.rstrip() + "\n" for line in lines)


def rewrite(text: str, example: Example, output: str) -> str:
    """``text`` with the example's block holding ``output`` (the lines around it unchanged)."""
    lines = text.splitlines(keepends=True)
    body = example.command + output
    marks = fence(body)
    block = [f"{marks}console\n", body, f"{marks}\n"]
    return "".join(lines[:example.start] + block + lines[example.end:])


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],  # --help must not rewrite the pages
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale example")
    check = parser.parse_args(argv).check
    os.chdir(REPO)
    stale = []
    for path in pages():
        text = path.read_text("utf-8")
        new = text
        for example in reversed(parse(text, path.relative_to(REPO).as_posix())):
            real = run(example)
            if real != example.shown:
                stale.append(f"{example.where}: {example.command.splitlines()[0]}")
                new = rewrite(new, example, real)
        if new != text and not check:
            path.write_text(new, "utf-8")
    if check:
        for where in stale:
            print(f"stale example: {where} (run python tools/readme_examples.py)", file=sys.stderr)
        return 1 if stale else 0
    print(f"{len(stale)} example(s) rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
