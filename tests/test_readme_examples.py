"""The README's console examples are what the tool prints: each `$ zeroadvisor ...` block is run
in process and every line the README shows must be a line of the real output (lines may be left
out, never changed)."""

from __future__ import annotations

import re
import shlex

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from conftest import REPO


def _examples() -> list[tuple[str, list[str], list[str]]]:
    text = (REPO / "README.md").read_text("utf-8")
    found = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        lines = block.splitlines()
        if not lines or not lines[0].startswith("$ zeroadvisor "):
            continue
        command = lines[0][2:]
        i = 1
        while command.endswith("\\"):
            command = command[:-1] + " " + lines[i].strip()
            i += 1
        args = shlex.split(command)[1:]
        shown = [line.rstrip() for line in lines[i:] if line.strip()]
        found.append((" ".join(args[:3]), args, shown))
    return found


EXAMPLES = _examples()


def test_the_readme_has_examples():
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("name,args,shown", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_readme_example_is_the_real_output(cli, monkeypatch, name, args, shown):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("COLUMNS", "200")
    result = cli(*args)
    real = {line.rstrip() for line in (result.stdout + result.stderr).splitlines()}
    missing = [line for line in shown if line not in real]
    assert not missing, "README lines the tool does not print:\n" + "\n".join(missing)
