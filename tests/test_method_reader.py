"""The training method as the trainers' own files say it (config/method_reader.py, issue 35): TRL config files,
LLaMA-Factory and axolotl YAML, each read through --training-args' reader (config/training_args.py)."""

from __future__ import annotations

import dataclasses

import pytest

from zeroadvisor.config.method import MethodSetup
from zeroadvisor.config.method_reader import MethodReading, merged, read_swift
from zeroadvisor.config.training_args import TrainerInputError, read_training_args
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.vocab import Method, ModelRole, TrainerChoice, TrainerFamily, VllmMode

_SPEC = spec_from_hf_config({"model_type": "llama", "hidden_size": 1024, "intermediate_size": 2816,
                             "num_hidden_layers": 4, "num_attention_heads": 16, "vocab_size": 32000})


def _read(tmp_path, text: str, name: str = "train.yaml") -> MethodReading | None:
    path = tmp_path / name
    path.write_text(text)
    return read_training_args(path).method


# -- TRL config files ----------------------------------------------------------------------------------------------


def test_a_dpo_config_gives_its_fields_but_not_the_method(tmp_path):
    """A DPOConfig YAML does not say which trainer reads it: its fields are read, the method left unsaid."""
    reading = _read(tmp_path, "model_name_or_path: Qwen/Qwen2.5-0.5B\nbeta: 0.2\nloss_type: ipo\n"
                              "precompute_ref_log_probs: true\nmax_length: 1024\n")
    assert reading is not None and reading.said == ""
    setup = reading.setup
    assert (setup.beta, setup.loss_type, setup.precompute_ref_log_probs, setup.max_length) == (0.2, "ipo", True, 1024)
    assert _read(tmp_path, "beta: 0.1\nrpo_alpha: 0.5\n").setup.rpo_alpha == 0.5
    assert _read(tmp_path, "beta: 0.1\nuse_weighting: true\n").setup.use_weighting is True
    assert _read(tmp_path, "base_model: m\nrl: dpo\ndpo_use_weighting: true\n").setup.use_weighting is True
    assert setup.trainer is TrainerFamily.TRL
    assert dict(setup.origin)["beta"].startswith("beta in ") and reading.hints[0] == ("beta", Method.DPO)


def test_a_grpo_config_gives_its_generation(tmp_path):
    reading = _read(tmp_path, "num_generations: 16\nmax_prompt_length: 512\nmax_completion_length: 2048\n"
                              "use_vllm: true\nvllm_mode: colocate\nvllm_gpu_memory_utilization: 0.3\nbeta: 0.0\n")
    generation = reading.setup.generation
    assert (generation.num_generations, generation.max_prompt_length, generation.max_completion_length) == \
        (16, 512, 2048)
    assert generation.use_vllm is True and generation.vllm_mode is VllmMode.COLOCATE
    assert generation.vllm_gpu_memory_utilization == 0.3 and reading.setup.beta == 0.0
    assert reading.hints[0] == ("num_generations", Method.GRPO)  # the generation keys point to GRPO first


@pytest.mark.parametrize(("text", "method"), [
    # a whole config as to_json_string writes it: DPOConfig also has max_completion_length, which is not GRPO's alone
    ("beta: 0.1\nloss_type: [sigmoid]\nmax_completion_length: 256\nprecompute_ref_log_probs: false\n", Method.DPO),
    ("beta: 0.1\nloss_type: kto\ndesirable_weight: 1.0\nmax_completion_length: 256\n", Method.KTO),
    ("beta: 0.1\nloss_type: sigmoid\ncpo_alpha: 1.0\nsimpo_gamma: 0.5\n", Method.CPO),
    ("max_length: 1024\ncenter_rewards_coefficient: 0.01\n", Method.REWARD),
    ("beta: 0.0\nloss_type: dapo\nnum_generations: 8\nuse_vllm: false\nmax_completion_length: 256\n", Method.GRPO),
])
def test_the_keys_of_each_config_point_to_its_trainer(tmp_path, text, method):
    assert _read(tmp_path, text).hints[0][1] is method


