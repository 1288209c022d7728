"""check --suggest with a model: off a terminal its diff is a patch of the files' bytes (as lint --diff's is), and
in a GitHub Actions log no line of it runs as a workflow command.

The check text report is the verdict, the findings and the estimate, then the diff; git apply skips the text
before the first ``--- `` header, so ``check ... --suggest | git apply`` applies the suggested change and leaves
what ``check --fix`` writes. Before, the diff was escaped for a terminal wherever it went (``\\ufeff`` for a BOM,
``\\xa0`` for a no-break space) and did not apply. Real processes, real git.
"""

from __future__ import annotations

import subprocess

import pytest

from ci_runner import executed
from cli_run import cli_process, cli_terminal_bytes
from zeroadvisor.report import Report
from zeroadvisor.report.check_text import narrow_diff
from zeroadvisor.report.text import suggested_diff

MODEL = ["--params", "1B", "--gpus", "8", "--gpu-memory", "80GiB", "--seq-len", "1024"]
# a misspelt section (the fix renames it) beside bytes a terminal gets escaped: a BOM, a no-break space, U+2028
# (str.splitlines splits there), a zero-width space, tabs, CRLF, and no final newline
ODD = '\ufeff{\r\n\t"_note": "a\u00a0b \u2028 c\u200b",\r\n  "zero_optimisation":\t{"stage": 2}\r\n}'
PLAIN = '{\n  "train_batch_size": 8,\n  "zero_optimisation": {"stage": 2}\n}\n'


def _repo(folder, files: dict[str, str]):
    folder.mkdir()
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    for name, text in files.items():
        (folder / name).write_bytes(text.encode())
    return folder


def _apply(patch: bytes, cwd) -> None:
    applied = subprocess.run(["git", "apply", "-v", "-"], check=False, input=patch, cwd=cwd, capture_output=True,
                             timeout=60)
    assert applied.returncode == 0, applied.stderr.decode(errors="replace")


@pytest.mark.parametrize("verbose", [[], ["--verbose"]], ids=["one-screen", "verbose"])
def test_check_suggest_through_a_pipe_applies_and_equals_fix(tmp_path, verbose):
    suggested = _repo(tmp_path / "suggested", {"ds.json": ODD, "b.json": PLAIN})
    fixed = _repo(tmp_path / "fixed", {"ds.json": ODD, "b.json": PLAIN})
    piped = cli_process("check", "ds.json", "b.json", *MODEL, "--suggest", *verbose, cwd=suggested, text=False)
    assert piped.returncode in (0, 1, 5), piped.stderr
    out = piped.stdout
    assert b"Verdict" in out  # the whole report, its diff after it
    assert "a\u00a0b \u2028 c\u200b\",\r\n".encode() in out and b":\t{" in out
    assert ("\ufeff{\r\n".encode() in out) == bool(verbose)  # line 1 is context of the 3-line diff only
    assert b"\\ufeff" not in out and b"\\xa0" not in out and b"\\u2028" not in out
    _apply(out, suggested)  # the report's text included: git apply skips it
    done = cli_process("check", "ds.json", "b.json", *MODEL, "--fix", cwd=fixed)
    assert "applied" in done.stderr, done.stderr
    for name in ("ds.json", "b.json"):
        after = (suggested / name).read_bytes()
        assert after == (fixed / name).read_bytes(), name
        assert b"zero_optimization" in after and b"zero_optimisation" not in after
    assert (suggested / "ds.json").read_bytes().startswith("\ufeff{\r\n\t\"_note\"".encode())


