"""Launch commands that name the trainer (config/launch.py, issue 35): ``trl dpo --config f.yaml``, TRL's scripts
under accelerate launch, ``swift rlhf``, OpenRLHF's modules under deepspeed/python, and ``ray job submit``."""

from __future__ import annotations

import dataclasses
import re

import pytest

from zeroadvisor.config.launch import OPENRLHF_BUILDS_CONFIG, LaunchError, parse_launch, trl_accelerate_config
from zeroadvisor.config.reader import MissingInput
from zeroadvisor.config.training_args import TrainerInputError
from zeroadvisor.vocab import Method, ModelRole, TrainerFamily, VllmMode

DPO_YAML = "model_name_or_path: Qwen/Qwen2.5-0.5B\nbeta: 0.2\nmax_length: 1024\nper_device_train_batch_size: 2\n"
PPO_RAY = ("ray job submit --address=http://127.0.0.1:8265 --runtime-env-json='{\"working_dir\": \"/openrlhf\"}' "
           "-- python3 -m openrlhf.cli.train_ppo_ray --ref_num_nodes 2 --ref_num_gpus_per_node 8 "
           "--actor_num_nodes 2 --actor_num_gpus_per_node 8 --critic_num_nodes 1 --critic_num_gpus_per_node 8 "
           "--reward_pretrain OpenRLHF/Llama-3-8b-rm --colocate_all_models --vllm_num_engines 8 "
           "--vllm_tensor_parallel_size 2 --vllm_gpu_memory_utilization 0.5 --ref_reward_offload --zero_stage 3 "
           "--micro_train_batch_size 8 --prompt_max_len 1024 --generate_max_len 1024 --n_samples_per_prompt 4 "
           "--pretrain OpenRLHF/Llama-3-8b-sft --bf16 --gradient_checkpointing --init_kl_coef 0.01")


@pytest.fixture
def dpo_yaml(tmp_path):
    (tmp_path / "dpo.yaml").write_text(DPO_YAML)
    return tmp_path


def test_trl_cli_names_the_method_and_reads_its_config(dpo_yaml):
    launch = parse_launch("trl dpo --config dpo.yaml --num_processes 8 --beta 0.3", cwd=str(dpo_yaml))
    setup = launch.training.method.setup
    assert (setup.method, setup.trainer, launch.training.method.said) == (Method.DPO, TrainerFamily.TRL, "trl dpo")
    assert setup.beta == 0.3  # the flag over the file (TrlParser: the command line over --config)
    assert launch.world_size == 8 and launch.training.get("per_device_train_batch_size") == 2
    assert launch.training.sequence_length == 1024 and launch.training.model == "Qwen/Qwen2.5-0.5B"


def test_trl_cli_takes_launch_keys_from_its_yaml_under_the_command_line(dpo_yaml):
    """TRL 1.x trl/cli/commands/training.py: the YAML's keys no dataclass takes go to accelerate launch."""
    (dpo_yaml / "grpo.yaml").write_text("num_generations: 8\nnum_processes: 4\n")
    assert parse_launch("trl grpo --config grpo.yaml", cwd=str(dpo_yaml)).world_size == 4
    assert parse_launch("trl grpo --config grpo.yaml --num_processes 2", cwd=str(dpo_yaml)).world_size == 2


def test_trl_cli_predefined_accelerate_config_is_trl_s_own_file(dpo_yaml):
    """TRL's own trl/accelerate_configs/zero3.yaml (a copy shipped here: the file is the same from TRL 0.18.0 on) is
    the config the run launches with, its num_processes under the command line's; before, it was not read."""
    launch = parse_launch("trl grpo --config dpo.yaml --accelerate_config zero3 --num_processes 4",
                          cwd=str(dpo_yaml))
    assert launch.world_size == 4 and launch.accelerate_config == trl_accelerate_config("zero3")
    assert any("TRL's own trl/accelerate_configs/zero3.yaml" in note for note in launch.notes)
    assert launch.training.method.setup.method is Method.GRPO
    assert parse_launch("trl dpo --config dpo.yaml --accelerate_config zero2", cwd=str(dpo_yaml)).world_size == 8
    with pytest.raises(LaunchError, match=r"--accelerate_config 'zero4' is neither a file nor one of TRL's"):
        parse_launch("trl dpo --config dpo.yaml --accelerate_config zero4", cwd=str(dpo_yaml))


@pytest.mark.parametrize("command", [
    "accelerate launch --num_processes 8 trl/scripts/dpo.py --config dpo.yaml",
    "accelerate launch --num_processes 8 examples/scripts/dpo.py --config dpo.yaml",
    "accelerate launch --num_processes 8 -m trl.scripts.dpo --config dpo.yaml",
])
def test_trl_scripts_under_accelerate_launch(dpo_yaml, command):
    launch = parse_launch(command, cwd=str(dpo_yaml))
    assert launch.training.method.setup.method is Method.DPO and launch.training.method.setup.beta == 0.2
    assert launch.world_size == 8


