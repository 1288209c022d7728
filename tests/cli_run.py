"""The command line in tests: one in-process runner, one real-process runner.

``cli`` (a fixture) runs ``zeroadvisor.cli.run`` in this process: the exit code, stdout and stderr.
Every CLI test uses it, except where a real process is the point of the test; those call
``cli_process``: the entry point ``python -m zeroadvisor`` (or a console-script stand-in via
``code=``), exit codes a process gets (141 on a closed stdout), what only a fresh interpreter shows
(which modules a command imports), and the interpreter's own environment (``PYTHONIOENCODING``),
resource limits (``preexec_fn``) and other programs (pre-commit, git apply) reading the output.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from zeroadvisor import cli as command_line

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def _argument(value) -> str:
    # a bytes file name reaches sys.argv as the interpreter decodes it (surrogateescape)
    return os.fsdecode(value) if isinstance(value, bytes) else str(value)


@pytest.fixture
def cli(capsys, monkeypatch):
    """``cli(*args, stdin=b"...", cwd=path, env={"NAME": "value" or None}, columns=80)`` -> Result.

    NO_COLOR is set, GITHUB_ACTIONS unset and the terminal is 250 columns wide unless ``env``/``columns`` say otherwise
    (the tests read whole lines; tests/test_report_text.py checks the 80-column layout); an ``env``
    value of None unsets the variable.
    """
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.delenv("ZEROADVISOR_DEBUG", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)  # a diff in a runner's log is wrapped (cli/stdout.py)

    def run(*args, stdin: bytes | None = None, cwd: Path | None = None, env: dict[str, str | None] | None = None,
            columns: int | None = None) -> Result:
        for name, value in {**(env or {}), **({"COLUMNS": str(columns)} if columns else {})}.items():
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = command_line.run([_argument(a) for a in args])
        out, err = capsys.readouterr()
        return Result(int(code), out, err)

    return run


def cli_process(*args, code: str | None = None, stdin: str | bytes | None = None,
                env: dict[str, str | None] | None = None, cwd: Path | str | None = None, text: bool = True,
                preexec_fn=None, stdout=subprocess.PIPE, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m zeroadvisor *args`` (or ``python -c code *args``) in a real process, importing this checkout.

    NO_COLOR is set and ZEROADVISOR_DEBUG and GITHUB_ACTIONS unset unless ``env`` says otherwise (None unsets one);
    ``text=False`` gives the output as bytes, so that what the stream really carried shows; ``stdout``
    another file descriptor (a pipe nobody reads).
    """
    # the output as a shell outside GitHub Actions gets it (a diff in a runner's log is wrapped: cli/stdout.py)
    environment = {k: v for k, v in os.environ.items() if k not in ("ZEROADVISOR_DEBUG", "GITHUB_ACTIONS")}
    environment["NO_COLOR"] = "1"
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    for name, value in (env or {}).items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "zeroadvisor"]
    if isinstance(stdin, str) and not text:
        stdin = stdin.encode()
    return subprocess.run([*command, *map(_argument, args)], stdout=stdout, stderr=subprocess.PIPE, text=text,
                          input=stdin, env=environment, cwd=cwd, timeout=timeout, preexec_fn=preexec_fn,
                          check=False)


def cli_terminal(*args, columns: int = 80, cwd: Path | str | None = None, timeout: float = 120) -> Result:
    """``python -m zeroadvisor *args`` with stdout on a real terminal (a pseudo-terminal, ``COLUMNS`` wide): what
    a person at a terminal sees, where ``cli`` and ``cli_process`` see a pipe. NO_COLOR is set; UTF-8 output.
    The terminal's CRLF line ends are read back as LF."""
    code, shown, stderr = cli_terminal_bytes(*args, columns=columns, cwd=cwd, timeout=timeout)
    return Result(code, shown.decode("utf-8").replace("\r\n", "\n"), stderr)


def cli_terminal_bytes(*args, columns: int = 80, cwd: Path | str | None = None, env: dict[str, str] | None = None,
                       timeout: float = 120) -> tuple[int, bytes, str]:
    """As ``cli_terminal``, the terminal's bytes as they came (CRLF included): (exit code, stdout, stderr). The
    terminal is read while the command runs, so a report longer than the terminal's buffer cannot stall it."""
    import pty
    import select

    environment = {k: v for k, v in os.environ.items() if k not in ("ZEROADVISOR_DEBUG", "GITHUB_ACTIONS")}
    environment.update(NO_COLOR="1", COLUMNS=str(columns), PYTHONIOENCODING="utf-8",
                       PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
                       **(env or {}))
    main, child = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "zeroadvisor", *map(_argument, args)], stdout=child,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=environment, cwd=cwd)
    os.close(child)
    chunks = []
    try:
        while select.select([main], [], [], timeout)[0]:
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: the child closed the terminal's other side
                break
            if not data:
                break
            chunks.append(data)
        process.wait(timeout)
    finally:
        os.close(main)
        if process.poll() is None:
            process.kill()
    stderr = process.stderr.read().decode("utf-8", "replace") if process.stderr else ""
    return process.returncode, b"".join(chunks), stderr
