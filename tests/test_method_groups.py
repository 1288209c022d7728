"""OpenRLHF's Ray actor groups: the reference / reward / critic models on GPUs of their own, judged there
(memory/groups.py). A group that cannot hold its model or its rollout forward fails the run, and the verdict
names it; the actor's own rows are unchanged."""

from __future__ import annotations

import json

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.advisor.check import CheckOptions, check_document
from zeroadvisor.config.launch import parse_launch
from zeroadvisor.config.method import Generation, MethodSetup, Placement
from zeroadvisor.config.source import parse
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.groups import group_gpus
from zeroadvisor.memory.method import critic_loaded
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape
from zeroadvisor.vocab import Method, ModelRole, TrainerFamily, Verdict

GB = 10**9
# Qwen3-8B (OpenRLHF#1066's model)
QWEN3_8B = spec_from_hf_config({"model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288,
                                "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
                                "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": False})
LLAMA2_7B = spec_from_hf_config({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
                                 "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
                                 "vocab_size": 32000})
# OpenRLHF's generated actor config: ZeRO-3 with --adam_offload, no optimizer block
ACTOR = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
         "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}
HOST = 2000 * GB


def grpo(ref_gpus: int, rollout: int, **kw) -> MethodSetup:
    """A Ray GRPO run (train_ppo_ray --advantage_estimator group_norm) with its reference on ``ref_gpus``."""
    return MethodSetup(method=Method.GRPO, trainer=TrainerFamily.OPENRLHF, trainer_version="0.8.5",
                       use_reference=True, beta=0.001,
                       generation=Generation(rollout_batch_size=rollout, use_vllm=True, vllm_num_gpus=2),
                       placements=(Placement(ModelRole.REFERENCE, num_nodes=1, gpus_per_node=ref_gpus),), **kw)


# The actor's own cards hold the same rollout forward as the reference (OpenRLHF's actor scores every micro batch
# with full-vocabulary logits too: memory/generation.py), so a group binds where its model is whole on its GPU and the
# actor's is partitioned: Qwen3-8B's 16.4 GB reference on one 32 GB card beside a 6 x 2,048-token forward (11.4 GB)
# does not fit, while the actor at ZeRO-3 over 8 such cards does
FORWARD_BOUND = {"seq": 2048, "gpus": 8, "gpu_gb": 32}
ROLLOUT = 6


def configured(setup: MethodSetup, spec=QWEN3_8B, seq: int = 12288, gpus: int = 4, gpu_gb: int = 80):
    e = estimate(ACTOR, spec, TrainingShape(seq, "full", method=setup),
                 Cluster(gpus=gpus, gpu_memory=gpu_gb * GB, cpu_memory=HOST))
    assert e.configured is not None
    return e.configured


def test_a_reference_group_of_one_gpu_that_cannot_hold_its_rollout_forward_does_not_fit():
    # 6 sequences of 2,048 tokens through the reference on its one GPU: the bf16 logits and their fp32 copy alone
    # are 6 B x 6 x 2048 x 151936 = 11.2 GB, beside its whole 16.4 GB copy
    st = configured(grpo(1, ROLLOUT), **FORWARD_BOUND)
    [group] = st.groups
    assert (group.role, group.gpus) == (ModelRole.REFERENCE, 1)
    forward = next(t for t in group.terms if t.key == "reference_forward")
    assert forward.nbytes >= 6 * ROLLOUT * 2048 * 151936
    assert "actor.py" in forward.source and "v0.8.5" in forward.source
    params = next(t for t in group.terms if t.key == "reference_params")
    assert params.nbytes == 2 * QWEN3_8B.parameters  # stage 3 kept, over the group's one GPU: a whole copy
    assert group.gpu - forward.nbytes < 32 * GB < group.gpu  # its model fits its card, not with the forward
    assert st.verdict == Verdict.DOES_NOT_FIT and st.binding_group == ModelRole.REFERENCE
    assert st.peak_gpu < 0.9 * 32 * GB  # the actor's own cards, with the same forward, are not what fails
    data = st.to_dict()
    assert data["binding_group"] == "reference" and data["groups"][0]["gpus"] == 1