def test_another_script_named_dpo_is_not_trl(dpo_yaml):
    launch = parse_launch("accelerate launch --num_processes 8 my/dpo.py dpo.yaml", cwd=str(dpo_yaml))
    assert launch.training.method is not None and launch.training.method.said == ""  # fields only, no method


def test_trl_unknown_command_is_one_line():
    with pytest.raises(LaunchError, match=r"trl 'vllm-serve' is not a TRL training command"):
        parse_launch("trl vllm-serve --model x")
    with pytest.raises(LaunchError, match=r"trl 'gkd' is not a TRL training command"):  # GKD has a script, no command
        parse_launch("trl gkd --model x")


@pytest.mark.parametrize(("command", "trainer"), [
    ("accelerate launch examples/scripts/bco.py --config f.yaml", "BCO"),
    ("accelerate launch examples/scripts/dpo_online.py --config f.yaml", "online DPO"),
    ("accelerate launch examples/scripts/rloo/rloo_tldr.py --config f.yaml", "RLOO"),
    ("torchrun --nproc_per_node 8 trl/examples/scripts/nash_md.py", "Nash-MD")])
def test_trl_trainers_not_costed_are_one_line_not_an_sft_estimate(command, trainer):
    """TRL's GKD, online DPO, Nash-MD ... (examples/scripts @ v0.21.0) and the RLOO of 0.21 and before (a PPO-style
    trainer, examples/scripts/rloo/) put a teacher, a judge or a reference and their generation beside the policy:
    costed as SFT their verdict would be another run's."""
    with pytest.raises(LaunchError, match=f"is TRL's {trainer} trainer, which zeroadvisor does not cost") as caught:
        parse_launch(command)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("script", ["examples/scripts/ppo/ppo.py", "trl/examples/scripts/ppo/ppo_tldr.py"])
def test_trl_s_ppo_examples_in_their_own_folder_are_its_ppo_trainer(script):
    """examples/scripts/ppo/ppo.py and ppo_tldr.py (@ v0.12.0 to v1.9.0): PPOTrainer (PPOv2Trainer before 0.12)."""
    method = parse_launch(f"accelerate launch {script} --response_length 64").training.method
    assert method is not None and method.setup.method is Method.PPO and method.setup.trainer is TrainerFamily.TRL
    other = parse_launch("accelerate launch my/ppo/ppo.py").training.method  # not TRL's folder
    assert other is None or other.said == ""


@pytest.mark.parametrize("command", ["trl rloo --num_processes 8", "accelerate launch trl/scripts/rloo.py",
                                     "accelerate launch -m trl.scripts.rloo"])
def test_trl_s_rloo_is_costed_as_its_grpo_sibling(command):
    """trl/scripts/rloo.py (0.22+, ``trl rloo``): RLOOTrainer shares GRPO's scoring, generation and reference
    handling (trl/trainer/rloo_trainer.py @ v1.9.0): GRPO, marked RLOO for its own defaults."""
    method = parse_launch(command).training.method
    assert method is not None and method.setup.method is Method.GRPO and method.setup.rloo
    assert method.setup.trainer is TrainerFamily.TRL


def test_trl_s_gspo_example_is_its_grpo_trainer():
    """examples/scripts/gspo.py @ v0.21.0: GRPOTrainer with importance_sampling_level "sequence"."""
    method = parse_launch("accelerate launch examples/scripts/gspo.py --num_generations 8").training.method
    assert method is not None and method.setup.method is Method.GRPO and method.setup.trainer is TrainerFamily.TRL


def test_swift_rlhf_reads_the_method_world_and_arguments():
    launch = parse_launch("NPROC_PER_NODE=8 NNODES=2 swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B "
                          "--train_type full --deepspeed zero3 --num_generations 8 --use_vllm true "
                          "--vllm_mode colocate --vllm_gpu_memory_utilization 0.4 --max_completion_length 1024 "
                          "--max_length 2048 --per_device_train_batch_size 2 --torch_dtype bfloat16 --beta 0.04")
    assert (launch.world_size, launch.per_node) == (16, 8)
    setup = launch.training.method.setup
    assert (setup.method, setup.trainer) == (Method.GRPO, TrainerFamily.MS_SWIFT)
    assert setup.generation.vllm_mode is VllmMode.COLOCATE and setup.generation.num_generations == 8
    assert launch.training.get("bf16") is True and launch.training.model == "Qwen/Qwen2.5-7B"
    assert launch.training.deepspeed is None  # ms-swift's own zero3.json, which the inputs read by the release
    assert launch.swift_config == "zero3"


@pytest.mark.parametrize(("kind", "method", "loss"), [("dpo", Method.DPO, None), ("simpo", Method.CPO, "simpo"),
                                                      ("rm", Method.REWARD, None), ("ppo", Method.PPO, None)])
def test_swift_rlhf_types(kind, method, loss):
    setup = parse_launch(f"swift rlhf --rlhf_type {kind} --model m --deepspeed ds.json").training.method.setup
    assert setup.method is method and setup.loss_type == loss