@pytest.mark.parametrize("text", ["loss_type: nll\nmax_length: 1024\n", "loss_type: dft\n"])
def test_sft_configs_keys_point_to_no_trainer(tmp_path, text):
    """SFTConfig's loss_type (nll, dft in trl 1.x) and max_length say nothing of a method."""
    assert _read(tmp_path, text) is None


def test_a_method_s_fields_without_a_hint_are_kept_for_the_method_a_command_says(tmp_path):
    """A lone max_completion_length says nothing of a method (no hint, no method: plain SFT without a flag), but
    ``trl grpo --config f.yaml`` or --trainer grpo cost the run with it (GRPO's completion cap, not its default)."""
    from zeroadvisor.inputs.method import resolve

    reading = _read(tmp_path, "max_completion_length: 1024\nmax_prompt_length: 256\n")
    assert reading is not None and not reading.hints and reading.said == ""
    assert resolve(reading, None, "--trainer", "--trainer METHOD", str(tmp_path))[0] == MethodSetup()
    setup, _ = resolve(reading, TrainerChoice.GRPO, "--trainer", "--trainer METHOD", str(tmp_path))
    assert (setup.generation.max_completion_length, setup.generation.max_prompt_length) == (1024, 256)


def test_dpo_loss_types_given_as_a_list_are_kept_together(tmp_path):
    """trl 0.21 DPOConfig.loss_type is a list of losses (MPO: sigmoid, bco_pair, sft)."""
    reading = _read(tmp_path, "beta: 0.1\nloss_type: [sigmoid, bco_pair, sft]\n")
    assert reading.setup.loss_type == "sigmoid,bco_pair,sft"


def test_use_peft_means_no_reference_copy(tmp_path):
    """trl/scripts/dpo.py: ref_model is None where get_peft_config gives a PEFT config."""
    reading = _read(tmp_path, "beta: 0.1\nuse_peft: true\n")
    assert reading.setup.use_reference is False
    assert "use_peft" in dict(reading.setup.origin)["use_reference"]


def test_a_plain_training_arguments_file_says_nothing_of_a_method(tmp_path):
    assert _read(tmp_path, "per_device_train_batch_size: 4\nmax_length: 2048\nbf16: true\n") is None


@pytest.mark.parametrize(("text", "words"), [
    ("beta: fast\n", "beta in "), ("num_generations: 0\n", "at least 1"), ("num_generations: 2.5\n", "whole"),
    ("vllm_gpu_memory_utilization: 1.5\n", "at most 1"), ("use_vllm: maybe\n", "true or false"),
    ("vllm_mode: remote\n", "colocate or server"), ("beta: -0.1\n", "at least 0"), ("beta: 'nan'\n", "at least 0"),
    ("loss_type: {a: 1}\n", "a name"), ("beta: '" + "9" * 5000 + "'\n", "characters"),
])
def test_a_bad_value_is_one_line_naming_the_key_and_file(tmp_path, text, words):
    with pytest.raises(TrainerInputError) as caught:
        _read(tmp_path, text)
    message = str(caught.value)
    assert "\n" not in message and "train.yaml" in message and words in message and len(message) < 300


# -- LLaMA-Factory ---------------------------------------------------------------------------------------------------

LF = "model_name_or_path: Qwen/Qwen2.5-7B-Instruct\nstage: {stage}\nfinetuning_type: {kind}\ncutoff_len: 2048\n"


@pytest.mark.parametrize(("stage", "method"), [("sft", Method.SFT), ("pt", Method.SFT), ("rm", Method.REWARD),
                                               ("ppo", Method.PPO), ("dpo", Method.DPO), ("kto", Method.KTO)])
def test_llama_factory_stage_says_the_method(tmp_path, stage, method):
    reading = _read(tmp_path, LF.format(stage=stage, kind="full"))
    assert reading.setup.method is method and reading.setup.trainer is TrainerFamily.LLAMA_FACTORY
    assert reading.said == "stage in " + str(tmp_path / "train.yaml")


