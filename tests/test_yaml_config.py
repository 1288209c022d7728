"""``lint ds.yaml`` on a DeepSpeed config written in YAML is an error (rules/syntax.py yaml-config, ZA007): DeepSpeed
reads a path with hjson, where a YAML block section is a string, and the Trainer and Accelerate with json.load. An
Accelerate config and a training-arguments YAML are not DeepSpeed configs and get no such finding."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from conftest import REPO

DS_YAML = "train_batch_size: 16\nbf16:\n  enabled: true\nzero_optimization:\n  stage: 3\n"


def test_lint_of_a_deepspeed_yaml_warns_and_fails_where_the_path_is_given(cli, tmp_path: Path):
    (tmp_path / "ds.yaml").write_text(DS_YAML)
    result = cli("lint", "ds.yaml", cwd=tmp_path)
    # a script may load it and pass the dict: a warning, which --fail-on warning turns into a failure
    assert result.returncode == 0
    assert result.stdout.startswith("ds.yaml:2:1: ZA007 [warning] a DeepSpeed config in YAML: DeepSpeed reads a "
                                    "config path with hjson, which reads 'bf16' here as the string 'enabled: true'")
    assert cli("lint", "--fail-on", "warning", "ds.yaml", cwd=tmp_path).returncode == 1
    # the Trainer given the path: its json.load refuses the file, an error
    trainer = cli("lint", "--integration", "hf-trainer", "ds.yaml", cwd=tmp_path)
    assert trainer.returncode == 1 and trainer.stdout.startswith("ds.yaml:2:1: ZA007 [error] ")
    # the same config as JSON is clean of it
    (tmp_path / "ds.json").write_text('{"train_batch_size": 16, "bf16": {"enabled": true}, '
                                      '"zero_optimization": {"stage": 3}}')
    assert cli("lint", "ds.json", cwd=tmp_path).returncode == 0


def test_a_project_that_loads_its_yaml_itself_ignores_the_rule_per_file(cli, tmp_path: Path):
    (tmp_path / "ds.yaml").write_text(DS_YAML)
    (tmp_path / "pyproject.toml").write_text('[tool.zeroadvisor.per-file-ignores]\n"ds.yaml" = ["ZA007"]\n')
    assert cli("lint", "ds.yaml", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("name,integration", [("accelerate_zero3.yaml", "accelerate"),
                                              ("llama_factory_sft.yaml", "hf-trainer")])
def test_other_yaml_files_get_no_such_finding(cli, tmp_path: Path, name: str, integration: str):
    # with the integration that reads a path with json.load, a flat DeepSpeed YAML would be ZA007: these are not one
    shutil.copy(REPO / "sample_configs" / name, tmp_path / name)
    result = cli("lint", "--format", "json", "--fail-on", "never", "--integration", integration, name, cwd=tmp_path)
    assert "ZA007" not in result.stdout + result.stderr