def test_swift_lora_dpo_has_no_reference_copy_and_one_process_without_nproc():
    launch = parse_launch("swift rlhf --rlhf_type dpo --model m --train_type lora")
    assert launch.world_size == 1 and launch.training.method.setup.use_reference is False
    assert parse_launch("swift sft --model m").training.method.setup.method is Method.SFT


def test_swift_s_own_refusals_of_deepspeed_are_read_from_its_flags():
    """sft_args.py _init_fsdp (3.12.0 on): --fsdp with --deepspeed at every stage; tuners/base.py grpo_context (3.2.0
    on): a LLaMA-Pro model in GRPO under ZeRO-3 only."""
    (fsdp,) = parse_launch("swift sft --model m --deepspeed zero2 --fsdp fsdp2").training.method.setup.refusals
    assert "FSDP2 is not compatible with DeepSpeed." in fsdp.words and fsdp.stages == {0, 1, 2, 3}
    assert fsdp.words.startswith("ms-swift raises") and fsdp.since == "3.12.0"
    (pro,) = parse_launch("swift rlhf --rlhf_type grpo --model m --train_type llamapro --deepspeed zero3"
                          ).training.method.setup.refusals
    assert "LLaMAPro&GRPO" in pro.words and pro.stages == {3}
    assert parse_launch("swift rlhf --rlhf_type dpo --model m --train_type llamapro").training.method.setup.refusals \
        == ()


def test_swift_refuses_deepspeed_where_it_splits_the_model_over_the_gpus_a_process_sees():
    """is_mp: the visible GPUs // NPROC_PER_NODE >= 2 -> device_map, and _init_deepspeed raises: one line, exit 2."""
    for command in ("CUDA_VISIBLE_DEVICES=0,1 swift sft --model m --deepspeed zero2",
                    ("CUDA_VISIBLE_DEVICES=0,1,2,3 NPROC_PER_NODE=2 swift rlhf --rlhf_type dpo --model m "
                     "--deepspeed ds.json")):
        with pytest.raises(LaunchError, match=r"refuses DeepSpeed.*device_map.*NPROC_PER_NODE=") as err:
            parse_launch(command)
        assert "\n" not in str(err.value)
    for runs in ("CUDA_VISIBLE_DEVICES=0,1 NPROC_PER_NODE=2 swift sft --model m --deepspeed zero2",
                 "CUDA_VISIBLE_DEVICES=0,1 swift sft --model m",  # no DeepSpeed: device_map is its way
                 "CUDA_VISIBLE_DEVICES=0 swift sft --model m --deepspeed zero2",
                 "CUDA_VISIBLE_DEVICES=0,1 SWIFT_SINGLE_DEVICE_MODE=1 swift sft --model m --deepspeed zero2"):
        parse_launch(runs)


def test_openrlhf_dpo_under_deepspeed():
    launch = parse_launch("deepspeed --num_gpus 8 --module openrlhf.cli.train_dpo --pretrain meta-llama/Llama-3-8B "
                          "--ref_pretrain meta-llama/Llama-3-8B --beta 0.1 --zero_stage 3 --max_len 2048 "
                          "--micro_train_batch_size 1 --bf16 --gradient_checkpointing --ref_offload")
    setup = launch.training.method.setup
    assert (setup.method, setup.trainer, setup.beta) == (Method.DPO, TrainerFamily.OPENRLHF, 0.1)
    assert setup.placements[0].role is ModelRole.REFERENCE and setup.placements[0].offload is True
    assert launch.world_size == 8 and launch.stage == 3 and launch.stage_from == "--zero_stage"
    assert launch.training.sequence_length == 2048 and launch.training.get("per_device_train_batch_size") == 1
    assert launch.training.checkpointing is True and launch.training.get("bf16") is True
    assert launch.builds_config == OPENRLHF_BUILDS_CONFIG


def test_ray_job_submit_reads_the_openrlhf_entrypoint():
    launch = parse_launch(PPO_RAY)
    assert launch.launcher.startswith("ray job submit")
    assert (launch.world_size, launch.per_node) == (16, 8)  # the actor's 2 nodes x 8 GPUs
    setup = launch.training.method.setup
    assert (setup.method, setup.trainer, setup.beta, setup.colocate_all_models) == \
        (Method.PPO, TrainerFamily.OPENRLHF, 0.01, True)
    assert setup.generation.vllm_num_gpus == 16 and setup.generation.vllm_gpu_memory_utilization == 0.5
    assert setup.generation.num_generations == 4 and setup.generation.max_completion_length == 1024
    roles = {placement.role: placement for placement in setup.placements}
    assert roles[ModelRole.REWARD].model == "OpenRLHF/Llama-3-8b-rm" and roles[ModelRole.REWARD].offload is True
    assert roles[ModelRole.REFERENCE].gpus_per_node == 8 and roles[ModelRole.CRITIC].offload is None
    assert launch.stage == 3 and launch.training.model == "OpenRLHF/Llama-3-8b-sft"


