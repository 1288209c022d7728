"""lint --fix and --diff through the command line: the lint rules' own fixes, written by the one fix writer
(zeroadvisor/fix), with no model and no cluster; what remains is reported; --diff writes nothing.

Real files, real modes and line endings, real processes for pre-commit's batches: nothing is mocked.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess

import pytest
import yaml

from cli_run import cli, cli_process  # noqa: F401 - the fixture
from conftest import REPO

MISSPELT = '{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimisation": {\n    "stage": 2\n  }\n}\n'
FIXED = MISSPELT.replace("zero_optimisation", "zero_optimization")
CLEAN = '{"train_micro_batch_size_per_gpu": 1}\n'
NOT_A_CONFIG = '{"architectures": ["LlamaForCausalLM"], "zero_optimisation": 1}\n'  # a model's config.json
STDERR_ONE_FIXED = "zeroadvisor: 1 file checked: 1 finding (1 fixed, 0 remaining)\n"
HOOKS = {hook["id"]: hook for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}


def test_a_misspelt_key_is_fixed_with_no_other_flag(cli, tmp_path):
    (tmp_path / "ds.json").write_text(MISSPELT)
    result = cli("lint", "--fix", "ds.json", cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "1 file checked: no problems\n", STDERR_ONE_FIXED)
    assert (tmp_path / "ds.json").read_text() == FIXED
    again = cli("lint", "--fix", "ds.json", cwd=tmp_path)  # nothing left to fix: no fix line
    assert (again.returncode, again.stdout, again.stderr) == (0, "1 file checked: no problems\n", "")


def test_comments_line_endings_and_mode_are_kept(cli, tmp_path):
    original = (b'{\r\n  // tuned on 8xA100\r\n  "train_micro_batch_size_per_gpu": 1, // per GPU\r\n'
                b'  "zero_optimisation": {\r\n    "stage": 2\r\n  }\r\n}\r\n')
    path = tmp_path / "ds.json"
    path.write_bytes(original)
    path.chmod(0o640)
    result = cli("lint", "--fix", "--ignore", "not-strict-json", "ds.json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert path.read_bytes() == original.replace(b"zero_optimisation", b"zero_optimization")  # every other byte
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["ds.json"]  # no temporary file left beside it


def test_a_symlink_is_fixed_through_to_its_target(cli, tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "ds.json").write_text(MISSPELT)
    (tmp_path / "ds.json").symlink_to(os.path.join("configs", "ds.json"))
    assert cli("lint", "--fix", "ds.json", cwd=tmp_path).returncode == 0
    assert (tmp_path / "ds.json").is_symlink() and (tmp_path / "configs" / "ds.json").read_text() == FIXED


def test_fixes_are_linted_again_and_fixed_again(cli, tmp_path):
    """The renamed section holds a key its stage ignores (ZA601, a fix of its own): one run fixes both."""
    text = ('{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimisation": {\n    "stage": 2,\n'
            '    "offload_param": {"device": "cpu"}\n  }\n}\n')
    (tmp_path / "ds.json").write_text(text)
    result = cli("lint", "--fix", "ds.json", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stderr == "zeroadvisor: 1 file checked: 2 findings (2 fixed, 0 remaining)\n"
    assert (tmp_path / "ds.json").read_text() == FIXED
    assert cli("lint", "ds.json", cwd=tmp_path).stdout == "1 file checked: no problems\n"


def test_what_remains_is_reported_with_the_exit_code_on_it(cli, tmp_path):
    """ZA002 (a comment, no fix) remains; the rename is written; --fail-on judges what remains."""
    (tmp_path / "ds.json").write_text(MISSPELT.replace("{\n", "{\n  // a comment\n", 1))
    result = cli("lint", "--fix", "--fail-on", "warning", "ds.json", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.startswith("ds.json:2:3: ZA002 [warning]") and result.stdout.endswith(
        "1 file checked: 1 warning\n")
    assert result.stderr == "zeroadvisor: 1 file checked: 2 findings (1 fixed, 1 remaining)\n"
    assert "zero_optimization" in (tmp_path / "ds.json").read_text()


def test_diff_prints_the_fixes_and_writes_nothing(cli, tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(MISSPELT)
    before = path.stat()
    result = cli("lint", "--diff", "ds.json", cwd=tmp_path)
    assert result.returncode == 1  # lint's: ZA102 is an error in the file as it is
    assert result.stdout.startswith("--- a/ds.json\n+++ b/ds.json\n@@ ")
    assert '-  "zero_optimisation": {\n+  "zero_optimization": {\n' in result.stdout
    assert result.stderr == "zeroadvisor: would fix 1 of 1 finding in 1 file\n"
    after = path.stat()
    assert path.read_text() == MISSPELT and (after.st_mtime_ns, after.st_ino) == (before.st_mtime_ns, before.st_ino)
    if shutil.which("git"):  # the diff is one git apply takes
        (tmp_path / "fix.diff").write_text(result.stdout)
        subprocess.run(["git", "apply", "fix.diff"], cwd=tmp_path, check=True, capture_output=True)
        assert path.read_text() == FIXED


def test_diff_of_a_clean_file_is_empty_and_exits_0(cli, tmp_path):
    (tmp_path / "ok.json").write_text(CLEAN)
    result = cli("lint", "--diff", "ok.json", cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "zeroadvisor: would fix 0 of 0 findings\n")


def test_a_directory_fixes_its_configs_and_leaves_other_json_alone(cli, tmp_path):
    for name, text in {"a.json": MISSPELT, "sub/b.json": MISSPELT, "config.json": NOT_A_CONFIG,
                       "ok.json": CLEAN}.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    result = cli("lint", "--fix", ".", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "3 files checked (1 skipped: not DeepSpeed configs): no problems\n"
    assert result.stderr == "zeroadvisor: 3 files checked: 2 findings (2 fixed, 0 remaining)\n"
    assert (tmp_path / "a.json").read_text() == FIXED and (tmp_path / "sub" / "b.json").read_text() == FIXED
    assert (tmp_path / "config.json").read_text() == NOT_A_CONFIG and (tmp_path / "ok.json").read_text() == CLEAN
    glob = cli("lint", "--diff", "*.json", cwd=tmp_path)  # a pattern names config.json: linted, nothing to fix
    assert (glob.stdout, glob.stderr) == ("", "zeroadvisor: would fix 0 of 1 finding\n")


def test_fix_refuses_standard_input_and_diff_reads_it(cli, tmp_path):
    refused = cli("lint", "--fix", "-", stdin=MISSPELT.encode())
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == ("zeroadvisor: --fix writes the fixed files and <stdin> is not one; --diff shows the "
                              "fixes without writing\n")
    shown = cli("lint", "--diff", "-", stdin=MISSPELT.encode())
    assert shown.returncode == 1 and '+  "zero_optimization": {' in shown.stdout


def test_fix_and_diff_together_are_a_usage_error(cli, tmp_path):
    (tmp_path / "ds.json").write_text(MISSPELT)
    result = cli("lint", "--fix", "--diff", "ds.json", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "zeroadvisor: give --fix (write the fixes) or --diff (show them), not both\n"
    assert (tmp_path / "ds.json").read_text() == MISSPELT


def test_unwritable_fixes_are_one_line_each_and_exit_2_the_others_still_fixed(cli, tmp_path):
    (tmp_path / "ds.yaml").write_text("train_micro_batch_size_per_gpu: 1\nzero_optimisation:\n  stage: 2\n")
    (tmp_path / "ro.json").write_text(MISSPELT)
    (tmp_path / "ro.json").chmod(0o444)
    (tmp_path / "ok.json").write_text(MISSPELT)
    result = cli("lint", "--fix", "ds.yaml", "ro.json", "ok.json", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "zeroadvisor: ds.yaml: fixes are written into JSON configs only; apply the suggested change by hand",
        "zeroadvisor: ro.json: the file is read-only (mode 0444): the fix is not written",
        "zeroadvisor: 3 files checked: 3 findings (1 fixed, 2 remaining)"]
    assert "ds.yaml:2:1: ZA102 [error]" in result.stdout and "ro.json:3:3: ZA102 [error]" in result.stdout
    assert (tmp_path / "ok.json").read_text() == FIXED and (tmp_path / "ro.json").read_text() == MISSPELT


def test_json_format_reports_what_remains(cli, tmp_path):
    import json

    (tmp_path / "ds.json").write_text(MISSPELT)
    result = cli("lint", "--fix", "--format", "json", "ds.json", cwd=tmp_path)
    assert json.loads(result.stdout)["findings"] == [] and result.stderr == STDERR_ONE_FIXED


# -- the pre-commit hooks -------------------------------------------------------------------------

def test_the_fix_hook_runs_lint_fix_on_the_lint_hooks_files():
    fix, check = HOOKS["zeroadvisor-fix"], HOOKS["zeroadvisor"]
    assert fix["entry"] == "zeroadvisor lint --only-configs --fix" and fix["language"] == "python"
    assert (fix["files"], fix["exclude"]) == (check["files"], check["exclude"])


def _hook_args(hook_id: str, *files: str) -> list[str]:
    """The hook's entry as pre-commit runs it: its words after the program, then the files."""
    program, *args = shlex.split(HOOKS[hook_id]["entry"])
    assert program == "zeroadvisor"
    return [*args, *files]