@pytest.mark.parametrize("encoding", [None, "ascii"])  # the patch is bytes, whatever the stream's encoding
def test_check_suggest_written_to_a_file_is_the_same_patch(tmp_path, encoding):
    repo = _repo(tmp_path / "repo", {"ds.json": ODD})
    with open(tmp_path / "report.txt", "wb") as out:
        done = cli_process("check", "ds.json", *MODEL, "--suggest", cwd=repo, stdout=out,
                           env={"PYTHONIOENCODING": encoding})
    assert done.returncode in (0, 1, 5), done.stderr
    report = (tmp_path / "report.txt").read_bytes()
    patch = report.split(b"--- a/ds.json", 1)[1]  # the diff after the report (one line of context each side)
    assert "a\u00a0b \u2028 c\u200b".encode() in patch and b"\\xa0" not in patch
    _apply(report, repo)
    assert b'"zero_optimization":\t{"stage": 2}\r\n}' in (repo / "ds.json").read_bytes()


def _on_a_terminal(*args, cwd, env=None) -> bytes:
    code, shown, stderr = cli_terminal_bytes(*args, cwd=cwd, env=env)
    assert code in (0, 1, 5), stderr
    return shown


def test_check_suggest_on_a_terminal_escapes_the_diff(tmp_path):
    (tmp_path / "ds.json").write_bytes(ODD.encode())
    shown = _on_a_terminal("check", "ds.json", *MODEL, "--suggest", cwd=tmp_path)
    assert b"\\u2028" in shown and b"\\xa0" in shown and "\u2028".encode() not in shown


def test_the_report_leaves_an_off_terminal_diff_to_its_writer():
    """In the library: Report.terminal (the command line decides it) says whether the diff is part of the text
    (escaped) or written after it as bytes (suggested_diff, raw); the default, for the API's report(), is escaped."""
    diff = '--- a/ds.json\n+++ b/ds.json\n@@ -1,2 +1,2 @@\n \ufeff{\n-  "a": 1\n+  "b": 1\n'
    report = Report([], diff=diff)
    assert suggested_diff(report) == narrow_diff(diff) and "\ufeff" in suggested_diff(report)
    from dataclasses import replace

    assert suggested_diff(replace(report, verbose=True)) == "\n" + diff


def test_narrow_diff_counts_lines_as_the_diff_does():
    """str.splitlines splits at U+2028 (and CR, FF, ...) inside a config's line: the recounted hunk did not apply."""
    diff = ('--- a/x\n+++ b/x\n@@ -1,5 +1,5 @@\n {\n \t"n": "a \u2028 b",\n x\x0c\n-  "a": 1\n+  "b": 1\n }\n')
    assert narrow_diff(diff) == ('--- a/x\n+++ b/x\n@@ -3,3 +3,3 @@\n x\x0c\n-  "a": 1\n+  "b": 1\n }\n')


# -- GitHub Actions: a raw patch in the job's log -------------------------------------------------------------

# key names a runner reads as commands: '##[' anywhere in a line (ActionCommand.TryParse), and '::error::' as a
# pull request would try it; each next to the misspelt section, so the diff's context holds it
HOSTILE = ('{\n  "::error::pwned": 1,\n  "##[add-mask]pwned": 2,\n  "zero_optimisation": {"stage": 2},\n'
           '  "##[error]pwned": 3\n}\n')


@pytest.mark.parametrize("command", [["lint", "--diff"], ["check", *MODEL, "--suggest"],
                                     ["check", "--suggest"]], ids=["lint-diff", "check-suggest", "check-lint-only"])