@pytest.mark.parametrize(("loss", "method"), [("orpo", Method.ORPO), ("simpo", Method.CPO)])
def test_llama_factory_orpo_and_simpo_train_without_a_reference(tmp_path, loss, method):
    """finetuning_args.py: use_ref_model = stage == "dpo" and pref_loss not in ["orpo", "simpo"]."""
    reading = _read(tmp_path, LF.format(stage="dpo", kind="full") + f"pref_loss: {loss}\npref_beta: 0.2\n")
    setup = reading.setup
    assert setup.method is method and setup.use_reference is False and setup.loss_type == loss
    assert setup.beta == 0.2


def test_llama_factory_sigmoid_dpo_keeps_its_reference_and_lora_drops_it(tmp_path):
    full = _read(tmp_path, LF.format(stage="dpo", kind="full") + "pref_loss: sigmoid\n").setup
    assert full.method is Method.DPO and full.use_reference is None  # the trainer's default: a reference copy
    lora = _read(tmp_path, LF.format(stage="dpo", kind="lora")).setup
    assert lora.use_reference is False  # the adapter is disabled for the reference pass
    named = _read(tmp_path, LF.format(stage="dpo", kind="lora") + "ref_model: Qwen/Qwen2.5-1.5B\n").setup
    assert named.use_reference is None and named.reference_model == "Qwen/Qwen2.5-1.5B"


@pytest.mark.parametrize(("tuner", "kind", "loaded"), [("lora", "", False),
                                                      ("lora", "reward_model_type: lora\n", False),
                                                      ("full", "reward_model_type: api\n", False),
                                                      ("full", "reward_model_type: full\n", True)])
def test_llama_factory_ppo_names_its_reward_model(tmp_path, tuner, kind, loaded):
    """train/trainer_utils.py create_reward_model: only reward_model_type full (not the default lora) loads a model;
    only api serves it outside the training processes (ppo/trainer.py get_rewards: no forward here)."""
    setup = _read(tmp_path, LF.format(stage="ppo", kind=tuner) + "reward_model: saves/rm\n" + kind).setup
    assert setup.placements[0].role is ModelRole.REWARD and setup.placements[0].model == "saves/rm"
    assert setup.placements[0].loaded is loaded
    assert setup.placements[0].remote is ("api" in kind)


def test_llama_factory_lora_ppo_has_no_reference_copy(tmp_path):
    assert _read(tmp_path, LF.format(stage="ppo", kind="lora")).setup.use_reference is False


@pytest.mark.parametrize(("text", "words"), [
    # hparams/finetuning_args.py __post_init__ @ v0.9.3: ValueError for reward_model_type lora with Freeze/Full
    ("finetuning_type: full\nreward_model: rm\n", "reward_model_type lora (the default) needs finetuning_type lora"),
    ("finetuning_type: freeze\nreward_model: rm\nreward_model_type: lora\n", "got freeze: LLaMA-Factory refuses"),
    ("reward_model: rm\nreward_model_type: adapter\n", "expected one of lora, full, api"),
])
def test_llama_factory_ppo_reward_model_type_is_checked_as_llama_factory_does(tmp_path, text, words):
    with pytest.raises(TrainerInputError) as caught:
        _read(tmp_path, "stage: ppo\n" + text)
    message = str(caught.value)
    assert words in message and "train.yaml" in message and "\n" not in message


