"""What a trainer's files freeze of a vision-language model (config/vision_freeze.py): LLaMA-Factory's
freeze_vision_tower / freeze_multi_modal_projector and ms-swift's --freeze_vit / --freeze_aligner (all on by default)
freeze the tower and the merger in a full fine-tune and leave them out of LoRA's targets; a text model is unchanged."""

from __future__ import annotations

import json

import pytest

from test_memory_vision import QWEN25_VL_7B
from test_model_peft import LLAMA_2_7B
from zeroadvisor.config.trainer_errors import TrainerInputError
from zeroadvisor.config.vision_freeze import read_vision_freeze
from zeroadvisor.inputs import run as inputs_run
from zeroadvisor.inputs.command import Command
from zeroadvisor.inputs.request import Request
from zeroadvisor.model.hf import spec_from_hf_config

VL = spec_from_hf_config(QWEN25_VL_7B)
TOWER = VL.vision.parameters if VL.vision else 0
MERGER = 5120 * 5120 + 5120 + 5120 * 3584 + 3584 + 1280  # mlp.0, mlp.2 (with biases) and ln_q (Qwen2.5-VL-7B)
# LoRA r=8 on every Linear of the decoder only: 28 layers x 8 x (q, o: 3584 + 3584; k, v: 3584 + 512; gate, up,
# down: 3584 + 18944)
LM_ONLY_R8 = 28 * 8 * (2 * 7168 + 2 * 4096 + 3 * 22528)


def _where(key: str) -> str:
    return f"{key} in t.yaml"


def test_both_trainers_freeze_the_tower_and_the_projector_by_default():
    for project in ("llama-factory", "ms-swift"):
        got = read_vision_freeze({}, project, _where)
        assert got is not None and (got.tower, got.projector) == (True, True)
        assert got.entries("qwen2_5_vl") == ("visual.patch_embed", "visual.blocks", "visual.merger")
    assert read_vision_freeze({"freeze_vit": "false"}, "ms-swift", _where).entries("qwen2_vl") == ("visual.merger",)
    # Qwen3-VL: LLaMA-Factory counts the deepstack mergers with the tower, ms-swift with the aligner
    lf = read_vision_freeze({"freeze_vision_tower": False}, "llama-factory", _where).entries("qwen3_vl")
    swift = read_vision_freeze({"freeze_vit": False}, "ms-swift", _where).entries("qwen3_vl")
    assert lf == ("visual.merger",) and swift == ("visual.merger", "visual.deepstack_merger_list")
    said = read_vision_freeze({"freeze_multi_modal_projector": False}, "llama-factory", _where)
    assert said.entries("qwen2_5_vl") == ("visual.patch_embed", "visual.blocks")
    assert "false from freeze_multi_modal_projector in t.yaml" in said.words()
    assert read_vision_freeze({}, "transformers", _where) is None  # TRL freezes nothing on its own
    with pytest.raises(TrainerInputError, match=r"freeze_vit in t\.yaml: expected true or false"):
        read_vision_freeze({"freeze_vit": "maybe"}, "ms-swift", _where)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "vl.json").write_text(json.dumps(QWEN25_VL_7B))
    (tmp_path / "llama.json").write_text(json.dumps(LLAMA_2_7B))
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, '
                                      '"zero_optimization": {"stage": 3}}')
    return tmp_path


def _model(project, model: str, training_args: str = "", launch: str | None = None):
    extra = {"launch": launch} if launch else {"training_args": str(project / "t.yaml")}
    (project / "t.yaml").write_text(training_args)
    request = Request(Command.ESTIMATE, config=str(project / "ds.json"), model=str(project / model), gpus=8,
                      gpu_memory="80GiB", seq_len=2048, **extra)
    return inputs_run.build(request).model


def test_llama_factory_full_fine_tune_freezes_tower_and_merger(project):
    model = _model(project, "vl.json", "stage: sft\nfinetuning_type: full\ncutoff_len: 2048\n")
    assert model.trainable_parameters == VL.parameters - TOWER
    assert not model.vision_trains
    unfrozen = _model(project, "vl.json", "stage: sft\nfinetuning_type: full\nfreeze_vision_tower: false\n")
    assert unfrozen.trainable_parameters == VL.parameters - MERGER and unfrozen.vision_trains


def test_llama_factory_lora_leaves_the_tower_out_of_all(project):
    model = _model(project, "vl.json", "stage: sft\nfinetuning_type: lora\nlora_target: all\n")
    assert model.trainable_parameters == LM_ONLY_R8
    assert not model.vision_trains
    assert any("left out of the targets" in note and "freeze_vision_tower" in note for note in model.notes)


def test_swift_full_fine_tune_reads_its_switches(project):
    launch = "swift sft --model m --train_type full --deepspeed zero3 --freeze_aligner false"
    model = _model(project, "vl.json", launch=launch)
    assert model.trainable_parameters == VL.parameters - TOWER + MERGER  # the merger trains, the tower does not
    assert not model.vision_trains
    thawed = _model(project, "vl.json", launch=launch.replace("--freeze_aligner false", "--freeze_vit false"))
    assert thawed.trainable_parameters == VL.parameters - MERGER and thawed.vision_trains


def test_a_text_model_is_unchanged_by_the_trainer_s_freezing(project):
    model = _model(project, "llama.json", "stage: sft\nfinetuning_type: full\n")
    assert model.trainable_parameters is None and model.frozen is None


def test_swift_s_vit_gradient_checkpointing_is_read(project):
    launch = ("swift sft --model m --train_type full --deepspeed zero3 --freeze_vit false "
              "--gradient_checkpointing true --vit_gradient_checkpointing false")
    (project / "t.yaml").write_text("")
    request = Request(Command.ESTIMATE, config=str(project / "ds.json"), model=str(project / "vl.json"), gpus=8,
                      gpu_memory="80GiB", seq_len=2048, launch=launch)
    built = inputs_run.build(request)
    assert built.shape.vision_checkpointing is False
    assert any("vision tower checkpointing off from" in note for note in built.notes)


def test_a_frozen_tower_is_not_peft_the_reference_model_stays(project):
    """Modules frozen without PEFT leave the rest trained in full: ms-swift's full DPO keeps its reference model (a
    frozen tower once read as LoRA, which has none)."""
    from zeroadvisor.memory.method import frozen_models, has_reference
    from zeroadvisor.vocab import ModelRole

    (project / "t.yaml").write_text("")
    request = Request(Command.ESTIMATE, config=str(project / "ds.json"), model=str(project / "vl.json"), gpus=4,
                      gpu_memory="80GiB", seq_len=4096,
                      launch="swift rlhf --rlhf_type dpo --model m --train_type full --deepspeed zero3")
    built = inputs_run.build(request)
    assert built.model.trainable_parameters == VL.parameters - TOWER and not built.model.adapters
    assert has_reference(built.shape.method, built.model)
    roles = [role for role, _ in frozen_models(built.shape.method, built.model, {})]
    assert roles == [ModelRole.REFERENCE]
