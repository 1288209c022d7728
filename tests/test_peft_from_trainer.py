"""LoRA/QLoRA read from the trainer's own files (config/peft_reader.py): LLaMA-Factory's training YAML and ms-swift's
command line become the PEFT inputs where no flag gives them, with their trainers' defaults; a flag wins over the
file's whole setup; a model given as a count is costed in full and said so; bad values are one-line errors."""

from __future__ import annotations

import json

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from test_model_peft import BASE_7B, LLAMA_2_7B
from zeroadvisor.config.launch import parse_launch
from zeroadvisor.config.trainer_errors import TrainerInputError
from zeroadvisor.config.training_args import read_training_args
from zeroadvisor.inputs import run as inputs_run
from zeroadvisor.inputs.command import Command
from zeroadvisor.inputs.request import Request

# Llama-2-7B, r=16 on q_proj and v_proj: 32 layers x 2 modules x 16 x (4096 + 4096), what peft prints
R16_QV = 8_388_608


@pytest.fixture
def project(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_2_7B))
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}}')
    return tmp_path


def _build(project, training_args: str, **extra):
    (project / "lf.yaml").write_text(training_args)
    request = Request(Command.ESTIMATE, config=str(project / "ds.json"), training_args=str(project / "lf.yaml"),
                      gpus=2, gpu_memory="80GiB", seq_len=1024, **({"model": str(project / "config.json")} | extra))
    return inputs_run.build(request)


def test_llama_factory_lora_is_read_with_its_rank_targets_and_dropout(project):
    inputs = _build(project, "stage: sft\nfinetuning_type: lora\nlora_rank: 16\nlora_target: q_proj,v_proj\n"
                             "lora_dropout: 0.1\n")
    assert inputs.model.trainable_parameters == R16_QV and inputs.model.parameters == BASE_7B
    assert inputs.model.peft == "LoRA r=16 on q_proj, v_proj, lora_dropout 0.1"
    assert any(note.startswith("LoRA r=16 on q_proj, v_proj, lora_dropout 0.1 (peft from finetuning_type in ")
               and note.endswith("read from the trainer's files") for note in inputs.notes)


def test_llama_factory_trains_lora_by_default_on_all_linear_layers(project):
    # FinetuningArguments: finetuning_type "lora", lora_rank 8, lora_target "all", lora_dropout 0.0 (@ v0.9.3)
    inputs = _build(project, "stage: sft\ncutoff_len: 1024\n")
    # all-linear on Llama-2-7B: 32 layers x 8 x (q, k, v, o: 4096 + 4096; gate, up: 4096 + 11008; down 11008 + 4096)
    assert inputs.model.trainable_parameters == 32 * 8 * (4 * 8192 + 3 * 15104)
    note = next(n for n in inputs.notes if "read from the trainer's files" in n)
    assert ("LLaMA-Factory's defaults: finetuning_type lora, lora_rank 8, lora_target all, lora_dropout 0.0"
            in note)
    assert _build(project, "stage: sft\nfinetuning_type: full\n").model.trainable_parameters is None
    assert _build(project, "stage: sft\nfinetuning_type: freeze\n").model.trainable_parameters is None


def test_llama_factory_quantization_bit_makes_it_qlora(project):
    inputs = _build(project, "stage: sft\nquantization_bit: 4\nlora_target: q_proj,v_proj\nlora_rank: 16\n")
    assert inputs.model.peft == "QLoRA r=16 on q_proj, v_proj (4bit base)"
    assert inputs.model.quantized_parameters > 0


def test_a_flag_wins_over_the_files_whole_lora_setup(project):
    inputs = _build(project, "stage: sft\nlora_rank: 64\nlora_target: all\n", peft="lora", lora_r=16,
                    lora_target_modules=["q_proj", "v_proj"])
    assert inputs.model.trainable_parameters == R16_QV
    assert any("the LoRA inputs given are used instead" in note for note in inputs.notes)


def test_a_model_given_as_a_count_is_costed_in_full_and_said_so(project):
    (project / "lf.yaml").write_text("stage: sft\nfinetuning_type: lora\n")
    request = Request(Command.ESTIMATE, config=str(project / "ds.json"), training_args=str(project / "lf.yaml"),
                      params="7B", gpus=2, gpu_memory="80GiB", seq_len=1024)
    inputs = inputs_run.build(request)
    assert inputs.model.trainable_parameters is None
    assert any("not counted without a model layout" in note for note in inputs.notes)


def test_swift_reads_its_lora_flags_several_target_names_after_one_flag():
    launch = parse_launch("swift sft --model m --train_type lora --lora_rank 16 --target_modules q_proj v_proj "
                          "--lora_dropout 0.1 --quant_bits 4 --deepspeed zero2")
    peft = launch.training.peft
    assert peft is not None
    assert (peft.method, peft.r, peft.target_modules, peft.dropout, peft.quantization) == (
        "qlora", 16, ("q_proj", "v_proj"), 0.1, "4bit")
    assert dict(peft.origin)["lora_target_modules"] == "--target_modules"
    # the words after the names are still read: --deepspeed's value is ms-swift's own config name
    assert any("swift --deepspeed zero2" in note for note in launch.notes)


@pytest.mark.parametrize(("text", "words"), [
    ("lora_rank: 0\n", "lora_rank"), ("lora_rank: x\n", "lora_rank"), ("lora_dropout: 1.5\n", "lora_dropout"),
    ("quantization_bit: 3\n", "quantization_bit"), ("lora_target: []\n", "lora_target"),
])
def test_a_bad_lora_value_in_the_file_is_a_one_line_error(tmp_path, text, words):
    path = tmp_path / "lf.yaml"
    path.write_text("stage: sft\n" + text)
    with pytest.raises(TrainerInputError, match=words) as error:
        read_training_args(path)
    assert "\n" not in str(error.value)


def test_the_cli_reads_lora_from_the_training_arguments(cli, project):
    (project / "lf.yaml").write_text("stage: sft\nlora_rank: 16\nlora_target: q_proj,v_proj\n")
    result = cli("estimate", project / "ds.json", "--model", project / "config.json", "--gpus", "2",
                 "--training-args", project / "lf.yaml", "-f", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["model"]["trainable_parameters"] == R16_QV
    bad = project / "bad.yaml"
    bad.write_text("stage: sft\nlora_dropout: 2\n")
    result = cli("estimate", project / "ds.json", "--model", project / "config.json", "--gpus", "2",
                 "--training-args", bad)
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1
    assert "lora_dropout" in result.stderr


def test_a_model_descriptions_peft_block_wins_over_the_trainers_files(project):
    (project / "model.yaml").write_text("hf_config: config.json\npeft: {method: lora, r: 16, target_modules: "
                                        "[q_proj, v_proj]}\n")
    inputs = _build(project, "stage: sft\nlora_rank: 64\nlora_target: all\n", model=str(project / "model.yaml"))
    assert inputs.model.trainable_parameters == R16_QV
    assert any("the model description's peft block is used instead" in note for note in inputs.notes)
    # a description without one takes the file's
    (project / "plain.yaml").write_text("hf_config: config.json\n")
    inputs = _build(project, "stage: sft\nlora_rank: 16\nlora_target: q_proj,v_proj\n",
                    model=str(project / "plain.yaml"))
    assert inputs.model.trainable_parameters == R16_QV