@pytest.mark.parametrize("stage", ["dpo", "kto", "ppo"])
def test_llama_factory_default_finetuning_type_is_lora_no_reference_copy(tmp_path, stage):
    # FinetuningArguments.finetuning_type defaults to "lora" (finetuning_args.py @ v0.9.3): create_ref_model -> None
    reading = _read(tmp_path, f"stage: {stage}\nreward_model: rm\n")
    assert reading.setup.use_reference is False
    assert dict(reading.setup.origin)["use_reference"].startswith("LLaMA-Factory's default finetuning_type lora")
    # the adapter itself is read as the PEFT inputs (config/peft_reader.py): LLaMA-Factory's defaults
    peft = read_training_args(tmp_path / "train.yaml").peft
    assert peft is not None and (peft.method, peft.r, peft.target_modules, peft.dropout) == ("lora", 8, "all-linear",
                                                                                             0.0)
    full = _read(tmp_path, f"stage: {stage}\nfinetuning_type: full\nreward_model: rm\nreward_model_type: full\n")
    assert full.setup.use_reference is None and not full.setup.notes
    assert read_training_args(tmp_path / "train.yaml").peft is None


def test_llama_factory_unknown_stage_is_one_line(tmp_path):
    with pytest.raises(TrainerInputError, match=r"train.yaml: expected one of pt, sft, rm, ppo, dpo, kto"):
        _read(tmp_path, LF.format(stage="grpo", kind="full"))


# -- axolotl ---------------------------------------------------------------------------------------------------------

AX = "base_model: Qwen/Qwen2.5-7B\nmicro_batch_size: 2\nsequence_len: 4096\n"


@pytest.mark.parametrize(("rl", "method", "loss"), [("dpo", Method.DPO, None), ("ipo", Method.DPO, "ipo"),
                                                    ("kto", Method.KTO, None), ("orpo", Method.ORPO, None),
                                                    ("simpo", Method.CPO, "simpo"), ("grpo", Method.GRPO, None)])
def test_axolotl_rl_says_the_method(tmp_path, rl, method, loss):
    setup = _read(tmp_path, AX + f"rl: {rl}\n").setup
    assert setup.method is method and setup.loss_type == loss and setup.trainer is TrainerFamily.AXOLOTL


def test_axolotl_trl_block_gives_grpo_generation_and_beta(tmp_path):
    setup = _read(tmp_path, AX + "rl: grpo\nrl_beta: 0.5\ntrl:\n  beta: 0.04\n  num_generations: 8\n"
                                 "  use_vllm: true\n  vllm_gpu_memory_utilization: 0.4\n").setup
    assert setup.beta == 0.04  # trl.beta over rl_beta
    assert setup.generation.num_generations == 8 and setup.generation.use_vllm is True
    assert dict(setup.origin)["num_generations"].startswith("trl.num_generations in ")
    assert _read(tmp_path, AX + "rl: dpo\nrl_beta: 0.5\n").setup.beta == 0.5


def test_axolotl_vllm_block_gives_the_share_and_the_servers_gpus(tmp_path):
    setup = _read(tmp_path, AX + "rl: grpo\ntrl:\n  use_vllm: true\n  vllm_mode: server\nvllm:\n"
                                 "  gpu_memory_utilization: 0.85\n  tensor_parallel_size: 2\n"
                                 "  data_parallel_size: 2\n").setup
    assert setup.generation.vllm_gpu_memory_utilization == 0.85 and setup.generation.vllm_num_gpus == 4
    colocated = _read(tmp_path, AX + "rl: grpo\ntrl:\n  vllm_mode: colocate\n  vllm_gpu_memory_utilization: 0.3\n"
                                     "vllm:\n  gpu_memory_utilization: 0.9\n  tensor_parallel_size: 2\n").setup
    assert colocated.generation.vllm_gpu_memory_utilization == 0.3 and colocated.generation.vllm_num_gpus is None


def test_axolotl_rl_adapter_ref_model_keeps_a_reference_beside_the_adapter(tmp_path):
    lora = "adapter: lora\nlora_r: 8\nlora_target_linear: true\n"
    assert _read(tmp_path, AX + "rl: dpo\n" + lora).setup.use_reference is None  # has_reference: none with PEFT
    setup = _read(tmp_path, AX + "rl: dpo\nrl_adapter_ref_model: true\n" + lora).setup
    assert setup.use_reference is True
    assert dict(setup.origin)["use_reference"].startswith("rl_adapter_ref_model in ")
    # without an adapter it changes nothing; KTO/SimPO/ORPO trainers are not handed the model
    assert _read(tmp_path, AX + "rl: dpo\nrl_adapter_ref_model: true\n").setup.use_reference is None
    assert _read(tmp_path, AX + "rl: kto\nrl_adapter_ref_model: true\n" + lora).setup.use_reference is None


