"""Folder walks as ruff's (config/paths.py, config/excludes.py, config/gitfiles.py): ``lint .`` (the Action's
default) reads the project's configs, not the installed DeepSpeed's templates in ``.venv/``, not ``node_modules/``,
not what ``.gitignore`` ignores; a file named on the command line is read whatever the excludes say."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import zeroadvisor
from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config.excludes import Excludes, excludes_from
from zeroadvisor.config.paths import expand

# A DeepSpeed config with one misspelt key: every file linted has one finding, so the findings name the files read.
TYPO = '{"train_batch_size": 8, "zero_optimisation": {"stage": 3}}\n'
# DeepSpeed's own autotuning template, as pip installs it into a virtual environment (a DeepSpeed config by content).
TEMPLATE = ('{"zero_optimization": {"stage": 3, "allgather_partitions": true, "reduce_scatter": true, '
            '"stage3_max_live_parameters": 1e9, "sub_group_size": 1e12}}\n')
SITE = ".venv/lib/python3.11/site-packages/deepspeed/autotuning/config_templates"

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _git(root: Path, *args: str) -> None:
    environment = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                   "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, env=environment)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository's work tree: two configs of its own, and what a developer's checkout holds beside them."""
    root = tmp_path / "repo"
    _write(root, {
        ".git/ds_config.json": TYPO,  # (before git init: a .git folder holding a config, never walked)
        "configs/ds_z3.json": TYPO,
        "train/zero2.json": TYPO,
        f"{SITE}/template_zero3.json": TEMPLATE,
        "venv/lib/site-packages/pkg/ds.json": TYPO,
        "node_modules/some-package/ds_config.json": TYPO,
        "outputs/run1/ds_config.json": TYPO,  # ignored by .gitignore: a training run's copy of the config
        "build/lib/pkg/ds.json": TYPO,
        ".cache/ds.json": TYPO,
        ".gitignore": "outputs/\n",
    })
    return root


def _linted(cli, root: Path, *args: str) -> set[str]:
    result = cli("lint", "--format", "json", "--fail-on", "never", *args, cwd=root)
    assert result.returncode == 0, result.stderr
    return {finding["file"] for finding in json.loads(result.stdout)["findings"]}


@needs_git
def test_lint_dot_in_a_repository_lints_only_the_projects_configs(cli, project):
    _git(project, "init", "-q")
    assert _linted(cli, project, ".") == {"configs/ds_z3.json", "train/zero2.json"}
    # the same tree committed: tracked files are listed by git, and still the excluded folders are left out
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "x")
    assert _linted(cli, project, ".") == {"configs/ds_z3.json", "train/zero2.json"}
    assert _linted(cli, project, "configs") == {"configs/ds_z3.json"}


def test_without_git_the_default_excludes_still_apply(cli, project):
    # no repository here: .gitignore is not read, the default excludes are; the same where git is not installed
    found = {"configs/ds_z3.json", "train/zero2.json", "outputs/run1/ds_config.json"}
    assert _linted(cli, project, ".") == found
    empty = project.parent / "bin"
    empty.mkdir()
    result = cli("lint", "--format", "json", "--fail-on", "never", ".", cwd=project, env={"PATH": str(empty)})
    assert {f["file"] for f in json.loads(result.stdout)["findings"]} == found


@needs_git
def test_no_default_excludes_walks_everything(cli, project):
    _git(project, "init", "-q")
    found = _linted(cli, project, "--no-default-excludes", ".")
    assert {"configs/ds_z3.json", f"{SITE}/template_zero3.json", "node_modules/some-package/ds_config.json",
            "outputs/run1/ds_config.json", "build/lib/pkg/ds.json", ".cache/ds.json"} <= found
    assert not any(name.startswith(".git/") for name in found)  # version control's own folder: never walked


@needs_git
def test_exclude_patterns_by_name_and_by_path(cli, project):
    _git(project, "init", "-q")
    assert _linted(cli, project, "--exclude", "train", ".") == {"configs/ds_z3.json"}
    assert _linted(cli, project, "--exclude", "configs/*.json", ".") == {"train/zero2.json"}
    every = cli("lint", "--exclude", "*.json", ".", cwd=project)
    assert every.returncode == 2 and "directory has no" in every.stderr
    # a trailing / matches folders only: a file named "train" would stay
    assert _linted(cli, project, "--exclude", "zero2.json/", ".") == {"configs/ds_z3.json", "train/zero2.json"}


@needs_git
def test_project_configuration_exclude(cli, project):
    _git(project, "init", "-q")
    (project / "pyproject.toml").write_text('[tool.zeroadvisor]\nexclude = ["train/"]\n')
    assert _linted(cli, project, ".") == {"configs/ds_z3.json"}
    (project / "pyproject.toml").write_text('[tool.zeroadvisor]\nexclude = 3\n')
    result = cli("lint", ".", cwd=project)
    assert result.returncode == 2
    assert "pyproject.toml" in result.stderr and "exclude" in result.stderr


@needs_git
def test_a_named_file_is_read_whatever_the_excludes_say(cli, project):
    _git(project, "init", "-q")
    named = {"outputs/run1/ds_config.json", "node_modules/some-package/ds_config.json"}  # ignored, excluded
    assert _linted(cli, project, *sorted(named), "--exclude", "*.json") == named


