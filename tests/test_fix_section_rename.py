"""A rename fix changes the key's token in place (issue 20, defect 6).

`lint --fix` of a misspelt section used to write the rename as a deletion and an insertion: every comment above
and inside the section was deleted and the section moved to the end of the file. Now only the key's string token
changes; every other byte, the file's mode and its line endings stay. Where the correct key is also given, no fix
is offered (renaming would overwrite what DeepSpeed reads with what it ignores) and the finding says so.
"""

from __future__ import annotations

import stat

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.config.source import parse
from zeroadvisor.fix.editor import patched_text

COMMENTED = (
    "{\n"
    "  // batch: tuned on 8xA100\n"
    '  "train_micro_batch_size_per_gpu": 1,\n'
    "  // ZeRO: stage 2 for the 7B, see the wiki\n"
    '  "zero_optimisation": {\n'
    "    // keep the gradients on the GPU\n"
    '    "stage": 2, // two\n'
    '    /* measured */ "overlap_comm": true\n'
    "  }, # the section ends here\n"
    '  "bf16": {"enabled": true}\n'
    "}\n"
)


def _fixed(text: str) -> str:
    return text.replace("zero_optimisation", "zero_optimization")


@pytest.mark.parametrize("text", [
    pytest.param(COMMENTED, id="comments above, inside and after a section that is not the last"),
    pytest.param(COMMENTED.replace("\n", "\r\n"), id="CRLF"),
    pytest.param(COMMENTED.replace('"zero_optimisation"', "zero_optimisation"), id="hjson quoteless key"),
    pytest.param(COMMENTED.replace('"zero_optimisation"', "'zero_optimisation'"), id="single-quoted key"),
    pytest.param(COMMENTED.replace('"zero_optimisation": {', '"zero_optimisation":\n  {'),
                 id="the value on the next line"),
])
def test_lint_fix_renames_a_misspelt_section_in_place(cli, tmp_path, text):
    path = tmp_path / "ds.json"
    path.write_bytes(text.encode())
    path.chmod(0o640)
    result = cli("lint", "--fix", "--ignore", "not-strict-json", "ds.json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert path.read_bytes() == _fixed(text).encode()  # only the key's token changed
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert cli("lint", "--ignore", "not-strict-json", "ds.json", cwd=tmp_path).returncode == 0


def test_a_misspelt_key_inside_a_section_is_renamed_in_place(cli, tmp_path):
    """ZA101 (a pydantic section's unknown key) goes through the same rename."""
    text = ('{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimization": {\n    // overlap: measured\n'
            '    "overlap_com": true, // on\n    "stage": 2\n  }\n}\n')
    (tmp_path / "ds.json").write_text(text)
    assert cli("lint", "--fix", "--ignore", "not-strict-json", "ds.json", cwd=tmp_path).returncode == 0
    assert (tmp_path / "ds.json").read_text() == text.replace("overlap_com", "overlap_comm")


def test_a_rename_with_changes_to_its_value_keeps_the_comments_inside():
    """A fix of the same run (advice on the renamed section) edits the value in place, under the new key."""
    doc = parse(COMMENTED)
    value = dict(doc.data["zero_optimisation"], stage=3, reduce_bucket_size=5e8)
    new = patched_text(doc, {"zero_optimisation": None, "zero_optimization": value})
    assert parse(new).data == mp.apply(doc.data, {"zero_optimisation": None, "zero_optimization": value})
    assert new == _fixed(COMMENTED).replace('"stage": 2, // two', '"stage": 3, // two').replace(
        '"overlap_comm": true\n', '"overlap_comm": true,\n    "reduce_bucket_size": 500000000.0\n')


def test_an_unrelated_deletion_and_insertion_is_not_a_rename():
    text = '{\n  // a\n  "a": {"x": 1},\n  "b": 2\n}\n'
    assert patched_text(parse(text), {"a": None, "c": {"y": 1}}) == '{\n  "b": 2,\n  "c": {\n    "y": 1\n  }\n}\n'


def test_no_fix_when_the_correct_section_is_also_given(cli, tmp_path):
    """Renaming would overwrite the section DeepSpeed reads (stage 2) with the one it ignores (stage 3)."""
    text = ('{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimisation": {"stage": 3},\n'
            '  "zero_optimization": {"stage": 2}\n}\n')
    path = tmp_path / "ds.json"
    path.write_text(text)
    result = cli("lint", "--fix", "ds.json", cwd=tmp_path)
    assert result.returncode == 1 and path.read_text() == text
    assert result.stdout.startswith("ds.json:3:3: ZA102 [error]")
    assert ("'zero_optimization' is also given, so no fix is offered: merge the two by hand and delete "
            "'zero_optimisation'") in result.stdout
    assert cli("lint", "--diff", "ds.json", cwd=tmp_path).stdout.count("---") == 0