@pytest.mark.parametrize(("text", "copy"), [
    ("rl: simpo\n", True), ("rl: kto\n", True), ("rl: grpo\n", True),  # loaded, never handed to the trainer
    ("rl: dpo\n", False), ("rl: orpo\n", False),  # dpo gets it (a reference); orpo loads none
    ("rl: simpo\nadapter: lora\nlora_r: 8\nlora_target_linear: true\n", False),  # none loaded with an adapter...
    ("rl: simpo\nadapter: lora\nlora_r: 8\nlora_target_linear: true\nrl_adapter_ref_model: true\n", True),  # ...unless
])
def test_axolotl_loads_a_copy_no_trainer_gets_for_simpo_kto_and_grpo(tmp_path, text, copy):
    """train.py setup_reference_model loads it for every rl: type but orpo (none with an adapter unless
    rl_adapter_ref_model); core/builders/rl.py hands it to the dpo/ipo trainers only."""
    assert _read(tmp_path, AX + text).setup.unused_copy_at_load is copy


@pytest.mark.parametrize(("text", "words", "since"), [
    ("optimizer: muon\n", "Muon optimizer is currently incompatible with DeepSpeed", "0.8.0"),
    ("optimizer: flash_adamw\n", "flash_adamw optimizer is incompatible with DeepSpeed", "0.16.0"),
    ("optimizer: q_galore_adamw8bit\n", "q_galore_adamw8bit is not yet validated with DeepSpeed", "0.17.0"),
    ("relora: true\njagged_restart_steps: 50\n", "deepspeed not supported with ReLoRA", "0.12.0"),
    ("fsdp:\n  - full_shard\n", "deepspeed and fsdp cannot be used together", None),
])
def test_axolotl_s_own_refusals_of_deepspeed_are_read_for_every_stage(tmp_path, text, words, since):
    """utils/schemas/validation.py raises with ``deepspeed`` set whatever its stage, in SFT (no rl:) as in DPO; each
    check from the release that made it."""
    for rl in ("", "rl: dpo\n"):
        setup = _read(tmp_path, AX + rl + text).setup
        assert setup.trainer is TrainerFamily.AXOLOTL
        (refused,) = setup.refusals
        assert words in refused.words and refused.words.startswith("axolotl raises") and "check_" in refused.words
        assert refused.stages == {0, 1, 2, 3} and refused.since == since
    assert _read(tmp_path, AX + "optimizer: adamw_torch_fused\nfsdp: []\nrelora: false\n").setup.refusals == ()


def test_a_refusal_applies_by_the_trainer_s_release():
    """Refusal.applies: a check made from ``since`` and dropped at ``before``; an unknown release is the newest
    read (a check that has since been dropped does not apply)."""
    from packaging.version import Version

    from zeroadvisor.config.method import Refusal

    muon = Refusal("muon", frozenset({0, 1, 2, 3}), since="0.8.0")
    assert muon.applies(2, None) and muon.applies(0, Version("0.8.0")) and not muon.applies(2, Version("0.7.1"))
    steps = Refusal("relora_steps", frozenset({0, 1, 2, 3}), before="0.12.0")
    assert steps.applies(3, Version("0.11.0")) and not steps.applies(3, Version("0.12.0"))
    assert not steps.applies(3, None)
    assert not Refusal("zero3 only", frozenset({3})).applies(2, None)
    # OpenRLHF's sleep check: passed with the optimizer offloaded; from 0.8.10 only with DeepSpeed <= 0.17.5
    sleep = Refusal("sleep", frozenset({0, 1, 2}), since="0.8.10", offload_optimizer_runs=True,
                    deepspeed_through="0.17.5")
    assert sleep.applies(2, None, False, Version("0.17.5")) and sleep.applies(2, Version("0.9.0"), False, None)
    assert not sleep.applies(2, None, True, Version("0.17.5"))
    assert not sleep.applies(2, None, False, Version("0.17.6")) and not sleep.applies(3, None, False, None)