@pytest.mark.parametrize(("flag", "mode"), [("", VllmMode.COLOCATE), ("--async_train", VllmMode.SERVER),
                                             ("--train.async_enable", VllmMode.SERVER)])
def test_openrlhf_async_training_keeps_vllm_off_the_colocated_gpus(flag, mode):
    """cli/train_ppo_ray.py @ v0.8.5 (and its --train.* flags @ v0.11.0): "Using --colocate_all_models in async RLHF
    only colocates DeepSpeed models": create_vllm_engines gets no placement group with --async_train, so the vLLM
    engines run on GPUs of their own (OpenRLHF's examples/scripts/train_reinforce_baseline_llama_ray_agent_async.sh:
    6 actor GPUs, 2 vLLM engines)."""
    launch = parse_launch(f"{PPO_RAY} {flag}")
    setup = launch.training.method.setup
    assert setup.colocate_all_models and setup.generation.vllm_mode is mode


@pytest.mark.parametrize(("flag", "coef"), [("", None), ("--entropy_loss_coef 0", 0.0),
                                             ("--entropy_loss_coef 0.01", 0.01), ("--actor.entropy_coef 0.001", 0.001)])
def test_openrlhf_entropy_coefficient_puts_the_entropy_s_gradient_in_the_actor_s_loss(flag, coef):
    """--entropy_loss_coef (0.8) / --actor.entropy_coef (0.11): the actor's entropy, in the loss where it is not 0
    (ppo_actor.py training_step @ v0.8.5, v0.11.0): its gradient of the fp32 logits beside the kernel's and their sum,
    four fp32 copies at the loss's peak where the kernel alone holds 2.5 (benchmarks/openrlhf_loss.md)."""
    from zeroadvisor.memory.activations import activation_bytes
    from zeroadvisor.memory.method import activation_spec
    from zeroadvisor.model.hf import spec_from_hf_config
    from zeroadvisor.model.spec import Checkpointing, TrainingShape

    setup = parse_launch(f"{PPO_RAY} {flag}").training.method.setup
    assert setup.entropy_coef == coef
    spec = spec_from_hf_config({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                                "intermediate_size": 172, "num_hidden_layers": 2, "num_attention_heads": 4,
                                "num_key_value_heads": 2, "vocab_size": 32768, "tie_word_embeddings": False})
    shape = TrainingShape(512, Checkpointing.FULL, True, method=setup)
    plain = dataclasses.replace(setup, entropy_coef=None)
    extra = activation_bytes(activation_spec(setup, spec), shape, 2, "bf16").nbytes - activation_bytes(
        activation_spec(plain, spec), dataclasses.replace(shape, method=plain), 2, "bf16").nbytes
    # bf16 training: 16 B per token and vocabulary entry against the kernel's 10
    assert extra == (6 * 2 * 512 * 32768 if coef else 0)


def test_openrlhf_dotted_flags_and_no_kl_means_no_reference():
    launch = parse_launch("python -m openrlhf.cli.train_ppo_ray --actor.num_gpus_per_node 4 --ds.zero_stage 2 "
                          "--init_kl_coef 0 --pretrain m")
    assert launch.world_size == 4 and launch.stage == 2
    assert launch.training.method.setup.use_reference is False  # train_ppo_ray: init_kl_coef <= 0: no ref_model


@pytest.mark.parametrize(("command", "words"), [
    ("ray job submit --address x", "names no entrypoint"),
    ("ray job submit --", "no entrypoint after --"),
    ("ray start --head", "only 'ray job submit"),
    ("ray job submit -- bash run.sh", "not a launcher"),
    ("python -m openrlhf.cli.train_dpo --zero_stage 7 --pretrain m", "ZeRO stage 0 to 3"),
    ("python -m openrlhf.cli.train_ppo_ray --actor_num_gpus_per_node 0", "starts no process"),
    ("python -m openrlhf.cli.train_ppo_ray --vllm_gpu_memory_utilization lots", "expected a number"),
    ("swift rlhf --rlhf_type gkd --model m", "ms-swift's rlhf types"),
    ("NPROC_PER_NODE=x swift sft --model m", "NPROC_PER_NODE"),
])
def test_bad_trainer_launch_commands_are_one_line(command, words):
    with pytest.raises(TrainerInputError) as caught:
        parse_launch(command)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_swift_trains_lora_by_default_and_says_so():
    """ms-swift TunerArguments.train_type defaults to lora (3.x; tuner_type later): no reference copy for DPO
    without --ref_model, and the adapter read as ms-swift's defaults (config/peft_reader.py)."""
    launch = parse_launch("swift rlhf --rlhf_type dpo --model m")
    setup = launch.training.method.setup
    assert setup.use_reference is False
    assert dict(setup.origin)["use_reference"].startswith("ms-swift's default --train_type lora")
    peft = launch.training.peft
    assert peft is not None and (peft.method, peft.r, peft.target_modules, peft.dropout) == ("lora", 8, "all-linear",
                                                                                             0.05)
    full = parse_launch("swift rlhf --rlhf_type dpo --model m --tuner_type full")
    assert full.training.method.setup.use_reference is None and full.training.method.setup.notes == ()
    assert full.training.peft is None
    named = parse_launch("swift rlhf --rlhf_type dpo --model m --ref_model r").training.method.setup
    assert named.use_reference is None and named.reference_model == "r"


