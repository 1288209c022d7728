"""The models a preference/RL method keeps beside the policy (memory/method.py; issue 35 item 2).

Numbers are hand arithmetic on a Llama-2-7B shape: P = 6,738,415,616 parameters, bf16 (2 B), 8 GPUs. TRL's
prepare_deepspeed (trl/models/utils.py) keeps stage 3 for the reference model and sets any other stage to 0;
up to TRL 1.9.0 it copies the config's optimizer block, which makes DeepSpeed build an optimizer for the frozen
engine (measured on CPU: tests/oracle/test_trl_reference_oracle.py).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.advisor.check import CheckOptions, check_document
from zeroadvisor.config.method import Generation, MethodSetup, Placement, Refusal
from zeroadvisor.config.source import parse
from zeroadvisor.memory.activations import activation_bytes
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.method import activation_spec
from zeroadvisor.memory.states import partition_stage12
from zeroadvisor.memory.terms import ROWS, ceil_div
from zeroadvisor.memory.trl_sft_loss import fused_head_bytes
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape
from zeroadvisor.report.estimate_text import render
from zeroadvisor.vocab import Method, ModelRole, TermKind, TrainerFamily, VllmMode

LLAMA2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000}
SPEC = spec_from_hf_config(LLAMA2_7B)
P = SPEC.parameters
GB = 10**9
ZERO3 = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
         "zero_optimization": {"stage": 3}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}}}
NO_OPTIMIZER = {k: v for k, v in ZERO3.items() if k != "optimizer"}
CLUSTER = Cluster(gpus=8, gpu_memory=80 * GB)


# two fp32 copies of the paired batch's logits (LLaMA-Factory's reference pass over the backward's three: its logits,
# the contiguous shifted copy and the log-softmax beside the policy's held two)
PASS_FP32 = 2 * 4 * 2 * 1024 * 32000


def dpo(**kw) -> MethodSetup:
    return MethodSetup(method=Method.DPO, **kw)


def run(setup: MethodSetup, config=None, spec=SPEC, cluster=CLUSTER, **shape):
    return estimate(ZERO3 if config is None else config, spec,
                    TrainingShape(shape.pop("seq", 1024), "full", method=setup, **shape), cluster)


def train_terms(st, row: str) -> dict[str, object]:
    return {t.key: t for t in st.terms if t.row == row and t.phase == "train"}


def test_sft_has_no_method_rows():
    st = run(MethodSetup()).stage(1)
    assert tuple(st.per_gpu) == ROWS and tuple(st.to_dict()["per_gpu"]) == ROWS


@pytest.mark.parametrize("stage", [0, 1, 2])
def test_reference_is_a_whole_bf16_copy_below_stage_3(stage):
    st = run(dpo(trainer_version="1.16.0")).stage(stage)
    [term] = train_terms(st, "reference_model").values()
    assert term.nbytes == 2 * P and term.kind == TermKind.EXACT and "prepare_deepspeed @ v1.16.0" in term.source
    assert st.per_gpu["reference_model"] == 2 * P
    sft = run(MethodSetup()).stage(stage)
    # the total carries the reference copy (and the paired batch's activations), never as overhead
    assert st.per_gpu["total"] - sft.per_gpu["total"] >= 2 * P
    assert st.per_gpu["overhead"] - sft.per_gpu["overhead"] < 2 * P // 10


def test_reference_is_partitioned_at_stage_3_and_offloaded_with_the_parameters():
    st = run(dpo(trainer_version="1.16.0")).stage(3)
    assert st.per_gpu["reference_model"] == 2 * ceil_div(P, 8)
    off = run(dpo(trainer_version="1.16.0")).stage(3, "cpu", "cpu")
    assert off.per_gpu["reference_model"] == 0
    [term] = train_terms(off, "reference_model").values()
    assert term.device == "cpu" and term.nbytes == 2 * ceil_div(P, 8)


def test_old_trl_copies_the_optimizer_block_14_bytes_per_param_at_stage_0():
    old = run(dpo(trainer_version="1.9.0")).stage(1)
    assert old.per_gpu["reference_model"] == 14 * P
    new = run(dpo(trainer_version="1.9.1")).stage(1)
    assert new.per_gpu["reference_model"] == 2 * P
    no_block = run(dpo(trainer_version="1.9.0"), NO_OPTIMIZER).stage(1)
    assert no_block.per_gpu["reference_model"] == 2 * P


def test_old_trl_at_stage_3_adds_partitions_and_the_ipg_bucket():
    st = run(dpo(trainer_version="0.21.0")).stage(3)
    share = ceil_div(P, 8)
    # bf16 partition + fp32 partitioned groups + bf16 gradient partition + the 5e8-element bf16 IPG bucket
    assert st.per_gpu["reference_model"] == (2 + 4 + 2) * share + 2 * 500_000_000


def test_unknown_trl_release_expects_the_current_behaviour_and_bounds_the_old_one():
    e = run(dpo())
    st = e.stage(1)
    assert st.per_gpu["reference_model"] == 2 * P
    assert st.per_gpu_bound["reference_model"] == 14 * P
    bounds = [t for t in train_terms(st, "reference_model").values() if t.kind == TermKind.BOUND]
    assert bounds and all(t.nbytes == 0 for t in bounds)
    assert any("TRL release unknown" in a for a in e.assumptions)
    assert not any("TRL release unknown" in a for a in run(dpo(trainer_version="1.16.0")).assumptions)


@pytest.mark.parametrize("setup", [
    MethodSetup(method=Method.ORPO), MethodSetup(method=Method.CPO), dpo(loss_type="simpo"),
    dpo(precompute_ref_log_probs=True), MethodSetup(method=Method.GRPO), MethodSetup(method=Method.GRPO, beta=0.0),
    dpo(use_reference=False),
], ids=["orpo", "cpo", "simpo", "precompute", "grpo-default-beta", "grpo-beta-0", "explicit-none"])
def test_no_reference_model(setup):
    assert "reference_model" not in run(setup).stage(1).per_gpu


def test_grpo_with_beta_and_kto_load_a_reference():
    assert run(MethodSetup(method=Method.GRPO, beta=0.04)).stage(1).per_gpu["reference_model"] == 2 * P
    assert run(MethodSetup(method=Method.KTO)).stage(1).per_gpu["reference_model"] == 2 * P


def test_peft_policy_has_no_reference_unless_one_is_named():
    lora = dataclasses.replace(SPEC, trainable_parameters=4_194_304, peft="LoRA r=8")
    assert "reference_model" not in run(dpo(), spec=lora).stage(1).per_gpu
    named = run(dpo(reference_model="other/7b", trainer_version="1.16.0"), spec=lora).stage(1)
    assert named.per_gpu["reference_model"] == 2 * P  # the base architecture, whole


def test_a_different_reference_model_is_costed_by_its_own_spec():
    small = spec_from_hf_config({**LLAMA2_7B, "num_hidden_layers": 8})
    e = estimate(ZERO3, SPEC, TrainingShape(1024, "full", method=dpo(trainer_version="1.16.0"),
                                            auxiliary_specs=((ModelRole.REFERENCE, small),)), CLUSTER)
    assert e.stage(1).per_gpu["reference_model"] == 2 * small.parameters


def test_paired_methods_double_the_sequences_through_the_policy():
    sft2 = estimate({**ZERO3, "train_micro_batch_size_per_gpu": 2}, SPEC, TrainingShape(1024, "full"), CLUSTER)
    # LLaMA-Factory upcasts the logits to fp32 as transformers' loss does: the SFT run at twice the micro batch
    lf = run(dpo(trainer=TrainerFamily.LLAMA_FACTORY)).stage(3)
    # ... and its reference pass holds one fp32 copy of the logits more (test_dpo_reference_pass_...)
    assert lf.per_gpu["activations"] == sft2.stage(3).per_gpu["activations"] + PASS_FP32
    # TRL 0.15 to 0.28 keep them in bf16 and take the log-softmax row by row (selective_log_softmax): its backward
    # holds 2 copies of 2 B and one row's (of the 2), not 3 of 4 B, per token and vocabulary entry
    trl = run(dpo(trainer_version="0.21.0")).stage(3)
    assert _loss(dpo(trainer=TrainerFamily.LLAMA_FACTORY)) - _loss(dpo(trainer_version="0.21.0")) == \
        (12 - 5) * 2 * 1024 * 32000
    # with the loss that low, a layer's recompute is the backward's peak: TRL's loss side stays under it by the
    # headroom (no reference-pass term at 0.21), so the two differ by the logits' count and the pass, less it
    trl_setup = dpo(trainer_version="0.21.0")
    view = activation_bytes(activation_spec(trl_setup, SPEC), TrainingShape(1024, "full", method=trl_setup), 2, "bf16")
    assert trl.per_gpu["activations"] == view.nbytes and view.loss_headroom > 0
    assert lf.per_gpu["activations"] - trl.per_gpu["activations"] == \
        (12 - 5) * 2 * 1024 * 32000 + PASS_FP32 - view.loss_headroom
    # from 1.15 the fused LM head scores both sequences (dpo_trainer.py _compute_loss @ v1.16.0): no logits, the fp32
    # gradients of the hidden states and of the head, their casts and a tile, over the 2 x 1024 tokens
    fused = run(dpo(trainer_version="1.16.0")).stage(3)
    assert fused.per_gpu["activations"] - lf.per_gpu["activations"] == \
        fused_head_bytes(2, 2 * 1024, 4096, 32000) - 12 * 2 * 1024 * 32000 - PASS_FP32
    # KTO is unpaired (fp32 logits): the SFT batch, plus its KL forward beside the graph (below)
    kto = run(MethodSetup(method=Method.KTO, trainer=TrainerFamily.LLAMA_FACTORY)).stage(3)
    assert kto.per_gpu["activations"] == run(MethodSetup()).stage(3).per_gpu["activations"] + 12 * 1024 * 32000


def _loss(setup: MethodSetup, samples: int = 1) -> int:
    """The head and loss's peak of ``setup`` on SPEC at 1024 tokens, as memory/activations.py counts it."""
    from zeroadvisor.memory.method import batch_factor

    shape = TrainingShape(1024, "full", method=setup)
    return activation_bytes(activation_spec(setup, SPEC), shape, samples * batch_factor(setup), "bf16").logits


def _headroom(setup: MethodSetup, spec=SPEC) -> int:
    """How far the loss side of ``setup`` stays under a layer's recompute at 1024 tokens (Activations.loss_headroom)."""
    from zeroadvisor.memory.method import batch_factor

    shape = TrainingShape(1024, "full", method=setup)
    return activation_bytes(activation_spec(setup, spec), shape, batch_factor(setup), "bf16").loss_headroom


def _kl_term(e) -> int | None:
    return next((t.nbytes for t in e.stage(3).terms if t.key == "kto_kl_forward" and t.phase == "train"), None)


@pytest.mark.parametrize("micro", [1, 2])
def test_llama_factory_kto_kl_forward_holds_fp32_logits_beside_the_graph(micro):
    # llamafactory/train/kto/trainer.py @ v0.9.3: the policy's KL forward after its own (graph live), fp32 logits
    # and a full log_softmax of a contiguous copy of the shifted view; at the reference pass the policy's saved
    # log-softmax (4 B), its chosen/rejected fp32 copies (4 B) and the reference's own logits (4 B) are held beside
    # its KL forward (12 B): 24 B per token and entry against the backward's 12 (a replica measures 6.00 fp32
    # copies: benchmarks/dpo_loss.md)
    config = {**ZERO3, "train_micro_batch_size_per_gpu": micro}
    kto = MethodSetup(method=Method.KTO, trainer=TrainerFamily.LLAMA_FACTORY, trainer_version="0.9.3")
    e = run(kto, config)
    assert _kl_term(e) == 12 * micro * 1024 * 32000
    sft = estimate(config, SPEC, TrainingShape(1024, "full"), CLUSTER).stage(3)
    assert e.stage(3).per_gpu["activations"] == sft.per_gpu["activations"] + 12 * micro * 1024 * 32000
    assert any("KL forward runs after the policy's" in a for a in e.assumptions)
    # 0.9.0 returns log-probs only (no logits held): a KL forward's 12 B beside the saved 4, against the backward's 12
    old = run(dataclasses.replace(kto, trainer_version="0.9.0"), config)
    assert _kl_term(old) == 4 * micro * 1024 * 32000
    assert old.stage(3).per_gpu["activations"] == sft.per_gpu["activations"] + 4 * micro * 1024 * 32000


