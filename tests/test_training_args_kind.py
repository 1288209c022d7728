"""A training-arguments file (LLaMA-Factory's or axolotl's training YAML, a Hugging Face TrainingArguments YAML or
JSON) is recognised by content (deepspeed/kind.py ``is_training_args``) and never linted as a DeepSpeed config:
found in a folder it is skipped with a note, named it gets the one not-a-DeepSpeed-config line (exit 4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cli_run import cli  # noqa: F401 - the fixture
from conftest import REPO
from zeroadvisor.deepspeed.kind import TRAINING, TRAINING_MARKERS, deepspeed_keys, is_training_args, kind_of_data

LLAMA_FACTORY = (REPO / "sample_configs" / "llama_factory_sft.yaml").read_text()
# axolotl's examples/llama-3/fft-8b.yaml, shortened: optimizer is a name here, an object in DeepSpeed
AXOLOTL = """base_model: NousResearch/Meta-Llama-3.1-8B
datasets:
  - path: tatsu-lab/alpaca
    type: alpaca
sequence_len: 8192
gradient_accumulation_steps: 8
micro_batch_size: 1
num_epochs: 1
optimizer: paged_adamw_8bit
lr_scheduler: cosine
learning_rate: 2e-5
bf16: auto
gradient_checkpointing: true
deepspeed: deepspeed_configs/zero3_bf16.json
"""
# TrainingArguments as YAML (HfArgumentParser.parse_yaml_file)
TRAINER = """output_dir: out
per_device_train_batch_size: 4
gradient_accumulation_steps: 2
bf16: true
log_level: info
dataloader_drop_last: true
deepspeed: ds_z3.json
"""
DEEPSPEED = '{"train_batch_size": 8, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}}\n'


@pytest.mark.parametrize("text", [LLAMA_FACTORY, AXOLOTL, TRAINER], ids=["llama-factory", "axolotl", "trainer"])
def test_training_arguments_are_recognised(text):
    assert kind_of_data(yaml.safe_load(text)) == TRAINING


@pytest.mark.parametrize("data", [
    {"train_batch_size": 8, "learning_rate": 1e-5},  # a DeepSpeed-only key: a DeepSpeed config with a stray key
    {"bf16": {"enabled": True}, "output_dir": "x"},  # a shared key holding DeepSpeed's object
    {"zero_optimization": {"stage": 3}, "per_device_train_batch_size": 4},
    {"bf16": True},  # no key only training arguments have
    {},
])
def test_deepspeed_configs_with_a_stray_key_are_not_training_arguments(data):
    assert not is_training_args(data)


def test_no_marker_is_a_deepspeed_key():
    # a marker that DeepSpeed reads too would make a DeepSpeed config with that key training arguments
    assert TRAINING_MARKERS & deepspeed_keys() == set()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "llama_factory.yaml").write_text(LLAMA_FACTORY)
    (tmp_path / "axolotl.yml").write_text(AXOLOTL)
    (tmp_path / "trainer.json").write_text(json.dumps(yaml.safe_load(TRAINER)))
    (tmp_path / "ds.json").write_text(DEEPSPEED)
    return tmp_path


def test_found_in_a_folder_they_are_skipped_with_a_note(cli, tree):
    result = cli("lint", ".", cwd=tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "1 file checked (3 skipped: not DeepSpeed configs): no problems"
    notes = [line for line in result.stderr.splitlines() if "training arguments" in line or "TrainingArg" in line]
    assert len(notes) == 3
    assert ("zeroadvisor: note: skipped axolotl.yml: not a DeepSpeed config: axolotl training arguments (check "
            "reads them with --training-args)") in notes[0]


def test_named_it_is_one_line_and_exit_4(cli, tree):
    result = cli("lint", "trainer.json", cwd=tree)
    assert result.returncode == 4
    assert result.stdout == ""
    assert "trainer.json: not a DeepSpeed config: Hugging Face TrainingArguments" in result.stderr
    assert "ZA" not in result.stderr


def test_check_names_it_in_one_line(cli, tree):
    result = cli("check", "llama_factory.yaml", "ds.json", "--params", "7B", "--gpus", "8", "--gpu-memory", "80GB",
                 cwd=tree)
    assert "llama_factory.yaml: not a DeepSpeed config: LLaMA-Factory training arguments" in result.stderr
    assert "ZA201" not in result.stdout