def test_a_folder_with_only_excluded_configs_says_why_it_is_empty(cli, tmp_path):
    _write(tmp_path, {"node_modules/x/ds.json": TYPO})
    result = cli("lint", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert "--no-default-excludes" in result.stderr


@needs_git
def test_a_nested_repository_is_asked_for_its_own_ignores(cli, tmp_path):
    _write(tmp_path, {"top/a.json": TYPO, "top/sub/b.json": TYPO, "top/sub/tmp/c.json": TYPO,
                      "top/sub/.gitignore": "tmp/\n"})
    _git(tmp_path / "top", "init", "-q")
    _git(tmp_path / "top" / "sub", "init", "-q")
    assert _linted(cli, tmp_path / "top", ".") == {"a.json", "sub/b.json"}


@pytest.mark.parametrize("repository", [False, pytest.param(True, marks=needs_git)])
def test_symlinks_out_of_the_folder_are_not_followed(tmp_path, monkeypatch, repository):
    outside = tmp_path / "outside"
    _write(outside, {"secret.json": TYPO, "deep/d.json": TYPO})
    root = tmp_path / "repo"
    _write(root, {"a/x.json": TYPO})
    (root / "a" / "out").symlink_to(outside)  # a folder outside
    (root / "a" / "secret.json").symlink_to(outside / "secret.json")  # a file outside
    (root / "a" / "loop").symlink_to(root)  # a loop back to the top
    (root / "a" / "same.json").symlink_to(root / "a" / "x.json")  # a file inside: the same file, listed once
    if repository:
        _git(root, "init", "-q")
    monkeypatch.chdir(root)
    assert expand(["."]) == ["a/x.json"]
    assert expand(["a"]) == ["a/x.json"]


def test_glob_patterns_do_not_wander_into_excluded_folders(tmp_path, monkeypatch):
    _write(tmp_path, {"configs/a.json": TYPO, f"{SITE}/template_zero3.json": TEMPLATE, "node_modules/p/c.json": TYPO})
    monkeypatch.chdir(tmp_path)
    assert expand(["**/*.json"], Excludes()) == ["configs/a.json"]
    assert "node_modules/p/c.json" in expand(["node_modules/*/*.json"], Excludes())  # spelt out: taken
    # without the defaults node_modules is walked; .venv stays out: a pattern skips hidden names, as glob does
    assert expand(["**/*.json"], Excludes(defaults=False)) == ["configs/a.json", "node_modules/p/c.json"]


def test_exclude_pattern_matching(tmp_path):
    excludes = excludes_from(("legacy", "configs/old/**", "*.yml", "[a-c]x.json", "bad[[:x:]]", "[z-a]"), str(tmp_path),
                             defaults=False)
    assert excludes.excludes(str(tmp_path / "x" / "legacy"), True)
    assert excludes.excludes(str(tmp_path / "configs" / "old" / "a" / "b.json"), False)
    assert not excludes.excludes(str(tmp_path / "configs" / "older" / "b.json"), False)
    assert excludes.excludes(str(tmp_path / "deep" / "c.yml"), False)
    assert excludes.excludes(str(tmp_path / "bx.json"), False)
    assert not excludes.excludes(str(tmp_path / "dx.json"), False)
    assert not excludes.excludes(str(tmp_path / "other" / "z.json"), False)
    # a path pattern does not match outside its base folder
    assert not excludes_from(("configs/*",), str(tmp_path / "a")).excludes(str(tmp_path / "configs" / "x"), False)
    # * stays within one folder, ** crosses them
    single = excludes_from(("configs/*.json",), str(tmp_path), defaults=False)
    assert not single.excludes(str(tmp_path / "configs" / "a" / "b.json"), False)


# -- the Python API walks as the command line does -------------------------------------------------

def _api_linted(root: Path, monkeypatch, **keywords) -> set[str]:
    monkeypatch.chdir(root)  # exclude patterns are relative to the current folder, as --exclude's are
    result = zeroadvisor.lint(".", **keywords)
    return {os.path.relpath(finding.file, ".") for finding in result.findings}


def test_the_api_takes_exclude_and_default_excludes(tmp_path, monkeypatch):
    _write(tmp_path, {"configs/a.json": TYPO, "train/b.json": TYPO, "node_modules/x.json": TYPO})
    assert _api_linted(tmp_path, monkeypatch) == {"configs/a.json", "train/b.json"}
    assert _api_linted(tmp_path, monkeypatch, exclude=["train"]) == {"configs/a.json"}
    assert _api_linted(tmp_path, monkeypatch, exclude="configs/*.json") == {"train/b.json"}
    assert _api_linted(tmp_path, monkeypatch, default_excludes=False) == {"configs/a.json", "train/b.json",
                                                                          "node_modules/x.json"}
    assert _api_linted(tmp_path, monkeypatch, default_excludes=False, exclude=("train/", "configs")) == {
        "node_modules/x.json"}
    # a file named is read whatever the excludes say, as on the command line
    assert {f.file for f in zeroadvisor.lint("node_modules/x.json", exclude="*.json").findings} == {
        "node_modules/x.json"}