@pytest.mark.parametrize("family", [None, TrainerFamily.AXOLOTL, TrainerFamily.MS_SWIFT])
def test_trl_kto_kl_forward_adds_nothing_to_the_peak(family):
    # trl/trainer/kto_trainer.py _compute_loss @ v1.9.0 (forward @ v0.21.0): the policy's KL forward under no_grad
    # before its own, the reference's one at a time with its own forward: under the backward's loss peak
    kto = run(MethodSetup(method=Method.KTO, trainer=family, trainer_version="1.9.0"))
    apo = run(MethodSetup(method=Method.KTO, trainer=family, trainer_version="1.9.0", loss_type="apo_zero_unpaired"))
    assert _kl_term(kto) is None and kto.stage(3).per_gpu == apo.stage(3).per_gpu
    assert any("KL forward (loss_type kto)" in a and "nothing added" in a for a in kto.assumptions)
    assert any("no KL term" in a for a in apo.assumptions)


def test_vllm_colocated_takes_its_share_of_the_card_and_server_mode_none():
    grpo = MethodSetup(method=Method.GRPO, generation=Generation(use_vllm=True, vllm_mode=VllmMode.COLOCATE))
    assert run(grpo).stage(3).per_gpu["vllm"] == int(80 * GB * 0.3)  # TRL's default utilization
    lower = MethodSetup(method=Method.GRPO, generation=Generation(use_vllm=True, vllm_mode=VllmMode.COLOCATE,
                                                                 vllm_gpu_memory_utilization=0.1))
    assert run(lower).stage(3).per_gpu["vllm"] == 8 * GB
    server = MethodSetup(method=Method.GRPO, generation=Generation(use_vllm=True, vllm_mode=VllmMode.SERVER,
                                                                  vllm_num_gpus=2))
    st = run(server).stage(3)
    assert "vllm" not in st.per_gpu and any("server mode" in n for n in st.notes + run(server).assumptions)