def test_the_fix_hook_entry_fixes_configs_and_skips_other_files(cli, tmp_path):
    (tmp_path / "ds.json").write_text(MISSPELT)
    (tmp_path / "config.json").write_text(NOT_A_CONFIG)
    result = cli(*_hook_args("zeroadvisor-fix", "ds.json", "config.json"), cwd=tmp_path, env={"PRE_COMMIT": "1"})
    assert (result.returncode, result.stdout, result.stderr) == (0, "", STDERR_ONE_FIXED)  # clean now: no summary
    assert (tmp_path / "ds.json").read_text() == FIXED and (tmp_path / "config.json").read_text() == NOT_A_CONFIG


def test_pre_commit_batches_each_say_their_own_files_and_a_clean_one_says_nothing(tmp_path):
    """pre-commit runs a hook on batches of the files, in processes of their own (require_serial: false): each
    batch's summary counts its files, and under pre-commit (PRE_COMMIT set) a clean batch prints nothing."""
    names = {"a.json": MISSPELT, "b.json": CLEAN, "c.json": CLEAN, "d.json": CLEAN, "e.json": CLEAN}
    for name, text in names.items():
        (tmp_path / name).write_text(text)
    env = {"PRE_COMMIT": "1"}
    failing = cli_process(*_hook_args("zeroadvisor", "a.json", "b.json"), cwd=tmp_path, env=env)
    clean = cli_process(*_hook_args("zeroadvisor", "c.json", "d.json", "e.json"), cwd=tmp_path, env=env)
    assert failing.returncode == 1 and failing.stdout.splitlines()[-1] == "2 files checked: 1 error"
    assert (clean.returncode, clean.stdout, clean.stderr) == (0, "", "")
    outside = cli_process(*_hook_args("zeroadvisor", "c.json", "d.json", "e.json"), cwd=tmp_path,
                          env={"PRE_COMMIT": None})
    assert outside.stdout == "3 files checked: no problems\n"  # outside pre-commit: the summary as always


