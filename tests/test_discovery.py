"""Files found in a directory are linted when their content is a DeepSpeed or Accelerate config; the
summary says how many were skipped. `check` takes several configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from conftest import corpus_manifest
from zeroadvisor.deepspeed import kind

TYPO = '{\n  "train_batch_size": 8,\n  "zero_optimisation": {"stage": 3}\n}\n'
NOT_CONFIGS = {
    "package.json": '{"name": "x", "version": "1.0.0", "scripts": {"test": "jest"}}',
    "tsconfig.json": '{"compilerOptions": {"strict": true}}',
    "config.json": '{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096}',  # a model config
    ".github/workflows/ci.yml": "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n",
    "notes.conf": "[section]\nkey = value\n",
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name, text in NOT_CONFIGS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "ds_config.json").write_text(TYPO)
    (tmp_path / "stage3.conf").write_text('{"zero_optimization": {"stage": 3}, "train_batch_size": 8}')
    (tmp_path / "zero3.yaml").write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n")
    (tmp_path / "template.json").write_text('{\n  "train_batch_size": {{BATCH}},\n  "fp16": {"enabled": true}\n}\n')
    return tmp_path


def test_directory_lints_configs_by_content_and_counts_the_rest(cli, tree):
    result = cli("lint", "--fail-on", "never", ".", cwd=tree)
    # .github/ is a hidden folder: not walked (config/excludes.py), so 4 of the 5 other files are judged and skipped
    assert result.stdout.splitlines()[-1].startswith("4 files checked (4 skipped: not DeepSpeed configs): ")
    data = json.loads(cli("lint", "--format", "json", ".", cwd=tree).stdout)
    # "." walked gives the names as the repository has them (GitHub matches annotations and SARIF on those)
    assert sorted(data["skipped"]) == sorted(name for name in NOT_CONFIGS if not name.startswith("."))
    linted = {f["file"] for f in data["findings"]}
    assert {"ds_config.json", "template.json"} <= linted  # the template's syntax error is reported
    named = json.loads(cli("lint", "--format", "json", "./", cwd=tree).stdout)
    assert "./ds_config.json" in {f["file"] for f in named["findings"]}  # any other spelling is kept as typed


def test_named_files_are_linted_unless_only_configs(cli, tree):
    assert "ZA006" in cli("lint", "package.json", cwd=tree).stdout
    result = cli("lint", "--only-configs", "package.json", "ds_config.json", cwd=tree)
    assert result.stdout.splitlines()[-1] == ("1 file checked (1 skipped: not DeepSpeed configs): "
                                              "1 error")


def test_every_corpus_config_is_found_by_content(corpus, tmp_path):
    rows = [row for row in corpus_manifest(corpus) if row["kind"] in ("ds_json", "accelerate_yaml")]
    for row in rows:
        found = corpus / row["file"]
        if not found.exists():
            found = corpus / "accelerate_yaml" / row["file"]
        assert kind.kind_of_file(found) is not None, row["file"]


def test_check_takes_several_configs(cli, tmp_path):
    for name, stage in (("a.json", 0), ("b.json", 3)):
        (tmp_path / name).write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                                                 "zero_optimization": {"stage": stage}}))
    common = ("--params", "7B", "--gpus", "8", "--gpu", "A100-SXM4-80GB")
    result = cli("check", "a.json", "b.json", *common, "--format", "json", cwd=tmp_path)
    documents = json.loads(result.stdout)
    assert [d["estimate"]["stages"] is not None for d in documents] == [True, True]
    assert result.returncode == 1  # a.json (stage 0: 16+ bytes x 7e9 > 80 GiB) does not fit
    text = cli("check", "a.json", "b.json", *common, cwd=tmp_path).stdout
    assert text.count("file checked") == 2
    sarif = json.loads(cli("check", "a.json", "b.json", *common, "--format", "sarif", cwd=tmp_path).stdout)
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in sarif["runs"][0]["results"]} \
        >= {"a.json"}


def test_a_model_description_found_beside_the_configs_is_not_checked_as_one(cli, tmp_path):
    """Its activation_checkpointing is a DeepSpeed key too: a walked "." (the Action's default) checked
    check --model's own file as a DeepSpeed config, with errors."""
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}')
    (tmp_path / "model.yaml").write_text("parameters: 7B\nsequence_length: 2048\nactivation_checkpointing: full\n")
    data = json.loads(cli("lint", "--format", "json", ".", cwd=tmp_path).stdout)
    assert data["skipped"] == ["model.yaml"] and {f["file"] for f in data["findings"]} <= {"ds.json"}
    # a DeepSpeed config with a key the description also has is still one
    (tmp_path / "model.yaml").write_text("activation_checkpointing: {partition_activations: true}\n")
    data = json.loads(cli("lint", "--format", "json", ".", cwd=tmp_path).stdout)
    assert "skipped" not in data or "model.yaml" not in data["skipped"]