def test_vllm_floor_is_its_weights_and_one_max_model_len_request_in_its_share():
    from zeroadvisor.memory.method import vllm_floor

    gen = Generation(use_vllm=True, vllm_mode=VllmMode.COLOCATE, max_prompt_length=512, max_completion_length=1000)
    floor = vllm_floor(MethodSetup(method=Method.GRPO, generation=gen), SPEC, None, 80 * GB)
    # TRL passes max_model_len = 512 + 1000 = 1512; vLLM's KV cache in whole blocks of 16 tokens: 95 blocks, 1520
    # tokens of K and V over 32 layers x 32 heads x 128 dims in bf16
    assert floor is not None and floor.tokens == 1512 and floor.weights == 2 * P
    assert floor.kv_cache == 2 * 32 * 32 * 128 * 2 * 1520
    assert floor.share == 0.18  # (13.48 GB + 0.80 GB) / 80 GB = 0.1785, rounded up to the hundredth
    # no prompt length (TRL 0.26 on): the training sequence counted, and said to be a lower bound
    short = vllm_floor(MethodSetup(method=Method.GRPO, generation=Generation(use_vllm=True)), SPEC, 2048, 80 * GB)
    assert short is not None and short.tokens == 2048 and any("lower bound" in n for n in short.notes)
    assert vllm_floor(MethodSetup(method=Method.GRPO), dataclasses.replace(SPEC, num_layers=None), 2048, GB) is None
    # vllm_tensor_parallel_size 4: each rank holds a quarter of the weights and 32 // 4 = 8 of the KV heads; at 64 the
    # 32 heads are replicated, one per rank (vllm ModelConfig.get_num_kv_heads: max(1, heads // tp))
    def at(tp: int):
        return vllm_floor(MethodSetup(method=Method.GRPO, generation=dataclasses.replace(
            gen, vllm_tensor_parallel_size=tp)), SPEC, None, 80 * GB)
    tp4, tp64 = at(4), at(64)
    assert tp4 is not None and tp4.weights == -(-2 * P // 4) and tp4.kv_cache == 2 * 32 * 8 * 128 * 2 * 1520
    assert tp64 is not None and tp64.kv_cache == 2 * 32 * 1 * 128 * 2 * 1520


def test_ppo_holds_a_trained_critic_and_a_frozen_reward_model():
    st = run(MethodSetup(method=Method.PPO, trainer=TrainerFamily.OPENRLHF, colocate_all_models=True)).stage(2)
    sft = run(MethodSetup()).stage(2)
    # its own states, at the policy's stage: the policy's model-state terms, and its fp32 gradient partition held
    # for its own step (the policy's is counted in the step, beyond the activations freed before it)
    critic = {t.key.removeprefix("critic_"): t.nbytes for t in st.terms if t.row == "critic"}
    policy = {t.key: t.nbytes for t in sft.terms if t.phase == "train" and t.device == "gpu"}
    for key in ("lp_params", "lp_grads", "master", "optimizer_state"):
        assert critic[key] == policy[key], key
    assert critic["step12_fp32_grads"] == 4 * partition_stage12(P, 8)
    assert st.per_gpu["critic"] == sum(critic.values())
    assert st.per_gpu["reward_model"] == st.per_gpu["reference_model"] == 2 * P
    # a model's own stage; --ref_reward_offload moves the parameters to the host at stage 3 only (DeepSpeed
    # ignores offload_param below it)
    placed = MethodSetup(method=Method.PPO, trainer=TrainerFamily.OPENRLHF, colocate_all_models=True, placements=(
        Placement(ModelRole.REFERENCE, zero_stage=3, offload=True), Placement(ModelRole.REWARD, offload=True)))
    st = run(placed).stage(2)
    assert st.per_gpu["reference_model"] == 0 and st.per_gpu["reward_model"] == 2 * P
    assert sum(t.nbytes for t in st.terms if t.row == "reference_model" and t.device == "cpu") == 2 * ceil_div(P, 8)


def test_openrlhf_without_colocation_keeps_the_other_models_off_the_actors_cards():
    e = run(MethodSetup(method=Method.PPO, trainer=TrainerFamily.OPENRLHF))
    st = e.stage(2)
    assert not {"reference_model", "reward_model", "critic"} & set(st.per_gpu)
    assert any("GPUs of its own" in n for n in st.notes)


def test_openrlhf_and_llama_factory_optimizer_block():
    assert run(dpo(trainer=TrainerFamily.OPENRLHF, colocate_all_models=True)).stage(1).per_gpu_bound[
        "reference_model"] == 2 * P  # its own eval config: no optimizer block, nothing to bound
    assert run(dpo(trainer=TrainerFamily.LLAMA_FACTORY, trainer_version="0.9.3")).stage(1).per_gpu[
        "reference_model"] == 14 * P  # TRL <= 0.9.6's _prepare_deepspeed copies it


@pytest.mark.parametrize(("trainer", "version", "copied"), [
    # LLaMA-Factory 0.9.4 and 0.9.5 pin trl>=0.18.0,<=0.24.0, whose prepare_deepspeed keeps the block
    (TrainerFamily.LLAMA_FACTORY, "0.9.4", True), (TrainerFamily.LLAMA_FACTORY, "0.9.5", True),
    # no pin: the newest release read, as the assumed input says (LLaMA-Factory 0.9.5, axolotl 0.18.0 on TRL
    # 1.8.0: copied; TRL 1.16.0: dropped since 1.10, the bound keeps it)
    (TrainerFamily.LLAMA_FACTORY, None, True), (TrainerFamily.AXOLOTL, None, True), (TrainerFamily.TRL, None, False),
    (TrainerFamily.LLAMA_FACTORY, "0.9.6", False),  # not read: the bound keeps it, the expected does not
    # axolotl by the TRL it pins: 0.18.1 runs trl==1.8.0's copy; 0.19 is past the release line read
    (TrainerFamily.AXOLOTL, "0.18.1", True), (TrainerFamily.AXOLOTL, "0.19.0", False),
])
def test_the_optimizer_block_by_the_trainer_release_or_the_newest_read(trainer, version, copied):
    st = run(dpo(trainer=trainer, trainer_version=version)).stage(1)
    assert st.per_gpu["reference_model"] == (14 if copied else 2) * P
    assert st.per_gpu_bound["reference_model"] == 14 * P


def test_grpo_counts_the_completion_logits_over_prompt_and_completion():
    gen = Generation(num_generations=8, max_prompt_length=512, max_completion_length=1536)
    old = MethodSetup(method=Method.GRPO, generation=gen, trainer_version="1.9.0")
    grpo = estimate(ZERO3, SPEC, TrainingShape(None, "full", method=old), CLUSTER)
    assert grpo.shape.sequence_length == 2048
    terms = train_terms(grpo.stage(3), "activations")
    # TRL 1.9: the bf16 logits, their per-row log-softmax and gradient, and the whole output's gradient the in-place
    # temperature division materializes (benchmarks/grpo_logits.md); 0.29 divides out of place: at one row the
    # backward's saved rows and the row's three transients, 4 copies too (trl_grpo_out_of_place)
    assert terms["completion_logits"].nbytes == 4 * 2 * 1 * 1536 * 32000
    before = estimate(ZERO3, SPEC, TrainingShape(None, "full", method=dataclasses.replace(
        old, trainer_version="0.29.0")), CLUSTER)
    assert train_terms(before.stage(3), "activations")["completion_logits"].nbytes == 2 * 32000 * (1536 + 3 * 1536)
    # TRL 1.15+ (and an unknown release: the newest read) score the completion through the fused LM head
    # (trl/kernels/chunked_logprob.py @ v1.16.0), by hand for 1536 tokens, hidden 4096, V 32000 in bf16: what the
    # forward saves (int64 targets, fp32 log_z and entropy) and the backward's end, fp32 grad_hidden and grad_weight,
    # their bf16 casts, the bf16 1536 x 32000 tile buffer and the fp32 incoming gradient
    t, h, v = 1536, 4096, 32000
    by_hand = (8 + 4 + 4) * t + 4 * (t * h + v * h) + 2 * (t * h + v * h) + 2 * t * v + 4 * t
    for release in ("1.16.0", None):
        fused = estimate(ZERO3, SPEC, TrainingShape(None, "full", method=dataclasses.replace(
            old, trainer_version=release)), CLUSTER)
        assert train_terms(fused.stage(3), "activations")["completion_logits"].nbytes == by_hand
        # the head's bf16 gradient the fused head casts is the one ZeRO-3's hook receives: counted once, there
        assert "gathered_grad" not in train_terms(fused.stage(3), "gathered_parameters")
    assert train_terms(grpo.stage(3), "gathered_parameters")["gathered_grad"].nbytes == 2 * v * h
    sft = estimate(ZERO3, SPEC, TrainingShape(2048, "full"), CLUSTER).stage(3)
    # the whole sequence's fp32 loss peak replaced by the completion's logits in bf16 (the training step: the
    # rollout's generation moment apart, tests/test_method_generation.py)
    rollout = terms["generation_moment"].nbytes if "generation_moment" in terms else 0
    assert grpo.stage(3).per_gpu["activations"] - rollout < sft.per_gpu["activations"]


def test_reward_model_training_has_no_vocabulary_logits():
    reward = run(MethodSetup(method=Method.REWARD)).stage(3)
    assert "reference_model" not in reward.per_gpu
    sft2 = estimate({**ZERO3, "train_micro_batch_size_per_gpu": 2}, SPEC, TrainingShape(1024, "full"), CLUSTER)
    assert reward.per_gpu["activations"] < sft2.stage(3).per_gpu["activations"] - 12 * 2 * 1024 * 32000 // 2


def test_json_and_text_show_the_rows_by_role():
    e = run(dpo(trainer_version="1.16.0"))
    d = e.stage(1).to_dict()
    rows = list(d["per_gpu"])
    assert rows.index("reference_model") == rows.index("overhead") - 1 and set(ROWS) <= set(rows)
    assert d["per_gpu"]["reference_model"] == 2 * P
    assert any(t["row"] == "reference_model" and "prepare_deepspeed" in t["source"] for t in d["terms"])
    json.dumps(e.to_dict())
    text = render(e, width=400)
    assert "reference model" in text
    assert "reference model" not in render(run(MethodSetup()), width=400)


def _lead(setup: MethodSetup, gpu_gb: int):
    options = CheckOptions(model=SPEC, shape=TrainingShape(1024, "full", method=setup),
                           cluster=Cluster(gpus=8, gpu_memory=gpu_gb * GB))
    result = check_document(parse(json.dumps(ZERO3), "ds.json"), options)
    return result.recommendation


def test_lower_stage_advice_keeps_the_reference_copy():
    """A DPO run at ZeRO-3 whose SFT twin fits at ZeRO-1 is not told to go to ZeRO-1 unless the reference copy
    fits there too: the advisor re-estimates each candidate through the same estimate."""
    sft = _lead(MethodSetup(), 64)
    assert sft is not None and sft.option is not None and sft.option.option.stage == 1
    lead = _lead(dpo(trainer_version="1.16.0"), 64)
    assert lead is None or lead.option is None or lead.option.option.stage != 1
    if lead is not None and lead.option is not None:  # what it recommends holds the reference and fits with it
        assert lead.option.per_gpu["reference_model"] > 0 and lead.option.comfortable
    roomy = _lead(dpo(trainer_version="1.16.0"), 141)  # where the whole copy fits at ZeRO-1, it may say so
    assert roomy is not None and roomy.option is not None and roomy.option.option.stage == 1
    assert roomy.option.per_gpu["reference_model"] == 2 * P


def test_axolotl_and_ms_swift_follow_the_trl_they_pin():
    axolotl = dpo(trainer=TrainerFamily.AXOLOTL, trainer_version="0.18.0")
    st = run(axolotl).stage(1)  # axolotl 0.18.0 pins TRL 1.8.0, which copies the block
    assert st.per_gpu["reference_model"] == 14 * P
    assert "reference_model" not in run(MethodSetup(method=Method.ORPO, trainer=TrainerFamily.AXOLOTL)).stage(1).per_gpu
    swift = run(dpo(trainer=TrainerFamily.MS_SWIFT, trainer_version="3.8.0")).stage(1)
    assert swift.per_gpu["reference_model"] == 14 * P  # ms-swift 3.x pins trl < 0.21
    later = run(dpo(trainer=TrainerFamily.MS_SWIFT, trainer_version="4.1.0")).stage(1)
    assert later.per_gpu["reference_model"] == 2 * P and later.per_gpu_bound["reference_model"] == 14 * P


def test_the_does_not_fit_message_names_the_reference_model():
    config = {**ZERO3, "zero_optimization": {"stage": 1}}
    options = CheckOptions(model=SPEC, shape=TrainingShape(1024, "full", method=dpo(trainer_version="1.9.0")),
                           cluster=CLUSTER)
    result = check_document(parse(json.dumps(config), "ds.json"), options)
    [finding] = [f for f in result.findings if f.code == "ZA801"]
    # 14 B × P: the bf16 copy, its fp32 master and Adam's states (TRL 1.9.0 copies the optimizer block)
    assert f"reference model {14 * P / 2**30:.2f} GiB" in finding.message
    assert "Cheapest change that fits: ZeRO-3" in finding.message


def test_vllm_mode_defaults_by_release():
    def share(**kw) -> int:
        setup = MethodSetup(method=Method.GRPO, generation=Generation(use_vllm=True), **kw)
        return run(setup).stage(3).per_gpu.get("vllm", 0)

    assert share(trainer_version="0.29.1") == 0  # "server" up to 0.29
    assert share(trainer_version="1.0.0") == share() == int(80 * GB * 0.3)  # "colocate" since 1.0.0
    assert share(trainer=TrainerFamily.OPENRLHF) == 0
    # OpenRLHF's own --vllm_gpu_memory_utilization default (cli/train_ppo_ray.py @ v0.8.5: 0.95), not TRL's 0.3
    assert share(trainer=TrainerFamily.OPENRLHF, colocate_all_models=True) == int(80 * GB * 0.95)


@pytest.mark.parametrize(("trainer", "source"), [
    (None, "trl/models/utils.py prepare_deepspeed @ v1.16.0"),
    (TrainerFamily.LLAMA_FACTORY, "_prepare_deepspeed @ v0.9.6"),
    (TrainerFamily.AXOLOTL, "setup_reference_model @ v0.18.0"),
    (TrainerFamily.MS_SWIFT, "_prepare_single_model @ v3.8.0"),
    (TrainerFamily.OPENRLHF, "get_ds_eval_config @ v0.8.5"),
])
def test_each_reference_term_names_where_its_trainer_prepares_it(trainer, source):
    st = run(dpo(trainer=trainer, colocate_all_models=True)).stage(1)
    terms = list(train_terms(st, "reference_model").values())
    assert terms and all(source in t.source for t in terms)


def test_old_trl_with_optimizer_offload_below_stage_3_is_noted():
    st = run(dpo(trainer_version="1.9.0")).stage(2, "cpu")
    assert any("dies before training" in n for n in st.notes)
    assert not any("dies before training" in n for n in run(dpo(trainer_version="1.9.1")).stage(2, "cpu").notes)
    assert not any("dies before training" in n for n in run(dpo(trainer_version="1.9.0")).stage(3, "cpu").notes)


def test_bars_chart_and_markdown_draw_the_reference_model():
    from zeroadvisor.report import html, markdown

    e = run(dpo(trainer_version="1.16.0"))
    text = render(e, width=160)
    assert "R reference model" in text and "R reference model" not in render(run(MethodSetup()), width=160)
    z1 = next(line for line in text.splitlines() if line.startswith("Z1 "))
    assert "R" in z1  # the copy is a row of its own in the bar, not part of the load/save dots
    assert 'data-row="reference_model"' in html.chart(list(e.stages), e, "GiB", None)
    table = markdown.breakdown_table(e, None, "GiB")
    assert any(line.startswith("| reference model |") for line in table)


@pytest.mark.parametrize("family", [TrainerFamily.MS_SWIFT, TrainerFamily.OPENRLHF])
def test_ppo_critic_takes_the_policys_lora_where_the_trainer_puts_it_there(family):
    # ms-swift prepares the value model with the policy's prepare_model (LoRA included: swift/llm/train/rlhf.py
    # @ v3.8.0), OpenRLHF builds the critic with the actor's --lora_rank (ppo_critic.py @ v0.8.5): a frozen bf16
    # base and the adapters' states, not a second full fine-tune (swift's PPO LoRA example: 4 x 50 GiB)
    lora = dataclasses.replace(SPEC, trainable_parameters=4_194_304, peft="LoRA r=8")
    setup = MethodSetup(method=Method.PPO, trainer=family, colocate_all_models=True)
    critic = {t.key: t.nbytes for t in run(setup, spec=lora).stage(2).terms if t.row == "critic"}
    assert critic["critic_frozen_params"] == 2 * P
    assert sum(critic.values()) < 2 * P + 20 * 4_194_304 + 2 * 10**9  # adapters' states and buckets, no 16 B × P
    # TRL's PPOTrainer puts its peft_config on the policy only: the value model it is given trains whole
    whole = {t.key: t.nbytes for t in run(MethodSetup(method=Method.PPO), spec=lora).stage(2).terms
             if t.row == "critic"}
    assert "critic_frozen_params" not in whole and whole["critic_lp_params"] == 2 * P


def test_ms_swift_keeps_the_preference_logits_in_bf16_as_trl_does():
    # swift/trainers/rlhf_trainer/dpo_trainer.py get_per_token_logps @ v3.8.0 calls TRL's selective_log_softmax on
    # the bf16 logits (no upcast): the same activations as TRL's DPO before its fused LM head (1.15), below
    # LLaMA-Factory's fp32 ones
    swift = run(dpo(trainer=TrainerFamily.MS_SWIFT, trainer_version="3.8.0")).stage(3).per_gpu["activations"]
    trl = run(dpo(trainer_version="0.21.0")).stage(3).per_gpu["activations"]
    lf = run(dpo(trainer=TrainerFamily.LLAMA_FACTORY)).stage(3).per_gpu["activations"]
    assert swift == trl and _loss(dpo(trainer=TrainerFamily.MS_SWIFT, trainer_version="3.8.0")) == \
        _loss(dpo(trainer_version="0.21.0")) == 2 * 32000 * (2 * 2048 + 1024) + 8 * 2048 < lf


def test_axolotl_s_preference_trainers_are_trl_s_at_the_trl_it_pins():
    # AxolotlDPOTrainer subclasses TRL's DPOTrainer and overrides tokenization and training_step only
    # (core/trainers/dpo/trainer.py @ v0.18.0): the logits stay in the model's bf16, as TRL's, not LLaMA-Factory's
    # fp32, at any axolotl release (each pins TRL 0.7.9 or later)
    ax = run(dpo(trainer=TrainerFamily.AXOLOTL, trainer_version="0.18.0")).stage(3).per_gpu["activations"]
    trl = run(dpo(trainer_version="1.8.0")).stage(3).per_gpu["activations"]
    assert ax == trl == run(dpo(trainer=TrainerFamily.AXOLOTL)).stage(3).per_gpu["activations"]
    # axolotl 0.6.0 pins trl==0.12.1: TRL's reference pass beside the held bf16 logits (before 0.15), as TRL 0.12.1
    old = dpo(trainer=TrainerFamily.AXOLOTL, trainer_version="0.6.0")
    assert _pass(run(old)) == _pass(run(dpo(trainer_version="0.12.1"))) == 2 * 2 * 2 * 1024 * 32000
    assert _pass(run(dpo(trainer=TrainerFamily.AXOLOTL, trainer_version="0.7.0"))) is None  # trl==0.15.0


def test_trl_0_7_4_upcasts_the_dpo_logits_to_fp32():
    # trl/trainer/dpo_trainer.py @ v0.7.4 concatenated_forward: ``.logits.to(torch.float32)`` and a full
    # log_softmax (the alignment handbook's pin); 0.7.5 keeps the model's dtype
    old = run(dpo(trainer_version="0.7.4")).stage(3).per_gpu["activations"]
    new = run(dpo(trainer_version="0.7.5")).stage(3).per_gpu["activations"]
    lf = run(dpo(trainer=TrainerFamily.LLAMA_FACTORY)).stage(3).per_gpu["activations"]
    # both hold the policy's logits across the reference pass: two copies over, fp32 against bf16
    assert old == lf and old - new == (12 - 6) * 2 * 1024 * 32000 + 2 * (4 - 2) * 2 * 1024 * 32000


def _pass(e) -> int | None:
    return next((t.nbytes for t in e.stage(3).terms if t.key == "dpo_reference_pass" and t.phase == "train"), None)


def test_dpo_reference_pass_holds_two_copies_of_the_logits_over_the_backward():
    # llamafactory/train/dpo/trainer.py get_batch_loss_metrics @ v0.9.3: the policy's fp32 logits (held by the
    # chosen/rejected views for the metrics) and log_softmax output (saved) beside the reference pass's own three
    # (its logits, the contiguous copy log_softmax takes of logits[:, :-1, :], its output): 20 B per token and
    # vocabulary entry against the backward's 12 (measured: benchmarks/dpo_loss.md); the paired batch is 2 x 1024
    lf = dpo(trainer=TrainerFamily.LLAMA_FACTORY, trainer_version="0.9.3")
    assert _pass(run(lf)) == PASS_FP32
    # with LoRA the pass runs through the same model, its adapter disabled: no reference copy, the same pass
    lora = dataclasses.replace(SPEC, trainable_parameters=4_194_304, peft="LoRA r=8")
    lora_run = run(dataclasses.replace(lf, use_reference=False), spec=lora)
    assert _pass(lora_run) == PASS_FP32 and "reference_model" not in lora_run.stage(3).per_gpu
    assert any("reference pass" in a and "counted" in a for a in lora_run.assumptions)
    # TRL 0.7.5 to 0.14 hold the bf16 logits and bf16 log-softmax (trl/trainer/dpo_trainer.py @ v0.9.6): 2 x 2 B over
    assert _pass(run(dpo(trainer_version="0.9.6"))) == 2 * 2 * 2 * 1024 * 32000
    # TRL 0.15 to 0.28 return the mean logits only and score row by row; precomputed log-probs run no pass
    assert _pass(run(dpo(trainer_version="0.15.0"))) is None
    assert _pass(run(dpo(trainer_version="0.28.0"))) is None
    assert _pass(run(dataclasses.replace(lf, precompute_ref_log_probs=True))) is None
    # the unpaired and reference-free methods have none
    assert _pass(run(MethodSetup(method=Method.ORPO, trainer=TrainerFamily.LLAMA_FACTORY))) is None


def test_trl_dpo_s_compute_loss_holds_the_policy_and_reference_logits_to_its_metrics():
    """trl/trainer/dpo_trainer.py _compute_loss (0.29 to 1.14) keeps the policy's output to its end: at the metrics the
    policy's logits, the per-row log-softmax saved for backward and the reference pass's logits are live, with up to
    1.5 the .contiguous() copy of each model's shifted logits (5 copies) and from 1.6 entropy_from_logits' reshape copy
    (4); measured on CPU with TRL's own code (benchmarks/dpo_loss.md). The backward's count is 3 copies."""
    one = 2 * 2 * 1024 * 32000  # one bf16 copy of the paired batch's logits
    # what a layer's recompute, the backward's peak here, leaves above the loss side: the two moments are apart
    room = _headroom(dpo(trainer_version="1.9.0"))
    assert 0 < room < one // 2
    # live at once, less the backward's 2.5 (two copies and one row's of the 2: the per-row log-softmax)
    for release, copies, bound in (("0.29.0", 2.5, 3), ("1.5.1", 2.5, 3), ("1.6.0", 1.5, 1.5), ("1.14.0", 1.5, 1.5)):
        term = next(t for t in run(dpo(trainer_version=release)).stage(3).terms
                    if t.key == "dpo_reference_pass" and t.phase == "train")
        assert term.nbytes == copies * one - room and term.upper == bound * one - room, release
    # the same with LoRA: the adapter-disabled pass makes the reference logits all the same
    lora = dataclasses.replace(SPEC, trainable_parameters=4_194_304, peft="LoRA r=8")
    lora_room = _headroom(dpo(trainer_version="1.9.0"), lora)
    assert _pass(run(dpo(trainer_version="1.9.0"), spec=lora)) == 1.5 * one - lora_room
    # precomputed log-probs: no reference logits; 3 live (the entropy's copy from 1.6; up to 3.5 with 1.5's masked
    # copy), half a copy over the backward's 2.5
    assert _pass(run(dpo(trainer_version="1.9.0", precompute_ref_log_probs=True))) == one // 2 - room
    pre = next(t for t in run(dpo(trainer_version="1.5.1", precompute_ref_log_probs=True)).stage(3).terms
               if t.key == "dpo_reference_pass" and t.phase == "train")
    assert pre.nbytes == one // 2 - room and pre.upper == one - room
    # TRL 0.15 to 0.28: 2 live (2.5 with the masked copy), under the backward's 2.5 at 2 rows
    assert _pass(run(dpo(trainer_version="0.24.0"))) is None
    # axolotl 0.17.0 pins trl==1.5.1, 0.18.0 trl==1.8.0: TRL's code at those releases
    assert _pass(run(dpo(trainer=TrainerFamily.AXOLOTL, trainer_version="0.17.0"))) == 2.5 * one - room
    assert _pass(run(dpo(trainer=TrainerFamily.AXOLOTL, trainer_version="0.18.0"))) == 1.5 * one - room
    # the fused LM head (1.15+) scores without logits
    assert _pass(run(dpo(trainer_version="1.15.0"))) is None


def test_trl_kto_s_loss_side_holds_the_policy_and_reference_logits():
    """trl/trainer/kto_trainer.py _compute_loss (1.8 to 1.14) has DPO's shape from 1.6: one copy of the batch's logits
    (one row per sample) over the backward's three, up to two with the chosen rows' copies (benchmarks/dpo_loss.md);
    precomputed log-probs add none."""
    one = 2 * 1024 * 32000
    kto = MethodSetup(method=Method.KTO, trainer_version="1.9.0")
    term = next(t for t in run(kto).stage(3).terms if t.key == "dpo_reference_pass" and t.phase == "train")
    assert term.nbytes == one and term.upper == 2 * one
    # the older forward (0.15 to 1.7): the chosen/rejected copies held while the reference runs, 1 copy over
    # (TRL 0.24.0's and 0.29.0's own code: 4.01); before 0.15 a full log-softmax of the shifted view, 2 over
    for release in ("0.24.0", "1.5.1", "1.7.0"):
        assert _pass(run(dataclasses.replace(kto, trainer_version=release))) == one, release
    assert _pass(run(dataclasses.replace(kto, trainer_version="0.9.6"))) == 2 * one
    assert _pass(run(dataclasses.replace(kto, trainer_version="1.15.0"))) is None
    assert _pass(run(dataclasses.replace(kto, precompute_ref_log_probs=True))) is None
    assert _pass(run(MethodSetup(method=Method.KTO, trainer=TrainerFamily.AXOLOTL, trainer_version="0.18.0"))) == one
    assert any("4 copies of the batch's logits live at once" in a for a in run(kto).assumptions)


LLAMA2_13B = {"model_type": "llama", "hidden_size": 5120, "intermediate_size": 13824, "num_hidden_layers": 40,
              "num_attention_heads": 40, "num_key_value_heads": 40, "vocab_size": 32000}


def _critic_activations(spec, seq: int, checkpointing: str) -> int:
    """The critic backbone (no LM head) at one sample of ``seq`` tokens, bf16, by the activation model itself."""
    return activation_bytes(dataclasses.replace(spec, lm_head=False), TrainingShape(seq, checkpointing), 1,
                            "bf16").nbytes


@pytest.mark.parametrize("family", [TrainerFamily.TRL, TrainerFamily.MS_SWIFT])
def test_trl_ppo_keeps_the_critics_activations_beside_the_policys(family):
    # TRL's PolicyAndValueWrapper.forward runs the critic backbone and the policy in one forward, one backward
    # (trl/trainer/ppo_trainer.py @ v0.21.0; ms-swift's PPOTrainer is TRL's), and nothing checkpoints the critic:
    # its whole un-checkpointed activations are live with the policy's (checkpointed) ones
    ppo = run(MethodSetup(method=Method.PPO, trainer=family)).stage(3)
    sft = run(MethodSetup()).stage(3)
    [term] = [t for t in ppo.terms if t.key == "critic_activations" and t.phase == "train"]
    assert term.row == "activations" and "PolicyAndValueWrapper" in term.source
    assert term.nbytes == _critic_activations(SPEC, 1024, "none")
    assert term.nbytes > 5 * sft.per_gpu["activations"]  # un-checkpointed against the policy's full checkpointing
    policy = next(t.nbytes for t in ppo.terms if t.key == "activations" and t.phase == "train")
    rollout = next((t.nbytes for t in ppo.terms if t.key == "generation_moment" and t.phase == "train"), 0)
    assert ppo.per_gpu["activations"] == policy + term.nbytes + rollout  # the rollout: test_method_generation.py


def test_openrlhf_ppo_peaks_at_the_larger_of_the_actor_and_critic_steps():
    # OpenRLHF trains actor and critic in their own steps (ppo_trainer.py training_step @ v0.5.1): a critic of the
    # actor's architecture (no LM head) adds nothing; a larger one what its step holds beyond the actor's
    colocated = MethodSetup(method=Method.PPO, trainer=TrainerFamily.OPENRLHF, colocate_all_models=True)
    same = {t.key: t.nbytes for t in run(colocated, seq=512).stage(3).terms if t.row == "activations"}
    assert same["critic_activations"] == 0
    big = spec_from_hf_config(LLAMA2_13B)
    shape = TrainingShape(512, "none", method=colocated, auxiliary_specs=((ModelRole.CRITIC, big),))
    st = estimate(ZERO3, SPEC, shape, CLUSTER).stage(3)
    rows = {t.key: t.nbytes for t in st.terms if t.row == "activations" and t.phase == "train"}
    assert rows["critic_activations"] == _critic_activations(big, 512, "none") - rows["activations"] > 0
    # on GPUs of their own (no --colocate_all_models) the critic's step is not on the actor's cards
    apart = run(MethodSetup(method=Method.PPO, trainer=TrainerFamily.OPENRLHF)).stage(3)
    assert not any(t.key == "critic_activations" for t in apart.terms)


def test_ppo_trains_on_query_plus_response():
    # TRL's PPOTrainer.train runs policy and critic over query_responses (trl/trainer/ppo_trainer.py @ v0.21.0):
    # ms-swift's --max_length caps the prompt (its template truncates it), --response_length more are generated
    swift = MethodSetup(method=Method.PPO, trainer=TrainerFamily.MS_SWIFT, max_length=2048,
                        generation=Generation(max_completion_length=512))
    e = run(swift, seq=2048)
    assert e.shape.sequence_length == 2560
    assert any("query + response" in note for note in e.assumptions)
    assert e.stage(3).per_gpu["activations"] > run(dataclasses.replace(swift, generation=Generation()),
                                                  seq=2048).stage(3).per_gpu["activations"]
    # OpenRLHF: --prompt_max_len + --generate_max_len where no length is given; a length of its own is kept
    openrlhf = MethodSetup(method=Method.PPO, trainer=TrainerFamily.OPENRLHF,
                           generation=Generation(max_prompt_length=1024, max_completion_length=1024))
    assert run(openrlhf, seq=None).shape.sequence_length == 2048
    assert run(openrlhf, seq=4096).shape.sequence_length == 4096
    # TRL's PPOConfig has no prompt cap: the shape's length stands
    trl = MethodSetup(method=Method.PPO, trainer=TrainerFamily.TRL, max_length=2048,
                      generation=Generation(max_completion_length=512))
    assert run(trl, seq=2048).shape.sequence_length == 2048


# --------------------------------------------------------------------------- the frozen models at load


def load_peak(setup: MethodSetup, stage: int, **shape):
    from zeroadvisor.model.spec import LoadInputs
    st = run(setup, load=LoadInputs(load_dtype="bf16"), **shape).stage(stage)
    return st, st.phases["load"]


@pytest.mark.parametrize("stage", [0, 1, 2])
def test_reference_is_read_into_host_ram_beside_the_policy_before_its_engine(stage):
    # DPOTrainer.__init__ (TRL 1.9.0) builds the reference with the policy's model_init_kwargs (device_map None:
    # host RAM on every rank) while the HF Trainer keeps the policy on the host until train(): both, 8 ranks
    st, peak = load_peak(dpo(trainer_version="1.16.0"), stage)
    _, sft = load_peak(MethodSetup(), stage)
    assert peak.host_per_node - sft.host_per_node == 8 * 2 * P
    [built] = [t for t in st.terms if t.key == "frozen_models_built"]
    assert built.phase == "load" and built.device == "cpu" and built.nbytes * 1 == 8 * 2 * P


@pytest.mark.parametrize("stage", [0, 1, 2])
def test_the_reference_engine_is_on_the_gpu_while_the_policy_engine_is_built(stage):
    # prepare_deepspeed runs in DPOTrainer.__init__, before the policy's deepspeed.initialize: its stage-0 copy
    # sits beside the policy's whole module as the engine moves and flattens it
    _, peak = load_peak(dpo(trainer_version="1.16.0"), stage)
    _, sft = load_peak(MethodSetup(), stage)
    assert peak.gpu - sft.gpu == 2 * P


def test_zero_init_partitions_the_reference_at_stage_3():
    st, peak = load_peak(dpo(trainer_version="1.16.0"), 3)
    _, sft = load_peak(MethodSetup(), 3)
    assert not [t for t in st.terms if t.key == "frozen_models_built"]
    assert peak.host_per_node == sft.host_per_node
    assert 0 <= peak.gpu - sft.gpu <= 2 * ceil_div(P, 8)


def test_no_reference_no_change_at_load():
    # precompute_ref_log_probs: no reference model (DPOTrainer.__init__ sets ref_model None)
    for stage in (1, 3):
        _, peak = load_peak(dpo(trainer_version="1.16.0", precompute_ref_log_probs=True), stage)
        _, sft = load_peak(MethodSetup(), stage)
        assert (peak.gpu, peak.host_per_node) == (sft.gpu, sft.host_per_node)


def test_the_paired_note_names_a_reference_forward_only_where_there_is_one():
    from zeroadvisor.memory.method import method_notes

    def note(setup: MethodSetup) -> str:
        return next(n for n in method_notes(setup, False, SPEC) if "concatenated" in n)

    # TRL runs the reference after the policy's forward (get_batch_metrics @ v0.7.4, _compute_loss @ v1.9.0)
    assert "reference forward runs under no_grad after the policy's" in note(dpo())
    assert "reference" not in note(MethodSetup(method=Method.CPO))  # CPO/SimPO: no reference model
    assert "reference" not in note(dpo(precompute_ref_log_probs=True))


# LLaMA-Factory's PPO (llamafactory/train/ppo/workflow.py run_ppo @ v0.9.3, the same 0.9.0 to 0.9.5): the policy is
# an AutoModelForCausalLMWithValueHead (the critic is its value head, no second copy); the reward model is an adapter
# on the policy with reward_model_type lora (the default) and a second model only with full; the reference is none
# with LoRA and a second copy otherwise, both prepared by TRL 0.9.6's PPOTrainer._prepare_deepspeed.
LF_PPO = "model_name_or_path: m\nstage: ppo\ncutoff_len: 1024\nreward_model: saves/rm\n"


def _lf_ppo(tmp_path, text: str) -> MethodSetup:
    from zeroadvisor.config.training_args import read_training_args

    path = tmp_path / "ppo.yaml"
    path.write_text(LF_PPO + text)
    reading = read_training_args(path).method
    assert reading is not None and reading.setup.method is Method.PPO
    return dataclasses.replace(reading.setup, trainer_version="0.9.3")


@pytest.mark.parametrize("stage", [1, 3])
def test_llama_factory_lora_ppo_counts_no_critic_reward_or_reference_copy(tmp_path, stage):
    setup = _lf_ppo(tmp_path, "finetuning_type: lora\nreward_model_type: lora\n")
    e = run(setup, NO_OPTIMIZER)
    st, sft = e.stage(stage), run(MethodSetup(), NO_OPTIMIZER).stage(stage)
    assert not {"critic", "reward_model", "reference_model"} & set(st.per_gpu)
    # the parameters and optimizer states are SFT's (no other model); the step's transients counted beyond the
    # loss's tensors freed before them (the reduction's flat copy, the step's fp32 gradient) shrink with its larger
    # loss; the activations are the step's over query and response, or the rollout (memory/generation.py), the larger
    moment = sum(t.nbytes for t in st.terms if t.key == "generation_moment" and t.phase == "train")
    for row in ("parameters", "optimizer_states"):
        assert st.per_gpu[row] == sft.per_gpu[row]
    for row in ("buffers", "gradients"):
        assert st.per_gpu[row] <= sft.per_gpu[row]
    # the step trains on the query (up to cutoff_len 1024) and the response (max_new_tokens, 1024 by default), its
    # loss holding four fp32 copies of the logits where SFT's holds three (benchmarks/ppo_loss.md)
    longer = run(MethodSetup(), NO_OPTIMIZER, seq=2048).stage(stage)
    assert st.per_gpu["activations"] - moment == longer.per_gpu["activations"] + 4 * 2048 * 32000
    assert any("up to 1024 prompt tokens and 1024 generated, one sequence through the policy with its value head" in a
               for a in e.assumptions)
    assert any("value head (hidden × 1) on the policy's own backbone" in n for n in st.notes + e.assumptions)


def test_llama_factory_ppo_step_matches_trl_0_9_6_s_own_loss_measured_on_cpu():
    """benchmarks/ppo_loss.json: TRL 0.9.6's own value head, logprobs_from_logits and PPOTrainer.loss behind
    LLaMA-Factory 0.9.3's batched_forward_pass, one mini batch and its backward on CPU
    (benchmarks/calibrate_ppo_loss.py): 4.00 fp32 copies of the logits at every size. The estimate's activations
    for the same model and shape are within 1% of each measured peak; SFT's count of the same step (three copies)
    is a quarter short."""
    from pathlib import Path

    from zeroadvisor.model.spec import Checkpointing

    data = json.loads((Path(__file__).resolve().parent.parent / "benchmarks" / "ppo_loss.json").read_text())
    spec = spec_from_hf_config(data["model"])
    assert len(data["rows"]) >= 3 and {row["trl"] for row in data["rows"]} == {"0.9.6"}
    for row in data["rows"]:
        setup = MethodSetup(method=Method.PPO, trainer=TrainerFamily.LLAMA_FACTORY, trainer_version="0.9.3")
        shape = TrainingShape(row["query"] + row["response"], Checkpointing.FULL, True, method=setup)
        predicted = activation_bytes(activation_spec(setup, spec), shape, row["rows"], "bf16").nbytes
        assert abs(predicted / row["peak"] - 1) < 0.01, row
        plain = activation_bytes(spec, dataclasses.replace(shape, method=MethodSetup()), row["rows"], "bf16").nbytes
        assert plain / row["peak"] < 0.8, row


def test_trl_ppo_step_matches_trl_s_own_code_measured_on_cpu():
    """benchmarks/trl_ppo_loss.json: TRL 1.9.0's own forward, PolicyAndValueWrapper and selective_log_softmax with
    PPOTrainer.train's loss lines (and the log_softmax + gather of TRL 0.9 to 0.14), one micro batch and its backward
    on CPU (benchmarks/calibrate_trl_ppo_loss.py). The estimate's activations for the same model and shape are
    within 1% of each measured peak; a count of three copies of the whole sequence's logits (the plain bf16 loss's)
    is short by the response's copies, more the longer the response."""
    from pathlib import Path

    from zeroadvisor.config.method import Generation
    from zeroadvisor.model.spec import Checkpointing

    data = json.loads((Path(__file__).resolve().parent.parent / "benchmarks" / "trl_ppo_loss.json").read_text())
    spec = spec_from_hf_config(data["model"])
    assert len(data["rows"]) >= 8 and {row["predicted_release"] for row in data["rows"]} == {None, "0.14.0"}
    for row in data["rows"]:
        setup = MethodSetup(method=Method.PPO, trainer=TrainerFamily.TRL, trainer_version=row["predicted_release"],
                            generation=Generation(max_completion_length=row["response"]))
        tokens = row["query"] + row["response"]
        shape = TrainingShape(tokens, Checkpointing.FULL, True, method=setup)
        predicted = activation_bytes(activation_spec(setup, spec), shape, row["rows"], "bf16").nbytes
        assert abs(predicted / row["peak"] - 1) < 0.01, row
        # the same response length counted twice (0.15+) or three times (before), beyond the whole logits' three
        copies = 2 if row["predicted_release"] is None else 3
        assert abs(row["peak"] / row["copy_bytes"] - (3 + copies * row["response"] / tokens)) < 0.05, row


def test_llama_factory_ppo_from_0_9_4_is_refused_beside_its_own_trl_pin(tmp_path):
    """CustomPPOTrainer.__init__ @ v0.9.4, v0.9.5 requires TRL 0.8.6 to 0.9.6; LLaMA-Factory's own pin installs
    0.18 to 0.24. No TRL pin read: its own pin's TRL is refused, at every stage; its release unknown: the newest
    read (0.9.5) decides; 0.9.3 makes no such check."""
    from zeroadvisor.memory.method import llama_factory_ppo_trl_refusal

    setup = dataclasses.replace(_lf_ppo(tmp_path, "finetuning_type: lora\n"), trainer_version="0.9.4")
    words = llama_factory_ppo_trl_refusal(setup)
    assert words is not None and "LLaMA-Factory's own pin installs trl>=0.18.0,<=0.24.0" in words
    assert "ppo requires TRL version >=0.8.6,<=0.9.6." in words
    unknown = llama_factory_ppo_trl_refusal(dataclasses.replace(setup, trainer_version=None))
    assert unknown is not None and "LLaMA-Factory 0.9.4+ (its release not pinned: the newest read)" in unknown
    for fine in (dataclasses.replace(setup, trainer_version="0.9.3"), dataclasses.replace(setup, trl_version="0.9.6"),
                 dataclasses.replace(setup, trl_version="<0.10"), dataclasses.replace(setup, trl_version="nonsense!"),
                 dataclasses.replace(setup, method=Method.DPO)):
        assert llama_factory_ppo_trl_refusal(fine) is None, fine
    assert llama_factory_ppo_trl_refusal(dataclasses.replace(setup, trl_version=">=0.18")) is not None
    e = run(setup, NO_OPTIMIZER)
    assert all(st.trainer_refusal == words for st in e.stages)


@pytest.mark.parametrize("stage", [1, 3])
def test_llama_factory_full_ppo_counts_a_reward_and_a_reference_copy_and_no_critic(tmp_path, stage):
    setup = _lf_ppo(tmp_path, "finetuning_type: full\nreward_model_type: full\n")
    st = run(setup, NO_OPTIMIZER).stage(stage)
    copy = 2 * ceil_div(P, 8) if stage == 3 else 2 * P  # _prepare_deepspeed: stage 3 kept, else 0
    assert st.per_gpu["reference_model"] == copy and st.per_gpu["reward_model"] == copy
    assert "critic" not in st.per_gpu
    terms = train_terms(st, "reward_model")
    assert "PPOTrainer._prepare_deepspeed @ v0.9.6" in terms["reward_params"].source
    # with an optimizer block LLaMA-Factory 0.9.3's TRL 0.9.6 builds an optimizer for each frozen engine (no copy)
    old = run(setup).stage(1)
    assert old.per_gpu["reference_model"] == old.per_gpu["reward_model"] == 14 * P
    # api: a server, no model
    api = run(_lf_ppo(tmp_path, "finetuning_type: full\nreward_model_type: api\n"), NO_OPTIMIZER).stage(stage)
    assert "reward_model" not in api.per_gpu and api.per_gpu["reference_model"] == copy


@pytest.mark.parametrize("setup, loads", [
    (MethodSetup(method=Method.GRPO, trainer=TrainerFamily.TRL, trainer_version="0.18.2"), True),  # beta 0.04
    (MethodSetup(method=Method.GRPO, trainer=TrainerFamily.TRL, trainer_version="0.19.0"), False),  # beta 0.0
    (MethodSetup(method=Method.GRPO, trainer=TrainerFamily.MS_SWIFT), True),  # ms-swift: 0.04 where None
    (MethodSetup(method=Method.GRPO, trainer=TrainerFamily.MS_SWIFT, beta=0.0), False),
    (MethodSetup(method=Method.GRPO, trainer=TrainerFamily.AXOLOTL, trainer_version="0.18.0"), False),  # TRL 1.8.0
], ids=["trl-0.18", "trl-0.19", "swift-default", "swift-beta-0", "axolotl"])
def test_grpo_default_beta_follows_the_family_and_release(setup, loads):
    # trl/trainer/grpo_config.py beta: 0.04 up to v0.18.0, 0.0 from v0.19.0; ms-swift rlhf_args.py _check_grpo sets
    # 0.04 where beta is None; a full fine-tune with beta > 0 keeps a reference copy (2P below ZeRO-3)
    st = run(setup, NO_OPTIMIZER).stage(1)  # no optimizer block: TRL <= 1.9.0 would copy it (14 B/param)
    assert ("reference_model" in st.per_gpu) is loads
    if loads:
        assert st.per_gpu["reference_model"] == 2 * P
    assumed = {a.name: a for a in run(setup, NO_OPTIMIZER).assumed} if setup.beta is None else {}
    if setup.beta is None:
        assert float(assumed["beta"].value) == (0.04 if loads else 0.0)


def test_ms_swift_colocated_vllm_takes_its_own_default_share():
    # ms-swift's vllm_gpu_memory_utilization defaults to 0.9 (swift/trainers/arguments.py @ v3.8.0), TRL's to 0.3
    gen = Generation(use_vllm=True, vllm_mode=VllmMode.COLOCATE)
    swift = run(MethodSetup(method=Method.GRPO, trainer=TrainerFamily.MS_SWIFT, beta=0.0, generation=gen)).stage(3)
    trl = run(MethodSetup(method=Method.GRPO, trainer=TrainerFamily.TRL, beta=0.0, generation=gen)).stage(3)
    assert swift.per_gpu["vllm"] == int(80 * GB * 0.9) and trl.per_gpu["vllm"] == int(80 * GB * 0.3)


def test_llama_factory_reward_model_holds_its_value_head_models_logits_at_the_forwards_end():
    # run_rm loads AutoModelForCausalLMWithValueHead (add_valuehead=True, v0.9.3), whose forward computes the LM
    # head's logits and upcasts them (trl modeling_value_head.py @ v0.9.6): 2 + 4 B per token and vocabulary
    # entry over chosen + rejected, beyond the backward's peak; TRL's RewardTrainer (a scalar head) has none
    lf = run(MethodSetup(method=Method.REWARD, trainer=TrainerFamily.LLAMA_FACTORY), NO_OPTIMIZER, seq=4096)
    [term] = [t for t in lf.stage(1).terms if t.key == "value_head_logits"]
    logits = 6 * 2 * 4096 * 32000
    assert 0 < term.nbytes < logits and term.nbytes >= logits - 2 * 2**30
    trl = run(MethodSetup(method=Method.REWARD, trainer=TrainerFamily.TRL), NO_OPTIMIZER, seq=4096)
    assert not [t for t in trl.stage(1).terms if t.key == "value_head_logits"]
    assert lf.stage(1).per_gpu["total"] - trl.stage(1).per_gpu["total"] >= term.nbytes


def test_axolotl_simpo_holds_no_reference_in_training_and_its_unused_copy_only_at_load():
    """axolotl/train.py setup_reference_model loads a copy for simpo, kto and grpo too, but core/builders/rl.py
    hands it to the dpo/ipo trainers only: dropped when setup returns, before the policy's engine (read at 0.18)."""
    plain = MethodSetup(method=Method.CPO, trainer=TrainerFamily.AXOLOTL, trainer_version="0.18.0")
    unused = dataclasses.replace(plain, unused_copy_at_load=True)
    for stage in (1, 3):
        assert "reference_model" not in run(unused).stage(stage).per_gpu
    st, peak = load_peak(unused, 1)
    _, alone = load_peak(plain, 1)
    assert peak.host_per_node - alone.host_per_node == 8 * 2 * P  # bf16, on each of the node's 8 ranks
    [built] = [t for t in st.terms if t.key == "frozen_models_built"]
    assert built.phase == "load" and built.device == "cpu"
    assert peak.gpu == alone.gpu  # no engine: nothing beside the policy's on the GPU
    # kto: TRL's own reference stays resident; axolotl's copy adds to the host at load only
    kto = MethodSetup(method=Method.KTO, trainer=TrainerFamily.AXOLOTL, trainer_version="0.18.0")
    both, _ = load_peak(dataclasses.replace(kto, unused_copy_at_load=True), 1)
    one, _ = load_peak(kto, 1)
    assert both.per_gpu == one.per_gpu and both.per_gpu["reference_model"] > 0
    assert sum(t.nbytes for t in both.terms if t.key == "frozen_models_built") == 2 * sum(
        t.nbytes for t in one.terms if t.key == "frozen_models_built")


@pytest.mark.parametrize("method", [Method.DPO, Method.KTO])
def test_trl_1_15_scores_dpo_and_kto_through_the_fused_lm_head(method):
    """dpo_trainer.py and kto_trainer.py _compute_loss @ v1.15.0 and v1.16.0 call the model with fused_lm_head=True
    (none in 1.14.0): no bf16 logits (3 copies of 2 B per token and vocabulary entry), the fused head's fp32
    gradients, casts and tile instead; an unknown release is costed as the newest read. ms-swift's own DPO keeps
    selective_log_softmax on the logits whatever TRL it pins."""
    sequences = 2 if method == Method.DPO else 1
    tokens = sequences * 1024

    def act(**kw):
        return run(MethodSetup(method=method, **kw)).stage(3).per_gpu["activations"]

    def loss_peak(release: str) -> int:  # the head and loss's peak as memory/activations.py counts it
        setup = MethodSetup(method=method, trainer_version=release)
        shape = TrainingShape(1024, "full", method=setup)
        return activation_bytes(activation_spec(setup, SPEC), shape, sequences, "bf16").logits

    # 1.14: the per-row log-softmax's backward, two bf16 copies and one row's (DPO's 2 rows; KTO's 1 row: 3);
    # 1.16: the fused head, no logits
    assert loss_peak("1.14.0") == 2 * 32000 * (2 * tokens + 1024) + 8 * tokens
    assert loss_peak("1.16.0") == fused_head_bytes(2, tokens, 4096, 32000) + 8 * tokens
    assert act(trainer_version="1.16.0") != act(trainer_version="1.14.0")
    assert act(trainer_version="1.15.0") == act(trainer_version="1.16.0") == act()
    assert act(trainer=TrainerFamily.MS_SWIFT) == act(trainer=TrainerFamily.MS_SWIFT, trainer_version="3.8.0")


@pytest.mark.parametrize("quant", ["4bit", "8bit"])
def test_llama_factory_s_quantized_reference_is_whole_on_every_gpu_at_every_stage(quant):
    """llamafactory/train/dpo/trainer.py: a reference loaded in 4 or 8 bits is not handed to DeepSpeed ("quantized
    models are already set on the correct device"): not partitioned at ZeRO-3, and no optimizer copy whatever the
    config's block. Its Linear weights but the head quantized (model/peft.py quantized_bytes), the rest in bf16."""
    from zeroadvisor.model.peft import quantized_bytes

    linears = {(4096, 4096): 4 * 32, (4096, 11008): 2 * 32, (11008, 4096): 32}
    elements = sum(a * b * n for (a, b), n in linears.items())
    stored = sum(quantized_bytes(a, b, quant, True) * n for (a, b), n in linears.items())
    setup = dpo(trainer=TrainerFamily.LLAMA_FACTORY, reference_model="other/llama", reference_quantization=quant)
    for stage in (0, 1, 3):
        st = run(setup).stage(stage)
        [term] = train_terms(st, "reference_model").values()
        assert term.nbytes == stored + 2 * (P - elements) and "not prepared by DeepSpeed" in term.what
    assert stored < (0.6 if quant == "4bit" else 1.01) * elements  # 0.5 B + constants, or 1 B + a scale per row
    # unquantized, the same reference is partitioned at ZeRO-3 (a config without an optimizer block: TRL's
    # preparation would build one for it)
    plain = run(dpo(trainer=TrainerFamily.LLAMA_FACTORY, reference_model="other/llama"), NO_OPTIMIZER).stage(3)
    assert plain.per_gpu["reference_model"] < stored


def test_axolotl_s_unused_copy_is_partitioned_on_the_gpu_under_zero_init():
    """Under zero.Init (ZeRO-3) axolotl's copy that no trainer gets is built as the policy is, partitioned in the
    config's dtype on every GPU, until setup returns: its partition beside the policy's at the build, no host copy."""
    from zeroadvisor.memory.method import frozen_at_load
    from zeroadvisor.memory.options import configured_option
    from zeroadvisor.memory.phases import load_moments
    from zeroadvisor.memory.settings import read_settings
    from zeroadvisor.model.spec import LoadInputs

    unused = MethodSetup(method=Method.CPO, trainer=TrainerFamily.AXOLOTL, trainer_version="0.18.0",
                         unused_copy_at_load=True)
    settings = read_settings(ZERO3, SPEC, 8)
    option, _ = configured_option(settings)

    def moments(setup, zero_init):
        beside = frozen_at_load(setup, SPEC, {}, [])
        load = LoadInputs(load_dtype="bf16", zero_init=zero_init)
        return {m.name: m for m in load_moments(SPEC, settings, option, CLUSTER, load, beside=beside)}

    built = moments(unused, True)["frozen_models_built"]
    [part] = [t for t in built.every_rank if t.key == "unused_copy_partition"]
    assert (part.device, part.nbytes) == ("gpu", 2 * ceil_div(P, 8))
    assert not [t for t in built.every_rank if t.device == "cpu" and t.key == "frozen_models_built"]
    assert "frozen_models_built" not in moments(dataclasses.replace(unused, unused_copy_at_load=False), True)
    # without zero.Init the copy is read into host RAM instead (the test above)
    host = moments(unused, False)["frozen_models_built"]
    assert not [t for t in host.every_rank if t.key == "unused_copy_partition"]


def test_llama_factory_refuses_an_8_bit_model_under_zero_3_whatever_its_memory():
    """llamafactory/model/model_utils/quantization.py configure_quantization: under ZeRO-3 only 4-bit bitsandbytes
    runs ("Only 4-bit quantized model can use fsdp+qlora or auto device map."), for the policy's quantization_bit
    and the reference's ref_model_quantization_bit (create_ref_model loads it through the same function). The
    memory is still counted; the option carries the refusal, and only ZeRO-3 does."""
    from zeroadvisor.model.hf import layout_from_hf_config
    from zeroadvisor.model.peft import PeftSettings, apply

    eight = dpo(trainer=TrainerFamily.LLAMA_FACTORY, reference_model="other/llama", reference_quantization="8bit")
    result = run(eight)
    refused = result.stage(3).trainer_refusal
    assert refused and "ref_model_quantization_bit: 8" in refused and "quantization.py" in refused
    assert "the trainer does not run this configuration" in result.stage(3).notes[0]
    assert result.stage(3).per_gpu["reference_model"] > 0  # counted all the same
    assert all(st.trainer_refusal is None for st in result.stages if st.option.stage < 3)
    # 4 bits runs under ZeRO-3; another trainer's 8-bit reference is not LLaMA-Factory's check
    assert run(dataclasses.replace(eight, reference_quantization="4bit")).stage(3).trainer_refusal is None
    assert run(dataclasses.replace(eight, trainer=TrainerFamily.TRL)).stage(3).trainer_refusal is None
    # the policy's own 8-bit base (QLoRA), SFT included
    modules = layout_from_hf_config(LLAMA2_7B)[2]
    qlora8 = apply(SPEC, modules, PeftSettings(method="qlora", quantization="8bit"))
    assert qlora8.quantization == "8bit"
    sft = MethodSetup(trainer=TrainerFamily.LLAMA_FACTORY)
    policy = run(sft, spec=qlora8).stage(3).trainer_refusal
    assert policy and "quantization_bit: 8" in policy and "ref_model" not in policy
    qlora4 = apply(SPEC, modules, PeftSettings(method="qlora"))
    assert run(sft, spec=qlora4).stage(3).trainer_refusal is None
    assert run(MethodSetup(), spec=qlora8).stage(3).trainer_refusal is None  # no trainer said: not its check
    # the file's own ZeRO-3 refusals (use_unsloth, ...) join it, at ZeRO-3 only
    unsloth = "LLaMA-Factory raises \"Unsloth is incompatible with DeepSpeed ZeRO-3.\" for use_unsloth: true"
    both = run(dataclasses.replace(sft, refusals=(Refusal(unsloth, frozenset({3})),)), spec=qlora8)
    assert both.stage(3).trainer_refusal.startswith(unsloth + "; LLaMA-Factory raises \"Only 4-bit")
    assert both.stage(2).trainer_refusal is None


_LF_QLORA8 = ("model_name_or_path: {model}\nstage: sft\ndo_train: true\nfinetuning_type: lora\nlora_target: all\n"
              "quantization_bit: 8\ncutoff_len: 1024\nper_device_train_batch_size: 1\nbf16: true\n")


def _lf_check(cli, tmp_path, stage: int, hf_config: dict, *cluster: str, template: str = _LF_QLORA8):
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "ds.json").write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                                                  "zero_optimization": {"stage": stage}}))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(hf_config))
    (tmp_path / "lf.yaml").write_text(template.format(model=tmp_path / "model"))
    return cli("check", str(tmp_path / "ds.json"), "--training-args", str(tmp_path / "lf.yaml"), "--gpus", "8",
               "--model", str(tmp_path / "model"), "--load-dtype", "bf16", "--format", "json", *cluster)


