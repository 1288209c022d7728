#!/usr/bin/env python3
"""Run the README's console examples and write their real output back (``--check``: only compare).

A console block whose first line is ``$ zeroadvisor ...`` is an example; the command may end in
``| grep -E 'PATTERN'`` to show an excerpt (the lines of the real output that match). The block's
other lines are the output, regenerated from the tool itself, never edited by hand.
tests/test_readme_examples.py runs the same comparison.
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
README = REPO / "README.md"
BLOCK = re.compile(r"(```console\n)(\$ zeroadvisor .*?\n)((?:(?!```).*\n)*?)(```)")


@dataclass
class Example:
    command: str  # as written, continuation lines included
    args: list[str]
    pattern: str | None
    shown: str  # the output lines in the README


def parse(text: str) -> list[tuple[re.Match, Example]]:
    out = []
    for match in BLOCK.finditer(text):
        lines = (match.group(2) + match.group(3)).splitlines(keepends=True)
        command_lines = [lines[0]]
        while command_lines[-1].rstrip("\n").endswith("\\"):
            command_lines.append(lines[len(command_lines)])
        command = "".join(command_lines)
        flat = " ".join(line.rstrip("\n").rstrip("\\").strip() for line in command_lines)[2:]
        pattern = None
        if " | grep -E " in flat:
            flat, grep = flat.split(" | grep -E ", 1)
            pattern = shlex.split(grep)[0]
        out.append((match, Example(command, shlex.split(flat)[1:], pattern, "".join(lines[len(command_lines):]))))
    return out


def run(example: Example) -> str:
    """The example's output as the README shows it: stdout then stderr, filtered by its grep."""
    from zeroadvisor import cli

    os.environ["NO_COLOR"] = "1"
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "80"  # the text report wraps to the terminal: the README shows an 80-column one
    # UTF-8 streams, as on a terminal (a StringIO has no encoding: the report would draw in ASCII)
    stdout, stderr = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8") for _ in range(2))
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            cli.run(example.args)
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    stdout.flush(), stderr.flush()
    lines = (stdout.buffer.getvalue() + stderr.buffer.getvalue()).decode("utf-8").splitlines()
    if example.pattern is not None:
        lines = [line for line in lines if re.search(example.pattern, line)]
    return "".join(line.rstrip() + "\n" for line in lines)


def main(argv: list[str]) -> int:
    os.chdir(REPO)
    text = README.read_text("utf-8")
    stale = []
    new = text
    for match, example in reversed(parse(text)):
        real = run(example)
        if real != example.shown:
            stale.append(example.command.splitlines()[0])
            continuation = "".join(example.command.splitlines(keepends=True)[1:])
            new = new[:match.start(3)] + continuation + real + new[match.end(3):]
    if "--check" in argv:
        for command in stale:
            print(f"README example is stale: {command}", file=sys.stderr)
        return 1 if stale else 0
    if new != text:
        README.write_text(new, "utf-8")
    print(f"{len(stale)} example(s) rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
