"""--suggest diffs apply with the real tools: git apply and GNU patch (issue 7, defect 4).

86 of the corpus's configs have no final newline; a diff touching their last line needs
'\\ No newline at end of file' or git apply and patch reject it.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config.source import ParseError, parse
from zeroadvisor.fix.apply import NO_NEWLINE, unified_diff
from zeroadvisor.fix.editor import EditError, patched_text

from conftest import corpus_manifest
from test_fix_write import CHECK, project  # noqa: F401 - the fixture

# Each touches the end of the root object, so the hunk holds the file's last line.
PATCHES = [
    {"zz_added_by_the_fix": {"enabled": True}},
    {"zero_optimization": {"stage": 1}, "zz_added_by_the_fix": 1},
]


def _run(command: list[str], cwd) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60)


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
    check = subprocess.run(["git", "apply", "--check", "fix.diff"], cwd=project, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr + repr(diff)
    subprocess.run(["git", "apply", "fix.diff"], cwd=project, check=True)
    after = (project / "ds.json").read_bytes()
    assert b'"stage": 3' not in after and not after.endswith(b"\n") and after.count(b"\n") == after.count(b"\r\n")