def test_an_8_bit_llama_factory_run_at_zero_3_fails_and_its_fix_is_a_stage_the_trainer_runs(cli, tmp_path):
    """ZA814: the configured ZeRO-3 'fits' but LLaMA-Factory stops at load; the check fails, the finding says the run
    stops before training and recommends the lower stage, which the trainer runs (as ZA802 does)."""
    result = _lf_check(cli, tmp_path, 3, LLAMA2_7B, "--gpu", "A100-SXM4-80GB")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    (stop,) = [f for f in report["findings"] if f["code"] == "ZA814"]
    assert stop["severity"] == "error" and stop["stops_before_training"] == "the trainer refuses this configuration"
    assert "(quantization_bit: 4) runs there" in stop["message"]
    by_label = {s["label"]: s for s in report["estimate"]["stages"]}
    text = _lf_check(cli, tmp_path / "text", 3, LLAMA2_7B, "--gpu", "A100-SXM4-80GB", "--format", "text").stdout
    (row,) = [line for line in text.splitlines() if line.startswith("* ZeRO-3")]
    assert row.endswith("the trainer refuses it")
    zero0 = [line for line in text.splitlines() if line.startswith(("  ZeRO-0", "> ZeRO-0"))]
    assert zero0 and not any(line.endswith("refuses it") for line in zero0)
    assert "configure_quantization" in by_label["Z3"]["trainer_refusal"] and by_label["Z2"]["trainer_refusal"] is None
    lower = [f for f in report["findings"] if f["code"] == "ZA802"]
    assert lower and lower[0]["recommends"]["option"].startswith("Z") and "Z3" not in lower[0]["recommends"]["option"]
    assert stop["recommends"]["option"] == lower[0]["recommends"]["option"] and stop["fix"] == lower[0]["fix"]