def test_a_patch_in_a_runner_log_runs_no_workflow_command(tmp_path, command):
    repo = _repo(tmp_path / "repo", {"ds.json": HOSTILE})
    name, *rest = command
    plain = cli_process(name, "ds.json", *rest, cwd=repo, text=False)
    assert b"##[add-mask]pwned" in plain.stdout  # the raw patch: a runner would mask and annotate
    assert {"add-mask", "error"} <= {name for name, _ in executed(plain.stdout.decode())}
    logged = cli_process(name, "ds.json", *rest, cwd=repo, text=False, env={"GITHUB_ACTIONS": "true"})
    out = logged.stdout.decode()
    assert executed(out) == []
    lines = out.splitlines()
    stop = next(line for line in lines if line.startswith("::stop-commands::"))
    token = stop.removeprefix("::stop-commands::")
    assert len(token) >= 32 and lines.index(f"::{token}::") > lines.index(stop)
    assert "##[add-mask]pwned" in out.split(stop)[1].split(f"::{token}::")[0]  # the bytes inside are the file's
    _apply(logged.stdout, repo)  # git apply skips the stop and resume lines
    assert b'"zero_optimization": {"stage": 2}' in (repo / "ds.json").read_bytes()
    again = cli_process(name, "ds.json", *rest, cwd=_repo(tmp_path / "again", {"ds.json": HOSTILE}), text=False,
                        env={"GITHUB_ACTIONS": "true"})
    assert f"::{token}::".encode() not in again.stdout  # a fresh token each run: a config cannot hold it


def test_a_patch_written_to_a_file_in_a_job_is_the_patch_alone(tmp_path):
    """'> fix.diff' in a workflow step: a regular file is the user's, not the log; nothing is added to it."""
    repo = _repo(tmp_path / "repo", {"ds.json": HOSTILE})
    with open(tmp_path / "fix.diff", "wb") as out:
        cli_process("lint", "--diff", "ds.json", cwd=repo, stdout=out, env={"GITHUB_ACTIONS": "true"})
    patch = (tmp_path / "fix.diff").read_bytes()
    assert patch.startswith(b"--- a/ds.json\n") and b"stop-commands" not in patch


def test_a_terminal_in_a_job_gets_the_escaped_diff(tmp_path):
    (tmp_path / "ds.json").write_text(HOSTILE)
    shown = _on_a_terminal("lint", "--diff", "ds.json", cwd=tmp_path, env={"GITHUB_ACTIONS": "true"})
    assert b"stop-commands" not in shown and b"##[" not in shown and executed(shown.decode()) == []


def test_patch_apply_takes_the_wrapped_patch(tmp_path):
    """GNU patch skips the stop and resume lines too."""
    import shutil

    if not shutil.which("patch"):
        pytest.skip("GNU patch is not installed")
    repo = _repo(tmp_path / "repo", {"ds.json": HOSTILE})
    logged = cli_process("lint", "--diff", "ds.json", cwd=repo, text=False, env={"GITHUB_ACTIONS": "true"})
    done = subprocess.run(["patch", "-p1"], check=False, input=logged.stdout, cwd=repo, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert b"zero_optimization" in (repo / "ds.json").read_bytes()


def test_what_stdout_is_is_decided_from_the_stream_and_the_environment(tmp_path):
    import io

    from zeroadvisor.cli.stdout import Stdout, classify

    captured = io.StringIO()  # no descriptor (an embedding program's stream): a stream, which may be the log
    assert classify(captured, {}) is Stdout.STREAM
    assert classify(captured, {"GITHUB_ACTIONS": "true"}) is Stdout.RUNNER_LOG
    assert classify(captured, {"GITHUB_ACTIONS": "false"}) is Stdout.STREAM
    with open(tmp_path / "out.txt", "w") as regular:
        assert classify(regular, {"GITHUB_ACTIONS": "true"}) is Stdout.FILE


def test_the_stop_ends_on_a_line_of_its_own():
    """A text without a final line break still gets its resume line at the start of a line, or the runner would
    stay stopped (and the patch's last line would change)."""
    from zeroadvisor.report.escape import without_workflow_commands

    wrapped = without_workflow_commands("+x", token="t0ken")
    assert wrapped == "::stop-commands::t0ken\n+x\n::t0ken::\n"
    assert executed(wrapped + "::error::after\n") == [("error", "after")]  # commands run again after it
    fresh = without_workflow_commands("x\n")
    assert fresh.startswith("::stop-commands::zeroadvisor-") and fresh != without_workflow_commands("x\n")
