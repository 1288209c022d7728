"""The Action's steps RUN as the runner runs them (tests/action_runner.py) on a throwaway repository: default
inputs, a directory, a glob, a block-scalar input, a workspace with a hostile pip/ and zeroadvisor/, a fork's
read-only token, a repository without code scanning. The venv the Install step builds is built once per
session, by the Install step itself (offline: pip's index is a wheelhouse of what is installed here)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from action_runner import STEPS, LocalGitHub, Runner, offline_pip, wheelhouse

CLEAN = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 2}}
# a misspelt key: lint's ZA101 error, so the last step fails at the default fail-on
TYPO = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
        "zero_optimization": {"stage": 3, "stage3_prefetch_bucket": 1000}}
CLUSTER = {"model": "gpt2", "seq-len": "1024", "gpus": "8", "gpu": "A100-SXM4-80GB"}
# Modules a pull request could plant where `python -m X` (current directory first on sys.path) or a
# PYTHONPATH pointing at the checkout would import them instead of the real ones.
INSTALL = ("actions/setup-python", "Install zeroadvisor")  # run once per session
HOSTILE = ("pip", "zeroadvisor", "venv", "ensurepip", "setuptools", "yaml", "typer", "jsonschema")


def plant_hostile(workspace: Path, canary: Path) -> None:
    code = f"open({str(canary)!r}, 'a').write(__name__ + '\\n')\n"
    for name in HOSTILE:
        (workspace / name).mkdir(exist_ok=True)
        (workspace / name / "__init__.py").write_text(code)
        (workspace / name / "__main__.py").write_text(code)
    for name in ("sitecustomize", "usercustomize"):
        (workspace / f"{name}.py").write_text(code)


def git_repository(root: Path, canary: Path) -> Path:
    """A checked-out pull request: two DeepSpeed configs, a JSON and a YAML that are not, hostile modules."""
    root.mkdir(parents=True)
    (root / "configs").mkdir()
    (root / "configs" / "ds.json").write_text(json.dumps(CLEAN))
    (root / "configs" / "zero3.json").write_text(json.dumps(TYPO))
    (root / "configs" / "labels.json").write_text(json.dumps({"labels": ["bug"]}))
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "workflows" / "ci.yml").write_text("on: [pull_request]\njobs: {}\n")
    plant_hostile(root, canary)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "pull request"], check=True)
    return root


@pytest.fixture(scope="session")
def installed(tmp_path_factory):
    """setup-python and the Install step, run once, in a hostile workspace with PYTHONPATH at the checkout
    (as an earlier step of the job could leave it): the outputs later steps read, and the canary."""
    root = tmp_path_factory.mktemp("action")
    canary = root / "canary"
    workspace = git_repository(root / "workspace", canary)
    env = {**offline_pip(wheelhouse(root / "wheels")), "PYTHONPATH": str(workspace)}
    runner = Runner(workspace, root / "runner-temp", extra_env=env).run(only=INSTALL)
    install = runner.step("Install zeroadvisor")
    assert install.code == 0, install.stderr[-3000:]
    return {"outputs": runner.outputs, "canary": canary, "runner": runner}


@pytest.fixture
def job(installed, tmp_path):
    """Run the steps after the install on a fresh workspace: job(inputs, **Runner fields) -> Runner."""
    canary = tmp_path / "canary"
    workspace = git_repository(tmp_path / "workspace", canary)

    def run(inputs: dict[str, str], **fields) -> Runner:
        runner = Runner(workspace, tmp_path / "runner-temp", inputs=inputs,
                        outputs={k: dict(v) for k, v in installed["outputs"].items()},
                        path_prefix=list(installed["runner"].path_prefix), **fields)
        runner.canary = canary  # type: ignore[attr-defined]
        return runner.run(skip=INSTALL)
    return run


def reported(runner: Runner) -> list[str]:
    """The configs the job summary's markdown report has a heading for."""
    return sorted(Path(m).name for m in re.findall(r"^### zeroadvisor: `([^`]+)`", runner.summary, re.M))


def sarif_files(runner: Runner, name: str = "zeroadvisor.sarif") -> list[str]:
    sarif = json.loads((runner.workspace / name).read_text())
    return sorted({Path(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]).name
                   for run in sarif["runs"] for r in run["results"]})


# -- the interpreter: only the Action's own installed code -----------------------------------------

def test_install_imports_nothing_from_the_workspace(installed):
    assert not installed["canary"].exists(), installed["canary"].read_text()
    runner = installed["runner"]
    python = runner.step("Install zeroadvisor").outputs["python"]
    assert Path(python).is_relative_to(runner.temp)  # its own venv, not the caller's Python
    where = subprocess.run([python, "-I", "-c", "import zeroadvisor, yaml; print(zeroadvisor.__file__)"],
                           cwd=runner.workspace, capture_output=True, text=True, check=True).stdout
    assert Path(where.strip()).is_relative_to(runner.temp / "zeroadvisor-venv")


def test_setup_python_leaves_the_callers_python_alone(installed):
    # update-environment: false: no python prepended to PATH for the caller's later steps
    assert installed["runner"].path_prefix == []
    assert installed["runner"].env_file.read_text() == ""


def test_hostile_workspace_is_never_imported(job):
    with LocalGitHub() as api:
        runner = job({**CLUSTER, "comment": "true"},
                     extra_env={"PYTHONPATH": ".", "GITHUB_API_URL": api.url})
        assert [s.method for s in api.seen] == ["GET", "GET", "POST"]
    assert not runner.canary.exists(), runner.canary.read_text()  # type: ignore[attr-defined]
    assert reported(runner) == ["ds.json", "zero3.json"]