_LF_FULL = ("model_name_or_path: {model}\nstage: sft\ndo_train: true\nfinetuning_type: full\ncutoff_len: 1024\n"
            "per_device_train_batch_size: 1\nbf16: true\n")


def test_layer_wise_badam_below_zero_3_is_refused_and_the_fix_is_zero_3(cli, tmp_path):
    """get_train_args (v0.8.3 on): layer-wise BAdam, the default badam_mode, runs under ZeRO-3 only. At ZeRO-2 the
    memory fits but the run stops; the finding's fix is the stage the trainer runs, and that option is not refused.
    Pinned to 0.8.2, BAdam is refused with any DeepSpeed config: no stage runs, so no fix."""
    result = _lf_check(cli, tmp_path / "now", 2, LLAMA2_7B, "--gpu", "A100-SXM4-80GB",
                       template=_LF_FULL + "use_badam: true\n")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    (stop,) = [f for f in report["findings"] if f["code"] == "ZA814"]
    assert "Layer-wise BAdam only supports DeepSpeed ZeRO-3 training." in stop["message"]
    assert stop["recommends"]["option"].startswith("Z3") and stop["fix"]["zero_optimization"]["stage"] == 3
    refused = {s["label"]: s["trainer_refusal"] for s in report["estimate"]["stages"]}
    assert all(refused[label] for label in ("Z0", "Z1", "Z2")) and refused["Z3"] is None
    old = tmp_path / "old"
    old.mkdir()
    (old / "requirements.txt").write_text("llamafactory==0.8.2\n")
    report = json.loads(_lf_check(cli, old, 2, LLAMA2_7B, "--gpu", "A100-SXM4-80GB",
                                  template=_LF_FULL + "use_badam: true\n").stdout)
    (stop,) = [f for f in report["findings"] if f["code"] == "ZA814"]
    assert "GaLore and BAdam are incompatible with DeepSpeed yet." in stop["message"] and "fix" not in stop
    assert "change it in the trainer's file" in stop["message"]


