"""An Accelerate config of a run without DeepSpeed (FSDP, plain multi-GPU DDP) is said to be one, in one line,
with its own exit code (cli/exits.py NOT_DEEPSPEED), by `lint` and `check`; found in a folder (or by the
pre-commit hook, --only-configs) it is skipped with a note. Every DeepSpeed Accelerate config, and one whose
deepspeed_config block its distributed_type leaves unused (rule ZA056), is linted as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import zeroadvisor
from cli_run import cli  # noqa: F401 - the fixture
from conftest import corpus_manifest
from zeroadvisor.cli.exits import ExitCode
from zeroadvisor.config.source import parse
from zeroadvisor.deepspeed import kind

FSDP = ("compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nfsdp_config:\n"
        "  fsdp_sharding_strategy: FULL_SHARD\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
        "mixed_precision: bf16\nnum_processes: 8\n")
MULTI_GPU = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 2\ngpu_ids: all\n"
DEEPSPEED = "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n"
FSDP_LINE = ("fsdp.yaml: not a DeepSpeed config: an Accelerate FSDP config (distributed_type: FSDP); "
             "zeroadvisor checks DeepSpeed runs")
MULTI_GPU_LINE = ("ddp.yaml: not a DeepSpeed config: an Accelerate multi-GPU config (distributed_type: MULTI_GPU); "
                  "zeroadvisor checks DeepSpeed runs")
CLUSTER = ("--params", "7B", "--gpus", "8", "--gpu", "A100-SXM4-80GB")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "fsdp.yaml").write_text(FSDP)
    (tmp_path / "ddp.yaml").write_text(MULTI_GPU)
    (tmp_path / "zero3.yaml").write_text(DEEPSPEED)
    (tmp_path / "ds_config.json").write_text('{"train_batch_size": 8, "zero_optimisation": {"stage": 3}}')
    return tmp_path


@pytest.mark.parametrize("text, what", [
    (FSDP, "an Accelerate FSDP config (distributed_type: FSDP)"),
    (MULTI_GPU, "an Accelerate multi-GPU config (distributed_type: MULTI_GPU)"),
    ("distributed_type: NO\nnum_processes: 1\n", "an Accelerate single-process config (distributed_type: NO)"),
    ("distributed_type: MULTI_NPU\n", "an Accelerate MULTI_NPU config (distributed_type: MULTI_NPU)"),
    ("compute_environment: AMAZON_SAGEMAKER\ndistributed_type: DATA_PARALLEL\n",
     "an Accelerate DATA_PARALLEL config (distributed_type: DATA_PARALLEL)"),
])
def test_what_a_run_without_deepspeed_is(text, what):
    assert kind.not_deepspeed(parse(text, "accelerate.yaml")) == what


@pytest.mark.parametrize("text", [
    DEEPSPEED,
    "distributed_type: MULTI_GPU\ndeepspeed_config:\n  zero_stage: 2\n",  # ZA056 says the block is unused
    "distributed_type: FSDP\ndeepspeed_config: {}\n",
    "distributed_type: DEEP_SPEED\n",  # a type Accelerate refuses: ZA052 says so
    "compute_environment: AMAZON_SAGEMAKER\ndistributed_type: FSDP\n",  # not a SageMaker type: ZA052
    "distributed_type: 3\n",
    '{"train_batch_size": 8, "zero_optimization": {"stage": 3}}',
    '{"model_type": "llama"}',
    "[1, 2]",
])
def test_everything_else_is_linted_as_before(text):
    assert kind.not_deepspeed(parse(text, "config.yaml")) is None


def test_lint_names_it_in_one_line_with_its_own_exit_code(cli, folder):
    result = cli("lint", "fsdp.yaml", cwd=folder)
    assert result.returncode == ExitCode.NOT_DEEPSPEED == 4
    assert result.stderr == f"zeroadvisor: {FSDP_LINE}\n"
    assert result.stdout == ""  # never "0 files checked: no problems"


def test_lint_of_several_files_says_it_beside_the_report(cli, folder):
    clean = cli("lint", "ddp.yaml", "zero3.yaml", cwd=folder)
    assert clean.returncode == ExitCode.NOT_DEEPSPEED
    assert clean.stderr == f"zeroadvisor: {MULTI_GPU_LINE}\n"
    assert clean.stdout.splitlines()[-1].startswith("1 file checked")
    findings = cli("lint", "ddp.yaml", "ds_config.json", cwd=folder)  # a finding is the more pressing news
    assert findings.returncode == ExitCode.FINDINGS and "ZA102" in findings.stdout
    data = json.loads(cli("lint", "--format", "json", "fsdp.yaml", cwd=folder).stdout)
    assert data["files"] == 0 and data["not_deepspeed"] == [FSDP_LINE]


@pytest.mark.parametrize("argv", [("lint", "."), ("lint", "--only-configs", "fsdp.yaml", "ddp.yaml", "zero3.yaml")])
def test_found_in_a_folder_or_by_the_hook_it_is_skipped_with_a_note(cli, folder, argv):
    result = cli(*argv, "--fail-on", "never", cwd=folder)
    assert result.returncode == ExitCode.OK
    notes = sorted(line for line in result.stderr.splitlines())
    # named as the folder has them, whether found under "." or named (config/paths.py)
    assert notes == [f"zeroadvisor: note: skipped {line}" for line in (MULTI_GPU_LINE, FSDP_LINE)]
    assert "(2 skipped: not DeepSpeed configs)" in result.stdout.splitlines()[-1]


def test_the_hook_does_not_fail_on_them(cli, folder):
    assert cli("lint", "--only-configs", "fsdp.yaml", "ddp.yaml", cwd=folder).returncode == ExitCode.OK


def test_check_names_it_in_one_line_with_its_own_exit_code(cli, folder):
    result = cli("check", "fsdp.yaml", *CLUSTER, cwd=folder)
    assert result.returncode == ExitCode.NOT_DEEPSPEED
    assert result.stderr == f"zeroadvisor: {FSDP_LINE}\n"  # not "fix the errors reported first"
    assert result.stdout == ""
    both = cli("check", "ddp.yaml", "zero3.yaml", *CLUSTER, "--fail-on", "never", cwd=folder)
    assert both.returncode == ExitCode.NOT_DEEPSPEED
    assert f"zeroadvisor: {MULTI_GPU_LINE}" in both.stderr.splitlines()
    assert "zero3.yaml" in both.stdout  # the DeepSpeed one is checked


def test_the_library_says_it_too(folder):
    result = zeroadvisor.lint(folder / "fsdp.yaml")
    assert result.files == 0 and not result.ok
    assert result.not_deepspeed == [str(folder / FSDP_LINE)]
    report = zeroadvisor.check(folder / "ddp.yaml", params="7B", gpus=8, gpu="A100-SXM4-80GB")
    assert report.not_deepspeed == str(folder / MULTI_GPU_LINE) and report.estimate is None
    assert report.findings == []


@pytest.mark.corpus
def test_every_accelerate_config_of_the_corpus_is_linted_as_before(corpus):
    rows = [row for row in corpus_manifest(corpus) if row["kind"] == "accelerate_yaml"]
    assert rows
    for row in rows:
        path = corpus / row["file"]
        if not path.exists():  # the manifest names some by their path in accelerate_yaml/
            path = corpus / "accelerate_yaml" / row["file"]
        assert kind.not_deepspeed(parse(path.read_text("utf-8"), row["file"])) is None, row["file"]
        result = zeroadvisor.lint(path)
        assert result.files == 1 and result.not_deepspeed == [], row["file"]
