"""Random configs never crash lint, estimate or check: every bad value becomes a finding."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zeroadvisor.advisor.check import CheckOptions, check_document, combined_patch
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.config.source import parse
from zeroadvisor.deepspeed import schema
from zeroadvisor.fix.editor import patched_text
from zeroadvisor.memory.cluster import Cluster
from zeroadvisor.model.spec import ModelSpec, TrainingShape

TOP = list(schema.load()["properties"])
ZERO = list(schema.node("zero_optimization")["properties"])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**12),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from(["auto", "cpu", "nvme", "none", "2", "abc", "", "fp16", "Adam", "WarmupLR"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.sampled_from([*ZERO, "device", "x"]), inner,
                                                                      max_size=4)), max_leaves=8)
configs = st.dictionaries(st.sampled_from([*TOP, "zero_optimisation", "_comment"]), values, max_size=8)
zero_blocks = st.dictionaries(st.sampled_from(ZERO), values, max_size=6)

OPTIONS = CheckOptions(model=ModelSpec(parameters=7_000_000_000, num_layers=32, hidden_size=4096,
                                       num_attention_heads=32, intermediate_size=11008, vocab_size=32000),
                       shape=TrainingShape(sequence_length=2048),
                       cluster=Cluster(gpus=8, gpu_memory=80 * 2**30, cpu_memory=512 * 10**9))


@pytest.mark.slow  # a property test
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs, zero_blocks)
def test_check_never_raises_and_fixes_apply(config, zero):
    config = {**config, "zero_optimization": zero} if zero else config
    doc = parse(json.dumps(config, indent=2), "fuzz.json")
    result = check_document(doc, OPTIONS)
    for finding in result.findings:
        assert finding.message and "\n" not in finding.message
    patch = combined_patch(result.findings)
    if patch:
        # json.dumps text holds no placeholder and the findings' fixes are finite: no refusal is
        # documented for this input, so an EditError here is a defect and fails the test.
        new_text = patched_text(doc, patch)
        assert parse(new_text).data == mp.apply(doc.data, patch)
        assert patched_text(parse(new_text), patch) == new_text


# -- the parsers around the config: each input gives a result or the parser's own error --------------

COUNTS = st.sampled_from(["0", "1", "2", "8", "-1", "1.5", "²", "٣", "x", "", "gpu", "1:4", "9" * 5000,
                          str(2**24 + 1), "1" + "0" * 400])
LAUNCH_WORDS = st.lists(st.one_of(COUNTS, st.sampled_from([
    "--nnodes", "--nproc-per-node", "--num_gpus", "--num_nodes", "--num_processes", "--num_machines", "--zero_stage",
    "--include", "--hostfile", "--max_seq_length", "--per_device_train_batch_size", "--deepspeed", "ds.json",
    "train.py", "--", "-m", "--bf16",
    # the training method's flags (issue 35): TRL's, ms-swift's and OpenRLHF's
    "--beta", "--num_generations", "--use_vllm", "--vllm_mode", "--vllm_gpu_memory_utilization", "--rlhf_type",
    "--train_type", "--ref_num_gpus_per_node", "--actor_num_nodes", "--actor.num_gpus_per_node",
    "--vllm_num_engines", "--colocate_all_models", "--init_kl_coef", "--micro_train_batch_size", "--max_len",
    "openrlhf.cli.train_ppo_ray", "dpo", "rlhf", "job", "submit", "--config", "0.5", "colocate", "lora",
    # LLaMA-Factory's and axolotl's own commands
    "train", "quantization_bit=8", "--quantization_bit", "--launcher", "--num-processes", "torchrun", "python",
    "--sweep", "x.yml", "--stage", "use_unsloth=true", "--cutoff_len",
    # the attention, sequence-parallel, packing and placement flags read since (config/training_args.py, launch.py)
    "--flash_attn", "--attn_implementation", "eager", "--attn_impl", "--sequence_parallel_size", "--ring_attn_size",
    "--ds.ring_attn_size", "--packing", "--colocate_actor_ref", "--colocate_critic_reward", "--async_train",
    "--ref_num_nodes", "--reward_num_gpus_per_node", "--critic_num_gpus_per_node", "--advantage_estimator",
    "--vllm_tensor_parallel_size", "--deepspeed_enable_sleep", "--ds.param_dtype", "--param_dtype", "fp16",
    "--entropy_loss_coef", "--actor.entropy_coef"])),
    max_size=8)
LAUNCHERS = st.sampled_from([["torchrun"], ["deepspeed"], ["accelerate", "launch"], ["python"],
                             ["CUDA_VISIBLE_DEVICES=", "torchrun"], ["CUDA_VISIBLE_DEVICES=0,1", "deepspeed"],
                             ["trl"], ["trl", "dpo"], ["NPROC_PER_NODE=8", "swift", "rlhf"], ["swift"],
                             ["ray", "job", "submit", "--"], ["python", "-m", "openrlhf.cli.train_ppo_ray"],
                             ["deepspeed", "--module", "openrlhf.cli.train_dpo"], ["ray"],
                             ["llamafactory-cli"], ["NPROC_PER_NODE=8", "llamafactory-cli", "train"],
                             ["CUDA_VISIBLE_DEVICES=0", "FORCE_TORCHRUN=1", "lmf", "train"], ["OPTIM_TORCH=x", "lmf"],
                             ["axolotl"], ["axolotl", "train"], ["NNODES=2", "NPROC_PER_NODE=x", "lmf", "train"]])


@pytest.mark.slow
@settings(max_examples=200)
@given(LAUNCHERS, LAUNCH_WORDS)
def test_the_launch_parser_raises_only_its_error(launcher, words):
    from zeroadvisor.config.launch import LaunchError, parse_launch
    from zeroadvisor.config.reader import InputError
    from zeroadvisor.config.training_args import TrainerInputError

    try:
        launch = parse_launch([*launcher, *words])
    except (LaunchError, TrainerInputError, InputError) as err:  # InputError: an arguments file that is not here
        assert "\n" not in str(err) and len(str(err)) < 1000
        return
    assert launch.world_size is None or 1 <= launch.world_size


TRAINER_VALUES = st.one_of(COUNTS, st.integers(-2, 10**400), st.floats(), st.none(), st.booleans(),
                           st.sampled_from(["auto", "bf16", [], {}]))
TRAINER = st.dictionaries(st.sampled_from([
    "per_device_train_batch_size", "gradient_accumulation_steps", "max_seq_length", "bf16", "gradient_checkpointing",
    "max_grad_norm", "optim", "deepspeed", "micro_batch_size", "batch_size", "sequence_len", "base_model",
    "cutoff_len", "model_max_length", "use_liger_kernel",
    # the training method's keys (issue 35): TRL's fields, LLaMA-Factory's, axolotl's
    "beta", "loss_type", "precompute_ref_log_probs", "num_generations", "use_vllm", "vllm_mode",
    "vllm_gpu_memory_utilization", "max_completion_length", "use_peft", "ref_model", "stage", "pref_loss",
    "pref_beta", "finetuning_type", "rl", "rl_beta", "trl", "reward_model",
    # the attention kernel, the sequence degree and packing (config/training_args.py)
    "attn_implementation", "flash_attn", "flash_attention", "eager_attention", "sdp_attention",
    "context_parallel_size", "sequence_parallel_degree", "packing", "neat_packing", "sample_packing",
    "pad_to_sequence_len"]),
    st.one_of(TRAINER_VALUES, st.sampled_from(["dpo", "grpo", "orpo", "simpo", "rm", "lora", "colocate"]),
              st.dictionaries(st.sampled_from(["beta", "num_generations", "use_vllm", "vllm_mode"]), TRAINER_VALUES,
                              max_size=3)), max_size=6)


@pytest.mark.slow
@settings(max_examples=200)
@given(TRAINER)
def test_the_trainer_arguments_raise_only_their_error(data):
    from zeroadvisor.config.training_args import TrainerInputError, from_mapping

    try:
        from_mapping(data, "train.yaml")
    except TrainerInputError as err:
        assert "\n" not in str(err)


ACCELERATE = st.fixed_dictionaries({"distributed_type": st.sampled_from(["DEEPSPEED", "MULTI_GPU", "x"])}, optional={
    "num_processes": TRAINER_VALUES, "num_machines": TRAINER_VALUES, "mixed_precision": TRAINER_VALUES,
    "parallelism_config": st.one_of(TRAINER_VALUES, st.dictionaries(
        st.sampled_from(["parallelism_config_sp_size", "parallelism_config_sp_backend"]), TRAINER_VALUES, max_size=2)),
    "deepspeed_config": st.dictionaries(st.sampled_from(["zero_stage", "gradient_clipping", "offload_optimizer_device",
                                                         "gradient_accumulation_steps", "deepspeed_config_file"]),
                                        TRAINER_VALUES, max_size=4)})


@pytest.mark.slow
@settings(max_examples=150)
@given(ACCELERATE)
def test_an_accelerate_config_never_raises(data):
    from zeroadvisor.deepspeed import accelerate_map

    text = json.dumps(data, default=str)
    try:
        doc = parse(text, "accelerate.json")
    except ValueError:  # the reader's own limits (a 5,000-digit number): the config fuzz covers them
        return
    launch = accelerate_map.build(doc)
    assert launch.world_size is None or launch.world_size >= 1
    degree = accelerate_map.sequence_parallel(doc.data)
    assert degree is None or degree > 1


PROJECT_LINES = st.lists(st.one_of(
    st.sampled_from(["[cluster]", "[training]", "[run]", "[gpus.card]", "a = " + "[" * 3000 + "]" * 3000]),
    st.builds("{} = {}".format, st.sampled_from(["gpus", "gpus-per-node", "seq-len", "micro-batch", "cpu-cores",
                                                 "memory", "dense-tflops"]),
              st.sampled_from(["0", "8", "-1", "1.5", "9" * 5000, "1e400", '"x"', "[]"])),
    st.builds('{} = "{}"'.format, st.sampled_from(["gpu-memory", "headroom", "gpu", "cpu-memory", "select", "format",
                                                   "fail-on", "efficiency", "inter-node-bandwidth", "trainer"]),
              st.sampled_from(["1B", "80GiB", "1EB", "99.9999999999%", "10%", "x", "²", "A100-SXM4-80GB", "dpo",
                               "grpo", "DPO"]))),
    max_size=6)


@pytest.mark.slow
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(PROJECT_LINES)
def test_the_project_configuration_raises_only_its_error(tmp_path, lines):
    from zeroadvisor.config import project
    from zeroadvisor.config.project import ProjectConfigError
    from zeroadvisor.inputs import project as checked

    path = tmp_path / ".zeroadvisor.toml"
    path.write_text("\n".join(lines) + "\n")
    try:
        config = project.load(str(path))
        if config is not None:
            checked.forget()
            checked.checked(config)
    except ProjectConfigError as err:
        assert "\n" not in str(err) and len(str(err)) < 1000


@pytest.mark.slow
@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(TRAINER, st.sampled_from([None, "dpo", "grpo", "sft", "bogus", 3]))
def test_the_training_method_reaches_the_shape_or_one_documented_error(tmp_path, data, trainer):
    """Issue 35: any training-arguments file with the method's keys, and any --trainer, through the one builder:
    a shape whose method is one of the set, or one of the API's documented errors in one line."""
    from zeroadvisor.api import EXPECTED_ERRORS
    from zeroadvisor.inputs.command import Command
    from zeroadvisor.inputs.request import Request
    from zeroadvisor.inputs.run import build
    from zeroadvisor.vocab import Method

    path = tmp_path / "args.json"
    path.write_text(json.dumps(data, default=str))
    try:
        inputs = build(Request(Command.ESTIMATE, params="7B", gpus=8, gpu_memory="80GiB", training_args=str(path),
                               trainer=trainer))
    except EXPECTED_ERRORS as err:
        assert "\n" not in str(err) and len(str(err)) < 1000
        return
    assert inputs.shape.method.method in tuple(Method)