@pytest.mark.parametrize(("release", "deepspeed", "refused"), [
    ("0.5.9", "0.15.0", False), ("0.6.0.post1", "0.19.8", True), ("0.8.5", "0.19.8", True),
    ("0.8.10", "0.19.8", False), ("0.8.10", "0.17.5", True), (None, "0.16.4", True), (None, "0.19.8", False),
])
def test_openrlhf_refuses_deepspeed_sleep_below_zero_3_without_adam_offload(release, deepspeed, refused):
    """openrlhf/utils/deepspeed/deepspeed_utils.py offload_deepspeed_states, read at every tag from v0.6.0 to
    v0.11.0: --deepspeed_enable_sleep (--ds.enable_sleep at 0.10+) raises below ZeRO-3 unless Adam is offloaded,
    from v0.8.10 only with DeepSpeed 0.17.5 or lower."""
    from zeroadvisor.config.launch import parse_launch
    from zeroadvisor.memory.method import trainer_refusal
    from zeroadvisor.memory.options import Option
    from zeroadvisor.vocab import Device

    for flag in ("--deepspeed_enable_sleep", "--ds.enable_sleep"):
        setup = parse_launch(f"python -m openrlhf.cli.train_ppo_ray --zero_stage 2 {flag}").training.method.setup
        setup = dataclasses.replace(setup, trainer_version=release)
        spec = _SPEC
        words = trainer_refusal(setup, spec, Option(2, Device.NONE, Device.NONE), deepspeed)
        assert (words is not None) == refused, (flag, release, deepspeed)
        assert words is None or words.startswith("OpenRLHF raises \"Only Zero stage 3")
        assert trainer_refusal(setup, spec, Option(2, Device.CPU, Device.NONE), deepspeed) is None  # --adam_offload
        assert trainer_refusal(setup, spec, Option(3, Device.NONE, Device.NONE), deepspeed) is None
    plain = parse_launch("python -m openrlhf.cli.train_ppo_ray --zero_stage 2").training.method.setup
    assert plain.refusals == ()


@pytest.mark.parametrize(("text", "words", "stages"), [
    ("use_galore: true\n", "GaLore and APOLLO are incompatible with DeepSpeed yet.", {0, 1, 2, 3}),
    ("use_apollo: true\n", "GaLore and APOLLO are incompatible with DeepSpeed yet.", {0, 1, 2, 3}),
    ("use_badam: true\n", "Layer-wise BAdam only supports DeepSpeed ZeRO-3 training.", {0, 1, 2}),
    ("use_badam: true\nbadam_mode: ratio\n", "Radio-based BAdam does not yet support distributed", {0, 1, 2, 3}),
])
def test_llama_factory_s_refusals_outside_zero_3_are_read(tmp_path, text, words, stages):
    """get_train_args: GaLore and APOLLO with any DeepSpeed config; BAdam's layer-wise mode (the default) under
    ZeRO-3 only and its ratio mode never in distributed training (from v0.8.3; up to v0.8.2 BAdam never with
    DeepSpeed, a refusal of its own that the newest release no longer makes)."""
    refusals = _read(tmp_path, LF.format(stage="sft", kind="full") + text).setup.refusals
    now = [r for r in refusals if r.before is None]
    assert len(now) == 1 and words in now[0].words and now[0].stages == stages


@pytest.mark.parametrize(("text", "words"), [("rl: ppo\n", "axolotl's rl: types"), ("rl: dpo\ntrl: 3\n", "mapping"),
                                             ("rl: grpo\nvllm: 1\n", "vLLM settings"),
                                             ("rl: grpo\nvllm:\n  gpu_memory_utilization: 2\n", "at most 1"),
                                             ("rl: dpo\ntrl:\n  num_generations: x\n", "trl.num_generations")])