@pytest.mark.slow  # real pre-commit on a throwaway git repository
def test_pre_commit_fix_hook_fixes_then_the_check_passes(tmp_path):
    """Real pre-commit, both hooks as `language: system` with this checkout's entries (tests/test_precommit.py
    says why not `language: python`), on more files than one batch holds."""
    import sys

    pytest.importorskip("pre_commit")
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    for index in range(9):
        (repo / f"ds_{index}.json").write_text(MISSPELT if index % 3 == 0 else CLEAN)
    hooks = [{"id": hook_id, "name": HOOKS[hook_id]["name"], "language": "system", "files": HOOKS[hook_id]["files"],
              "exclude": HOOKS[hook_id]["exclude"],
              "entry": HOOKS[hook_id]["entry"].replace("zeroadvisor", f"{sys.executable} -m zeroadvisor", 1)}
             for hook_id in ("zeroadvisor-fix", "zeroadvisor")]
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": hooks}]}))
    env = {**os.environ, "PYTHONPATH": str(REPO), "PRE_COMMIT_HOME": str(tmp_path / "cache"), "NO_COLOR": "1",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", "."], cwd=repo, check=True, env=env)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)

    def pre_commit() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files"], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=240, check=False)

    first = pre_commit()
    assert first.returncode == 1 and "files were modified by this hook" in first.stdout, first.stdout + first.stderr
    assert all((repo / f"ds_{index}.json").read_text() == (FIXED if index % 3 == 0 else CLEAN) for index in range(9))
    assert "no problems" not in first.stdout  # no clean batch's summary beside the others
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
    second = pre_commit()
    assert second.returncode == 0, second.stdout + second.stderr
