"""The pre-commit hook (.pre-commit-hooks.yaml): its file pattern admits every config name in the corpus
and not the usual other JSON/YAML, and real `pre-commit` running it finds what `zeroadvisor lint` finds."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from cli_run import cli  # noqa: F401 - the fixture
from conftest import REPO, corpus_manifest

HOOKS = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
HOOK = next(h for h in HOOKS if h["id"] == "zeroadvisor")
FILES, EXCLUDE = re.compile(HOOK["files"]), re.compile(HOOK["exclude"])
FINDING = re.compile(r"^(?:\./)?(\S+?:\d+:\d+: ZA\d+ \[\w+\])", re.MULTILINE)


def selected(path: str) -> bool:
    """What pre-commit passes the hook: `files` matches and `exclude` does not (re.search, as pre-commit)."""
    return bool(FILES.search(path)) and not EXCLUDE.search(path)


def test_hook_runs_lint_judging_files_by_content():
    assert HOOK["entry"] == "zeroadvisor lint --only-configs" and HOOK["language"] == "python"


def test_every_corpus_config_name_is_selected(corpus):
    rows = [row for row in corpus_manifest(corpus) if row["kind"] in ("ds_json", "accelerate_yaml", "other")]
    assert len(rows) >= 280
    missed = [row["path"] for row in rows if not selected(row["path"])]  # the path inside its repository
    assert missed == []


@pytest.mark.parametrize("path", ["package.json", "web/package-lock.json", "tsconfig.json", "tsconfig.build.json",
                                  ".github/workflows/ci.yml", ".pre-commit-config.yaml", "docker-compose.yml",
                                  "mkdocs.yml", "models/llama/tokenizer_config.json", "README.md", "train.py",
                                  "model.safetensors.index.json"])
def test_usual_other_files_are_not_selected(path):
    assert not selected(path)


@pytest.mark.parametrize("path", ["ds_z3_config.json", "configs/ds_zero2.json", "stage3_offloading.conf",
                                  "recipes/accelerate_configs/zero3.yaml", "training/glue_bert_base.json"])
def test_config_names_are_selected(path):
    assert selected(path)


@pytest.mark.slow  # real pre-commit on a throwaway git repository
def test_pre_commit_finds_what_lint_finds(cli, corpus, tmp_path):
    """Real pre-commit on a throwaway repository. The hook runs as `language: system` here, with this
    checkout's `files`, `exclude` and arguments: `language: python` would pip-install this project into a
    fresh virtualenv, which needs the network (setuptools for the build, jsonschema/typer/PyYAML)."""
    pytest.importorskip("pre_commit")
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    repo = tmp_path / "repo"
    (repo / "configs").mkdir(parents=True)
    names = ["ds_z3_config.json", "ds_zero2.json", "stage3_offloading.conf", "zero3.yaml", "glue_bert_base.json"]
    for row in corpus_manifest(corpus):
        name = row["path"].rsplit("/", 1)[-1]
        source = corpus / row["file"] if (corpus / row["file"]).exists() else corpus / "accelerate_yaml" / row["file"]
        if name in names and not (repo / "configs" / name).exists():
            shutil.copyfile(source, repo / "configs" / name)
    (repo / "configs" / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')  # not a DS config
    (repo / "package.json").write_text('{"name": "x"}')
    entry = f"{sys.executable} -m zeroadvisor lint --only-configs --fail-on warning"
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": [{
        "id": "zeroadvisor", "name": HOOK["name"], "entry": entry, "language": "system",
        "files": HOOK["files"], "exclude": HOOK["exclude"]}]}]}))
    env = {**os.environ, "PYTHONPATH": str(REPO), "PRE_COMMIT_HOME": str(tmp_path / "cache"), "NO_COLOR": "1",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", "."], cwd=repo, check=True, env=env)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
    hook = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files", "--verbose"], cwd=repo,
                          env=env, capture_output=True, text=True, timeout=240, check=False)
    lint = cli("lint", "--fail-on", "warning", ".", cwd=repo)
    found_by_hook = set(FINDING.findall(hook.stdout))
    found_by_lint = set(FINDING.findall(lint.stdout))
    assert found_by_lint, lint.stdout + lint.stderr  # the corpus configs have warnings at least
    assert found_by_hook == found_by_lint, hook.stdout + hook.stderr
    assert hook.returncode == 1 and lint.returncode == 1
    assert "configs/config.json" not in hook.stdout and "package.json" not in hook.stdout


@pytest.mark.parametrize("hook", HOOKS, ids=lambda hook: hook["id"])
def test_both_hooks_pass_on_the_projects_sample_configs(cli, hook, tmp_path):
    """Each hook's entry on what pre-commit passes it from sample_configs/ (a LLaMA-Factory training YAML among
    them, a model description and a model's config.json): skipped by content, so the hooks pass and fix nothing."""
    shutil.copytree(REPO / "sample_configs", tmp_path / "sample_configs")
    files = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "sample_configs").rglob("*")
                   if p.is_file() and selected(str(p.relative_to(tmp_path))))
    assert "sample_configs/llama_factory_sft.yaml" in files
    before = {name: (tmp_path / name).read_bytes() for name in files}
    result = cli(*hook["entry"].split()[1:], *files, cwd=tmp_path, env={"PRE_COMMIT": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "skipped sample_configs/llama_factory_sft.yaml: not a DeepSpeed config: LLaMA-Factory" in result.stderr
    assert {name: (tmp_path / name).read_bytes() for name in files} == before