def test_the_text_verdict_names_the_binding_group():
    options = CheckOptions(model=QWEN3_8B, shape=TrainingShape(2048, "full", method=grpo(1, ROLLOUT)),
                           cluster=Cluster(gpus=8, gpu_memory=32 * GB, cpu_memory=HOST))
    result = check_document(parse(json.dumps(ACTOR), "ds.json"), options)
    from zeroadvisor.report.overview import verdict_sentence

    assert result.estimate is not None
    sentence = verdict_sentence(result.estimate, None, "GiB")
    assert "does not fit" in sentence and "on the reference model's own GPU" in sentence


@pytest.mark.parametrize(("ref_gpus", "verdict", "binding"), [(1, Verdict.DOES_NOT_FIT, ModelRole.REFERENCE),
                                                              (8, Verdict.FITS, None)])
def test_enough_gpus_in_the_reference_group_fit(ref_gpus, verdict, binding):
    # a 7B reference at ZeRO-3 on 16 GB cards: whole on one GPU (13.5 GB + its forward), an eighth on eight
    st = configured(grpo(ref_gpus, 2), spec=LLAMA2_7B, seq=1024, gpus=8, gpu_gb=16)
    assert (st.verdict, st.binding_group) == (verdict, binding)
    assert st.groups[0].gpus == ref_gpus


def test_the_reward_model_has_no_vocabulary_logits_and_the_critic_trains_on_its_own_group():
    setup = MethodSetup(method=Method.PPO, trainer=TrainerFamily.OPENRLHF, trainer_version="0.8.5",
                        generation=Generation(rollout_batch_size=4))
    st = configured(setup, spec=LLAMA2_7B, seq=2048, gpus=8)
    roles = {g.role: g for g in st.groups}
    assert set(roles) == {ModelRole.REFERENCE, ModelRole.REWARD, ModelRole.CRITIC}
    assert all(g.gpus == 8 for g in st.groups)  # train_ppo_ray's default: 1 node x 8 GPUs
    reward = next(t for t in roles[ModelRole.REWARD].terms if t.key == "reward_forward")
    reference = next(t for t in roles[ModelRole.REFERENCE].terms if t.key == "reference_forward")
    assert reward.nbytes < 6 * 4 * 2048 * 32000 <= reference.nbytes
    critic = {t.key for t in roles[ModelRole.CRITIC].terms}
    assert {"critic_lp_params", "critic_optimizer_state", "critic_group_activations", "cuda_context"} <= critic
    assert not {"reference_model", "reward_model", "critic"} & set(st.per_gpu)  # the actor's rows as before


def test_colocated_models_have_no_groups():
    st = configured(grpo(1, 32, colocate_all_models=True))
    assert st.groups == () and st.binding_group is None
    assert group_gpus(MethodSetup(method=Method.PPO, trainer=TrainerFamily.OPENRLHF), ModelRole.CRITIC) == 8


def test_a_grpo_launch_without_gae_or_with_a_remote_reward_has_no_critic_or_reward_group():
    # train_ppo_ray: a critic only for --advantage_estimator gae, no reward model with --remote_rm_url (v0.8.5)
    launch = parse_launch("python -m openrlhf.cli.train_ppo_ray --ref_num_nodes 1 --ref_num_gpus_per_node 1 "
                          "--advantage_estimator group_norm --remote_rm_url http://rm:5000/get_reward "
                          "--micro_rollout_batch_size 32 --prompt_max_len 4096 --generate_max_len 8192 "
                          "--zero_stage 3 --bf16 --adam_offload --init_kl_coef 0.001 --vllm_num_engines 1 "
                          "--vllm_tensor_parallel_size 2")
    setup = launch.training.method.setup
    assert not critic_loaded(setup)
    st = configured(setup)
    assert [g.role for g in st.groups] == [ModelRole.REFERENCE]
    # the reference's rollout forward alone passes its one card (the actor's own scoring forward at that micro
    # batch does too: memory/generation.py)
    assert st.verdict == Verdict.DOES_NOT_FIT and st.groups[0].gpu > 80 * GB
    gae = parse_launch("python -m openrlhf.cli.train_ppo_ray --advantage_estimator gae --zero_stage 3")
    assert critic_loaded(gae.training.method.setup)