def test_openrlhf_ppo_under_deepspeed_holds_every_model_on_every_gpu():
    # openrlhf/cli/train_ppo.py @ v0.5.1 (no Ray): one process builds and prepares actor, critic, reward and the
    # initial model, so none is on GPUs of its own (the OOM report OpenRLHF#519 ran it)
    launch = parse_launch("deepspeed --module openrlhf.cli.train_ppo --pretrain OpenRLHF/Llama-3-8b-sft-mixture "
                          "--reward_pretrain OpenRLHF/Llama-3-8b-rm-mixture --zero_stage 2 --adam_offload "
                          "--micro_train_batch_size 2 --prompt_max_len 1024 --generate_max_len 1024 --bf16")
    setup = launch.training.method.setup
    assert (setup.method, setup.trainer, setup.colocate_all_models) == (Method.PPO, TrainerFamily.OPENRLHF, True)
    ray = parse_launch("python -m openrlhf.cli.train_ppo_ray --actor_num_gpus_per_node 8 --pretrain m")
    assert not ray.training.method.setup.colocate_all_models


@pytest.mark.parametrize(("flags", "completion"), [("--response_length 512", 512), ("--max_new_tokens 256", 256),
                                                   ("--response_length 512 --max_completion_length 128", 512),
                                                   ("--max_completion_length 128", 128)])
def test_swift_reads_its_older_names_for_the_completion_length(flags, completion):
    # RLHFArguments._init_max_completion_length (swift/arguments/rlhf_args.py @ v4.6.0): response_length or
    # max_new_tokens or max_completion_length; the PPO examples say --response_length
    setup = parse_launch(f"swift rlhf --rlhf_type ppo --model m --max_length 2048 {flags}").training.method.setup
    assert setup.generation.max_completion_length == completion


def test_openrlhf_0_11_dotted_flags_say_vllm_colocation_and_the_models():
    # OpenRLHF 0.10+ spells its flags in groups (openrlhf/cli/train_ppo_ray.py @ v0.11.0): --vllm.num_engines,
    # --train.colocate_all, --vllm.enable_sleep, ... read as their 0.8 names, not dropped (a colocated vLLM read as
    # none, the actor's model unnamed)
    launch = parse_launch("python -m openrlhf.cli.train_ppo_ray --actor.num_gpus_per_node 8 --train.colocate_all "
                          "--vllm.num_engines 4 --vllm.tensor_parallel_size 2 --vllm.gpu_memory_utilization 0.5 "
                          "--vllm.enable_sleep --ds.enable_sleep --actor.model_name_or_path m "
                          "--reward.model_name_or_path rm --critic.model_name_or_path cm --algo.kl.init_coef 0 "
                          "--rollout.n_samples_per_prompt 8 --rollout.max_new_tokens 1024 "
                          "--train.micro_batch_size 2 --ds.lora.rank 16")
    setup = launch.training.method.setup
    gen = setup.generation
    assert launch.training.model == "m" and setup.colocate_all_models is True
    assert (gen.use_vllm, gen.vllm_mode, gen.vllm_num_gpus, gen.vllm_gpu_memory_utilization) == \
        (True, VllmMode.COLOCATE, 8, 0.5)
    assert (gen.vllm_sleep_level, gen.offload_model, gen.offload_optimizer) == (1, True, True)
    assert (gen.num_generations, gen.max_completion_length) == (8, 1024)
    assert {p.role: p.model for p in setup.placements}[ModelRole.REWARD] == "rm"
    assert {p.role: p.model for p in setup.placements}[ModelRole.CRITIC] == "cm"
    assert setup.use_reference is False  # init_kl_coef 0: no reference model



def test_openrlhf_0_11_dotted_flags_say_the_models_and_the_trainer_s_arguments():
    # openrlhf/cli/train_ppo_ray.py @ v0.11.0: --reward.remote_url (no reward model), --algo.advantage.estimator
    # (no critic but for gae), --actor.gradient_checkpointing_enable, --ds.param_dtype, --ds.attn_implementation,
    # --data.dataloader_num_workers: each read as its older name, none "ignored"
    from zeroadvisor.memory.method import critic_loaded, reward_loaded

    launch = parse_launch("python -m openrlhf.cli.train_ppo_ray --reward.remote_url http://rm:5000 "
                          "--algo.advantage.estimator group_norm --actor.gradient_checkpointing_enable "
                          "--ds.param_dtype fp16 --ds.attn_implementation eager --data.dataloader_num_workers 4 "
                          "--ds.use_liger_kernel")
    training, setup = launch.training, launch.training.method.setup
    assert not critic_loaded(setup) and not reward_loaded(setup)
    assert training.checkpointing is True and training.attention is False
    assert (training.get("fp16"), training.get("bf16")) == (True, False)
    assert training.get("dataloader_num_workers") == 4 and training.get("use_liger_kernel") is True
    assert not any("ignored" in note for note in launch.notes)
    dpo = parse_launch("deepspeed --module openrlhf.cli.train_dpo --model.model_name_or_path m "
                       "--ref.model_name_or_path r --model.beta 0.3 --model.gradient_checkpointing_enable")
    assert dpo.training.model == "m" and dpo.training.method.setup.reference_model == "r"
    assert dpo.training.method.setup.beta == 0.3 and dpo.training.checkpointing is True