_AXOLOTL = "base_model: {model}\nmicro_batch_size: 1\nsequence_len: 1024\nbf16: true\noptimizer: muon\n"


def test_axolotl_refuses_deepspeed_with_muon_at_every_stage_unless_pinned_before_it(cli, tmp_path):
    """check_muon_deepspeed_fsdp (axolotl 0.8.0 on): the check fails at whatever stage, no fix is written (no
    DeepSpeed config runs it) and the finding names the setting; axolotl 0.7.0 had no such check."""
    result = _lf_check(cli, tmp_path / "now", 2, LLAMA2_7B, "--gpu", "A100-SXM4-80GB", template=_AXOLOTL)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    (stop,) = [f for f in report["findings"] if f["code"] == "ZA814"]
    assert stop["message"].startswith("axolotl raises \"Muon optimizer is currently incompatible with DeepSpeed\"")
    assert "fix" not in stop and "recommends" not in stop
    assert all(s["trainer_refusal"] for s in report["estimate"]["stages"])
    old = tmp_path / "old"
    old.mkdir()
    (old / "requirements.txt").write_text("axolotl==0.7.0\n")
    report = json.loads(_lf_check(cli, old, 2, LLAMA2_7B, "--gpu", "A100-SXM4-80GB", template=_AXOLOTL).stdout)
    assert "ZA814" not in {f["code"] for f in report["findings"]}