# -- configs: files, directories, globs, several lines --------------------------------------------

@pytest.mark.parametrize("configs", [
    None,  # the default, "."
    "configs/",
    "configs/*.json",  # labels.json is named by the pattern: lint warns (ZA006), check estimates it
    "configs/ds.json\nconfigs/zero3.json\n",  # a block scalar (configs: |)
    "  configs/ds.json\tconfigs/zero3.json  ",
])
def test_every_documented_form_of_configs_reaches_lint_and_check(job, configs):
    runner = job(CLUSTER if configs is None else {**CLUSTER, "configs": configs})
    check = runner.step("Check memory (markdown)")
    assert check.outputs["exit-code"] == "1", check.stderr  # zero3.json's lint error, both estimated
    named = "*" in (configs or "")  # files a pattern names are judged as configs, as files named one by one
    assert reported(runner) == ["ds.json", *(["labels.json"] if named else []), "zero3.json"], check.stderr
    assert sarif_files(runner) == [*(["labels.json"] if named else []), "zero3.json"]
    last = runner.step("Lint (annotations, fail-on)")
    assert last.code == 1 and re.search(r"^::error file=(\./)?configs/zero3\.json,", last.stdout, re.M), last.stdout
    # a JSON that is no DeepSpeed config, found in a folder, is skipped
    assert named or "labels.json" not in runner.summary + last.stdout


def test_the_default_dot_lints_only_the_projects_configs(job, tmp_path):
    """A developer's checkout as a self-hosted runner keeps it: a virtual environment with DeepSpeed's own
    autotuning templates, node_modules, and a training run's output that .gitignore ignores (lint.md)."""
    workspace = tmp_path / "workspace"  # the job fixture's checkout
    templates = workspace / ".venv/lib/python3.11/site-packages/deepspeed/autotuning/config_templates"
    templates.mkdir(parents=True)
    (templates / "template_zero3.json").write_text(json.dumps({"zero_optimization": {"stage": 3}}))
    (workspace / "node_modules" / "pkg").mkdir(parents=True)
    (workspace / "node_modules" / "pkg" / "ds_config.json").write_text(json.dumps(TYPO))
    (workspace / "outputs" / "run1").mkdir(parents=True)
    (workspace / "outputs" / "run1" / "ds_config.json").write_text(json.dumps(TYPO))
    (workspace / ".gitignore").write_text("outputs/\n")
    runner = job(CLUSTER)
    assert reported(runner) == ["ds.json", "zero3.json"], runner.step("Check memory (markdown)").stderr
    last = runner.step("Lint (annotations, fail-on)")
    assert "template_zero3" not in last.stdout and "node_modules" not in last.stdout and "outputs/" not in last.stdout


def test_a_clean_config_passes_the_job(job):
    runner = job({**CLUSTER, "configs": "configs/ds.json"})
    assert runner.step("Check memory (markdown)").outputs["exit-code"] == "0"
    assert runner.step("Lint (annotations, fail-on)").code == 0
    assert reported(runner) == ["ds.json"]


# -- what must not fail the job: a fork's token, no code scanning -----------------------------------

def test_read_only_token_warns_and_the_job_goes_on(job):
    refused = (403, {"message": "Resource not accessible by integration"})
    answers = {("POST", "/repos/org/repo/issues/7/comments"): refused}
    with LocalGitHub(answers=answers) as api:
        runner = job({**CLUSTER, "configs": "configs/ds.json", "comment": "true"},
                     extra_env={"GITHUB_API_URL": api.url})
        assert ("POST", "/repos/org/repo/issues/7/comments") in [(s.method, s.path) for s in api.seen]
    comment = runner.step("Comment on the pull request")
    assert comment.code == 0
    assert re.fullmatch(r"::warning::zeroadvisor: cannot comment on the pull request: .*HTTP 403.*\n", comment.stdout)
    assert runner.step("Lint (annotations, fail-on)").code == 0 and not runner.failed


def test_upload_failure_does_not_fail_the_job(job):
    runner = job({**CLUSTER, "configs": "configs/ds.json"})
    upload = next(s["name"] for s in STEPS if "upload-sarif" in s.get("uses", ""))
    assert runner.step(upload).ran and runner.step(upload).code == 1
    assert not runner.failed


def test_comment_of_an_empty_report_is_a_warning_not_a_marker_only_comment(job):
    with LocalGitHub() as api:
        runner = job({**CLUSTER, "configs": "configs/ds.json", "gpu": "no-such-gpu", "comment": "true"},
                     extra_env={"GITHUB_API_URL": api.url})
        assert [s.method for s in api.seen] == []
    assert runner.step("Check memory (markdown)").outputs["exit-code"] == "2"
    assert runner.step("Comment on the pull request").stdout.startswith("::warning::")


# -- pinned actions -----------------------------------------------------------------------------

def test_actions_are_pinned_by_commit():
    used = [s["uses"] for s in STEPS if "uses" in s]
    assert used and all(re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", u) for u in used), used
    text = (Path(__file__).parent.parent / "action.yml").read_text()
    for u in used:  # the tag the commit is, for the reader and for updates
        assert re.search(re.escape(u) + r"\s+# v\d+\.\d+\.\d+", text), u