@pytest.mark.parametrize(("command", "fused"), [
    ("deepspeed --module openrlhf.cli.train_dpo --flash_attn --bf16", True),
    ("deepspeed --module openrlhf.cli.train_dpo --attn_implementation sdpa", True),
    ("deepspeed --module openrlhf.cli.train_dpo --ds.attn_implementation eager", False),
    ("deepspeed --module openrlhf.cli.train_dpo --bf16", None),  # silent: the release decides (inputs/run.py)
    ("swift sft --model m --attn_impl eager", False),
    ("swift sft --model m --attn_impl flash_attn", True),
])
def test_the_attention_kernel_is_read_from_the_command(command, fused):
    assert parse_launch(command).training.attention is fused


LF_DPO = ("model_name_or_path: Qwen/Qwen2.5-7B\nstage: dpo\ndo_train: true\nfinetuning_type: full\npref_beta: 0.1\n"
          "deepspeed: examples/deepspeed/ds_z3_config.json\ncutoff_len: 2048\nper_device_train_batch_size: 1\n"
          "bf16: true\n")


def test_llamafactory_cli_reads_its_yaml_overrides_and_torchrun_world(tmp_path):
    """llamafactory/launcher.py: train runs torchrun with NPROC_PER_NODE x NNODES processes; hparams/parser.py
    read_args: the YAML with OmegaConf key=value overrides after it, typed as YAML (quantization_bit=4 is 4)."""
    (tmp_path / "dpo.yaml").write_text(LF_DPO)
    launch = parse_launch("NPROC_PER_NODE=8 NNODES=2 llamafactory-cli train dpo.yaml cutoff_len=4096 "
                          "finetuning_type=lora quantization_bit=4", cwd=str(tmp_path))
    assert (launch.world_size, launch.per_node, launch.launcher) == (16, 8, "torchrun")
    training = launch.training
    assert training.project == "llama-factory" and training.sequence_length == 4096
    assert training.deepspeed == "examples/deepspeed/ds_z3_config.json" and training.get("bf16") is True
    setup = training.method.setup
    assert (setup.method, setup.trainer) == (Method.DPO, TrainerFamily.LLAMA_FACTORY)
    assert training.peft is not None and (training.peft.method, training.peft.quantization) == ("qlora", "4bit")
    assert "cutoff_len=4096" in training.sequence_from
    # from 0.9.3 its torchrun runs with expandable segments unless OPTIM_TORCH=0
    assert launch.cli_env is not None and launch.cli_env.since == "0.9.3"
    assert dict(launch.cli_env.values)["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    off = parse_launch("OPTIM_TORCH=0 NPROC_PER_NODE=8 lmf train dpo.yaml", cwd=str(tmp_path))
    assert off.cli_env is None and off.world_size == 8


def test_llamafactory_cli_flags_and_its_one_process_and_unknown_worlds(tmp_path):
    flags = parse_launch("FORCE_TORCHRUN=1 NPROC_PER_NODE=4 lmf train --model_name_or_path m --stage sft --do_train "
                         "--finetuning_type lora --lora_target all --quantization_bit 8 --cutoff_len 1024 --bf16 true")
    assert flags.world_size == 4 and flags.training.sequence_length == 1024 and flags.training.get("bf16") is True
    assert flags.training.peft is not None and flags.training.peft.quantization == "8bit"
    assert flags.training.method.setup.trainer is TrainerFamily.LLAMA_FACTORY
    (tmp_path / "dpo.yaml").write_text(LF_DPO)
    (tmp_path / "sft.yaml").write_text(LF_DPO.replace("deepspeed: examples/deepspeed/ds_z3_config.json\n", ""))
    one = parse_launch("CUDA_VISIBLE_DEVICES=0 NPROC_PER_NODE=8 llamafactory-cli train sft.yaml", cwd=str(tmp_path))
    assert (one.world_size, one.launcher) == (1, "python") and one.cli_env is None
    forced = parse_launch("FORCE_TORCHRUN=1 CUDA_VISIBLE_DEVICES=0 lmf train dpo.yaml", cwd=str(tmp_path))
    assert (forced.world_size, forced.launcher) == (1, "torchrun")
    visible = parse_launch("CUDA_VISIBLE_DEVICES=0,1,2,3 llamafactory-cli train dpo.yaml", cwd=str(tmp_path))
    assert visible.world_size == 4
    unknown = parse_launch("llamafactory-cli train dpo.yaml", cwd=str(tmp_path))
    assert unknown.world_size is None and "NPROC_PER_NODE" in unknown.world_missing


@pytest.mark.parametrize(("command", "words"), [
    ("llamafactory-cli webui", "llamafactory-cli train CONFIG.yaml"),
    ("lmf", "is not the LLaMA-Factory training command"),
    ("NPROC_PER_NODE=two llamafactory-cli train --stage sft", "NPROC_PER_NODE"),
    ("llamafactory-cli train missing.yaml", "missing.yaml: no such file"),
    ("CUDA_VISIBLE_DEVICES=3 llamafactory-cli train --stage sft --deepspeed ds.json", "FORCE_TORCHRUN=1"),
])
def test_bad_llamafactory_cli_commands_are_one_line(command, words, tmp_path):
    with pytest.raises((TrainerInputError, MissingInput)) as caught:
        parse_launch(command, cwd=str(tmp_path))
    assert words in str(caught.value) and "\n" not in str(caught.value)


AX_DPO = ("base_model: meta-llama/Llama-2-7b-hf\nrl: dpo\nsequence_len: 2048\nmicro_batch_size: 1\nbf16: true\n"
          "deepspeed: ds.json\ngradient_checkpointing: true\n")


def test_axolotl_train_is_read_as_the_launch_command_it_runs(tmp_path):
    """axolotl/cli/utils/train.py launch_training: accelerate launch (the default) with --num_processes and the
    arguments after --, torchrun with those arguments, or one process (--launcher python)."""
    (tmp_path / "dpo.yml").write_text(AX_DPO)
    default = parse_launch("axolotl train dpo.yml --num-processes 8", cwd=str(tmp_path))
    assert (default.launcher, default.world_size) == ("accelerate launch", 8)
    setup = default.training.method.setup
    assert (setup.method, setup.trainer) == (Method.DPO, TrainerFamily.AXOLOTL)
    assert default.training.sequence_length == 2048 and default.training.deepspeed == "ds.json"
    torchrun = parse_launch("axolotl train dpo.yml --launcher torchrun -- --nproc_per_node 4 --nnodes 2",
                            cwd=str(tmp_path))
    assert (torchrun.launcher, torchrun.world_size, torchrun.per_node) == ("torchrun", 8, 4)
    assert parse_launch("axolotl train dpo.yml --launcher=python", cwd=str(tmp_path)).world_size == 1
    unknown = parse_launch("axolotl train dpo.yml", cwd=str(tmp_path))  # accelerate's default config decides
    assert unknown.world_size is None and "--num_processes" in unknown.world_missing


@pytest.mark.parametrize(("command", "words"), [
    ("axolotl preprocess dpo.yml", "axolotl train CONFIG.yml"),
    ("axolotl train --launcher deepspeed dpo.yml", "--launcher expects one of accelerate, torchrun, python"),
    ("axolotl train --sweep sweep.yml dpo.yml", "one run per permutation"),
    ("axolotl train --launcher", "needs a value"),
    ("axolotl train --num-processes 8", "names no config file"),
])
def test_bad_axolotl_commands_are_one_line(command, words, tmp_path):
    (tmp_path / "dpo.yml").write_text(AX_DPO)
    with pytest.raises(TrainerInputError) as caught:
        parse_launch(command, cwd=str(tmp_path))
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_llama_factory_s_expandable_segments_follow_its_pinned_release(tmp_path, monkeypatch):
    """llamafactory/launcher.py sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True from 0.9.3 (over the user's
    own); a pin of an earlier release leaves the environment as it is; without a pin 0.9.3 or later is taken."""
    from zeroadvisor.inputs.run import alloc_conf
    from zeroadvisor.inputs.trainer import read_trainer

    monkeypatch.chdir(tmp_path)
    (tmp_path / "dpo.yaml").write_text(LF_DPO)
    launch = "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128 NPROC_PER_NODE=8 llamafactory-cli train dpo.yaml"
    trainer = read_trainer(None, launch)
    value, notes = alloc_conf(trainer, {}, pin_start=str(tmp_path / "dpo.yaml"))
    assert value == "expandable_segments:True" and "not pinned" in notes[0]
    (tmp_path / "requirements.txt").write_text("llamafactory==0.9.2\n")
    assert alloc_conf(trainer, {}, pin_start=str(tmp_path / "dpo.yaml")) == ("max_split_size_mb:128", [])
    (tmp_path / "requirements.txt").write_text("llamafactory==0.9.4\n")
    value, notes = alloc_conf(trainer, {}, pin_start=str(tmp_path / "dpo.yaml"))
    assert value == "expandable_segments:True" and "0.9.4" in notes[0]


@pytest.mark.parametrize(("command", "degree"), [
    ("swift sft --model m --sequence_parallel_size 4", 4),
    ("python -m openrlhf.cli.train_ppo_ray --ring_attn_size 2", 2),
    ("python -m openrlhf.cli.train_ppo_ray --ds.ring_attn_size 8", 8),
    ("swift sft --model m", None),
])
def test_the_trainer_s_own_sequence_parallel_degree_is_read(command, degree):
    # ms-swift's Ulysses (--sequence_parallel_size) and OpenRLHF's ring attention (--ring_attn_size,
    # --ds.ring_attn_size at 0.10+): the layout's sequence degree (config/training_args.py SEQUENCE_PARALLEL_KEYS)
    training = parse_launch(command).training
    assert training.sequence_parallel == degree
    assert (training.sequence_parallel_from != "") == (degree is not None)


@pytest.mark.parametrize("value", ["0", "two", "99999999"])
def test_a_bad_sequence_parallel_degree_is_one_line(value):
    with pytest.raises(TrainerInputError, match="--sequence_parallel_size"):
        parse_launch(f"swift sft --model m --sequence_parallel_size {value}")


@pytest.mark.parametrize(("flags", "words"), [
    ("--colocate_actor_ref --ref_num_gpus_per_node 4", "the reference colocated with the actor needs the actor's 1 x"),
    ("--colocate_all_models --actor_num_nodes 2", "the reference colocated with the actor needs the actor's 2 x 8"),
    ("--colocate_all_models --vllm_num_engines 2", "but 2 engine(s) x tensor parallel 1 is 2"),
    ("--train.colocate_all --vllm.num_engines 4 --vllm.tensor_parallel_size 4", "x tensor parallel 4 is 16"),
    ("--colocate_critic_reward --reward_num_gpus_per_node 4", "the reward model colocated with the critic"),
    ("--colocate_actor_ref --init_kl_coef abc", "--init_kl_coef: expected a number"),
])
def test_openrlhf_s_placement_asserts_are_one_line(flags, words):
    # train_ppo_ray.py train @ v0.8.5 (v0.11.0 with the dotted names) asserts these before it builds a model
    with pytest.raises(TrainerInputError, match=re.escape(words)):  # a LaunchError, or the reader's own
        parse_launch(f"python -m openrlhf.cli.train_ppo_ray --pretrain m {flags}")


@pytest.mark.parametrize("flags", [
    "--colocate_actor_ref --ref_num_gpus_per_node 4 --init_kl_coef 0",  # no reference model: nothing to place
    "--colocate_all_models --vllm_num_engines 2 --async_train",  # async: the engines are not colocated
    "--colocate_critic_reward --reward_num_gpus_per_node 4 --advantage_estimator group_norm",  # no critic
    "--colocate_all_models --vllm_num_engines 4 --vllm_tensor_parallel_size 2",
])
def test_openrlhf_placements_it_runs_are_read(flags):
    assert parse_launch(f"python -m openrlhf.cli.train_ppo_ray --pretrain m {flags}").training.method is not None


def test_an_unread_option_s_further_values_are_its_own():
    """ms-swift's --reward_funcs takes several words (nargs="+"); before, each word after the first was named as an
    argument of its own in the note on what was not read ("--reward_funcs, format")."""
    launch = parse_launch("NPROC_PER_NODE=8 swift rlhf --rlhf_type grpo --model m --reward_funcs accuracy format "
                          "cosine --max_completion_length 1024 --deepspeed zero3")
    ignored = [note for note in (*launch.notes, *launch.training.notes) if "were ignored" in note]
    assert ignored and ignored[0].endswith("were ignored: --reward_funcs"), ignored
    assert launch.training.method.setup.generation.max_completion_length == 1024


def test_swift_grpo_reads_what_decides_its_scoring_path():
    """ms-swift computes the completion's entropy only for --log_entropy or --top_entropy_quantile < 1
    (``self.compute_entropy``, swift/rlhf_trainers/grpo_trainer.py @ v4.5.2) and sends --padding_free batches to its
    local forward from 3.11 (memory/method.py swift_grpo_scoring): read, not listed as ignored."""
    base = "NPROC_PER_NODE=8 swift rlhf --rlhf_type grpo --model m --deepspeed zero3"
    plain = parse_launch(base).training.method.setup
    assert (plain.entropy_computed, plain.padding_free) == (None, None)
    for flags, entropy in (("--log_entropy true", True), ("--top_entropy_quantile 0.2", True),
                           ("--top_entropy_quantile 1.0 --log_entropy false", False)):
        launch = parse_launch(f"{base} {flags} --padding_free true")
        setup = launch.training.method.setup
        assert (setup.entropy_computed, setup.padding_free) == (entropy, True), flags
        ignored = [note for note in (*launch.notes, *launch.training.notes) if "were ignored" in note]
        assert not any(word in " ".join(ignored) for word in ("entropy", "padding_free")), ignored
    with pytest.raises(TrainerInputError, match="top_entropy_quantile: expected a share"):
        parse_launch(f"{base} --top_entropy_quantile 1.5")
