"""--suggest diffs apply with the real tools: git apply and GNU patch (issue 7, defect 4).

86 of the corpus's configs have no final newline; a diff touching their last line needs
'\\ No newline at end of file' or git apply and patch reject it.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from conftest import corpus_manifest
from test_fix_write import CHECK, project  # noqa: F401 - the fixture
from zeroadvisor.config.source import ParseError, parse
from zeroadvisor.fix.apply import NO_NEWLINE, unified_diff
from zeroadvisor.fix.editor import EditError, patched_text

# Each touches the end of the root object, so the hunk holds the file's last line.
PATCHES = [
    {"zz_added_by_the_fix": {"enabled": True}},
    {"zero_optimization": {"stage": 1}, "zz_added_by_the_fix": 1},
]


def _run(command: list[str], cwd) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def _apply_everywhere(folder, diff: str) -> None:
    """git apply --check, then git apply and patch -p1 for real, each on its own copy."""
    diff_file = str(folder / "fix.diff")
    (folder / "fix.diff").write_text(diff, newline="")
    for command in (["git", "apply", "--check", "-v", diff_file], ["git", "apply", diff_file]):
        result = _run(command, folder / "git")
        assert result.returncode == 0, result.stderr[-2000:]
    if shutil.which("patch"):
        for command in (["patch", "-p1", "--dry-run", "-i", diff_file], ["patch", "-p1", "-s", "-i", diff_file]):
            result = _run(command, folder / "patch")
            assert result.returncode == 0, result.stdout[-2000:]


def _setup(folder, files: dict[str, str]) -> None:
    for tool in ("git", "patch"):
        (folder / tool).mkdir()
        for name, text in files.items():
            (folder / tool / name).write_bytes(text.encode())


@pytest.mark.corpus
def test_corpus_diffs_without_final_newline_apply_with_git_and_patch(corpus, tmp_path, monkeypatch):
    originals, expected, diffs, marked = {}, {}, [], 0
    for row in corpus_manifest(corpus):
        if row["kind"] != "ds_json":
            continue
        text = (corpus / row["file"]).read_bytes().decode("utf-8")
        if text.endswith("\n"):
            continue
        try:
            doc = parse(text, row["file"])
        except ParseError:
            continue
        for index, patch in enumerate(PATCHES):
            try:
                new = patched_text(doc, patch)
            except EditError as err:
                assert err.reason == "placeholder", f"{row['file']}: {err}"
                continue
            name = f"{index}-{row['file']}"
            originals[name], expected[name] = text, new
            diff = unified_diff(doc, patch, name)
            marked += diff.endswith("\n" + NO_NEWLINE)  # the last line is in the hunk, and marked
            diffs.append(diff)
    assert len(originals) >= 150  # 86 files without a final newline, two patches each
    assert marked >= 100  # most hunks reach the last line (some files end in blank lines)
    _setup(tmp_path, originals)
    monkeypatch.chdir(tmp_path)
    _apply_everywhere(tmp_path, "".join(diffs))
    for name, new in expected.items():
        assert (tmp_path / "git" / name).read_bytes() == new.encode(), name
        if shutil.which("patch"):
            assert (tmp_path / "patch" / name).read_bytes() == new.encode(), name


@pytest.mark.parametrize("text", [
    '{\r\n  "zero_optimization": {\r\n    "stage": 3\r\n  }\r\n}',  # CRLF, no final newline
    '{\r\n  "zero_optimization": {\r\n    "stage": 3\r\n  }\r\n}\r\n',
    '{"zero_optimization": {"stage": 3}}',  # one line, no final newline
    '{\n  "note": "a\u2028b\\f",\n  "zero_optimization": {"stage": 3}\n}',  # characters splitlines() splits at
])
def test_diff_applies_to_crlf_and_single_line_files(tmp_path, monkeypatch, text):
    name = "my ds.json"  # a space: GNU patch needs the tab git writes after such a name
    doc = parse(text, name)
    patch = {"zero_optimization": {"stage": 2, "overlap_comm": True}}
    _setup(tmp_path, {name: text})
    monkeypatch.chdir(tmp_path)
    _apply_everywhere(tmp_path, unified_diff(doc, patch, name))
    assert (tmp_path / "git" / name).read_bytes() == patched_text(doc, patch).encode()


def test_a_file_name_cannot_break_the_diff_header():
    name = 'ds\n+++ b/evil.json\t"x".json'
    diff = unified_diff(parse('{"a": 1}', name), {"a": 2}, name)
    headers = diff.splitlines()[:2]
    assert headers == ['--- "a/ds\\n+++ b/evil.json\\t\\"x\\".json"', '+++ "b/ds\\n+++ b/evil.json\\t\\"x\\".json"']


def test_cli_suggest_diff_of_a_file_without_final_newline_applies(cli, project):
    # test_fix_write's project: a CRLF config without a final newline, its model and its description
    result = cli(*CHECK, "--suggest", cwd=project)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    diff = out[out.index("--- a/ds.json"):]
    (project / "fix.diff").write_text(diff, newline="")
    check = subprocess.run(["git", "apply", "--check", "fix.diff"], cwd=project, capture_output=True, text=True,
                           check=False)
    assert check.returncode == 0, check.stderr + repr(diff)
    subprocess.run(["git", "apply", "fix.diff"], cwd=project, check=True)
    after = (project / "ds.json").read_bytes()
    assert b'"stage": 3' not in after and not after.endswith(b"\n") and after.count(b"\n") == after.count(b"\r\n")


# lint --diff to a file or a pipe is a patch of the files' own bytes (issue 32, item 4): each config has a fix
# (a misspelt key) and bytes a terminal would get escaped. Names end in .json: all are linted as JSON/hjson.
ODD_BYTES = {
    "bom.json": '\ufeff{\n  "zero_optimisation": {"stage": 2},\n  "train_batch_size": 8\n}\n',
    "nbsp.json": '{\n  "_note": "8\u00a0GPUs",\n  "zero_optimisation": {"stage": 2}\n}\n',
    "crlf.json": '{\r\n\t"zero_optimisation": {"stage": 2},\r\n\t"train_batch_size": 8\r\n}\r\n',
    "no-newline.json": '{"train_batch_size": 8, "zero_optimisation": {"stage": 2}}',  # the changed line is the last
    "all.json": '\ufeff{\r\n\t"_note": "a\u00a0b \u2028 c\u200b",\r\n  "zero_optimisation":\t{"stage": 2}\r\n}',
}


def _git_repo(folder, files: dict[str, str]) -> None:
    folder.mkdir()
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    for name, text in files.items():
        (folder / name).write_bytes(text.encode())


@pytest.mark.parametrize("encoding", [None, "ascii"])  # the patch is bytes, whatever the stream's encoding
def test_lint_diff_written_to_a_file_applies_with_git_and_equals_fix(tmp_path, encoding):
    from cli_run import cli_process

    _git_repo(tmp_path / "diffed", ODD_BYTES)
    _git_repo(tmp_path / "fixed", ODD_BYTES)
    with open(tmp_path / "fix.diff", "wb") as out:
        diffed = cli_process("lint", "--diff", *ODD_BYTES, cwd=tmp_path / "diffed", stdout=out,
                             env={"PYTHONIOENCODING": encoding})
    assert diffed.returncode in (0, 1), diffed.stderr
    patch = (tmp_path / "fix.diff").read_bytes()
    assert "\ufeff".encode() in patch and "\u00a0".encode() in patch and b"\r\n" in patch and b"\t" in patch
    assert b"\\ufeff" not in patch and b"\\xa0" not in patch and b"\\t" not in patch
    # no-newline.json: its last line changes (marked on both sides); all.json: its last line is context (once)
    assert patch.count(NO_NEWLINE.encode()) == 3
    applied = _run(["git", "apply", "-v", str(tmp_path / "fix.diff")], tmp_path / "diffed")
    assert applied.returncode == 0, applied.stderr
    fixed = cli_process("lint", "--fix", *ODD_BYTES, cwd=tmp_path / "fixed")
    assert " fixed, " in fixed.stderr, fixed.stderr
    for name, text in ODD_BYTES.items():
        after = (tmp_path / "diffed" / name).read_bytes()
        assert after == (tmp_path / "fixed" / name).read_bytes(), name
        assert after == text.replace("zero_optimisation", "zero_optimization").encode(), name


def test_lint_diff_through_a_pipe_is_the_same_patch(tmp_path):
    from cli_run import cli_process

    _git_repo(tmp_path / "repo", ODD_BYTES)
    piped = cli_process("lint", "--diff", "all.json", cwd=tmp_path / "repo", text=False)
    assert "\ufeff{\r\n".encode() in piped.stdout
    applied = subprocess.run(["git", "apply", "-"], input=piped.stdout, cwd=tmp_path / "repo", capture_output=True,
                             check=False)
    assert applied.returncode == 0, applied.stderr
    assert b"zero_optimization" in (tmp_path / "repo" / "all.json").read_bytes()


def test_lint_diff_on_a_terminal_escapes_what_a_terminal_would_act_on(tmp_path):
    """A terminal still gets escapes: a config's bytes must not move its cursor or hide in it."""
    from cli_run import cli_terminal_bytes

    # ESC raw inside a JSON string is refused (a control character): a comment holds it instead
    (tmp_path / "ds.json").write_bytes('\ufeff{\n  # \x1b[2J\n  "zero_optimisation": {"stage": 2}\n}\n'.encode())
    code, shown, _ = cli_terminal_bytes("lint", "--diff", "ds.json", cwd=tmp_path)
    assert code == 1
    assert b"\\ufeff{" in shown and b"\\x1b[2J" in shown and b"\x1b" not in shown