def test_the_check_text_adds_one_line_per_group_under_the_actors_breakdown():
    from zeroadvisor.report.check_text import options_lines
    from zeroadvisor.report.estimate_text import Style

    e = estimate(ACTOR, QWEN3_8B, TrainingShape(12288, "full", method=grpo(1, 32)),
                 Cluster(gpus=4, gpu_memory=80 * GB, cpu_memory=HOST))
    lines = options_lines(e, None, "GiB", Style(200))
    at = next(i for i, line in enumerate(lines) if "all DeepSpeed's estimator counts" in line)
    group = e.configured.groups[0]
    assert lines[at + 1].startswith(f"On the reference model's own GPU: {group.gpu / 2**30:.2f} GiB = reference "
                                    "model 15.26 + ")
    assert "critic" not in " ".join(lines) and "reward model" not in " ".join(lines)


def test_the_does_not_fit_finding_names_the_group_and_its_flags():
    # the actor fits on its 8 cards; the reference's one GPU holds its 16 GB copy and 11 GB of logits
    options = CheckOptions(model=QWEN3_8B, shape=TrainingShape(2048, "full", method=grpo(1, ROLLOUT),
                                                               flash_attention=True),
                           cluster=Cluster(gpus=8, gpu_memory=32 * GB, cpu_memory=HOST))
    result = check_document(parse(json.dumps(ACTOR), "ds.json"), options)
    [finding] = [f for f in result.findings if f.code == "ZA801"]
    assert "while training on the reference model's own GPU (reference model 15.26 GiB" in finding.message
    assert "--micro_rollout_batch_size" in finding.message and "--ref_num_gpus_per_node" in finding.message
    assert result.estimate is not None and result.estimate.configured is not None
    assert result.estimate.configured.peak_gpu < 0.9 * 32 * GB


def test_openrlhf_builds_its_reference_whole_with_a_lora_actor():
    # ReferenceModelActor loads --pretrain without --lora_rank (trainer/ray/launcher.py @ v0.8.5); TRL disables
    # the adapter instead and loads none
    from dataclasses import replace

    from zeroadvisor.memory.method import has_reference

    lora = replace(LLAMA2_7B, trainable_parameters=20_000_000, peft="LoRA r=16 on all-linear")
    assert has_reference(grpo(1, 8), lora)
    assert not has_reference(MethodSetup(method=Method.DPO, trainer=TrainerFamily.TRL), lora)


def test_the_tables_name_the_binding_group_beside_the_phase():
    from zeroadvisor.report.markdown import options_table

    e = estimate(ACTOR, QWEN3_8B, TrainingShape(2048, "full", method=grpo(1, ROLLOUT)),
                 Cluster(gpus=8, gpu_memory=32 * GB, cpu_memory=HOST))
    rows = options_table(e, None, "GiB")[2:]
    named = [" | train (reference) | " in row for row in rows]
    # ZeRO-3 with the optimizer offloaded leaves the actor's cards below the reference's: the group binds there;
    # the options that keep more of the actor on its cards bind on the actor ("train" alone)
    assert named == [st.binding_group == ModelRole.REFERENCE for st in e.stages]
    assert any(named) and not all(named)
    assert e.configured is not None and e.configured.binding_group == ModelRole.REFERENCE


def _launch_setup(flags: str) -> MethodSetup:
    return parse_launch(f"python -m openrlhf.cli.train_ppo_ray --zero_stage 3 --bf16 --adam_offload "
                        f"--micro_rollout_batch_size 4 --advantage_estimator gae {flags}").training.method.setup