def test_axolotl_bad_values_are_one_line(tmp_path, text, words):
    with pytest.raises(TrainerInputError, match=words):
        _read(tmp_path, AX + text)


# -- combining -------------------------------------------------------------------------------------------------------


def test_the_launch_commands_fields_go_over_the_files(tmp_path):
    base = _read(tmp_path, "beta: 0.1\nnum_generations: 4\n")
    over = read_swift("rlhf", {"rlhf_type": "grpo", "num_generations": 8}, lambda key: f"--{key}")
    both = merged(base, over)
    assert both.setup.method is Method.GRPO and both.said == "--rlhf_type grpo"
    assert both.setup.generation.num_generations == 8 and both.setup.beta == 0.1


@pytest.mark.parametrize("tuner", ["lorra", "qlora", "adapter"])
def test_llama_factory_finetuning_type_is_one_it_knows(tmp_path, tuner):
    # FinetuningArguments.finetuning_type: Literal["lora", "freeze", "full"] @ v0.9.3 ("oft" from v0.9.4):
    # HfArgumentParser refuses anything else, so a typo is never costed as a full fine-tune with a reference copy
    with pytest.raises(TrainerInputError) as caught:
        _read(tmp_path, f"stage: dpo\nfinetuning_type: {tuner}\n")
    message = str(caught.value)
    assert "finetuning_type" in message and "lora, oft, freeze, full" in message and "\n" not in message
    assert _read(tmp_path, "stage: dpo\nfinetuning_type: oft\n").setup.use_reference is None  # a full reference copy


def test_llama_factory_ref_model_quantization_bit_applies_to_its_ref_model_only(tmp_path):
    """train/trainer_utils.py create_ref_model: ModelArguments.copyfrom(..., quantization_bit=
    ref_model_quantization_bit) for the ref_model it loads; the policy's double_quantization is copied with it."""
    base = LF.format(stage="dpo", kind="full")
    setup = _read(tmp_path, base + "ref_model: Qwen/Qwen2.5-1.5B\nref_model_quantization_bit: 4\n").setup
    assert (setup.reference_quantization, setup.reference_double_quant) == ("4bit", True)
    assert dict(setup.origin)["reference_quantization"].startswith("ref_model_quantization_bit in ")
    eight = _read(tmp_path, base + "ref_model: m\nref_model_quantization_bit: 8\ndouble_quantization: false\n").setup
    assert (eight.reference_quantization, eight.reference_double_quant) == ("8bit", False)
    alone = _read(tmp_path, base + "ref_model_quantization_bit: 4\n").setup
    assert alone.reference_quantization is None and any("ignored without ref_model" in n for n in alone.notes)
    with pytest.raises(TrainerInputError, match=r"ref_model_quantization_bit.*expected 4 or 8"):
        _read(tmp_path, base + "ref_model: m\nref_model_quantization_bit: 2\n")


@pytest.mark.parametrize(("key", "words"), [("use_unsloth", "Unsloth is incompatible with DeepSpeed ZeRO-3."),
                                            ("pure_bf16", "`pure_bf16` is incompatible with DeepSpeed ZeRO-3."),
                                            ("predict_with_generate", "`predict_with_generate` is incompatible"),
                                            ("pissa_init", "initialize PiSSA in DeepSpeed ZeRO-3"),
                                            ("use_kt", "KTransformers is incompatible")])
def test_llama_factory_s_own_zero_3_refusals_are_read_with_where(tmp_path, key, words):
    """hparams/parser.py get_train_args raises under ZeRO-3 for each of these set true; false or unset is nothing."""
    base = LF.format(stage="sft", kind="lora")
    (refused,) = _read(tmp_path, base + f"{key}: true\n").setup.refusals
    assert f"for {key}: true" in refused.words and words in refused.words and "parser.py" in refused.words
    assert refused.stages == {3}
    assert _read(tmp_path, base + f"{key}: false\n").setup.refusals == ()
    assert _read(tmp_path, base).setup.refusals == ()