def test_the_advisor_never_recommends_a_zero_3_option_the_trainer_refuses(cli, tmp_path, monkeypatch):
    """On an 8.5 GiB card ZeRO-3 fits the 8-bit Llama-2-7B and ZeRO-0 to 2 do not; LLaMA-Factory refuses 8 bits at
    ZeRO-3, so the fix for the configured ZeRO-2 is no ZeRO-3 option. Without the refusal it would be."""
    def recommended(result) -> list[str]:
        report = json.loads(result.stdout)
        return [f["recommends"]["option"] for f in report["findings"] if f.get("recommends")]

    def check(folder):
        folder.mkdir()
        return _lf_check(cli, folder, 2, LLAMA2_7B, "--gpu-memory", "8.5GiB", "--headroom", "0")

    # nothing else fits (LLaMA-Factory splits no sequence, so no Ulysses: advisor/trainer_settings.py); the refused
    # ZeRO-3 is no way out either
    result = check(tmp_path / "refused")
    refused = recommended(result)
    assert not any(option.startswith("Z3") for option in refused), refused
    assert "Nothing fits" in next(f["message"] for f in json.loads(result.stdout)["findings"] if f["code"] == "ZA801")
    monkeypatch.setattr("zeroadvisor.memory.estimate.trainer_refusal", lambda *args: None)
    assert any(option.startswith("Z3") for option in recommended(check(tmp_path / "unrefused")))


def test_a_llama_factory_file_without_stage_is_llama_factory_s_sft_and_its_refusal_applies(cli, tmp_path):
    """LLaMA-Factory's stage defaults to sft: a file without it is still LLaMA-Factory's (ZA814 at ZeRO-3)."""
    result = _lf_check(cli, tmp_path, 3, LLAMA2_7B, "--gpu", "A100-SXM4-80GB",
                       template=_LF_QLORA8.replace("stage: sft\n", ""))
    assert "stage" not in (tmp_path / "lf.yaml").read_text()
    assert result.returncode == 1 and "ZA814" in {f["code"] for f in json.loads(result.stdout)["findings"]}


@pytest.mark.parametrize(("method", "release", "refused"), [
    (Method.DPO, "0.7.4", False), (Method.DPO, "0.7.5", True), (Method.DPO, "0.21.0", True),
    (Method.DPO, "0.28.0", True), (Method.DPO, "0.29.0", False), (Method.DPO, "1.9.0", False),
    (Method.DPO, None, False), (Method.KTO, "0.8.0", True), (Method.KTO, "1.2.0", True),
    (Method.KTO, "1.3.0", False)])
def test_trl_refuses_precompute_ref_log_probs_under_zero_3_at_the_releases_that_check_it(method, release, refused):
    """DPOTrainer.__init__ (0.7.5 to 0.28.x) and KTOTrainer.__init__ (0.8.0 to 1.2.x) raise "You cannot use
    `precompute_ref_log_probs=True` with Deepspeed ZeRO-3." where the plugin's stage is 3; ZeRO-1/2 run it, and a
    release not pinned is the newest read (no such check)."""
    setup = MethodSetup(method=method, trainer=TrainerFamily.TRL, trainer_version=release,
                        precompute_ref_log_probs=True)
    result = run(setup)
    words = result.stage(3).trainer_refusal
    assert (words is not None) == refused, words
    if refused:
        assert "precompute_ref_log_probs=True` with Deepspeed ZeRO-3" in words and f"{method}_trainer.py" in words
    assert all(st.trainer_refusal is None for st in result.stages if st.option.stage < 3)
    assert run(dataclasses.replace(setup, precompute_ref_log_probs=None)).stage(3).trainer_refusal is None


def test_openrlhf_deepspeed_sleep_at_zero_2_stops_with_an_old_deepspeed_and_its_fix_runs(cli, tmp_path):
    """offload_deepspeed_states (OpenRLHF 0.8.10 on): --deepspeed_enable_sleep below ZeRO-3 without --adam_offload
    raises with DeepSpeed 0.17.5 or lower. Read as 0.17.5 the ZeRO-2 run stops and the fix is an option OpenRLHF runs
    (ZeRO-3, or the optimizer offloaded); read as 0.19.8 it runs."""
    (tmp_path / "ds.json").write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                                                  "zero_optimization": {"stage": 2}}))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(LLAMA2_7B))
    launch = ("ray job submit -- python3 -m openrlhf.cli.train_ppo_ray --zero_stage 2 --bf16 --gradient_checkpointing "
              "--prompt_max_len 512 --generate_max_len 512 --advantage_estimator group_norm --init_kl_coef 0 "
              "--remote_rm_url http://rm --deepspeed_enable_sleep")

    def check(deepspeed: str) -> dict:
        result = cli("check", str(tmp_path / "ds.json"), "--model", str(tmp_path / "model"), "--gpus", "8",
                     "--gpu", "A100-SXM4-80GB", "--launch", launch, "--deepspeed-version", deepspeed,
                     "--format", "json")
        return json.loads(result.stdout)

    report = check("0.17.5")
    (stop,) = [f for f in report["findings"] if f["code"] == "ZA814"]
    assert stop["message"].startswith("OpenRLHF raises \"Only Zero stage 3 is currently supported when using")
    refused = {s["label"]: s["trainer_refusal"] for s in report["estimate"]["stages"]}
    assert refused["Z2"] and refused["Z3"] is None and refused["Z2 +opt:cpu"] is None
    assert refused[stop["recommends"]["option"]] is None
    assert "ZA814" not in {f["code"] for f in check("0.19.8")["findings"]}


