"""Run the command line in this process (``zeroadvisor.cli.run``): the exit code, stdout and stderr.

Most CLI tests use this; tests/test_cli_entry.py keeps a few real subprocesses for the entry point.
"""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from zeroadvisor import cli as command_line


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(capsys, monkeypatch):
    """``cli(*args, stdin=b"...", cwd=path)`` -> Result."""
    monkeypatch.setenv("NO_COLOR", "1")
    # a wide terminal: the tests read whole lines (tests/test_report_text.py checks the 80-column layout)
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.delenv("ZEROADVISOR_DEBUG", raising=False)

    def run(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> Result:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = command_line.run([str(a) for a in args])
        out, err = capsys.readouterr()
        return Result(int(code), out, err)

    return run