def test_a_llama_factory_yaml_without_stage_is_sft_by_llama_factory(tmp_path):
    """FinetuningArguments.stage defaults to "sft": the file says no method (a flag may), but the trainer is
    LLaMA-Factory's, so its own refusals apply (use_unsloth under ZeRO-3)."""
    reading = _read(tmp_path, "model_name_or_path: m\nfinetuning_type: lora\ncutoff_len: 1024\nuse_unsloth: true\n")
    assert reading is not None and not reading.said
    assert (reading.setup.method, reading.setup.trainer) == (Method.SFT, TrainerFamily.LLAMA_FACTORY)
    assert reading.setup.refusals and "Unsloth" in reading.setup.refusals[0].words


def test_every_refusal_check_names_the_settings_it_reads():
    """A launch command's reader keeps only the settings the checks name (config/trainer_refusals.py read_keys):
    a check reading one it does not name would never see it from a command line."""
    from zeroadvisor.config.trainer_refusals import REFUSALS

    seen: set[str] = set()

    class Seen(dict):
        def get(self, key, default=None):
            seen.add(key)
            return super().get(key, default)

    for checks in REFUSALS.values():
        for check in checks:
            seen.clear()
            for value in (True, "true", "grpo", "ratio", "muon", "flash_x", None):
                check.matches(Seen.fromkeys(check.keys, value))
                check.matches(Seen({check.keys[0]: value}))
            assert seen and seen <= set(check.keys), (check.setting, seen)


def test_axolotl_gdpo_is_grpo_s_trainer():
    """axolotl's rl: gdpo (from 0.14.0) runs GRPO's trainer with its rewards normalized one by one; before, the file
    was refused ("expected one of dpo, ipo, ...")."""
    from zeroadvisor.config.method_reader import read_mapping

    reading = read_mapping({"rl": "gdpo", "trl": {"num_generations": 2, "max_completion_length": 128}}, "axolotl",
                           lambda key: f"{key} in ax.yaml")
    assert (reading.setup.method, reading.setup.trainer) == (Method.GRPO, TrainerFamily.AXOLOTL)
    assert reading.setup.generation.num_generations == 2


def test_the_trainers_switches_for_liger_s_preference_loss_are_read(tmp_path):
    """TRL's use_liger_loss (DPOConfig 0.19-0.27, KTOConfig and GRPOConfig 0.17-0.27) and axolotl's
    dpo_use_liger_kernel (DPO's use_liger_kernel from axolotl 0.14) say whether Liger's own loss runs
    (memory/liger.py trl_loss_runs); axolotl's trl: block's use_liger_loss is GRPO's and does not say it for DPO."""
    trl = _read(tmp_path, "beta: 0.1\nuse_liger_loss: true\n").setup
    assert trl.liger_loss is True and dict(trl.origin)["use_liger_loss"].startswith("use_liger_loss in ")
    axolotl = _read(tmp_path, "base_model: m\nrl: dpo\ndpo_use_liger_kernel: true\n").setup
    assert axolotl.liger_loss is True and "dpo_use_liger_kernel" in dict(axolotl.origin)["liger_loss"]
    grpo_block = _read(tmp_path, "base_model: m\nrl: dpo\ntrl:\n  use_liger_loss: true\n").setup
    assert grpo_block.liger_loss is None
    grpo = _read(tmp_path, "base_model: m\nrl: grpo\ndpo_use_liger_kernel: true\ntrl:\n  use_liger_loss: true\n").setup
    assert grpo.liger_loss is True and dict(grpo.origin)["use_liger_loss"].startswith("trl.use_liger_loss in ")
    with pytest.raises(TrainerInputError, match="dpo_use_liger_kernel"):
        _read(tmp_path, "base_model: m\nrl: dpo\ndpo_use_liger_kernel: sometimes\n")