def test_no_lower_stage_is_advised_where_the_trainer_refuses_every_stage(cli, tmp_path):
    """axolotl refuses Muon with any DeepSpeed config (check_muon_deepspeed_fsdp): its ZeRO-2 fits but never runs, so
    no "ZeRO-2 fits" (ZA802) beside the refusal. Before, ZA802 advised the refused rung."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(LLAMA2_7B))
    (tmp_path / "ds.json").write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                                                  "zero_optimization": {"stage": 3}}))
    (tmp_path / "requirements.txt").write_text("axolotl==0.12.0\n")
    base = f"base_model: {tmp_path / 'model'}\nsequence_len: 1024\nmicro_batch_size: 1\nbf16: true\n"
    codes = {}
    for name, extra in (("adamw", ""), ("muon", "optimizer: muon\n")):
        (tmp_path / f"{name}.yaml").write_text(base + extra)
        result = cli("check", str(tmp_path / "ds.json"), "--training-args", str(tmp_path / f"{name}.yaml"),
                     "--gpus", "8", "--gpu", "H100-SXM5-80GB", "--format", "json", "--fail-on", "never")
        assert result.returncode == 0, result.stderr
        codes[name] = {f["code"] for f in json.loads(result.stdout)["findings"]}
    assert "ZA802" in codes["adamw"]  # the control: the same run without Muon is told ZeRO-2 fits
    assert "ZA814" in codes["muon"] and "ZA802" not in codes["muon"]


def test_orpo_and_cpo_hold_the_per_row_log_softmax_and_their_chosen_nll():
    """TRL's ORPO and CPO from 0.15 (and ms-swift's, which run TRL's concatenated_forward) take the log-probs with
    selective_log_softmax (2 copies and a row's in backward) and add their NLL over the chosen rows, whose
    log-softmax is saved too: half a copy (TRL 1.9.0's ORPOTrainer on CPU: 3.01 copies at 2 rows, 2.54 at 4 and 8;
    benchmarks/dpo_loss.md). Before 0.15 the full log-softmax's three copies."""
    tokens, v = 2 * 2 * 1024, 32000  # 2 pairs: 4 rows of 1024
    labels = 8 * tokens
    for method in (Method.ORPO, Method.CPO):
        for setup in (MethodSetup(method=method, trainer=TrainerFamily.TRL, trainer_version="0.21.0"),
                      MethodSetup(method=method, trainer=TrainerFamily.MS_SWIFT, trainer_version="3.8.0")):
            assert _loss(setup, samples=2) == 2 * v * (2 * tokens + 1024 + tokens // 2) + labels, setup
        old = MethodSetup(method=method, trainer=TrainerFamily.TRL, trainer_version="0.14.0")
        assert _loss(old, samples=2) == 3 * 2 * v * tokens + labels
    # DPO has no NLL of its own: two copies and a row's
    assert _loss(dpo(trainer_version="0.21.0"), samples=2) == 2 * v * (2 * tokens + 1024) + labels


def test_trl_dpo_s_rpo_alpha_and_sft_loss_add_the_chosen_nll_where_its_code_does():
    """TRL 0.15 to 0.28 add F.cross_entropy over the chosen rows' logits for rpo_alpha or an "sft" loss type
    (concatenated_forward @ v0.24.0): their log-softmax saved, half a copy; 0.29's _compute_loss has no rpo_alpha,
    ms-swift's RPO reuses its per-token log-probs."""
    tokens, v = 2 * 2 * 1024, 32000
    plain = _loss(dpo(trainer_version="0.21.0"), samples=2)
    half = 2 * v * (tokens // 2)
    assert _loss(dpo(trainer_version="0.21.0", rpo_alpha=0.1), samples=2) == plain + half
    assert _loss(dpo(trainer_version="0.24.0", loss_type="sigmoid,sft"), samples=2) == plain + half
    assert _loss(dpo(trainer_version="0.14.0", rpo_alpha=0.1), samples=2) == \
        _loss(dpo(trainer_version="0.14.0"), samples=2)  # the full log-softmax's count, not read before 0.15
    swift = dpo(trainer=TrainerFamily.MS_SWIFT, trainer_version="3.8.0")
    assert _loss(dataclasses.replace(swift, rpo_alpha=0.1), samples=2) == _loss(swift, samples=2)


def test_wpo_weighting_adds_its_logsumexp_copies_to_dpo_s_loss_side():
    """use_weighting (WPO) takes logsumexp over the logits and over twice them under no_grad at the loss side's
    moment: +2 copies at TRL 0.29 to 1.5, +1 from 1.6 (TRL's own _compute_loss on CPU: 7.0 and 5.0 copies against
    5.4-6.0 and 4.1; benchmarks/dpo_loss.md), +3 at 0.15 to 0.28 from the code (log-softmax, doubled, logsumexp)."""
    from zeroadvisor.memory.method import dpo_reference_pass_terms
    from zeroadvisor.memory.parallel import Parallel

    def side(setup: MethodSetup) -> int:
        shape = TrainingShape(1024, "full", method=setup)
        return sum(t.nbytes for t in dpo_reference_pass_terms(shape, SPEC, 2, Parallel(), 2))

    one = 2 * 2 * 2 * 1024 * 32000  # a bf16 copy of 2 pairs' logits
    for release, extra in (("1.9.0", 1), ("1.5.1", 2), ("0.29.0", 2)):
        plain, weighted = side(dpo(trainer_version=release)), side(dpo(trainer_version=release, use_weighting=True))
        assert weighted - plain == extra * one, release
    # 0.21: the moment (2 copies, under the backward's 2 and a row's) becomes 5, 2.75 copies over the backward
    assert side(dpo(trainer_version="0.21.0", use_weighting=True)) == (5 * 4 - (2 * 4 + 1)) * one // 4
    assert side(dpo(trainer_version="0.21.0")) == 0


def test_trl_0_29_s_sft_loss_type_widens_the_bound_by_the_chosen_completion_s_copies():
    """From 0.29 DPO's "sft" loss type takes cross_entropy over the chosen completion's positions (a boolean-indexed
    copy and its saved log-softmax, each at most half the batch's logits): the data decide the share, so the bound
    grows by a copy and the expected count stays."""
    from zeroadvisor.memory.method import dpo_reference_pass_terms
    from zeroadvisor.memory.parallel import Parallel

    def side(setup: MethodSetup) -> tuple[int, int]:
        [term] = dpo_reference_pass_terms(TrainingShape(1024, "full", method=setup), SPEC, 2, Parallel(), 2)
        return term.nbytes, term.upper

    one = 2 * 2 * 2 * 1024 * 32000
    plain, with_sft = side(dpo(trainer_version="1.9.0")), side(dpo(trainer_version="1.9.0", loss_type="sigmoid,sft"))
    assert with_sft[0] == plain[0] and with_sft[1] == plain[1] + one


def test_the_loss_side_is_counted_over_the_backward_as_the_activations_count_it():
    """The loss side's term is its moment less the backward's loss peak as the activations hold it: with rpo_alpha
    at TRL 0.21 that peak includes the chosen rows' NLL (half a copy), so WPO's moment (2 + 3 copies) is over it by
    5 - (2 + 1/4 + 1/2) = 2.25 copies of 4 rows' logits, not 2.75."""
    from zeroadvisor.memory.method import dpo_reference_pass_terms
    from zeroadvisor.memory.parallel import Parallel

    setup = dpo(trainer_version="0.21.0", use_weighting=True, rpo_alpha=0.1)
    [term] = dpo_reference_pass_terms(TrainingShape(1024, "full", method=setup), SPEC, 2, Parallel(), 2)
    one = 2 * 4 * 1024 * 32000  # a bf16 copy of 2 pairs' logits
    assert term.nbytes == 9 * one // 4


def test_openrlhf_splits_every_model_by_the_actor_s_tensor_parallel_degree():
    """openrlhf/utils/deepspeed/deepspeed.py _ds_init_train_model and _ds_init_eval_model @ v0.8.5: with
    --ds_tensor_parallel_size every model OpenRLHF prepares goes through deepspeed.tp_model_init, so the reference,
    the reward model and the critic hold a tensor-parallel rank's share, as the actor does (its example
    train_ppo_llama_ray_tensor_parallelism.sh: Llama-3-8B with TP 2). TRL's prepare_deepspeed runs no
    tp_model_init: its frozen engines stay whole."""
    from zeroadvisor.memory.parallel import Parallel, local_parameters

    config = {**NO_OPTIMIZER, "zero_optimization": {"stage": 2}, "tensor_parallel": {"autotp_size": 2}}
    ppo = MethodSetup(method=Method.PPO, trainer=TrainerFamily.OPENRLHF, colocate_all_models=True, beta=0.01)
    e = run(ppo, config)
    local = local_parameters(SPEC, Parallel(tensor=2)).total
    # by hand for Llama-2-7B: 32 blocks of 4 x 4096^2 + 3 x 4096 x 11008 linears split in two; the embeddings, the
    # head (2 x 32000 x 4096) and the norms (65 x 4096) whole
    assert local == 32 * (4 * 4096**2 + 3 * 4096 * 11008) // 2 + 2 * 32000 * 4096 + 65 * 4096
    st, whole = e.stage(2), run(ppo, NO_OPTIMIZER | {"zero_optimization": {"stage": 2}}).stage(2)
    assert st.per_gpu["reference_model"] == st.per_gpu["reward_model"] == 2 * local
    assert whole.per_gpu["reference_model"] == 2 * P
    # the critic trains at the actor's stage over its split parameters: its bf16 weights are a rank's share
    assert st.per_gpu["critic"] < whole.per_gpu["critic"]
    assert any("split by its tensor-parallel degree 2" in n for n in st.notes + e.assumptions)
    trl = run(dataclasses.replace(ppo, trainer=TrainerFamily.TRL), config).stage(2)
    assert trl.per_gpu["reference_model"] == 2 * P


def test_openrlhf_kto_holds_its_kl_half_with_its_graph():
    """openrlhf/trainer/kto_trainer.py compute_model_logps_with_KL @ v0.8.5: the KL half runs with grad after the
    matched half and KTOLoss detaches the KL, so the half's kept layer tensors and its saved fp32 logits copy stay
    through the step (benchmarks/openrlhf_loss.md: 4.01 fp32 copies of the matched half's logits where the plain
    count holds 3); TRL's KTO runs its KL forward under no_grad: nothing held."""
    openrlhf = run(MethodSetup(method=Method.KTO, trainer=TrainerFamily.OPENRLHF, trainer_version="0.8.5"))
    st = openrlhf.stage(3)
    half = train_terms(st, "activations")["kto_kl_half"]
    logits = 4 * 1 * 1024 * 32000  # micro batch 1, 1024 tokens, V 32000: the saved fp32 copy
    # beside it the half's kept layer tensors: under full recomputation each layer's bf16 input, 32 x 1024 x 4096
    assert half.nbytes >= logits + 32 * 2 * 1024 * 4096
    trl = run(MethodSetup(method=Method.KTO, trainer=TrainerFamily.TRL, trainer_version="1.9.0")).stage(3)
    assert "kto_kl_half" not in train_terms(trl, "activations")
    assert st.per_gpu["activations"] > trl.per_gpu["activations"]


def test_rloo_takes_rlooconfig_s_defaults_beside_grpo_s_machinery():
    """RLOOConfig's beta 0.05 loads a reference model where GRPOConfig's 0.0 loads none; its num_generations 2 is
    the batch check's group; no Liger loss (trl/trainer/rloo_config.py, rloo_trainer.py @ v1.9.0)."""
    from zeroadvisor.memory.liger import trl_loss_runs
    from zeroadvisor.memory.method import grpo_batch_refusal, grpo_default_beta

    gen = Generation(max_prompt_length=512, max_completion_length=512)
    grpo = MethodSetup(method=Method.GRPO, trainer=TrainerFamily.TRL, trainer_version="1.9.0", generation=gen)
    rloo = dataclasses.replace(grpo, rloo=True)
    assert grpo_default_beta(rloo)[0] == 0.05 and grpo_default_beta(grpo)[0] == 0.0
    assert "reference_model" in run(rloo).stage(3).per_gpu and "reference_model" not in run(grpo).stage(3).per_gpu
    # 3 completions per step on one process: GRPO's 8 generations refuse it, RLOO's 2 too; 2 pass RLOO only
    assert grpo_batch_refusal(grpo, 2, 1, 1) is not None and grpo_batch_refusal(rloo, 2, 1, 1) is None
    assert grpo_batch_refusal(rloo, 3, 1, 1) is not None
    liger = dataclasses.replace(rloo, trainer_version="0.26.0")
    assert not trl_loss_runs(liger, True) and trl_loss_runs(dataclasses.replace(liger, rloo=False), True)