def test_colocate_actor_ref_puts_the_reference_on_the_actors_gpus():
    # train_ppo_ray.py @ v0.8.5: --colocate_actor_ref gives the actor and the reference one placement group; the
    # reference partitions over the actor's GPUs at stage 3 and no reference group is judged
    setup = _launch_setup("--colocate_actor_ref --ref_num_gpus_per_node 8 --actor_num_gpus_per_node 8")
    assert setup.colocate_actor_ref is True and setup.colocate_critic_reward is None
    apart = configured(_launch_setup("--ref_num_gpus_per_node 8"), spec=LLAMA2_7B, seq=2048, gpus=8)
    together = configured(setup, spec=LLAMA2_7B, seq=2048, gpus=8)
    assert ModelRole.REFERENCE in {g.role for g in apart.groups} and "reference_model" not in apart.per_gpu
    assert {g.role for g in together.groups} == {ModelRole.REWARD, ModelRole.CRITIC}
    assert together.per_gpu["reference_model"] == -(-LLAMA2_7B.parameters // 8) * 2
    assert together.peak_gpu >= apart.peak_gpu + together.per_gpu["reference_model"]


def test_colocate_critic_reward_puts_the_reward_model_on_the_critics_gpus():
    setup = _launch_setup("--colocate_critic_reward --critic_num_gpus_per_node 4 --reward_num_gpus_per_node 4")
    apart = configured(_launch_setup("--critic_num_gpus_per_node 4 --reward_num_gpus_per_node 4"),
                       spec=LLAMA2_7B, seq=2048, gpus=8)
    together = configured(setup, spec=LLAMA2_7B, seq=2048, gpus=8)
    assert {g.role for g in apart.groups} == {ModelRole.REFERENCE, ModelRole.REWARD, ModelRole.CRITIC}
    [critic] = [g for g in together.groups if g.role == ModelRole.CRITIC]
    assert {g.role for g in together.groups} == {ModelRole.REFERENCE, ModelRole.CRITIC}
    assert critic.shares == (ModelRole.REWARD,) and "with the reward model" in critic.words
    assert [g["shares"] for g in together.to_dict()["groups"] if g["role"] == "critic"] == [["reward"]]
    [alone] = [g for g in apart.groups if g.role == ModelRole.CRITIC]
    [reward] = [g for g in apart.groups if g.role == ModelRole.REWARD]
    # the reward's states join the critic's; its forward runs at another moment than the critic's step, so the
    # critic group's activations are the larger of the two, and one CUDA context
    reward_params = next(t.nbytes for t in reward.terms if t.key == "reward_params")
    # stage 3 kept for the reward model, partitioned over the critic's 4 GPUs, which its group shares
    assert critic.rows["reward_model"] == reward_params == 2 * -(-LLAMA2_7B.parameters // 4)
    assert alone.gpu + reward_params <= critic.gpu < alone.gpu + reward.gpu


@pytest.mark.parametrize("module", ["train_dpo", "train_kto"])
def test_openrlhf_deepspeed_launcher_entry_points_keep_the_reference_on_the_policys_gpus(module):
    # cli/train_dpo.py, train_kto.py @ v0.8.5: the reference is built and prepared in the policy's own process
    launch = parse_launch(f"deepspeed --module openrlhf.cli.{module} --zero_stage 3 --bf16 --max_len 2048")
    setup = launch.training.method.setup
    assert setup.trainer == TrainerFamily.OPENRLHF and setup.colocate_all_models
    st = configured(setup, spec=LLAMA2_7B, seq=2048, gpus=8)
    assert st.groups == ()
    # ACTOR is a ZeRO-3 config: the reference kept at stage 3, over the policy's 8 GPUs
    assert st.per_gpu["reference_model"] == 2 * -(-LLAMA2_7B.parameters // 8)


PPO_COLOCATED = ("python3 -m openrlhf.cli.train_ppo_ray --actor_num_nodes 1 --actor_num_gpus_per_node 8 "
                 "--colocate_all_models --pretrain {model} --reward_pretrain {model} --micro_train_batch_size 2 "
                 "--train_batch_size 128 --prompt_max_len 1024 --generate_max_len 1024 --zero_stage 3 --bf16 "
                 "--init_kl_coef 0.01 --gradient_checkpointing")


def _ppo(cli, tmp_path, flags: str, *more: str) -> dict:
    import json

    (tmp_path / "model").mkdir(exist_ok=True)
    (tmp_path / "model" / "config.json").write_text(json.dumps(
        {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
         "num_attention_heads": 32, "vocab_size": 32000}))
    command = PPO_COLOCATED.format(model=tmp_path / "model") + flags
    result = cli("check", "--gpu", "A100-SXM4-80GB", "--cpu-memory", "2TB", "--format", "json", "--fail-on", "never",
                 *more, "--launch", command)
    assert result.returncode == 0, result.stderr
    stage = next(s for s in json.loads(result.stdout)["estimate"]["stages"] if s["configured"])
    return {(t["key"], t["device"]): t["bytes"] for t in stage["terms"] if t["phase"] == "train"} | {
        ("peak", "gpu"): stage["peak_gpu"], ("host", "train"): stage["train_host_per_node"]}


def test_openrlhf_s_sleeping_critic_keeps_only_its_bf16_partition_on_the_gpu(cli, tmp_path):
    """--deepspeed_enable_sleep: the critic's optimizer states, master weights and (DeepSpeed >= 0.16.5) gradients
    are on the host while the actor trains (offload_deepspeed_states @ v0.8.5). Before, the whole critic's states
    were counted on the actor's GPUs."""
    awake = _ppo(cli, tmp_path, "")
    asleep = _ppo(cli, tmp_path, " --deepspeed_enable_sleep")
    moved = ("critic_master", "critic_optimizer_state", "critic_lp_grads")
    assert all((key, "gpu") in awake and (key, "cpu") in asleep and (key, "gpu") not in asleep for key in moved)
    assert asleep[("critic_lp_params", "gpu")] == awake[("critic_lp_params", "gpu")]
    gone = sum(awake[(key, "gpu")] for key in moved)
    assert awake[("peak", "gpu")] - asleep[("peak", "gpu")] >= gone * 0.9  # the fragmentation allowance aside
    assert asleep[("host", "train")] - awake[("host", "train")] == 8 * gone
    # OpenRLHF offloads the gradients only on DeepSpeed 0.16.5 and later
    old = _ppo(cli, tmp_path, " --deepspeed_enable_sleep", "--deepspeed-version", "0.16.4")
    assert ("critic_lp_grads", "gpu") in old and ("critic_master", "cpu") in old
    # with --adam_offload the function returns at once: the critic's states stay where they were
    def critic(terms: dict) -> dict:
        return {key: value for key, value in terms.items() if key[0].startswith("critic_")}

    assert critic(_ppo(cli, tmp_path, " --deepspeed_enable_sleep --adam_offload")) == critic(
        _ppo(cli, tmp_path, " --adam_offload"))


def test_a_group_of_its_own_holds_a_tensor_parallel_rank_s_share():
    """--ds_tensor_parallel_size 2 (openrlhf/utils/deepspeed/deepspeed.py _ds_init_eval_model @ v0.8.5: tp_model_init
    on every model): the reference on 4 GPUs of its own holds a rank's share, partitioned at ZeRO-3 over the group's 2
    data-parallel ranks, not over all 4 of them."""
    from zeroadvisor.memory.parallel import Parallel, local_parameters

    config = {**ACTOR, "tensor_parallel": {"autotp_size": 2}}
    e = estimate(config, QWEN3_8B, TrainingShape(2048, "full", method=grpo(4, ROLLOUT)),
                 Cluster(gpus=8, gpu_memory=80 * GB, cpu_memory=HOST))
    assert e.configured is not None
    [group] = e.configured.groups
    params = next(t for t in group.terms if t.key == "reference_params")
    local = local_parameters(QWEN3_8B, Parallel(tensor=2)).total
    # by hand for Qwen3-8B: 36 blocks of q/o 4096^2, k/v 4096 x 1024 and 3 x 4096 x 12288 linears split in two; the
    # embeddings and head (2 x 151936 x 4096) and the norms (36 x (2 x 4096 + 2 x 128) + 4096) whole
    assert local == 36 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 12288) // 2 + 2 * 151936 * 4096 + \
        36 * (2 * 4096 + 2 * 128) + 4096
    assert params.nbytes == 2 * -(-local // 2)
