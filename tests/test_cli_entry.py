"""The real entry point in a real process: exit codes, stdout vs stderr, a closed stdout, an ASCII
terminal. (Everything else about the CLI is tested in this process: test_cli_*.py.)"""

from __future__ import annotations

import os

import pytest

from cli_run import cli_process as run

TYPO = '{\n  "train_batch_size": 8,\n  "zero_optimisation": {"stage": 3}\n}\n'


@pytest.fixture
def typo(tmp_path):
    (tmp_path / "typo.json").write_text(TYPO)
    return tmp_path / "typo.json"


def test_exit_codes_and_streams(typo):
    findings = run("lint", str(typo))
    assert findings.returncode == 1
    assert findings.stdout.endswith("1 file checked: 1 error\n") and findings.stderr == ""
    clean = run("lint", "--fail-on", "never", str(typo))
    assert clean.returncode == 0
    usage = run("lint", "--format", "xml", str(typo))
    assert usage.returncode == 2 and usage.stdout == ""
    assert usage.stderr.count("\n") == 1 and usage.stderr.startswith("zeroadvisor: ")
    unreadable = run("lint", str(typo.parent / "nope.json"))
    assert unreadable.returncode == 2
    assert unreadable.stdout == "1 file could not be read\n"
    assert unreadable.stderr == f"zeroadvisor: {typo.parent / 'nope.json'}: no such file\n"


def test_console_script_function_reads_sys_argv():
    code = "import sys; from zeroadvisor.cli import main; sys.argv[0] = 'zeroadvisor'; main()"
    result = run("--version", code=code)
    assert result.returncode == 0 and result.stdout.startswith("zeroadvisor ")


def test_internal_error_is_one_line_exit_3(typo):
    code = ("import zeroadvisor.flows as flows\n"
            "def bug(*args, **kwargs): raise RuntimeError('boom')\n"
            "flows.lint = bug\n"
            "from zeroadvisor.cli import main; main()")
    result = run("lint", str(typo), code=code)
    assert result.returncode == 3
    assert result.stderr == ("zeroadvisor: internal error: RuntimeError: boom (please report; ZEROADVISOR_DEBUG=1 "
                             "shows the traceback)\n")
    debug = run("lint", str(typo), code=code, env={"ZEROADVISOR_DEBUG": "1"})
    assert "Traceback" in debug.stderr and "RuntimeError: boom" in debug.stderr


@pytest.mark.parametrize("args", [["lint", "--format", "json"], ["rules"]])  # typer-free and typer paths
def test_closed_stdout_exits_141_quietly(typo, args):
    read, write = os.pipe()
    os.close(read)  # nobody will read: the first write fails with EPIPE
    argv = [*args, str(typo)] if args[0] == "lint" else args
    process = run(*argv, stdout=write, text=False, env={"NO_COLOR": None})
    os.close(write)
    assert process.returncode == 141
    assert process.stderr == b""


def test_ascii_stream_does_not_crash(tmp_path):
    name = tmp_path / "caf\u00e9.json"
    name.write_text(TYPO)
    lint = run("lint", str(name), env={"PYTHONIOENCODING": "ascii"})
    assert lint.returncode == 1, lint.stderr
    assert "caf\\xe9.json:3:3: ZA102" in lint.stdout
    estimate = run("estimate", "--params", "7B", "--gpus", "8", "--gpu", "H100-SXM5-80GB",
                   env={"PYTHONIOENCODING": "ascii", "COLUMNS": "200"})
    assert estimate.returncode == 0, estimate.stderr
    # the ASCII marks, not backslash escapes of the Unicode ones
    assert "yes fits, tight tight" in estimate.stdout and "NO does not fit" in estimate.stdout
    assert estimate.stdout.isascii()


def test_dash_is_standard_input():
    result = run("lint", "-", stdin=TYPO)
    assert result.returncode == 1
    assert result.stdout.startswith("<stdin>:3:3: ZA102 [error]")
