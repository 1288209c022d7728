"""The models and batches a preference/RL method adds to the one being trained (issue 35 item 2).

A DPO run is not the same SFT run: the trainer keeps a reference model beside the policy and runs chosen and
rejected through both; PPO adds a trained critic and a frozen reward model; GRPO with vLLM colocated gives a share
of each card to vLLM. Each is a term in its own row ("reference model", "critic", "reward model", "vLLM": terms.py
METHOD_ROWS), never folded into "overhead", so the advisor's re-estimate of a lower stage carries it too.

The frozen models (reference, reward) as TRL's ``prepare_deepspeed`` (trl/models/utils.py, the same function from
TRL 0.21 to 1.16) hands them to ``deepspeed.initialize``: a deepcopy of the user's DeepSpeed config, the stage kept
at 3, any other stage set to 0 (a whole copy on every GPU), and no optimizer passed. Its dotted
``"zero_optimization.reduce_bucket_size"`` keys are set on a plain dict and DeepSpeed never reads them, so the
config's own (or default) buckets apply. Up to TRL 1.9.0 the copy keeps the user's ``optimizer`` block, and DeepSpeed
then builds an optimizer for the frozen engine (engine.py __init__: has_optimizer from optimizer_name()); TRL 1.9.1
drops ``optimizer``, ``scheduler`` and ``offload_optimizer`` first (its comment: transformers' inference-mode
deepspeed_init does the same). Measured on CPU with DeepSpeed 0.19.8, one rank, bf16, an AdamW block
(tests/oracle/test_trl_reference_oracle.py):

* stage 0, no optimizer block: 2 B/param (the bf16 module; BF16_Optimizer over a DummyOptim holds nothing);
* stage 0, optimizer block: 14 B/param: the module, FP16_Optimizer's fp32 master copy (4) and the basic
  optimizer's Adam states, created at initialize (8);
* stage 3, no optimizer block: 2/N B/param (DeepSpeedZeRoOffload: the partitions);
* stage 3, optimizer block: 2/N + 4/N (fp32 partitioned groups) + 2/N (the gradient partitions, in the gradient
  accumulation dtype), plus stage 3's IPG bucket, reduce_bucket_size elements in the model dtype (TRL's dotted
  override ignored: 5e8 elements, 1 GB, by default); Adam's states stay lazy (the reference never steps).

Where the release is unknown, the expected bytes are the current behaviour (no optimizer block) and the copied
block is the bound (Term.bound), with the assumption stated. LLaMA-Factory, axolotl and ms-swift hand the models
to the TRL release they pin (OLD_TRL_PINS); OpenRLHF builds its own eval config (no optimizer block) and runs the
other models of its Ray trainer on GPUs of their own unless colocated (on_policy_gpus). Each term's source names
the file, the function and the release read.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum, StrEnum, auto
from fractions import Fraction

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from zeroadvisor.config.default_lengths import CLASS_DEFAULT, config_class
from zeroadvisor.config.method import MethodSetup, Placement, release_of
from zeroadvisor.config.pinned_trl import trl_release
from zeroadvisor.config.trainer_pins import DISTRIBUTIONS
from zeroadvisor.memory import bytes as B
from zeroadvisor.memory import generation as G
from zeroadvisor.memory.activations import (
    CHOSEN_NLL_SHARE,
    LOSS_COPIES,
    PPO_WHOLE_LOG_SOFTMAX_COPIES,
    ROW_LOSS_COPIES,
)
from zeroadvisor.memory.assumed import AssumedInput
from zeroadvisor.memory.liger import (
    GRPO_ROW_COPIES_BEFORE_08,
    GRPO_SEQ_TILE,
    GRPO_SOURCE,
    GRPO_TILES,
    GRPO_VOCAB_TILE,
    chunked_logprob_runs,
    grpo_peak,
    scores_without_logits,
    trl_loss_runs,
)
from zeroadvisor.memory.options import Option
from zeroadvisor.memory.parallel import Parallel, local_parameters, parallel_activations
from zeroadvisor.memory.phases import FrozenAtLoad
from zeroadvisor.memory.settings import Settings
from zeroadvisor.memory.states import deepspeed_terms, trainable
from zeroadvisor.memory.terms import Term, ceil_div, exact
from zeroadvisor.memory.trl_sft_loss import FUSED_SOURCE, fused_head_bytes, fused_head_runs
from zeroadvisor.model.peft import Quantization, quantized_base
from zeroadvisor.model.spec import LayerFacts, ModelSpec, TrainingShape
from zeroadvisor.vocab import (
    TRAINER_NAMES,
    Checkpointing,
    Device,
    Method,
    ModelRole,
    Phase,
    Precision,
    Resource,
    TermKind,
    TrainerFamily,
    VllmMode,
)

# The first TRL release whose prepare_deepspeed drops the optimizer block (trl/models/utils.py @ v1.9.1; v1.9.0
# keeps it). The issue text says 1.10: the wheels say 1.9.1.
TRL_DROPS_OPTIMIZER = Version("1.9.1")
PREPARE_SOURCE = "trl/models/utils.py prepare_deepspeed @ v{release}"
# where each family prepares the frozen models, at the release read
FAMILY_SOURCE = {
    TrainerFamily.LLAMA_FACTORY: "llamafactory/train/dpo/trainer.py CustomDPOTrainer.__init__ @ v0.9.3 -> "
                                 "trl/trainer/dpo_trainer.py _prepare_deepspeed @ v0.9.6",
    TrainerFamily.AXOLOTL: "axolotl/train.py setup_reference_model @ v0.18.0 -> trl/models/utils.py "
                           "prepare_deepspeed @ v1.8.0",
    TrainerFamily.MS_SWIFT: "swift/llm/train/rlhf.py _prepare_single_model @ v3.8.0 -> TRL (< 0.21) prepare_deepspeed",
    TrainerFamily.OPENRLHF: "openrlhf/utils/deepspeed/deepspeed.py get_ds_eval_config @ v0.8.5",
}
# LLaMA-Factory's PPO hands its reference (create_ref_model(add_valuehead=True)) to TRL 0.9.6's PPOTrainer, and its
# full reward model to the same _prepare_deepspeed: the plugin's own config (no copy, optimizer block kept), stage 3
# kept, else set to 0
LLAMA_FACTORY_PPO_SOURCE = ("llamafactory/train/ppo/workflow.py run_ppo, ppo/trainer.py CustomPPOTrainer.__init__ "
                            "@ v0.9.3 -> trl/trainer/ppo_trainer.py PPOTrainer._prepare_deepspeed @ v0.9.6")
# GRPO's beta where no file sets it (beta > 0 loads a reference model), by family and release: TRL's
# GRPOConfig.beta is 0.04 up to 0.18.x and 0.0 from 0.19.0 (trl/trainer/grpo_config.py @ v0.14.0 to v0.18.0, v0.19.0,
# v0.21.0, v1.16.0); ms-swift sets 0.04 where it is None (swift/llm/argument/rlhf_args.py GRPOArgumentsMixin
# _check_grpo @ v3.8.0, swift/arguments/rlhf_args.py @ v4.5.2); axolotl hands its trl: block to the TRL it pins
# (1.8.0 at v0.18.0: 0.0). vllm_gpu_memory_utilization defaults to 0.3 in every TRL release read (grpo_config.py
# @ v0.21.0, v0.29.1, v1.9.2, v1.10.0, v1.16.0).
GRPO_DEFAULT_BETA = 0.0
GRPO_KL_BETA = 0.04  # the GRPO paper's (arXiv 2402.03300), TRL's default to 0.18 and ms-swift's
TRL_GRPO_BETA_ZERO = Version("0.19.0")
# RLOOConfig's own defaults where GRPOConfig's differ and decide memory or the batch check (trl/trainer/rloo_config.py
# @ v0.22.0, v1.9.0): beta 0.05 (a reference model), num_generations 2
RLOO_DEFAULT_BETA = 0.05
RLOO_GENERATIONS = 2


# OpenRLHF's GRPO takes PPO's KL coefficient: --init_kl_coef, 0.01 by default, a reference model unless it is <= 0
# (openrlhf/cli/train_ppo_ray.py argparse and train: ``if args.init_kl_coef <= 0: ref_model = None`` @ v0.5.1,
# v0.5.9.post1, v0.8.5, v0.8.11)
OPENRLHF_KL_COEF = 0.01


def grpo_default_beta(setup: MethodSetup) -> tuple[float, str]:
    """GRPO's beta where no file sets it, and whose default it is (GRPO_DEFAULT_BETA's comment)."""
    if setup.trainer == TrainerFamily.MS_SWIFT:
        return GRPO_KL_BETA, "ms-swift's default (rlhf_args.py _check_grpo)"
    if setup.trainer == TrainerFamily.OPENRLHF:
        return OPENRLHF_KL_COEF, "OpenRLHF's default --init_kl_coef (train_ppo_ray.py)"
    if setup.rloo:
        return RLOO_DEFAULT_BETA, "RLOOConfig's default (trl/trainer/rloo_config.py @ v0.22.0 to v1.9.0)"
    release = setup.release
    if setup.trainer in (None, TrainerFamily.TRL) and release is not None and release < TRL_GRPO_BETA_ZERO:
        return GRPO_KL_BETA, f"TRL {setup.trainer_version}'s default (0.04 up to 0.18)"
    return GRPO_DEFAULT_BETA, "TRL's default from 0.19.0"
TRL_COLOCATE_DEFAULT = Version("1.0.0")  # GRPOConfig.vllm_mode's default became "colocate" (was "server")
VLLM_DEFAULT_UTILIZATION = 0.3
# Methods that run chosen and rejected as one concatenated batch: twice the sequences through the policy
# (trl/trainer/dpo_trainer.py concatenated_forward; cpo/orpo the same; reward_trainer two forwards per pair).
PAIRED = frozenset({Method.DPO, Method.ORPO, Method.CPO, Method.REWARD})
FP32_BYTES = 4
ROW_OF = {ModelRole.REFERENCE: "reference_model", ModelRole.REWARD: "reward_model", ModelRole.CRITIC: "critic",
          ModelRole.TEACHER: "teacher_model"}


@dataclass(frozen=True, slots=True)
class OptimizerCopy:
    """Whether the frozen engines get the user's optimizer block: ``expected`` is what the bytes count, ``bound``
    whether the bound adds it (the release unknown), ``release`` the TRL release it was decided by (text)."""

    expected: bool
    bound: bool
    release: str


def batch_factor(setup: MethodSetup) -> int:
    """How many sequences one sample puts through the policy: 2 for the paired methods (chosen + rejected)."""
    return 2 if setup.method in PAIRED else 1


# Losses that compare the policy's log-probs without a reference's: no reference pass runs (LLaMA-Factory's pref_loss
# orpo/simpo, hparams/finetuning_args.py use_ref_model; SimPO's own trainer, princeton-nlp/SimPO
# scripts/simpo_trainer.py get_batch_loss_metrics, which subclasses TRL's DPOTrainer)
REFERENCE_FREE_LOSSES = frozenset({"simpo", "orpo"})


def reference_free_loss(setup: MethodSetup) -> bool:
    """Whether the file's loss type compares the policy's log-probs without a reference's (REFERENCE_FREE_LOSSES)."""
    return (setup.loss_type or "").strip().lower() in REFERENCE_FREE_LOSSES


def has_reference(setup: MethodSetup, policy: ModelSpec) -> bool:
    """Whether the trainer loads a reference model (TRL dpo/kto/grpo trainer __init__ at the releases read):
    none with PEFT (the adapter is disabled for the reference pass) unless a separate one is named, none with
    precompute_ref_log_probs, none for ORPO, CPO/SimPO, and GRPO with beta 0.0 (the default); LLaMA-Factory none
    for pref_loss orpo/simpo (hparams/finetuning_args.py use_ref_model @ v0.9.3). axolotl loads a copy for every
    rl: type but ORPO (train.py setup_reference_model) and hands it to the dpo/ipo trainers only
    (core/builders/rl.py): for simpo nothing keeps it through training (MethodSetup.unused_copy_at_load: the load
    phase only, frozen_at_load)."""
    if setup.use_reference is not None:
        return setup.use_reference
    beta = setup.beta if setup.beta is not None else grpo_default_beta(setup)[0]
    none = (setup.method in (Method.SFT, Method.REWARD, Method.ORPO, Method.CPO, Method.GKD)
            or reference_free_loss(setup)
            or bool(setup.precompute_ref_log_probs)
            or (setup.method == Method.GRPO and beta == 0.0))
    # OpenRLHF builds its reference as a model of its own whatever the actor's --lora_rank (ReferenceModelActor
    # init_model_from_pretrained: Actor(pretrain, ...) without lora_rank, trainer/ray/launcher.py @ v0.8.5)
    peft_base = policy.adapters and setup.trainer != TrainerFamily.OPENRLHF
    return not none and not (peft_base and setup.reference_model is None)



# Trainers that hand the frozen models to a TRL whose preparation copies the optimizer block, up to the newest
# release read that pins such a TRL: LLaMA-Factory 0.9.3 pins trl>=0.8.6,<=0.9.6 and calls TRL's
# DPOTrainer._prepare_deepspeed (trl/trainer/dpo_trainer.py @ v0.9.6: the same deepcopy, no pop), 0.9.4 and 0.9.5
# pin trl>=0.18.0,<=0.24.0 (pyproject.toml, extras/misc.py check_dependencies) and call trl/models/utils.py
# prepare_deepspeed (llamafactory/train/dpo/trainer.py @ v0.9.5; TRL 0.24.0's keeps the block); ms-swift 3.8.0
# pins trl>=0.15,<0.21 and its DPO/KTO/GRPO trainers subclass TRL's (swift/trainers/rlhf_trainer); axolotl 0.18.0
# pins trl==1.8.0 (setup_reference_model hands the model to TRL's trainer). A later release is not read: unknown.
OLD_TRL_PINS: dict[TrainerFamily, tuple[tuple[Version, str], ...]] = {  # (newest release, its TRL), ascending
    TrainerFamily.LLAMA_FACTORY: ((Version("0.9.3"), "TRL <= 0.9.6"), (Version("0.9.5"), "TRL 0.18 to 0.24")),
    TrainerFamily.MS_SWIFT: ((Version("3.999"), "TRL < 0.21"),),  # every 3.x
}  # axolotl runs the TRL it pins itself (config/pinned_trl.py): decided by that TRL's release


def optimizer_copy(setup: MethodSetup, config_has_optimizer: bool) -> OptimizerCopy:
    """Whether the frozen engines' config keeps the user's ``optimizer`` block, by the trainer and its release:
    TRL's prepare_deepspeed copies it up to 1.9.0 (axolotl's trainers at the TRL it pins); the trainers of
    OLD_TRL_PINS at the releases read; OpenRLHF never (openrlhf/utils/deepspeed/deepspeed_utils.py
    get_eval_ds_config @ v0.8.5 builds its own config). Where the release is unknown the expected bytes follow the
    newest release read (NEWEST_READ, as the assumption says) and the bound keeps the block."""
    if not config_has_optimizer or setup.trainer == TrainerFamily.OPENRLHF:
        return OptimizerCopy(False, False, setup.trainer_version or "unknown")
    newest_read = setup.release is None
    release = NEWEST_RELEASE.get(setup.trainer) if newest_read else setup.release
    said = f"{release} (the newest read)" if newest_read else setup.trainer_version
    for newest, pinned in OLD_TRL_PINS.get(setup.trainer, ()) if setup.trainer is not None else ():
        if release is not None and release <= newest:
            return OptimizerCopy(True, False, f"{setup.trainer} {said} ({pinned})")
    trl = trl_release(setup)
    if trl is None:
        return OptimizerCopy(False, True, "unknown")
    label = f"TRL {trl}" if setup.trainer != TrainerFamily.AXOLOTL else f"axolotl {said} (TRL {trl})"
    return OptimizerCopy(trl < TRL_DROPS_OPTIMIZER, False, label)


def _placement(setup: MethodSetup, role: ModelRole) -> Placement | None:
    return next((p for p in setup.placements if p.role == role), None)


# The families whose PPO critic is a value head on the policy's own backbone, not a second model: LLaMA-Factory
# loads the policy as AutoModelForCausalLMWithValueHead (llamafactory/train/ppo/workflow.py run_ppo:
# load_model(..., add_valuehead=True) @ v0.9.0 to v0.9.5 and HEAD) and hands TRL 0.9.6's PPOTrainer that one model;
# its ``v_head`` is a Linear(hidden, 1) (trl/models/modeling_value_head.py ValueHead @ v0.9.6).
VALUE_HEAD_ON_POLICY = frozenset({TrainerFamily.LLAMA_FACTORY})


def reward_loaded(setup: MethodSetup) -> bool:
    """Whether the trainer loads a reward model of its own: PPO's, or one the flags place; not where the files say
    it is an adapter or a server (Placement.loaded False), nor for LLaMA-Factory without ``reward_model_type: full``
    (llamafactory/train/trainer_utils.py create_reward_model @ v0.9.3: "lora", the default, loads an adapter and a
    value head onto the policy, ``model.pretrained_model.load_adapter(reward_model, "reward")``; "api" a URL)."""
    place = _placement(setup, ModelRole.REWARD)
    if place is not None and place.loaded is not None:
        return place.loaded
    if setup.trainer == TrainerFamily.LLAMA_FACTORY:
        return False
    return setup.method == Method.PPO or place is not None


def critic_loaded(setup: MethodSetup) -> bool:
    """Whether a PPO run trains a critic model: not where the flags say none (OpenRLHF without GAE: its
    train_ppo_ray sets critic_pretrain None for any other --advantage_estimator, cli/train_ppo_ray.py @ v0.8.5)."""
    place = _placement(setup, ModelRole.CRITIC)
    return setup.method == Method.PPO and not (place is not None and place.loaded is False)


def frozen_stage(setup: MethodSetup, role: ModelRole, option: Option) -> int:
    """The stage a frozen model is prepared at: the trainer's own for it where its flags say, else the config's
    stage 3 kept and any other set to 0."""
    place = _placement(setup, role)
    return place.zero_stage if place is not None and place.zero_stage is not None else (3 if option.stage == 3 else 0)


def frozen_model_terms(role: ModelRole, spec: ModelSpec, s: Settings, option: Option, N: int,
                       setup: MethodSetup, config_has_optimizer: bool, tensor: int = 1) -> list[Term]:
    """A frozen model (reference, reward) as prepare_deepspeed builds it for ``option``: what it holds per GPU
    (and on the host where the config offloads its parameters); ``tensor``: the tensor-parallel degree it is split
    by (tensor_split: its ZeRO partition is over its GPUs' data-parallel ranks)."""
    row = ROW_OF[role]
    if role == ModelRole.REFERENCE and setup.reference_quantization is not None:
        return [quantized_reference_term(spec, s, setup)]
    place = _placement(setup, role)
    stage = frozen_stage(setup, role, option)
    if place is not None and place.num_nodes and place.gpus_per_node:  # its own GPUs (OpenRLHF --ref_num_gpus...)
        N = max(place.num_nodes * place.gpus_per_node // split_degree(setup, tensor), 1)
    # offload_param is a stage-3 feature: below it DeepSpeed ignores it (OpenRLHF --ref_reward_offload at stage 0);
    # OpenRLHF's eval config offloads only with --ref_reward_offload (get_ds_eval_config(offload=...) @ v0.8.5),
    # never from the actor's offload_param
    offload = stage == 3 and (place.offload if place is not None and place.offload is not None
                              else option.offload_param != Device.NONE and setup.trainer != TrainerFamily.OPENRLHF)
    P = spec.parameters
    w = B.nbytes(s.precision)
    src = (LLAMA_FACTORY_PPO_SOURCE if setup.trainer == TrainerFamily.LLAMA_FACTORY and setup.method == Method.PPO
           else FAMILY_SOURCE.get(setup.trainer) if setup.trainer is not None else None)
    src = src or PREPARE_SOURCE.format(release=setup.trainer_version or "1.16.0")
    name = role.value
    shard = N if stage == 3 else 1
    kept = ceil_div(P, shard) if stage == 3 else P
    device = Resource.CPU if offload else Resource.GPU
    how = f"stage {stage}" + (" (the trainer's flag)" if place is not None and place.zero_stage is not None
                              else " (kept from the config)" if stage == 3 else " (any stage but 3 set to 0)")
    terms = [Term(row, device, kept * w, f"{name}_params", f"{name} model parameters, {how}",
                  f"{w} B × {P:,}" + (f" / {shard}" if shard > 1 else ""), src)]
    copy = optimizer_copy(setup, config_has_optimizer)
    if not (copy.expected or copy.bound) or (s.precision == Precision.FP32 and stage == 0):
        return terms
    # the user's optimizer block copied with the config (TRL <= 1.9.0): what DeepSpeed builds for it
    k = s.optimizer_elements
    opt_device = Resource.CPU if option.offload_optimizer != Device.NONE and stage == 3 else Resource.GPU
    if stage == 0:
        parts = [(f"{name}_opt_master", "fp32 master copy (FP16_Optimizer)", FP32_BYTES * P, "4 B × P",
                  Resource.GPU),
                 (f"{name}_opt_states", "optimizer states created at initialize (FP16_Optimizer)",
                  k * FP32_BYTES * P, f"{k * FP32_BYTES} B × P", Resource.GPU)]
    else:
        g = B.nbytes(s.grad_accum_dtype)
        parts = [(f"{name}_opt_master", "fp32 partitioned groups (stage 3)", FP32_BYTES * kept, f"4 B × P / {N}",
                  opt_device),
                 (f"{name}_opt_grads", "gradient partitions (stage 3)", g * kept, f"{g} B × P / {N}", opt_device),
                 (f"{name}_opt_ipg", "IPG bucket: reduce_bucket_size (TRL's dotted override is not read)",
                  w * s.reduce_bucket_size, f"{w} B × {s.reduce_bucket_size:,}", Resource.GPU)]
    why = (f"the config's optimizer block copied to the {name} engine ({copy.release})"
           if copy.expected else f"bound: the optimizer block copied if TRL <= 1.9.0 ({name} engine)")
    for key, what, nbytes, formula, dev in parts:
        if copy.expected:
            terms.append(Term(row, dev, nbytes, key, f"{what}: {why}", formula, src))
        else:
            terms.append(Term(row, dev, 0, key, f"{what}: {why}", formula, src, kind=TermKind.BOUND, bound=nbytes))
    return terms


QUANTIZED_REFERENCE_SOURCE = ("llamafactory/train/dpo/trainer.py CustomDPOTrainer.__init__, kto/trainer.py @ ff6d4d1 "
                              "(a reference loaded in 8 or 4 bits is not prepared by DeepSpeed: \"quantized models "
                              "are already set on the correct device\"); transformers quantizers/quantizer_bnb_4bit.py "
                              "update_device_map (no device_map: the current GPU); model/peft.py quantized_bytes")


def quantized_reference_term(spec: ModelSpec, s: Settings, setup: MethodSetup) -> Term:
    """LLaMA-Factory's reference loaded by bitsandbytes (ref_model_quantization_bit): not handed to DeepSpeed, so
    whole on every GPU at every stage, ZeRO-3 included; its Linear weights (all but the output head) quantized with
    their constants, the rest in the training precision. Without a layout to find the Linear weights in, the whole
    16-bit model is the bound."""
    quant: Quantization = "8bit" if setup.reference_quantization == "8bit" else "4bit"
    w = B.nbytes(s.precision)
    P = spec.parameters
    base = quantized_base(spec, quant, setup.reference_double_quant)
    what = (f"reference model quantized to {quant} by bitsandbytes (ref_model_quantization_bit), whole on every GPU: "
            "not prepared by DeepSpeed")
    if base is None:
        return Term(ROW_OF[ModelRole.REFERENCE], Resource.GPU, w * P, "reference_params",
                    f"{what}; its Linear weights unknown (no layout): counted unquantized", f"{w} B × {P:,}",
                    QUANTIZED_REFERENCE_SOURCE, kind=TermKind.BOUND)
    elements, nbytes = base
    return Term(ROW_OF[ModelRole.REFERENCE], Resource.GPU, nbytes + w * (P - elements), "reference_params", what,
                f"{quant} Linear weights {nbytes:,} B ({elements:,} elements) + {w} B × {P - elements:,}",
                QUANTIZED_REFERENCE_SOURCE)


# LLaMA-Factory loads every model it quantizes through configure_quantization, the reference too (create_ref_model
# passes quantization_bit=ref_model_quantization_bit to load_model), and raises there under ZeRO-3 for any
# bitsandbytes width but 4: llamafactory/model/model_utils/quantization.py configure_quantization @ v0.8.0, v0.9.0,
# v0.9.3 and ff6d4d1 ("Only 4-bit quantized model can use fsdp+qlora or auto device map.").
LLAMA_FACTORY_QUANTIZATION = "llamafactory/model/model_utils/quantization.py configure_quantization"


# TRL refuses precompute_ref_log_probs under ZeRO-3 ("You cannot use `precompute_ref_log_probs=True` with Deepspeed
# ZeRO-3. Please set `precompute_ref_log_probs=False`.", ``deepspeed_plugin.zero_stage == 3``): DPOTrainer.__init__
# from 0.7.5 (#885) until the DPO refactor of 0.29.0 (#3906), KTOTrainer.__init__ from 0.8.0 (its first release)
# until 1.3.0 (trl/experimental/kto from 0.26.0): trl/trainer/dpo_trainer.py, kto_trainer.py at every tag read.
TRL_PRECOMPUTE_ZERO3 = {Method.DPO: SpecifierSet(">=0.7.5,<0.29.0"), Method.KTO: SpecifierSet(">=0.8.0,<1.3.0")}
# TRL refuses precompute_ref_log_probs beside its Liger loss at every stage ("Liger DPO loss does not support
# precomputing reference log probabilities.", KTO's the same): DPOTrainer.__init__ from 0.29.0, KTOTrainer.__init__
# from 1.8.0, until 1.14.0 computes the reference's log-probs with its chunked log-probs (dpo_trainer.py,
# kto_trainer.py @ v0.29.0, v1.8.0, v1.13.0, v1.14.0).
TRL_LIGER_PRECOMPUTE = {Method.DPO: SpecifierSet(">=0.29.0,<1.14.0"), Method.KTO: SpecifierSet(">=1.8.0,<1.14.0")}


# GRPO's batch checks, which raise before training whatever the memory, where the completions of a batch are not
# whole groups of num_generations (8 by default in TRL and ms-swift). One row per era of the trainer's code (read at
# each tag): from ``since``, which batch it counts, its words and where they are raised. TRL: 0.15 to 0.16 the global
# batch (processes x per_device_train_batch_size) in GRPOTrainer.__init__, 0.17 the effective one (x
# gradient_accumulation_steps), from 0.18 GRPOConfig.__post_init__ builds the generation batch (per device x processes
# x steps_per_generation, which defaults to the accumulation; or generation_batch_size, a multiple of the global
# batch), worded anew from 0.20; before 0.15 the batch counted prompts: no check. ms-swift's own: the effective batch
# in its GRPOTrainer from 3.4.0, none of its own in 3.5.0 and 3.5.1, the generation batch from 3.5.2
# (swift/trainers/rlhf_arguments.py; swift/rlhf_trainers/arguments.py from 4.0), worded anew from 4.2.0
# (args_mixin.py _init_generation_batch_params).
GRPO_GENERATIONS = 8


class BatchCount(Enum):
    """Which batch a GRPO check counts (internal to this module: never text)."""

    GLOBAL = auto()  # processes x micro batch
    EFFECTIVE = auto()  # x gradient_accumulation_steps
    GENERATION = auto()  # x steps_per_generation (default: the accumulation), or generation_batch_size


@dataclass(frozen=True, slots=True)
class GrpoCheck:
    since: Version
    counts: BatchCount | None  # None: no check of the trainer's own in this era
    words: str  # {processes} {micro} {steps} {batch} {groups}
    source: str


_EFFECTIVE_WORDS = ("The effective train batch size ({processes} x {micro} x {steps}) must be evenly divisible by the "
                    "number of generations per prompt ({groups})")
GRPO_CHECKS: dict[TrainerFamily, tuple[GrpoCheck, ...]] = {
    TrainerFamily.TRL: (
        GrpoCheck(Version("0.15.0"), BatchCount.GLOBAL, "The global train batch size ({processes} x {micro}) must be "
                  "evenly divisible by the number of generations per prompt ({groups})",
                  "trl/trainer/grpo_trainer.py GRPOTrainer.__init__"),
        GrpoCheck(Version("0.17.0"), BatchCount.EFFECTIVE, _EFFECTIVE_WORDS,
                  "trl/trainer/grpo_trainer.py GRPOTrainer.__init__"),
        GrpoCheck(Version("0.18.0"), BatchCount.GENERATION, _EFFECTIVE_WORDS,
                  "trl/trainer/grpo_config.py GRPOConfig.__post_init__"),
        GrpoCheck(Version("0.20.0"), BatchCount.GENERATION,
                  "generation_batch_size ({batch}) must be divisible by num_generations ({groups}).",
                  "trl/trainer/grpo_config.py GRPOConfig.__post_init__")),
    TrainerFamily.MS_SWIFT: (
        GrpoCheck(Version("3.4.0"), BatchCount.EFFECTIVE, _EFFECTIVE_WORDS,
                  "swift/trainers/rlhf_trainer/grpo_trainer.py GRPOTrainer.__init__"),
        GrpoCheck(Version("3.5.0"), None, "", ""),
        GrpoCheck(Version("3.5.2"), BatchCount.GENERATION, _EFFECTIVE_WORDS,
                  "swift/trainers/rlhf_arguments.py GRPOArguments.__post_init__"),
        GrpoCheck(Version("4.0.0"), BatchCount.GENERATION, _EFFECTIVE_WORDS,
                  "swift/rlhf_trainers/arguments.py GRPOArguments.__post_init__"),
        GrpoCheck(Version("4.2.0"), BatchCount.GENERATION,
                  "generation_batch_size ({batch}) must be evenly divisible by num_generations ({groups}).",
                  "swift/rlhf_trainers/args_mixin.py _init_generation_batch_params")),
}
# axolotl's GRPO (from 0.7.0) runs TRL's GRPOTrainer and GRPOConfig at the TRL release each axolotl release pins
# exactly (trl==X in its requirements.txt, then pyproject.toml, read at every tag from v0.7.0 to v0.18.0)
AXOLOTL_TRL = {"0.7.0": "0.15.0", "0.7.1": "0.15.1", "0.8.0": "0.16.0", "0.8.1": "0.16.1", "0.9.0": "0.17.0",
               "0.9.1": "0.17.0", "0.9.1.post1": "0.17.0", "0.9.2": "0.17.0", "0.10.0": "0.18.1", "0.10.1": "0.18.2",
               "0.11.0": "0.18.2", "0.11.0.post1": "0.18.2", "0.12.0": "0.21.0", "0.12.1": "0.21.0",
               "0.12.2": "0.21.0", "0.13.0": "0.25.0", "0.13.1": "0.25.1", "0.13.2": "0.27.0", "0.14.0": "0.27.1",
               "0.15.0": "0.29.0", "0.16.0": "0.29.0", "0.16.1": "0.29.0", "0.17.0": "1.5.1", "0.18.0": "1.8.0"}


def _grpo_check(setup: MethodSetup) -> tuple[GrpoCheck, str] | None:
    """The check of the code that runs ``setup``'s GRPO and how to name who raises it; None where none applies (another
    trainer, an era without one, a release older than the first). An unknown release: the newest check."""
    family, release = setup.trainer, setup.release
    if family is None or family not in (*GRPO_CHECKS, TrainerFamily.AXOLOTL):
        return None
    name = f"{TRAINER_NAMES[family]} {setup.trainer_version}"
    if family == TrainerFamily.AXOLOTL:
        pinned = AXOLOTL_TRL.get(str(release)) if release is not None else None
        if release is not None and pinned is None and release < Version(next(iter(AXOLOTL_TRL))):
            return None
        family, release = TrainerFamily.TRL, Version(pinned) if pinned is not None else None
        name = (f"TRL {pinned} (axolotl {setup.trainer_version}'s pin)" if pinned is not None
                else f"TRL (axolotl {setup.trainer_version or 'not pinned'}: the newest release's check)")
    elif release is None:
        name = f"{TRAINER_NAMES[family]} (not pinned: the newest release's check)"
    rows = [row for row in GRPO_CHECKS.get(family, ()) if release is None or row.since <= release]
    return (rows[-1], name) if rows and rows[-1].counts is not None else None


def grpo_batch_refusal(setup: MethodSetup, micro_batch: int, accumulation: int, processes: int) -> str | None:
    """The words where the trainer's GRPO refuses the batch (GRPO_CHECKS) at its pinned release, or None: TRL's,
    ms-swift's own, and axolotl's at the TRL release it pins (AXOLOTL_TRL)."""
    found = _grpo_check(setup) if setup.method == Method.GRPO else None
    if found is None:
        return None
    check, at = found
    gen = setup.generation
    groups = gen.num_generations or (RLOO_GENERATIONS if setup.rloo else GRPO_GENERATIONS)
    global_batch = micro_batch * processes
    steps = accumulation if check.counts == BatchCount.EFFECTIVE else 1
    if check.counts == BatchCount.GENERATION:
        if gen.generation_batch_size is not None and gen.steps_per_generation is not None:
            return (f"{at} raises \"'generation_batch_size' and 'steps_per_generation' can not be both configured "
                    f"at the same time\" ({check.source})")
        if gen.generation_batch_size is not None and gen.generation_batch_size % global_batch:
            return (f"{at} raises \"generation_batch_size ({gen.generation_batch_size}) must be divisible by the "
                    f"global batch size ({global_batch}).\" ({check.source})")
        steps = (gen.generation_batch_size // global_batch if gen.generation_batch_size is not None
                 else gen.steps_per_generation or accumulation)
    batch = global_batch * steps
    if batch % groups == 0 and groups >= 2:
        return None
    words = check.words.format(processes=processes, micro=micro_batch, steps=steps, batch=batch, groups=groups)
    return (f"{at} raises \"{words}\" ({check.source}); the batch of completions is per_device_train_batch_size x "
            "processes x steps_per_generation (by default gradient_accumulation_steps)")


def trainer_refusal(setup: MethodSetup, policy: ModelSpec, option: Option, deepspeed: str | None = None,
                    batch: tuple[int, int, int] | None = None, liger_kernel: bool = False) -> str | None:
    """Why the trainer itself stops before training with ``option``, whatever the memory, or None: the file's
    settings it refuses at the option's stage by its release (MethodSetup.refusals: config/trainer_refusals.py;
    some pass where the option offloads the optimizer, or refuse only with ``deepspeed`` releases up to one),
    TRL's refusal of precompute_ref_log_probs under ZeRO-3 at the releases of TRL_PRECOMPUTE_ZERO3 (a TRL run whose
    release is pinned), and LLaMA-Factory's refusal of a model quantized to 8 bits (the policy's
    quantization_bit, the reference's ref_model_quantization_bit) under ZeRO-3 (LLAMA_FACTORY_QUANTIZATION's
    comment); TRL's refusal of precompute_ref_log_probs beside its Liger loss (TRL_LIGER_PRECOMPUTE, with
    ``liger_kernel`` the Trainer's use_liger_kernel); and TRL's GRPO batch checks at every stage, where ``batch``
    (micro batch, accumulation, processes) is given (grpo_batch_refusal)."""
    offloads = option.offload_optimizer != Device.NONE
    reasons = [r.words for r in setup.refusals
               if r.applies(option.stage, setup.release, offloads, release_of(deepspeed))]
    grpo = grpo_batch_refusal(setup, *batch) if batch is not None else None
    if grpo is not None:
        reasons.append(grpo)
    window = TRL_PRECOMPUTE_ZERO3.get(setup.method)
    if option.stage == 3 and setup.precompute_ref_log_probs and setup.trainer == TrainerFamily.TRL \
            and window is not None and setup.release is not None and setup.release in window:
        reasons.append(f"TRL {setup.trainer_version} raises \"You cannot use `precompute_ref_log_probs=True` with "
                       f"Deepspeed ZeRO-3.\" ({setup.method}: trl/trainer/{setup.method}_trainer.py __init__, "
                       f"TRL {window}); precompute_ref_log_probs runs at ZeRO-1/2 or from "
                       f"TRL {'0.29.0' if setup.method == Method.DPO else '1.3.0'}")
    liger_window, trl = TRL_LIGER_PRECOMPUTE.get(setup.method), trl_release(setup)
    if setup.precompute_ref_log_probs and liger_window is not None and trl is not None and trl in liger_window \
            and trl_loss_runs(setup, liger_kernel):
        reasons.append(f"TRL {trl} raises \"Liger {setup.method.upper()} loss does not support precomputing reference "
                       f"log probabilities.\" (trl/trainer/{setup.method}_trainer.py __init__, TRL {liger_window}): "
                       "precompute_ref_log_probs or Liger's loss, not both")
    if setup.trainer == TrainerFamily.LLAMA_FACTORY and option.stage == 3:
        reference = setup.reference_quantization if has_reference(setup, policy) else None  # a loaded reference only
        keys = [key for key, quant in (("quantization_bit", policy.quantization),
                                       ("ref_model_quantization_bit", reference)) if quant == "8bit"]
        if keys:
            reasons.append(f"LLaMA-Factory raises \"Only 4-bit quantized model can use fsdp+qlora or auto device "
                           f"map.\" for {' and '.join(f'{k}: 8' for k in keys)} under ZeRO-3 "
                           f"({LLAMA_FACTORY_QUANTIZATION}); 4 bits ({', '.join(f'{k}: 4' for k in keys)}) runs there")
    ppo = llama_factory_ppo_trl_refusal(setup)
    if ppo is not None:
        reasons.append(ppo)
    return "; ".join(reasons) or None


# LLaMA-Factory's PPO runs TRL's old PPOTrainer (TRL 0.8.6 to 0.9.6). From 0.9.4, whose own pin installs
# trl>=0.18.0,<=0.24.0, CustomPPOTrainer.__init__ checks TRL's release with transformers' require_version, which
# DISABLE_VERSION_CHECK does not lift, and raises for any other (llamafactory/train/ppo/trainer.py @ v0.9.4, v0.9.5;
# hiyouga/LlamaFactory#9617: "If you wish to use PPO, you must manually install TRL v0.9.6 and set
# DISABLE_VERSION_CHECK=1", the latter for its own pin check at start-up). Users meet it at launch (#10757).
LLAMA_FACTORY_PPO_TRL_TEXT = ">=0.8.6,<=0.9.6"  # as its message writes it
LLAMA_FACTORY_PPO_TRL = SpecifierSet(LLAMA_FACTORY_PPO_TRL_TEXT)
LLAMA_FACTORY_PPO_TRL_CHECK = Version("0.9.4")
LLAMA_FACTORY_OWN_TRL = "trl>=0.18.0,<=0.24.0"  # its pyproject's dependency @ v0.9.4, v0.9.5
LLAMA_FACTORY_PPO_WORKAROUND = "0.9.6"  # the TRL release LlamaFactory#9617 tells PPO users to install
LLAMA_FACTORY_PPO_TRL_SOURCE = "llamafactory/train/ppo/trainer.py CustomPPOTrainer.__init__ @ v0.9.4, v0.9.5"


def llama_factory_ppo_trl_refusal(setup: MethodSetup) -> str | None:
    """LLaMA-Factory's PPO refused for the TRL release beside it (LLAMA_FACTORY_PPO_TRL), at every stage: from
    0.9.4 (its release unknown: the newest read); TRL's from the pins or the installed trl (MethodSetup.trl_version),
    else LLaMA-Factory's own pin; a TRL requirement that allows 0.9.6 is not refused."""
    if setup.trainer != TrainerFamily.LLAMA_FACTORY or setup.method != Method.PPO:
        return None
    if setup.release is not None and setup.release < LLAMA_FACTORY_PPO_TRL_CHECK:
        return None
    trl = setup.trl_version
    if trl is not None:
        exact = release_of(trl)
        try:
            allowed = exact in LLAMA_FACTORY_PPO_TRL if exact is not None else \
                SpecifierSet(trl).contains(LLAMA_FACTORY_PPO_WORKAROUND)
        except InvalidSpecifier:
            return None  # not a release or a requirement: unknown, no refusal
        if allowed:
            return None
    which = f"trl {trl} ({dict(setup.origin).get('trl_version', 'the pins')})" if trl is not None else \
        f"TRL not pinned here: LLaMA-Factory's own pin installs {LLAMA_FACTORY_OWN_TRL}"
    release = setup.trainer_version or f"{LLAMA_FACTORY_PPO_TRL_CHECK}+ (its release not pinned: the newest read)"
    return (f"LLaMA-Factory {release} raises \"Incompatible TRL version detected. LLaMA-Factory ppo requires TRL "
            f"version {LLAMA_FACTORY_PPO_TRL_TEXT}.\" for stage: ppo with {which} ({LLAMA_FACTORY_PPO_TRL_SOURCE}); "
            f"install trl=={LLAMA_FACTORY_PPO_WORKAROUND} beside it and launch with DISABLE_VERSION_CHECK=1")


def frozen_models(setup: MethodSetup, policy: ModelSpec,
                  auxiliary: dict[ModelRole, ModelSpec]) -> list[tuple[ModelRole, ModelSpec]]:
    """The frozen models the trainer loads beside the policy: the reference (has_reference) and the reward model
    (reward_loaded), each its own description or else the policy's base."""
    if setup.method == Method.SFT:
        return []
    base = policy if not policy.adapters else _base(policy)
    out: list[tuple[ModelRole, ModelSpec]] = []
    if has_reference(setup, policy):
        out.append((ModelRole.REFERENCE, auxiliary.get(ModelRole.REFERENCE, base)))
    if reward_loaded(setup):
        out.append((ModelRole.REWARD, auxiliary.get(ModelRole.REWARD, base)))
    if setup.method == Method.GKD:  # GKDTrainer.__init__: prepare_deepspeed(teacher_model, ...) as the reference
        out.append((ModelRole.TEACHER, auxiliary.get(ModelRole.TEACHER, base)))
    return out


def frozen_at_load(setup: MethodSetup, policy: ModelSpec, auxiliary: dict[ModelRole, ModelSpec],
                   train_terms: list[Term]) -> FrozenAtLoad:
    """The frozen models around the policy's load (memory/phases.py load_moments).

    The trainer builds them and prepares their engines in its ``__init__``, before the policy's engine exists:
    TRL's DPOTrainer.__init__ calls create_model_from_path(ref_model_path, **model_init_kwargs) (the policy's
    dtype and device_map None: host RAM on every rank, or partitioned under zero.Init at stage 3) and then
    prepare_deepspeed (trl/trainer/dpo_trainer.py @ v1.9.0; GRPO, KTO and PPO the same way), while the HF
    Trainer keeps the policy in host RAM until accelerator.prepare in train() (trainer.py _inner_training_loop).
    LLaMA-Factory (train/dpo/workflow.py create_ref_model, then CustomDPOTrainer.__init__) and ms-swift do the
    same through TRL. So every moment of the policy's load has their engines beside it (the train phase's
    terms), and host RAM holds both models while the reference is built. OpenRLHF's Ray trainer builds the models
    not colocated with the actor (on_policy_gpus) in Ray actors on GPUs of their own: nothing beside it. axolotl's copy
    that no trainer gets (MethodSetup.unused_copy_at_load) is read beside the policy in setup and dropped before
    the policy's engine: in host RAM at the moment the models are built, nowhere after. A reference bitsandbytes
    quantizes (LLaMA-Factory's ref_model_quantization_bit) is loaded onto the GPU, quantized as it is read: no host
    copy."""
    rows = {ROW_OF[role] for role, _ in frozen_models(setup, policy, auxiliary)}
    engines = tuple(replace(t, phase=Phase.LOAD) for t in train_terms if t.row in rows)
    unused = _base(policy).parameters if setup.unused_copy_at_load else 0
    if not engines and not unused:
        return FrozenAtLoad()
    built = sum(spec.parameters for role, spec in frozen_models(setup, policy, auxiliary)
                if not (role == ModelRole.REFERENCE and setup.reference_quantization)) if engines else 0
    return FrozenAtLoad(engines, built + unused, unused)


def method_terms(setup: MethodSetup, policy: ModelSpec, auxiliary: dict[ModelRole, ModelSpec], s: Settings,
                 option: Option, N: int, gpu_memory: int | None, config_has_optimizer: bool,
                 notes: list[str], liger_kernel: bool = False, layout: Parallel | None = None,
                 sequence_length: int | None = None) -> list[Term]:
    """Every model and share beside the policy for ``option``: reference, reward, critic, vLLM (``liger_kernel``:
    the Trainer's use_liger_kernel, which switches GRPO's Liger loss at some TRL releases; ``layout``: the policy's
    parallel degrees: its tensor-parallel one OpenRLHF gives every other model too (tensor_split), its sequence one
    decides ms-swift's GRPO scoring path and, with ``sequence_length`` (the training sequence), what it scores
    (completion_logits_terms))."""
    if setup.method == Method.SFT:
        return []
    layout = layout or Parallel()
    tensor = layout.tensor
    others: list[Term] = []
    for role, spec in frozen_models(setup, policy, auxiliary):
        others += frozen_model_terms(role, tensor_split(setup, spec, tensor, notes), s, option, N, setup,
                                     config_has_optimizer, tensor)
    if others and option.stage < 3 and option.offload_optimizer != Device.NONE \
            and optimizer_copy(setup, config_has_optimizer).expected:
        notes.append("the frozen engines get this config's optimizer and offload_optimizer at stage 0: DeepSpeed "
                     "builds a CPU Adam over parameters on the GPU and the run dies before training (TRL 1.9.1's "
                     "comment in trl/models/utils.py prepare_deepspeed, which drops both since)")
    if setup.method == Method.PPO and setup.trainer in VALUE_HEAD_ON_POLICY:
        notes.append(f"critic: {setup.trainer}'s value head (hidden × 1) on the policy's own backbone, trained with "
                     "it: no second copy")
    elif critic_loaded(setup):
        critic = critic_terms(tensor_split(setup, critic_spec(setup, policy, auxiliary, notes), tensor, notes), s,
                              option, N, notes)
        others += asleep_critic(critic, setup, option, s, notes) if on_policy_gpus(setup, ModelRole.CRITIC) else critic
    apart = {ROW_OF[role] for role in ROW_OF if not on_policy_gpus(setup, role)}
    for row in dict.fromkeys(t.row for t in others if t.row in apart):
        own = sum(t.nbytes for t in others if t.row == row and t.device == Resource.GPU)
        notes.append(f"{row.replace('_', ' ')}: on GPUs of its own (OpenRLHF's Ray trainer, not colocated with the "
                     f"actor), {own / 2**30:.2f} GiB of states per GPU there: judged on its group's GPUs "
                     "(memory/groups.py), not on the actor's cards")
    others = [t for t in others if t.row not in apart]
    return others + vllm_terms(setup, gpu_memory, notes) + completion_logits_terms(setup, policy, s, liger_kernel,
                                                                                 layout.sequence, sequence_length)


# Trainers that split every model they prepare by the policy's tensor-parallel degree: OpenRLHF's strategy runs
# deepspeed.tp_model_init on each model it prepares, trained or frozen, before deepspeed.initialize
# (openrlhf/utils/deepspeed/deepspeed.py _ds_init_train_model, _ds_init_eval_model @ v0.8.5: ``if
# self.ds_tensor_parallel_size > 1``), with the same --ds_tensor_parallel_size for actor, critic, reference and reward.
# TRL's prepare_deepspeed builds its frozen engines from the config without tp_model_init: whole, as counted.
TP_EVERY_MODEL = frozenset({TrainerFamily.OPENRLHF})


def split_degree(setup: MethodSetup, tensor: int) -> int:
    """The tensor-parallel degree the trainer splits its other models by: the policy's (TP_EVERY_MODEL), else 1."""
    return tensor if setup.trainer in TP_EVERY_MODEL else 1


def tensor_split(setup: MethodSetup, spec: ModelSpec, tensor: int, notes: list[str]) -> ModelSpec:
    """``spec`` as one tensor-parallel rank holds it where the trainer splits every model (TP_EVERY_MODEL): its
    block linears split ``tensor`` ways, embeddings, norms and head whole (memory/parallel.py local_parameters)."""
    tensor = split_degree(setup, tensor)
    if tensor <= 1:
        return spec
    local = local_parameters(spec, Parallel(tensor=tensor)).total
    note = (f"{setup.trainer}'s other models (reference, reward, critic, where it loads them): split by its "
            f"tensor-parallel degree {tensor} as the actor is (deepspeed.tp_model_init on every model it prepares)")
    if note not in notes:
        notes.append(note)
    trained = spec.trainable_parameters
    return replace(spec, parameters=local,
                   trainable_parameters=None if trained is None else ceil_div(trained * local, spec.parameters))


def on_policy_gpus(setup: MethodSetup, role: ModelRole) -> bool:
    """Whether ``role``'s model is on the policy's GPUs. Every trainer but OpenRLHF's Ray trainer builds the other
    models in the policy's processes. ``train_ppo_ray`` gives each a Ray actor group of its own GPUs, but with
    --colocate_all_models every group shares the actor's placement group, and with --colocate_actor_ref the
    reference does (openrlhf/cli/train_ppo_ray.py train: ``pg`` for actor and ref, 0.2 GPU per actor @ v0.8.5,
    ``--train.colocate_actor_ref`` @ v0.11.0). --colocate_critic_reward puts the reward model on the critic's GPUs,
    still apart from the actor's (memory/groups.py)."""
    if setup.trainer != TrainerFamily.OPENRLHF or setup.colocate_all_models:
        return True
    return role == ModelRole.REFERENCE and bool(setup.colocate_actor_ref)


# The families whose preference/RL losses take TRL's selective_log_softmax on the model's bf16 logits (see
# activation_spec); None: TRL itself. axolotl's trainers are TRL's (AxolotlDPOTrainer overrides tokenization and
# training_step only, AxolotlKTO/ORPO/CPOTrainer add mixins: core/trainers/dpo/trainer.py, core/trainers/trl.py
# @ v0.18.0), at the TRL it pins (0.7.5 or later for every release read: bf16).
BF16_LOGITS = frozenset({None, TrainerFamily.TRL, TrainerFamily.MS_SWIFT, TrainerFamily.AXOLOTL})
# The first TRL release whose DPO keeps the logits in the model's dtype: 0.7.4's concatenated_forward upcasts them
# (``.logits.to(torch.float32)``, then a full ``log_softmax`` in _get_batch_logps: trl/trainer/dpo_trainer.py @
# v0.7.4); 0.7.5 to 0.7.11 drop the upcast (``.logits``, the same file at each), 0.15 adds selective_log_softmax.
TRL_BF16_LOGITS = Version("0.7.5")


def bf16_logits(setup: MethodSetup) -> bool:
    """Whether the method's loss keeps the logits in the model's dtype (BF16_LOGITS), by the TRL release read;
    the release unknown: the current behaviour."""
    if setup.trainer not in BF16_LOGITS:
        return False
    release = setup.release if setup.trainer in (None, TrainerFamily.TRL) else None
    return release is None or release >= TRL_BF16_LOGITS


def activation_spec(setup: MethodSetup, policy: ModelSpec) -> ModelSpec:
    """The policy as the method's forward runs it, for the activations (memory/activations.py):

    * reward-model training: a scalar head (AutoModelForSequenceClassification), no vocabulary logits
      (trl/trainer/reward_trainer.py compute_loss @ v1.16.0: two forwards' rewards_chosen/rejected);
    * TRL's GRPO with the completion length known: no logits over the whole sequence (logits_to_keep: only the
      completion's, counted by completion_logits_terms); not OpenRLHF's (completion_logits);
    * TRL's preference trainers keep the logits in the model dtype (trl/trainer/utils.py selective_log_softmax
      @ v1.16.0: a per-row log-softmax for bf16), and so do ms-swift's, which call the same function
      (swift/trainers/rlhf_trainer/dpo_trainer.py get_per_token_logps @ v3.8.0: ``selective_log_softmax(logits,
      labels)`` on the model's bf16 logits, no upcast), where LLaMA-Factory upcasts them
      (llamafactory/train/dpo/trainer.py concatenated_forward @ v0.9.3: ``.logits.to(torch.float32)``);
    * LLaMA-Factory's PPO step takes the entropy of its fp32 logits with their graph (TRL 0.9.6 PPOTrainer.loss:
      memory/activations.py ENTROPY_LOSS_COPIES);
    * OpenRLHF's SFT, DPO and PPO/GRPO actor score tokens with flash-attn's cross-entropy kernel on fp32 logits
      (openrlhf_fused_ce: memory/activations.py FUSED_CE_LOSS_BYTES)."""
    # layer facts None: Korthikanti's (no loss of a trainer's own read)
    own = _trainer_loss_facts(setup, policy.layer_facts) if policy.layer_facts is not None else None
    if own is not None:
        return replace(policy, layer_facts=own)
    if setup.method == Method.SFT:
        return policy
    if setup.method == Method.REWARD:
        return replace(policy, lm_head=False, logits_note="no vocabulary-wide logits: reward-model training puts a "
                       "scalar head on the model (AutoModelForSequenceClassification)")
    if completion_logits(setup):
        return replace(policy, lm_head=False, logits_note="no logits over the whole sequence: GRPO's are the "
                       "completion's only (logits_to_keep), counted in a term of their own")
    if bf16_logits(setup) and policy.layer_facts is not None:  # None: Korthikanti's
        rows = row_log_softmax(setup)
        return replace(policy, layer_facts=replace(policy.layer_facts, loss_in_fp32=False, row_log_softmax=rows,
                                                   chosen_nll=rows and chosen_nll(setup)))
    return policy


# OpenRLHF's trainers that score tokens through Actor.forward's log_probs_from_logits, and the first release that
# does: SFTTrainer.fit (return_logprobs), DPOTrainer.concatenated_forward and the PPO actor's training step from
# 0.7.0 (openrlhf/trainer/sft_trainer.py, dpo_trainer.py, ray/ppo_actor.py @ v0.7.0, v0.8.5, v0.11.0; before, SFT's
# GPTLMLoss and DPO's own log-softmax; KTO keeps its own). The PPO/GRPO actor adds --entropy_loss_coef's entropy
# (off by default; memory/activations.py FUSED_CE_ENTROPY_BYTES where it is not 0).
OPENRLHF_FUSED_CE_METHODS = frozenset({Method.SFT, Method.DPO, Method.PPO, Method.GRPO})
OPENRLHF_FUSED_CE = Version("0.7.0")


def openrlhf_fused_ce(setup: MethodSetup) -> bool:
    """Whether OpenRLHF's loss is flash-attn's cross-entropy kernel on fp32 logits (OPENRLHF_FUSED_CE_METHODS at
    OPENRLHF_FUSED_CE or later; the release unknown: the newest read)."""
    if setup.trainer != TrainerFamily.OPENRLHF or setup.method not in OPENRLHF_FUSED_CE_METHODS:
        return False
    return setup.release is None or setup.release >= OPENRLHF_FUSED_CE


def _trainer_loss_facts(setup: MethodSetup, facts: LayerFacts) -> LayerFacts | None:
    """The loss of a trainer whose own scoring code the activations count (activation_spec); None: none."""
    if openrlhf_fused_ce(setup):
        # an entropy term in the actor's loss (--entropy_loss_coef not 0): its gradient beside the kernel's
        entropy = setup.method in G.OPENRLHF_ONLINE and bool(setup.entropy_coef)
        return replace(facts, loss_in_fp32=True, fused_ce_fp32=True, entropy_from_logits=entropy)
    if setup.method == Method.PPO and setup.trainer == TrainerFamily.LLAMA_FACTORY:
        return replace(facts, loss_in_fp32=True, entropy_from_logits=True)
    if setup.method == Method.GKD:
        return replace(facts, loss_in_fp32=False, jsd_copies=gkd_copies(setup))
    if setup.method == Method.PPO and setup.trainer in G.TRL_PPO:
        # TRL's PPOTrainer.train (ms-swift's is TRL's): the response's log-probs from a slice of the whole logits
        # (memory/activations.py PPO_SLICE_COPIES); selective_log_softmax from 0.15 (unknown: the newest read)
        trl = trl_release(setup)
        copies = ROW_LOSS_COPIES if trl is None or trl >= TRL_ROW_LOG_SOFTMAX else PPO_WHOLE_LOG_SOFTMAX_COPIES
        return replace(facts, loss_in_fp32=False, response_tokens=G.ppo_completion_length(setup) or 0,
                       response_copies=copies)
    return None


# TRL's GKDTrainer.compute_loss (no Liger) runs the student with its graph and the teacher under no_grad over the same
# sequences, and generalized_jsd_loss divides both logits by the temperature, takes both log_softmax and, for
# 0 < beta < 1, stacks the two shifted log-probs, takes their logsumexp and two kl_div over it
# (trl/experimental/gkd/gkd_trainer.py @ v1.9.0; trl/trainer/gkd_trainer.py @ v0.21.0): its peak, in the forward,
# holds the two models' logits and the JSD's temporaries over the scored positions. Measured with TRL 1.9.0's and
# 0.21.0's own compute_loss on CPU (benchmarks/gkd_loss.md): 2 copies of the whole logits plus 15 of the scored
# positions' at beta 0.5 (the default), 7 at beta 0, 7 and the masked copy (the completion's share) at beta 1. TRL 1.7
# and later score every position (the labels' -100 masks inside the loss); up to 1.6 from the batch's prompt width on,
# a share the data decides: the whole sequence is counted there (a bound, said in the note).
GKD_WHOLE_COPIES = 2
GKD_JSD_COPIES = 15
GKD_KL_COPIES = 7
GKD_SCORES_EVERY_POSITION = Version("1.7.0")


def gkd_copies(setup: MethodSetup) -> int:
    """The whole logits' copies at TRL's GKD loss peak (GKD_JSD_COPIES' comment): GKDConfig.beta (0.5 unset)."""
    beta = setup.beta if setup.beta is not None else GKD_DEFAULT_BETA
    if 0.0 < beta < 1.0:
        return GKD_WHOLE_COPIES + GKD_JSD_COPIES
    return GKD_WHOLE_COPIES + GKD_KL_COPIES + (1 if beta == 1.0 else 0)  # beta 1: the masked copy, at most one


GKD_DEFAULT_BETA = 0.5  # GKDConfig.beta (trl/experimental/gkd/gkd_config.py @ v1.9.0, trl/trainer @ v0.21.0)


# Before 0.15 TRL's preference losses take a full log_softmax of the shifted logits (get_batch_logps), after it
# selective_log_softmax, one row at a time (trl/trainer/utils.py).
# ORPO and CPO add their NLL over the chosen rows beside the per-row log-softmax (trl/trainer/orpo_trainer.py,
# cpo_trainer.py concatenated_forward @ v0.15.0, v0.21.0; trl/experimental/*/ @ v1.9.0; ms-swift's run TRL's through
# swift/rlhf_trainers/rlhf_mixin.py concatenated_forward @ v4.5.2): memory/activations.py CHOSEN_NLL_SHARE.
CHOSEN_NLL_METHODS = frozenset({Method.ORPO, Method.CPO})


# TRL's DPO 0.15 to 0.28 adds the same NLL for rpo_alpha or an "sft" loss type (concatenated_forward:
# ``F.cross_entropy(torch.flatten(logits[:num_examples, :-1], end_dim=1), ...)`` @ v0.15.0, v0.24.0; 0.29's
# _compute_loss drops rpo_alpha and scores "sft" over the chosen completion's positions only). ms-swift's RPO reuses
# its per-token log-probs (swift/rlhf_trainers/dpo_trainer.py concatenated_forward @ v4.5.2): nothing more.
TRL_DPO_NLL = SpecifierSet(">=0.15,<0.29")
DPO_SFT_LOSS = "sft"  # DPOConfig.loss_type's "sft" (a DPO loss term), not the method


def chosen_nll(setup: MethodSetup) -> bool:
    """Whether the loss adds a cross-entropy over the chosen rows' whole logits (memory/activations.py
    CHOSEN_NLL_SHARE): ORPO and CPO; TRL's DPO at TRL_DPO_NLL with rpo_alpha or an "sft" loss type."""
    if setup.method in CHOSEN_NLL_METHODS:
        return True
    trl = trl_release(setup)
    return setup.method == Method.DPO and setup.trainer in (None, TrainerFamily.TRL) and trl is not None and \
        trl in TRL_DPO_NLL and (setup.rpo_alpha is not None or DPO_SFT_LOSS in loss_types(setup))


def loss_types(setup: MethodSetup, default: str = "") -> frozenset[str]:
    """The loss types the file gives (TRL's loss_type, a list joined with commas), lower case; ``default`` where
    none is given."""
    return frozenset(loss.strip().lower() for loss in (setup.loss_type or default).split(","))


def row_log_softmax(setup: MethodSetup) -> bool:
    """Whether the DPO/KTO/ORPO/CPO loss takes its log-softmax one row at a time in the logits' dtype
    (memory/activations.py ROW_LOSS_COPIES): TRL from 0.15 (axolotl at the TRL it pins), ms-swift's
    get_per_token_logps (the same function). ORPO and CPO add a cross-entropy over the chosen rows beside it
    (CHOSEN_NLL_METHODS)."""
    if setup.method not in (Method.DPO, Method.KTO, *CHOSEN_NLL_METHODS) or not bf16_logits(setup):
        return False
    if setup.trainer == TrainerFamily.MS_SWIFT:
        return True
    trl = trl_release(setup)  # bf16_logits leaves TRL and axolotl here; unknown: the newest read
    return trl is None or trl >= TRL_ROW_LOG_SOFTMAX


def completion_logits(setup: MethodSetup) -> bool:
    """Whether the GRPO trainer computes logits over the completion only (TRL's logits_to_keep, the completion
    length known). Not OpenRLHF's GRPO, its PPO loop: ``Actor.forward`` runs the model over the whole sequence,
    upcasts all of its logits (``output["logits"].to(torch.float32)``), takes the log-probs of every position and
    only then slices the actions' (``log_probs[:, -action_mask.shape[1]:]``; openrlhf/models/actor.py forward @
    v0.8.5), so its logits are the whole sequence's, as its PPO's."""
    return setup.method == Method.GRPO and setup.trainer != TrainerFamily.OPENRLHF \
        and bool(setup.generation.max_completion_length)


def _fused_completion(setup: MethodSetup, policy: ModelSpec, liger_kernel: bool = False) -> bool:
    """Whether GRPO scores its completion through TRL's fused LM head (completion_logits_terms, TRL 1.15+), or
    through TRL's chunked log-probabilities, the same tiles, under use_liger_kernel at 1.13 and 1.14."""
    return completion_logits(setup) and bool(setup.generation.max_completion_length) \
        and (fused_head_runs(setup) or chunked_logprob_runs(setup, liger_kernel)) \
        and bool(policy.vocab_size and policy.hidden_size)


def completion_head_gradient(setup: MethodSetup, policy: ModelSpec, s: Settings, liger_kernel: bool = False) -> int:
    """The LM head's gradient that GRPO's fused completion head (or Liger's GRPO loss) casts and holds at its peak:
    what ZeRO-3's hook receives as the head's full gradient (memory/buffers.py gathered_terms); 0 where the
    completion is scored another way or the head is frozen."""
    liger_runs = completion_logits(setup) and trl_loss_runs(setup, liger_kernel)
    if not (_fused_completion(setup, policy, liger_kernel) or liger_runs) or not policy.head_gets_gradient:
        return 0
    return B.nbytes(s.precision) * (policy.vocab_size or 0) * (policy.hidden_size or 0)


def completion_logits_terms(setup: MethodSetup, policy: ModelSpec, s: Settings,
                            liger_kernel: bool = False, sequence: int = 1,
                            sequence_length: int | None = None) -> list[Term]:
    """GRPO's logits over the completion only (logits_to_keep = max_completion_length), per completion in the micro
    batch (TRL's per_device_train_batch_size counts completions: num_generations decides how many prompts, not how
    many rows per GPU). Up to TRL 1.14 (trl/trainer/grpo_trainer.py _get_per_token_logps_and_entropies @ v0.21.0):
    the logits, the per-row log-softmax and their gradient in the model dtype, and from 1.0 the whole gradient of
    the output the temperature divides in place (GRPO_INPLACE_COPIES). From 1.15 (and for an unknown TRL
    release) the completion's labels are scored through the fused LM head (the same function @ v1.16.0:
    ``model(..., labels=labels, fused_lm_head=True)``, the prompt's labels -100): memory/trl_sft_loss.py
    fused_head_bytes, no logits. ms-swift's sequence-parallel path (``sequence`` above 1) scores each rank's shard of
    the whole sequence (``sequence_length``: prompt and completion), not the completion."""
    completion = setup.generation.max_completion_length
    if not completion_logits(setup) or not completion or not policy.vocab_size:
        return []
    w = B.nbytes(s.precision)
    tokens = s.micro_batch * completion
    if trl_loss_runs(setup, liger_kernel) and policy.hidden_size:
        peak = grpo_peak(w, s.micro_batch, completion, policy.vocab_size, policy.hidden_size,
                         policy.head_gets_gradient)
        return [Term("activations", Resource.GPU, peak.nbytes, "completion_logits",
                     "GRPO completion scored by Liger's GRPO loss (no logits)",
                     f"{GRPO_TILES} fp32 tiles of {min(completion, GRPO_SEQ_TILE):,} x "
                     f"{min(policy.vocab_size, GRPO_VOCAB_TILE):,} (Liger 0.8+), the head's fp32 gradient and cast, "
                     f"the input gradient; up to one completion's logits x {GRPO_ROW_COPIES_BEFORE_08} before Liger "
                     "0.8 (eager)", GRPO_SOURCE, bound=peak.bound if peak.bound > peak.nbytes else None)]
    if _fused_completion(setup, policy, liger_kernel) and policy.hidden_size:
        n = fused_head_bytes(w, tokens, policy.hidden_size, policy.vocab_size, policy.head_gets_gradient)
        return [Term("activations", Resource.GPU, n, "completion_logits",
                     "GRPO completion scored by TRL's fused LM head (no logits)",
                     f"fp32 gradients of {tokens:,} tokens' hidden states and the head, casts, a tile",
                     f"trl/trainer/grpo_trainer.py _get_per_token_logps_and_entropies @ v1.16.0; {FUSED_SOURCE}")]
    in_place = grpo_divides_in_place(setup, sequence)
    unread = setup.trainer != TrainerFamily.MS_SWIFT and trl_release(setup) is None  # axolotl past the releases read
    path = swift_grpo_scoring(setup, sequence) if setup.trainer == TrainerFamily.MS_SWIFT else None
    # ms-swift's sequence-parallel scoring runs the model over its shard of the whole sequence, without
    # logits_to_keep, and scores every position of it before GatherLoss collects the ranks' log-probs and the
    # completion is cut out (swift/rlhf_trainers/grpo_trainer.py _get_logps_via_sp: ``logits = output.logits``,
    # ``logits / self.temperature``, selective_log_softmax over the shard's labels @ v4.5.2): rows of ceil(sequence /
    # SP) positions
    shard = path is SwiftScoring.SEQUENCE_PARALLEL and bool(sequence_length)
    if in_place or unread:
        copies = GRPO_INPLACE_COPIES if in_place else GRPO_UNREAD_COPIES
        n = copies * w * tokens * policy.vocab_size
        formula = f"{copies} × {w} B × {s.micro_batch} × {completion} × V {policy.vocab_size:,}"
    else:  # TRL 0.14 to 0.29 (axolotl at the TRL it pins), ms-swift's out-of-place paths: measured by its parts
        row = ceil_div(sequence_length or 0, sequence) if shard else completion
        positions, formula = trl_grpo_out_of_place(grpo_entropy_chunk(setup), s.micro_batch, row)
        n = w * policy.vocab_size * positions
        formula = f"{w} B × V {policy.vocab_size:,} × {formula}"
    what = (f"GRPO logits over each rank's shard of the sequence ({sequence_length or 0:,} / SP {sequence})" if shard
            else "GRPO logits over the completion (logits_to_keep)"
            + (", divided by the temperature in place" if in_place else ""))
    return [Term("activations", Resource.GPU, n, "completion_logits", what, formula, _scoring_source(path))]


def _scoring_source(path: SwiftScoring | None) -> str:
    """Where the scoring path :func:`completion_logits_terms` counts is (ms-swift's ``path``; None: TRL's), and where
    it was measured."""
    measured = "measured on CPU: benchmarks/grpo_logits.md)"
    if path is None:
        return f"trl/trainer/grpo_trainer.py _get_per_token_logps_and_entropies @ v0.21.0-v1.14 ({measured}"
    if path is SwiftScoring.TRL_METHOD:
        return ("swift/rlhf_trainers/grpo_trainer.py _get_per_token_logps_and_entropies_single @ v4.0.0 "
                f"(can_use_super: TRL's own method, compute_entropy=self.compute_entropy; {measured}")
    function = "_get_logps_via_sp" if path is SwiftScoring.SEQUENCE_PARALLEL else "_get_logps_via_local_forward"
    return f"swift/rlhf_trainers/grpo_trainer.py {function} @ v4.5.2 (TRL's pattern, {measured}"


# TRL's GRPO completion logits at their backward, in copies of the completion's logits in the model dtype
# (completion_logits_terms): up to 0.29 by their parts (trl_grpo_out_of_place; ms-swift's out-of-place paths are
# TRL's method or its pattern, swift_grpo_scoring); from 1.0 the temperature's division is in place on the sliced
# view of the model's output (``logits.div_(self.temperature)``, trl/trainer/grpo_trainer.py @ v1.0.0, v1.9.0), whose
# backward materializes the output's whole gradient beside the rows' (measured with TRL 1.9.0: 4.02-4.03 at
# 1 to 8 rows).
GRPO_INPLACE_COPIES = 4
TRL_GRPO_INPLACE = Version("1.0.0")
# The TRL beside the trainer not known (an axolotl release past the ones read, pinned_trl.axolotl_trl): the logits,
# the per-row log-softmax and their gradient, neither TRL's in-place count nor its out-of-place parts assumed
GRPO_UNREAD_COPIES = 3
# TRL 0.14 to 0.29 divide out of place; their peak, in positions' logits (rows x completion in all) of the model
# dtype, is the larger of the forward's and the backward's. Forward: the divided logits and the saved per-row
# log-softmax (2 copies) and, from 0.20, the entropy under no_grad: a chunk's log_softmax, exp and product (3), the
# chunk one row up to 0.22 (entropy_from_logits(chunk_size=1) splits the batch's rows) and 128 positions from 0.23
# (the flattened logits split by 128). Backward: the saved rows and one row's three transients (1 copy + 3 rows), or
# the stacked gradient and its division's (2 copies), the larger. Measured with TRL 0.19.1, 0.21.0, 0.24.0 and
# 0.29.0's own methods on CPU at 1 to 16 rows (benchmarks/grpo_logits.md): e.g. 0.29 at 1, 2, 3, 4, 8 and 16 rows
# 4.02, 2.52, 2.52, 2.40, 2.39 and 2.40 copies, where these parts give 4, 2.5, 2.5, 2.375, 2.375 and 2.375.
GRPO_HELD_COPIES = 2
GRPO_CHUNK_TRANSIENTS = 3
GRPO_ROW_TRANSIENTS = 3
TRL_GRPO_ENTROPY = Version("0.20.0")
TRL_GRPO_ENTROPY_POSITIONS = Version("0.23.0")
ENTROPY_CHUNK_POSITIONS = 128  # entropy_from_logits' chunk_size (trl/trainer/utils.py @ v0.23.0 to v0.29.0)


class EntropyChunk(StrEnum):
    """What the entropy under no_grad takes at once in an out-of-place scoring's forward (GRPO_HELD_COPIES)."""

    NONE = "none"  # not computed (TRL before 0.20; ms-swift without --log_entropy)
    ROW = "a row"  # entropy_from_logits(chunk_size=1) over the batch's rows (TRL 0.20 to 0.22)
    POSITIONS = "128 positions"  # the flattened logits split by ENTROPY_CHUNK_POSITIONS (TRL 0.23+)


def trl_grpo_out_of_place(entropy: EntropyChunk, rows: int, completion: int) -> tuple[int, str]:
    """(positions' logits at the peak, the formula) of TRL's GRPO scoring before 1.0 (GRPO_HELD_COPIES' comment)."""
    tokens = rows * completion
    chunk = {EntropyChunk.NONE: 0, EntropyChunk.ROW: completion,
             EntropyChunk.POSITIONS: min(ENTROPY_CHUNK_POSITIONS, tokens)}[entropy]
    forward = GRPO_HELD_COPIES * tokens + GRPO_CHUNK_TRANSIENTS * chunk
    backward = max(tokens + GRPO_ROW_TRANSIENTS * completion, GRPO_HELD_COPIES * tokens)
    return max(forward, backward), (f"max(forward {GRPO_HELD_COPIES} × {tokens:,} + {GRPO_CHUNK_TRANSIENTS} × "
                                    f"{chunk:,} entropy positions, backward max({tokens:,} + {GRPO_ROW_TRANSIENTS} × "
                                    f"{completion:,} of a row, {GRPO_HELD_COPIES} × {tokens:,}))")


class SwiftScoring(StrEnum):
    """The path ms-swift's GRPOTrainer scores the completion by (_get_per_token_logps_and_entropies_single)."""

    TRL_METHOD = "TRL's own method"  # super(): a text model without padding-free or SP, before 4.4.0
    LOCAL_OUT_OF_PLACE = "local forward, out of place"  # ``logits / self.temperature``: 3.11 to 4.1.1
    LOCAL_IN_PLACE = "local forward, in place"  # ``logits.div_(self.temperature)``: from 4.1.2
    SEQUENCE_PARALLEL = "sequence parallel"  # _get_logps_via_sp: out of place at every release


# ms-swift's GRPOTrainer scores a text model without padding-free or sequence parallelism with TRL's own
# _get_per_token_logps_and_entropies (``can_use_super``, swift/trainers/rlhf_trainer/grpo_trainer.py @ v3.8.0,
# swift/rlhf_trainers/grpo_trainer.py @ v4.0.0 to v4.3.x; its pins admit TRL < 1.0 there, which divides out of place)
# up to 4.3; from 4.4.0 its local forward is the sole non-SP path (``the TRL super() path ... has been removed``, @
# v4.4.0, v4.5.2). The local forward (padding-free; a multimodal model, which the estimate does not tell apart: read
# as text) divides in place from 4.1.2 (``logits.div_(self.temperature)`` @ v4.1.2; ``/ self.temperature`` @ v4.1.1
# and in 3.x); _get_logps_via_sp out of place at every release.
SWIFT_GRPO_INPLACE = Version("4.1.2")
# Up to 3.10 padding-free batches go through TRL's method too (under its padding_free_context @ v3.8.0, v3.10.3);
# 3.11 sends them to the local forward (``can_use_super = ... and not is_padding_free and not use_sp`` @ v3.11.0,
# v4.0.0)
SWIFT_GRPO_PADDING_FREE_LOCAL = Version("3.11.0")
SWIFT_GRPO_LOCAL_ONLY = Version("4.4.0")


def swift_grpo_scoring(setup: MethodSetup, sequence: int = 1) -> SwiftScoring:
    """ms-swift's GRPO scoring path for ``setup`` (the release unknown: the newest read, 4.6)."""
    if sequence > 1:
        return SwiftScoring.SEQUENCE_PARALLEL
    release = setup.release
    if release is None or release >= SWIFT_GRPO_LOCAL_ONLY:
        return SwiftScoring.LOCAL_IN_PLACE
    if not setup.padding_free or release < SWIFT_GRPO_PADDING_FREE_LOCAL:
        return SwiftScoring.TRL_METHOD
    return SwiftScoring.LOCAL_IN_PLACE if release >= SWIFT_GRPO_INPLACE else SwiftScoring.LOCAL_OUT_OF_PLACE


def grpo_divides_in_place(setup: MethodSetup, sequence: int = 1) -> bool:
    """Whether GRPO's scoring divides the completion's logits by the temperature in place (GRPO_INPLACE_COPIES):
    TRL from TRL_GRPO_INPLACE (axolotl at the TRL it pins), ms-swift on its local forward from SWIFT_GRPO_INPLACE
    (swift_grpo_scoring)."""
    if setup.trainer == TrainerFamily.MS_SWIFT:
        return swift_grpo_scoring(setup, sequence) is SwiftScoring.LOCAL_IN_PLACE
    trl = trl_release(setup)
    return trl is not None and trl >= TRL_GRPO_INPLACE


def grpo_entropy_chunk(setup: MethodSetup) -> EntropyChunk:
    """The entropy's chunk in an out-of-place scoring's forward: TRL's by its release (it always computes the
    entropy from 0.20); ms-swift's only where it computes one (MethodSetup.entropy_computed: --log_entropy or
    --top_entropy_quantile < 1), then TRL's at the TRL beside it (MethodSetup.trl_version; unknown: a row, the larger
    of TRL's chunks)."""
    if setup.trainer != TrainerFamily.MS_SWIFT:
        trl = trl_release(setup)
        return EntropyChunk.NONE if trl is None or trl < TRL_GRPO_ENTROPY else \
            EntropyChunk.ROW if trl < TRL_GRPO_ENTROPY_POSITIONS else EntropyChunk.POSITIONS
    if not setup.entropy_computed:
        return EntropyChunk.NONE
    trl = release_of(setup.trl_version)
    return EntropyChunk.POSITIONS if trl is not None and trl >= TRL_GRPO_ENTROPY_POSITIONS else EntropyChunk.ROW


def ppo_prompt_length(setup: MethodSetup) -> int | None:
    """The longest query PPO generates from: OpenRLHF's --prompt_max_len (max_prompt_length); ms-swift's
    --max_length, to which its template (mode 'transformers' for ppo: swift/pipelines/train/rlhf.py
    _prepare_template @ v4.6.0) truncates the prompt before TRL generates the response; TRL's PPOConfig has none."""
    gen = setup.generation
    if gen.max_prompt_length:
        return gen.max_prompt_length
    return setup.max_length if setup.trainer == TrainerFamily.MS_SWIFT else None


def method_shape(shape: TrainingShape) -> TrainingShape:
    """GRPO's sequence (prompt + completion) where the shape has no length of its own; PPO's query + response:
    TRL's PPOTrainer trains on query_responses, the query and up to response_length generated tokens
    (trl/trainer/ppo_trainer.py PPOTrainer.train @ v0.21.0: forward(model, mb_query_responses, ...)), where the
    shape's length is none or the prompt's cap (ms-swift's --max_length read as the sequence length)."""
    setup, gen = shape.method, shape.method.generation
    if setup.method == Method.GRPO and not shape.sequence_length and gen.max_prompt_length \
            and gen.max_completion_length:
        return replace(shape, sequence_length=gen.max_prompt_length + gen.max_completion_length)
    prompt = ppo_prompt_length(setup) if setup.method == Method.PPO else None
    if prompt and gen.max_completion_length and shape.sequence_length in (None, prompt):
        return replace(shape, sequence_length=prompt + gen.max_completion_length)
    if setup.method == Method.PPO and setup.trainer == TrainerFamily.LLAMA_FACTORY and shape.sequence_length \
            and not gen.max_prompt_length:
        # LLaMA-Factory's query is cut to cutoff_len (the shape's length: data/processor/unsupervised.py
        # _encode_data_example, infer_seqlen @ v0.9.3) and max_new_tokens are generated after it (ppo/trainer.py
        # get_inputs); the step trains on both (batched_forward_pass over query + response)
        cutoff = shape.sequence_length
        return replace(shape, sequence_length=cutoff + (G.ppo_completion_length(setup) or 0),
                       method=replace(setup, generation=replace(gen, max_prompt_length=cutoff)))
    return shape


def _base(policy: ModelSpec) -> ModelSpec:
    """The policy's architecture as a whole model (a PEFT policy's separately named reference is its base)."""
    return replace(policy, trainable_parameters=None, peft=None)


# Trainers that put the policy's tuner on the value model too: ms-swift prepares the value model (loaded from
# --reward_model) with the same prepare_model as the policy, LoRA included (swift/llm/train/rlhf.py
# _prepare_single_model @ v3.8.0: key 'value' -> self.prepare_model(args, model, task_type=task_type); the same in
# swift/pipelines/train/rlhf.py @ 4.x); OpenRLHF builds the critic with the actor's --lora_rank
# (openrlhf/trainer/ray/ppo_critic.py CriticModelActor.init_model_from_pretrained @ v0.8.5:
# get_llm_for_sequence_regression(..., lora_rank=strategy.args.lora_rank)). TRL's PPOTrainer applies its
# peft_config to the policy only and trains the value model it is given (its ppo.py script loads it whole).
CRITIC_TAKES_POLICY_TUNER = frozenset({TrainerFamily.MS_SWIFT, TrainerFamily.OPENRLHF})


def critic_spec(setup: MethodSetup, policy: ModelSpec, auxiliary: dict[ModelRole, ModelSpec],
                notes: list[str]) -> ModelSpec:
    """The critic as its trainer builds it: with the policy's LoRA where the family puts it there
    (CRITIC_TAKES_POLICY_TUNER; a frozen bf16 base and the adapters trained), else a whole trained model."""
    named = auxiliary.get(ModelRole.CRITIC)
    lora = policy.adapters and setup.trainer in CRITIC_TAKES_POLICY_TUNER
    if named is None:
        return policy if lora else _base(policy)
    if lora:
        notes.append(f"critic: {setup.trainer} puts the policy's LoRA on it too; a critic of another architecture "
                     "is costed whole (a bound: its adapters are not counted)")
    return named


def critic_terms(spec: ModelSpec, s: Settings, option: Option, N: int, notes: list[str]) -> list[Term]:
    """PPO's critic: a second copy with a value head, trained with its own optimizer at the policy's stage
    (OpenRLHF openrlhf/trainer/ray/ppo_critic.py; TRL's PPO the same config), so its model states are the
    policy's arithmetic over its own parameters (states.py deepspeed_terms)."""
    own: list[str] = []
    # the optimizer's parameters: its adapters where it has the policy's LoRA (the base is frozen_terms'), as the
    # policy's own states are counted (estimate.py _state_terms)
    states = deepspeed_terms(s, option, trainable(spec), N, spec, own)
    notes.append("critic: its model states as the policy's at this stage (LM head counted; the value head "
                 "is hidden × 1)")
    return [Term("critic", t.device, t.nbytes, f"critic_{t.key}", f"critic {t.what}", t.formula,
                 t.source, kind=t.kind, bound=t.bound) for t in states]


# OpenRLHF's --deepspeed_enable_sleep (--ds.enable_sleep from 0.10): each trained engine's states go to the host
# while the other one trains (openrlhf/trainer/ppo_trainer.py ppo_train: the critic's reload_states, fit,
# offload_states, then the actor's; trainer/ray/ppo_critic.py and ppo_actor.py "initial offload" @ v0.8.5), through
# offload_deepspeed_states (utils/deepspeed/deepspeed_utils.py @ v0.8.5): DeepSpeed's offload_states of the optimizer
# states, the fp32 master (hp_params) and the contiguous gradient buffer, and the low-precision gradients (lp_grads)
# where ``deepspeed.__version__ >= "0.16.5"``; never the bf16 parameter partition. Nothing with --adam_offload (the
# function returns: the states are on the host already) and only at ZeRO-3 (it raises below: trainer_refusals.py).
SLEEP_OFFLOADED = frozenset({"master", "optimizer_state"})
_SLEEP_WORDS = {"master": "fp32 master weights", "optimizer_state": "optimizer states", "lp_grads": "gradients"}
SLEEP_LP_GRADS_SINCE = "0.16.5"
SLEEP_SOURCE = ("openrlhf/utils/deepspeed/deepspeed_utils.py offload_deepspeed_states, trainer/ppo_trainer.py "
                "ppo_train @ v0.8.5; runtime/zero/stage3.py offload_states")


def asleep_critic(terms: list[Term], setup: MethodSetup, option: Option, s: Settings, notes: list[str]) -> list[Term]:
    """The critic's states while the actor trains beside it, where OpenRLHF puts it to sleep (SLEEP_OFFLOADED): what
    offload_states moves is on the host (pinned) meanwhile. The peak is then the actor's step, the critic asleep;
    the critic's own step, the actor asleep, is the same where the two are the same size."""
    if setup.trainer != TrainerFamily.OPENRLHF or not setup.generation.offload_model or option.stage != 3 \
            or option.offload_optimizer != Device.NONE:
        return terms
    from zeroadvisor.deepspeed.releases import version_key

    moved = SLEEP_OFFLOADED | ({"lp_grads"} if version_key(s.release) >= version_key(SLEEP_LP_GRADS_SINCE)
                               else frozenset())
    out = [replace(t, device=Resource.CPU, what=f"{t.what}, on the host while the actor trains", source=SLEEP_SOURCE)
           if t.device == Resource.GPU and t.key.removeprefix("critic_") in moved else t for t in terms]
    gone = sum(t.nbytes for t in out if t.device == Resource.CPU) - sum(t.nbytes for t in terms
                                                                         if t.device == Resource.CPU)
    notes.append(f"critic: asleep while the actor trains (--deepspeed_enable_sleep): its "
                 f"{', '.join(_SLEEP_WORDS[key] for key in sorted(moved))} "
                 f"({gone / 2**30:.2f} GiB per GPU) on the host meanwhile, its bf16 partition stays; the actor sleeps "
                 "in turn while the critic trains, the same peak where the two are the same size")
    return out


# The families whose PPO runs the critic's forward inside the policy's, one loss and one backward: TRL's
# PolicyAndValueWrapper.forward runs the critic backbone (with grad) and then the policy, and PPOTrainer.train calls
# accelerator.backward(pg_loss + vf_coef * vf_loss) once (trl/trainer/ppo_trainer.py @ v0.21.0; the same in
# trl/experimental/ppo/ppo_trainer.py @ v1.9.0); ms-swift's PPOTrainer is TRL's (swift/trainers/rlhf_trainer/
# ppo_trainer.py @ v3.8.0, swift/rlhf_trainers/ppo_trainer.py @ v4.6.0). Both backbones' activations are live at
# the backward. The critic is never checkpointed there: TRL 0.21's wrapper has no gradient_checkpointing_enable,
# 1.9.0's forwards it to the policy alone, neither PPOTrainer.train calls it, and ms-swift's
# _prepare_gradient_checkpointing is ``pass`` ("Be consistent with TRL").
CRITIC_IN_POLICY_FORWARD = frozenset({None, TrainerFamily.TRL, TrainerFamily.MS_SWIFT})
TRL_PPO_SOURCE = ("trl/trainer/ppo_trainer.py PolicyAndValueWrapper.forward, PPOTrainer.train @ v0.21.0 "
                  "(trl/experimental/ppo @ v1.9.0)")
# OpenRLHF trains actor and critic as their own engines in their own steps, each with its own backward
# (openrlhf/trainer/ppo_trainer.py training_step -> training_step_actor, training_step_critic @ v0.5.1;
# trainer/ray/ppo_actor.py and ppo_critic.py training_step @ v0.8.5), both checkpointed by --gradient_checkpointing
# (cli/train_ppo.py train @ v0.5.1; ppo_critic.py init_model_from_pretrained @ v0.8.5): the peak is the larger step.
OPENRLHF_PPO_SOURCE = ("openrlhf/trainer/ppo_trainer.py training_step @ v0.5.1; trainer/ray/ppo_critic.py "
                       "training_step @ v0.8.5")


def critic_activation_terms(shape: TrainingShape, policy: ModelSpec, micro_batch: int, precision: str,
                            layout: Parallel, policy_activations: int) -> list[Term]:
    """PPO's critic activations beside the policy's (``policy_activations``, the activation term): the critic
    backbone as AutoModelForSequenceClassification runs it (no vocabulary logits: its score head is hidden × 1)
    over the same query + response micro batch, at the checkpointing its trainer sets. TRL/ms-swift: all of it, on
    top of the policy's, never checkpointed (CRITIC_IN_POLICY_FORWARD); OpenRLHF colocated: what its step holds
    beyond the actor's (the larger step is the peak); on GPUs of its own (OpenRLHF without
    --colocate_all_models) and elsewhere (LLaMA-Factory's value head rides on the policy): nothing here."""
    setup = shape.method
    if not critic_loaded(setup) or not shape.sequence_length:
        return []
    together = setup.trainer in CRITIC_IN_POLICY_FORWARD
    if not together and not (setup.trainer == TrainerFamily.OPENRLHF and on_policy_gpus(setup, ModelRole.CRITIC)):
        return []
    spec = replace(critic_spec(setup, policy, dict(shape.auxiliary_specs), []), lm_head=False)
    checkpointing = Checkpointing.NONE if together else shape.activation_checkpointing
    act = parallel_activations(spec, replace(shape, activation_checkpointing=checkpointing), micro_batch, precision,
                               layout).nbytes
    if together:
        return [Term("activations", Resource.GPU, act, "critic_activations",
                     "critic activations: its forward runs inside the policy's, one backward (not checkpointed)",
                     f"critic backbone, no LM head, checkpointing {checkpointing}, micro batch {micro_batch}",
                     TRL_PPO_SOURCE)]
    return [Term("activations", Resource.GPU, max(act - policy_activations, 0), "critic_activations",
                 "critic activations beyond the actor's: their own step (the larger step is the peak)",
                 f"max(critic {act:,} - actor {policy_activations:,}, 0)", OPENRLHF_PPO_SOURCE)]


# LLaMA-Factory trains reward models as TRL's AutoModelForCausalLMWithValueHead (llamafactory/train/rm/workflow.py
# run_rm: load_model(..., add_valuehead=True) @ v0.9.3; the same from 0.8): its forward runs the causal LM's own
# head, full-vocabulary logits in the model dtype, and upcasts them (``lm_logits.float()``,
# trl/models/modeling_value_head.py AutoModelForCausalLMWithValueHead.forward @ v0.9.6), which PairwiseTrainer
# discards (llamafactory/train/rm/trainer.py compute_loss: ``_, _, values = model(...)``). TRL's own RewardTrainer
# builds AutoModelForSequenceClassification: no vocabulary logits.
VALUE_HEAD_RM = frozenset({TrainerFamily.LLAMA_FACTORY})
VALUE_HEAD_RM_SOURCE = ("llamafactory/train/rm/workflow.py run_rm @ v0.9.3 -> trl/models/modeling_value_head.py "
                        "AutoModelForCausalLMWithValueHead.forward @ v0.9.6")


def value_head_logits_terms(shape: TrainingShape, policy: ModelSpec, micro_batch: int, layout: Parallel,
                            per_layer: int, head_share: int) -> list[Term]:
    """A value-head reward model's discarded logits (VALUE_HEAD_RM): at the end of its forward the bf16 logits and
    their fp32 copy (6 B per token and vocabulary entry) sit beside the saved activations; the backward's peak
    (the activation term) holds, beyond those, one layer's recompute under checkpointing (``per_layer``) and the
    head's share (``head_share``): only what the forward's end holds beyond that is added (the larger moment)."""
    setup = shape.method
    if setup.method != Method.REWARD or setup.trainer not in VALUE_HEAD_RM or not shape.sequence_length \
            or not policy.vocab_size:
        return []
    rows = batch_factor(setup) * micro_batch  # chosen and rejected in one batch (PairwiseDataCollator)
    tokens = rows * ceil_div(shape.sequence_length, layout.sequence)
    logits = (2 + FP32_BYTES) * tokens * policy.vocab_size
    backward = (per_layer if shape.activation_checkpointing != Checkpointing.NONE else 0) + head_share
    extra = max(0, logits - backward)
    if not extra:
        return []
    return [Term("activations", Resource.GPU, extra, "value_head_logits",
                 "the value-head model's full-vocabulary logits and their fp32 copy at the end of its forward "
                 "(discarded by the loss): beyond the backward's peak", f"max(0, (2 + 4) B × {rows} × "
                 f"{ceil_div(shape.sequence_length, layout.sequence)} × V {policy.vocab_size:,} - {backward:,} B)",
                 VALUE_HEAD_RM_SOURCE, kind=TermKind.EXACT)]


# KTO's KL term: loss_type "kto" estimates KL(policy || reference) from mismatched (prompt, completion) pairs, one
# more forward of the policy and one of the reference, both under no_grad; "apo_zero_unpaired" needs none
# (trl/trainer/kto_trainer.py __init__: calculate_KL = loss_type not in ["apo_zero_unpaired"] @ v0.21.0, v1.9.0,
# v1.16.0). LLaMA-Factory's KTO always runs it (llamafactory/train/kto/trainer.py concatenated_forward @ v0.9.3: no
# loss choice).
KTO_NO_KL_LOSSES = frozenset({"apo_zero_unpaired"})
# The first LLaMA-Factory release whose KTO keeps the fp32 logits beside the KL forward: concatenated_forward
# returns target_logits[kto_tags] (llamafactory/train/kto/trainer.py @ v0.9.1 to v0.9.5 and HEAD; v0.9.0 returns
# log-probs only)
LLAMA_FACTORY_KTO_KEEPS_LOGITS = Version("0.9.1")
LLAMA_FACTORY_KTO_SOURCE = "llamafactory/train/kto/trainer.py concatenated_forward, get_batch_loss_metrics @ v0.9.3"
OPENRLHF_KTO_SOURCE = ("openrlhf/trainer/kto_trainer.py fit, compute_model_logps_with_KL @ v0.8.5; models/loss.py "
                       "KTOLoss")
TRL_KTO_SOURCE = "trl/trainer/kto_trainer.py _compute_loss, _compute_kl_logps @ v1.9.0 (forward @ v0.21.0)"


def kto_calculates_kl(setup: MethodSetup) -> bool:
    """Whether the KTO run computes the KL term (KTO_NO_KL_LOSSES; LLaMA-Factory always)."""
    if setup.method != Method.KTO:
        return False
    if setup.trainer == TrainerFamily.LLAMA_FACTORY:
        return True
    return not loss_types(setup, "kto") <= KTO_NO_KL_LOSSES


def kto_kl_terms(shape: TrainingShape, policy: ModelSpec, micro_batch: int, layout: Parallel,
                 backward_kept: int = 0) -> list[Term]:
    """What KTO's KL forward adds to the peak, beyond the policy's loss peak in backward (its 3 copies of the
    logits, one of them the graph's saved log-probs: the activation term):

    * TRL (and axolotl, ms-swift, which run TRL's KTOTrainer.forward/_compute_loss): nothing. The policy's KL
      forward runs under no_grad *before* its own forward (_compute_kl_logps(model, batch) first; only B log-probs
      kept), and the reference's KL forward after it but before the reference's own forward (its logits freed on
      return): its copy and the one of the policy's still held (``outputs.logits`` @ v1.9.0, the chosen/rejected
      split @ v0.21.0) stay within the backward's two (TRL_KTO_SOURCE; from 1.15.0 the fused LM head keeps no
      logits at all).
    * LLaMA-Factory from 0.9.1: the policy's KL forward runs *after* its own, graph live, and in fp32
      (``.logits.to(torch.float32)`` then a full ``log_softmax`` in get_batch_logps, which takes a contiguous copy
      of the shifted view ``logits[:, :-1, :]``). The peak is the reference pass's KL forward: the policy's saved
      log-softmax (4 B), its chosen/rejected fp32 logits (boolean-indexed copies held for the metrics, 4 B), the
      reference's own fp32 logits (held across its KL forward, 4 B), and the KL forward's fp32 logits, their
      contiguous copy and log-softmax (12 B): 24 B per token and vocabulary entry against the backward's 12 (three
      fp32 copies): 12 B more. 0.9.0 keeps no logits: a KL forward's 12 B beside the saved 4, 16 against 12: 4 B
      more. Measured with a line-for-line replica of 0.9.3's code on CPU: 6.00 fp32 copies (benchmarks/dpo_loss.md).
    * OpenRLHF (0.5 to 0.9.5, its KTO's last release): the collate doubles the micro batch (each sample and an
      unmatched one for the KL term) and compute_model_logps_with_KL runs the policy over the KL half *with* its graph
      after the matched half (openrlhf/trainer/kto_trainer.py @ v0.8.5); KTOLoss detaches the KL, so that graph is
      never freed by the backward: the half's kept layer tensors (``backward_kept``, the matched half's, the same
      rows) and its saved fp32 logits copy (flash-attn's cross-entropy saves the reshaped slice) stay through the
      step. Beside them the reference's pass holds its fp32 logits and their copy while the policy's saved copy of
      the matched half lives: the plain loss's 12 B. Measured with OpenRLHF 0.8.5's own compute_model_logps_with_KL
      and KTOLoss on CPU: 4.01 fp32 copies of the matched half's logits (benchmarks/openrlhf_loss.md), 16 B."""
    setup = shape.method
    if not kto_calculates_kl(setup) or not shape.sequence_length or not policy.vocab_size or policy.lm_head is False:
        return []
    length = ceil_div(shape.sequence_length, layout.sequence)
    if setup.trainer == TrainerFamily.OPENRLHF:
        logits = FP32_BYTES * micro_batch * length * policy.vocab_size
        return [Term("activations", Resource.GPU, logits + backward_kept, "kto_kl_half",
                     "KTO's KL half held with its graph (its kept layer tensors and saved fp32 logits copy)",
                     f"{backward_kept:,} B kept + 4 B × {micro_batch} × {length} × V {policy.vocab_size:,}",
                     OPENRLHF_KTO_SOURCE)]
    if setup.trainer != TrainerFamily.LLAMA_FACTORY:
        return []
    release = setup.release
    keeps = release is None or release >= LLAMA_FACTORY_KTO_KEEPS_LOGITS
    tokens = micro_batch * ceil_div(shape.sequence_length, layout.sequence)
    copies = 3 if keeps else 1
    formula = "(4 + 4 + 4 + 12 - 12)" if keeps else "(4 + 12 - 12)"
    return [Term("activations", Resource.GPU, copies * FP32_BYTES * tokens * policy.vocab_size, "kto_kl_forward",
                 "KTO's KL forward after the policy's (no_grad, fp32) beside the held policy and reference logits"
                 if keeps else "KTO's KL forward after the policy's (no_grad, fp32) beside its saved log-softmax",
                 f"{formula} B × {micro_batch} × {ceil_div(shape.sequence_length, layout.sequence)} "
                 f"× V {policy.vocab_size:,}", LLAMA_FACTORY_KTO_SOURCE)]


LLAMA_FACTORY_DPO_SOURCE = ("llamafactory/train/dpo/trainer.py get_batch_loss_metrics, concatenated_forward "
                            "(@ v0.6.0 to v0.9.4); train/trainer_utils.py get_batch_logps")
TRL_DPO_SOURCE = "trl/trainer/dpo_trainer.py get_batch_loss_metrics, concatenated_forward, get_batch_logps @ v0.9.6"
# TRL's DPO stops holding the whole logits across the reference pass at 0.15: concatenated_forward returns the mean
# logits only, and selective_log_softmax keeps one row's log-softmax at a time (trl/trainer/utils.py)
TRL_ROW_LOG_SOFTMAX = Version("0.15")
# From 0.29 DPO's loss is one function, _compute_loss, that holds the policy's output (its logits) to the end, beside
# the reference forward's output and the metrics over the logits; 1.6 drops its .contiguous() copies; 1.15 scores
# through the fused LM head (memory/trl_sft_loss.py), no logits.
TRL_DPO_COMPUTE_LOSS = Version("0.29")
TRL_DPO_NO_CONTIGUOUS = Version("1.6")
TRL_DPO_FUSED = Version("1.15")
TRL_DPO_ROW_SOURCE = ("trl/trainer/dpo_trainer.py concatenated_forward @ v0.24.0 (the mean of the chosen rows' masked "
                      "logits); measured on CPU: benchmarks/dpo_loss.md")
WPO_SOURCE = ("trl/trainer/dpo_trainer.py _compute_loss @ v0.29.0-v1.9.0 (logsumexp of the logits and of twice "
              "them), concatenated_forward @ v0.24.0; measured on CPU: benchmarks/dpo_loss.md")
TRL_COMPUTE_LOSS_SOURCE = ("trl/trainer/dpo_trainer.py _compute_loss @ v0.29.0, v1.5.1 (shift_logits .contiguous()), "
                           "v1.9.0; trl/trainer/utils.py entropy_from_logits; measured on CPU: "
                           "benchmarks/calibrate_dpo_loss.py")


@dataclass(frozen=True, slots=True)
class LossMoment:
    """The moment of DPO's (or KTO's) loss side, in copies of the batch's logits live at once: ``copies`` expected,
    ``bound`` where the data decides more (the chosen completion's share of the positions), ``upcast`` whether a
    copy is fp32 (else the model's dtype). What it adds is what it holds above the backward's loss peak
    (backward_copies; dpo_reference_pass_terms)."""

    copies: Fraction
    bound: Fraction
    upcast: bool
    source: str


def _reference_pass(setup: MethodSetup, liger_kernel: bool = False) -> LossMoment | None:
    """What DPO's (KTO's) loss side holds at once, by the trainer's code at its release (dpo_reference_pass_terms
    counts what it holds above the backward's loss peak); None where the trainer's code is not read here or no
    moment of it can exceed the backward's.

    * LLaMA-Factory and TRL up to 0.14 run the reference pass under no_grad after the policy's forward, with the
      policy's graph live and its whole logits held for the metrics (``policy_chosen_logits``), beside log_softmax's
      output (saved for backward): 2 copies; the pass makes its logits, the contiguous copy log_softmax takes of
      the shifted view (``logits[:, :-1, :]``) and its output, 3 more, freed on return: 5 live, two copies over the
      backward's 3, in the logits' dtype: fp32 where the trainer upcasts them (LLaMA-Factory's
      ``.logits.to(torch.float32)``; TRL before 0.7.5). Measured on CPU with a replica of LLaMA-Factory 0.9.3's
      code (benchmarks/dpo_loss.md: 5.0 copies). With LoRA the reference is the same model with its adapter
      disabled, so the pass runs without a reference copy too. Precomputed log-probs: no pass.
    * TRL 0.15 to 0.28: concatenated_forward returns the mean logits only: the policy's logits, its saved
      log-softmax and the masked copy for their mean (2.4 copies measured), under the backward's count.
    * TRL 0.29 to 1.14 (_compute_loss): the policy's output stays referenced to the end, so at the metrics the
      policy's logits, the per-row log-softmax saved for backward and the reference's logits (a local too; with LoRA
      the adapter-disabled pass's) are live, with, up to 1.5, the ``.contiguous()`` copy of each model's shifted
      logits (5 copies), and from 1.6 entropy_from_logits' reshape copy of the non-contiguous shifted logits (4);
      the masked copy of the chosen rows' logits for their mean adds half a copy at most (the completion's share: a
      bound). Measured on CPU with TRL 0.29.0, 1.5.1 and 1.9.0's own _compute_loss (benchmarks/dpo_loss.md): 5.38
      and 4.0 copies on a GPU's arithmetic, the backward's own peak 2.0 to 2.5. Precomputed log-probs: no reference
      logits (3 copies up to 1.5, the entropy copy's moment 3 from 1.6)."""
    if scores_without_logits(setup, liger_kernel):  # Liger's loss, TRL's chunked log-probs (memory/liger.py)
        return None
    if setup.method == Method.KTO:
        return _trl_kto_moment(setup)
    if setup.method != Method.DPO or reference_free_loss(setup):
        return None
    precomputed = bool(setup.precompute_ref_log_probs)
    if setup.trainer == TrainerFamily.LLAMA_FACTORY:
        return None if precomputed else LossMoment(Fraction(5), Fraction(5), True, LLAMA_FACTORY_DPO_SOURCE)
    trl = trl_release(setup)
    sft = DPO_SFT_LOSS in loss_types(setup)
    return None if trl is None else _trl_dpo_moment(trl, precomputed, bool(setup.use_weighting), sft)


# TRL's KTO is one _compute_loss of DPO's 1.6+ shape from 1.8 (trl/trainer/kto_trainer.py @ v1.8.0, v1.9.0); before,
# KTOTrainer.forward splits the logits into chosen/rejected copies that outlive it while the reference runs (the
# experimental KTOTrainer of 1.5 to 1.7 keeps that forward); 1.15 fuses the LM head.
TRL_KTO_COMPUTE_LOSS = Version("1.8")
TRL_KTO_COMPUTE_LOSS_SOURCE = ("trl/trainer/kto_trainer.py _compute_loss @ v1.8.0, v1.9.0, forward @ v0.8.0 to "
                               "v0.29.0; "
                               "trl/trainer/utils.py entropy_from_logits; measured on CPU: "
                               "benchmarks/calibrate_dpo_loss.py, benchmarks/dpo_loss.md")


def _trl_kto_moment(setup: MethodSetup) -> LossMoment | None:
    """KTO's loss side in copies of its batch's logits live at once (one row per sample), by the TRL that runs it
    (its own release, or the one axolotl pins):

    * before 1.8 (KTOTrainer.forward): the policy's saved log-softmax and its chosen/rejected index copies (one copy
      together) are held while the reference's forward makes its logits and their copies: 4 copies (measured with
      TRL 0.24.0's and 0.29.0's own code: 4.01). Before 0.15 the log-softmax is a full one of the shifted view, so
      the reference's logits, their contiguous copy and the log-softmax are live together: 5.
    * 1.8 to 1.14 (_compute_loss): DPO's shape from 1.6, the policy's and the reference's logits, the saved
      log-softmax and entropy_from_logits' copy at the metrics (4), then the chosen and rejected rows' index_select
      copies (1 together) with the chosen rows' masked copy for their mean: up to 5.
    Precomputed log-probs: no reference forward, 3."""
    trl = trl_release(setup)
    if trl is None or trl >= TRL_DPO_FUSED or setup.precompute_ref_log_probs:
        return None
    if trl < TRL_ROW_LOG_SOFTMAX:
        return LossMoment(Fraction(5), Fraction(5), False, TRL_KTO_COMPUTE_LOSS_SOURCE)
    bound = Fraction(5) if trl >= TRL_KTO_COMPUTE_LOSS else Fraction(4)
    return LossMoment(Fraction(4), bound, False, TRL_KTO_COMPUTE_LOSS_SOURCE)


# WPO weighting (DPOConfig.use_weighting) takes, under no_grad, logsumexp over the logits and over twice them at the
# loss side's moment: the doubled copy and logsumexp's temporary, beside what is held there. Measured with TRL's own
# _compute_loss on CPU: 7.0 copies against 5.4-6.0 at 0.29.0 and 1.5.1 (+2, the CPU's fp32 mean copy no longer the
# peak), 5.0 against 4.1 at 1.9.0 (+1: the entropy's reshape copy is gone by then); 0.15 to 0.28
# (concatenated_forward @ v0.24.0: F.log_softmax(logits), then logsumexp(2 * logprobs)) counted from the code: the
# log-softmax, its doubled copy and logsumexp's temporary, +3.
WPO_EXTRA = ((TRL_DPO_NO_CONTIGUOUS, Fraction(1)), (TRL_DPO_COMPUTE_LOSS, Fraction(2)),
             (TRL_ROW_LOG_SOFTMAX, Fraction(3)))


def _wpo_extra(trl: Version) -> Fraction:
    """What use_weighting adds to DPO's loss-side moment at ``trl`` (WPO_EXTRA; nothing before 0.15: not read)."""
    return next((extra for since, extra in WPO_EXTRA if trl >= since), Fraction(0))


def _trl_dpo_moment(trl: Version, precomputed: bool, weighting: bool = False,
                    sft: bool = False) -> LossMoment | None:
    """_reference_pass for TRL's DPO at ``trl`` (its own, or the one axolotl pins), with WPO weighting or not, and
    with an "sft" loss type or not: from 0.29 its cross-entropy over the chosen completion's positions
    (``chosen_logits[chosen_mask.bool()]``, _compute_loss @ v1.9.0) copies them and saves their log-softmax, up to
    half a copy each (the completion's share of the chosen rows, the data's): the bound only."""
    base = _trl_dpo_base_moment(trl, precomputed)
    if base is None:
        return None
    copies = base.copies + (_wpo_extra(trl) if weighting else Fraction(0))
    chosen_sft = Fraction(1) if sft and trl >= TRL_DPO_COMPUTE_LOSS else Fraction(0)
    return replace(base, copies=copies, bound=max(base.bound, copies) + chosen_sft)


def _trl_dpo_base_moment(trl: Version, precomputed: bool) -> LossMoment | None:
    """The moment without WPO weighting."""
    if trl < TRL_ROW_LOG_SOFTMAX:
        return None if precomputed else LossMoment(Fraction(5), Fraction(5), trl < TRL_BF16_LOGITS, TRL_DPO_SOURCE)
    if trl >= TRL_DPO_FUSED:
        return None
    if trl < TRL_DPO_COMPUTE_LOSS:  # the policy's logits and saved log-softmax, the masked copy for their mean
        return LossMoment(Fraction(2), Fraction(5, 2), False, TRL_DPO_ROW_SOURCE)
    contiguous = trl < TRL_DPO_NO_CONTIGUOUS
    # live at the metrics: 5 copies with the .contiguous() copies, else 4; the reference's (and its copy) gone
    # with precomputed log-probs
    live = Fraction((5 if contiguous else 4) - ((2 if contiguous else 1) if precomputed else 0))
    masked = Fraction(1, 2) if contiguous else Fraction(0)  # at 1.6+ under the entropy copy's moment
    return LossMoment(live, live + masked, False, TRL_COMPUTE_LOSS_SOURCE)


def copies(n: Fraction) -> str:
    """``n`` copies in words: "1 copy", "2 copies", "2.5 copies"."""
    return f"{float(n):g} cop{'y' if n == 1 else 'ies'}"


def dpo_reference_pass_terms(shape: TrainingShape, policy: ModelSpec, micro_batch: int, layout: Parallel,
                             model_bytes: int, headroom: int = 0) -> list[Term]:
    """What DPO's (KTO's) loss side adds beyond the activations' peak (_reference_pass): the copies of the batch's
    logits it holds at once above the backward's loss peak, less ``headroom``, what a layer's recompute counted as
    the peak leaves above the loss side (memory/activations.py Activations.loss_headroom): the two moments are not
    live together."""
    found = _reference_pass(shape.method, shape.liger_kernel)
    if found is None or not shape.sequence_length or not policy.vocab_size or policy.lm_head is False:
        return []
    rows = batch_factor(shape.method) * micro_batch
    backward = backward_copies(shape.method, rows)
    over, over_bound = max(found.copies - backward, Fraction(0)), max(found.bound - backward, Fraction(0))
    if not over_bound:
        return []
    per = FP32_BYTES if found.upcast else model_bytes
    length = ceil_div(shape.sequence_length, layout.sequence)
    one = per * rows * length * policy.vocab_size
    expected, bound = max(exact(over * one) - headroom, 0), max(exact(over_bound * one) - headroom, 0)
    if not bound:
        return []
    return [Term("activations", Resource.GPU, expected, "dpo_reference_pass",
                 "the loss side (the reference pass, the held logits, the metrics) above the backward's loss peak",
                 f"({float(found.copies):g} - {float(backward):g}) x {per} B × {rows} rows × {length} × "
                 f"V {policy.vocab_size:,} (copies of the logits live at once, less the backward's"
                 + (f"; less {headroom:,} B a layer's recompute already counts" if headroom else "")
                 + (f"; up to {float(found.bound):g} with the chosen rows' masked copy" if found.bound > found.copies
                    else "") + ")",
                 found.source, bound=bound if bound > expected else None)]


def backward_copies(setup: MethodSetup, rows: int) -> Fraction:
    """The backward's loss peak in copies of the logits, from memory/activations.py's own counts (its _logits): two
    and one row's with a per-row log-softmax (row_log_softmax), and half a copy more with the chosen rows' NLL
    (chosen_nll); else three."""
    if not row_log_softmax(setup):
        return Fraction(LOSS_COPIES)
    nll = Fraction(1, CHOSEN_NLL_SHARE) if chosen_nll(setup) else Fraction(0)
    return Fraction(ROW_LOSS_COPIES) + Fraction(1, max(rows, 1)) + nll


def _kto_moment_words(setup: MethodSetup, liger_kernel: bool = False) -> str:
    """The loss side's moment above the backward (_trl_kto_moment), as a clause of kto_note; empty where none."""
    moment = None if scores_without_logits(setup, liger_kernel) else _trl_kto_moment(setup)
    if moment is None:
        return ""
    return (f"; the loss side holds the policy's and the reference's logits, their saved log-softmax and the metrics' "
            f"copies together: {copies(moment.copies)} of the batch's logits live at once (up to "
            f"{float(moment.bound):g} with the chosen rows' masked copy), what they hold above the backward's loss "
            f"peak counted ({moment.source})")


def kto_note(setup: MethodSetup, liger_kernel: bool = False) -> str | None:
    """What KTO's KL term does to the estimate, said once (kto_kl_terms); None for another method."""
    if setup.method != Method.KTO:
        return None
    if not kto_calculates_kl(setup):
        return (f"KTO loss_type {setup.loss_type}: no KL term, no mismatched-completion forward"
                + _kto_moment_words(setup, liger_kernel))
    if setup.trainer != TrainerFamily.LLAMA_FACTORY:
        return ("KTO's KL forward (loss_type kto): the policy's under no_grad before its own forward, the reference's "
                f"one at a time with its own: under the backward's loss peak, nothing added ({TRL_KTO_SOURCE})"
                + _kto_moment_words(setup, liger_kernel))
    release = setup.release
    if release is not None and release < LLAMA_FACTORY_KTO_KEEPS_LOGITS:
        return (f"KTO's KL forward (LLaMA-Factory {setup.trainer_version} keeps no logits beside it): its fp32 "
                "logits, their contiguous copy and log-softmax beside the saved one, 4 B per token and vocabulary "
                f"entry beyond the backward's loss peak ({LLAMA_FACTORY_KTO_SOURCE})")
    return ("KTO's KL forward runs after the policy's with its graph live, logits in fp32: 12 B per token and "
            f"vocabulary entry beyond the backward's loss peak ({LLAMA_FACTORY_KTO_SOURCE})")


def vllm_mode(setup: MethodSetup) -> VllmMode:
    """Where vLLM runs when no file says: TRL's GRPOConfig.vllm_mode defaults to "server" up to 0.29 and to
    "colocate" from 1.0.0 (trl/trainer/grpo_config.py @ v0.29.1, v1.0.0; the release unknown: the current
    default); OpenRLHF puts its vLLM engines on the training GPUs only with --colocate_all_models."""
    if setup.generation.vllm_mode is not None:
        return setup.generation.vllm_mode
    if setup.trainer == TrainerFamily.OPENRLHF:
        return VllmMode.COLOCATE if setup.colocate_all_models else VllmMode.SERVER
    release = setup.release if setup.trainer in (None, TrainerFamily.TRL) else None
    return VllmMode.SERVER if release is not None and release < TRL_COLOCATE_DEFAULT else VllmMode.COLOCATE


# ms-swift's own default share for vLLM (swift/trainers/arguments.py GRPOArgumentsMixin @ v3.8.0,
# swift/rlhf_trainers/args_mixin.py @ HEAD: vllm_gpu_memory_utilization 0.9), not TRL's 0.3.
SWIFT_VLLM_UTILIZATION = 0.9


# OpenRLHF's --vllm_gpu_memory_utilization (--vllm.gpu_memory_utilization from 0.11): 0.95 (openrlhf/cli/
# train_ppo_ray.py @ v0.6.4, v0.7.0, v0.8.5, v0.8.11, v0.11.0), 0.9 before (v0.6.0 to v0.6.3).
OPENRLHF_VLLM_UTILIZATION = 0.95
OPENRLHF_EARLY_VLLM_UTILIZATION = (Version("0.6.4"), 0.9)


def default_vllm_share(setup: MethodSetup) -> float:
    """The share of each card vLLM takes colocated where no file sets it: ms-swift's 0.9, OpenRLHF's 0.95 (0.9
    before 0.6.4), else TRL's 0.3."""
    if setup.trainer == TrainerFamily.OPENRLHF:
        release = setup.release
        first, early = OPENRLHF_EARLY_VLLM_UTILIZATION
        return early if release is not None and release < first else OPENRLHF_VLLM_UTILIZATION
    return SWIFT_VLLM_UTILIZATION if setup.trainer == TrainerFamily.MS_SWIFT else VLLM_DEFAULT_UTILIZATION


def vllm_share(setup: MethodSetup) -> float:
    """The share of each card vLLM takes colocated: the files' ``vllm_gpu_memory_utilization``, else the trainer's
    default (default_vllm_share)."""
    share = setup.generation.vllm_gpu_memory_utilization
    return share if share is not None else default_vllm_share(setup)


# vLLM's KV cache is allocated in blocks of this many tokens (vllm/config CacheConfig.block_size: 16 on CUDA by
# default); one request's cache is whole blocks (v1/kv_cache_interface.py AttentionSpec.max_memory_usage_bytes:
# cdiv(max_model_len, block_size) x page_size).
VLLM_BLOCK_TOKENS = 16
VLLM_FLOOR_SOURCE = ("vllm/v1/worker/gpu_worker.py determine_available_memory (requested = total x "
                     "gpu_memory_utilization, less the weights); vllm/v1/core/kv_cache_utils.py "
                     "check_enough_kv_cache_memory (one request of max_model_len); trl/trainer/grpo_trainer.py "
                     "__init__ @ v0.21.0 (max_model_len = max_prompt_length + max_completion_length)")


@dataclass(frozen=True, slots=True)
class VllmFloor:
    """The least ``vllm_gpu_memory_utilization`` at which a colocated vLLM starts: its weights and the KV cache
    of one request at ``max_model_len`` inside its share of the card (``share``, rounded up to 0.01)."""

    weights: int
    kv_cache: int
    tokens: int  # the max_model_len counted
    share: float
    notes: tuple[str, ...] = ()

    @property
    def nbytes(self) -> int:
        return self.weights + self.kv_cache


def colocated_vllm_pool(setup: MethodSetup, policy: ModelSpec, sequence_length: int | None,
                        gpu_memory: int | None) -> tuple[VllmFloor, int] | None:
    """A colocated vLLM's floor and its share of the card in bytes (gpu_memory x vllm_gpu_memory_utilization, what
    gpu_worker.py lets it take); None where the run has no vLLM on the training GPUs or its floor is not known.
    The one reading both the verdict (memory/verdict.py vllm_share_judgement) and vllm-below-floor use."""
    if not setup.generation.use_vllm or vllm_mode(setup) != VllmMode.COLOCATE or not gpu_memory:
        return None
    floor = vllm_floor(setup, policy, sequence_length, gpu_memory)
    return None if floor is None else (floor, int(gpu_memory * vllm_share(setup)))


def vllm_floor(setup: MethodSetup, policy: ModelSpec, sequence_length: int | None,
               gpu_memory: int) -> VllmFloor | None:
    """What vLLM needs of its share before it generates anything. ``gpu_memory_utilization`` is a fraction of the
    whole card that vLLM's own allocations may take, its weights included: gpu_worker.py's requested memory is
    total x utilization, and the KV cache gets what is left of it after the weights and the profile run; with
    nothing left vLLM raises "No available memory for the cache blocks", and with less than one request of
    max_model_len, check_enough_kv_cache_memory raises "To serve at least one request ...". So the floor is

    * the weights: the policy's parameters in 16-bit (vLLM's dtype "auto" keeps a bf16/fp16 checkpoint's dtype and
      runs an fp32 one in 16 bits), split over vLLM's tensor parallel ranks (``vllm_tensor_parallel_size``,
      default 1: each rank holds 1/tp of them; the norms it replicates are not counted, so the floor stays a lower
      bound);
    * the KV cache of one request: 2 (K, V) x layers x the rank's key/value heads (max(1, heads // tp):
      vllm/config ModelConfig.get_num_kv_heads, replicated where tp exceeds them) x head dim x 2 B per token, over
      ``max_model_len`` in whole blocks of VLLM_BLOCK_TOKENS: the trainer's own where it gives one (TRL's
      vllm_max_model_length, ms-swift's --vllm_max_model_len, axolotl's vllm.max_model_len). Else TRL 0.21
      passes max_prompt_length + max_completion_length where both are set; where one is not (TRL 0.26 on), vLLM
      takes the model's context, which the model description does not carry: the training sequence is counted
      and the floor is a lower bound (said in the notes).

    Not counted, as no code gives a size for them: the profile run's activations (TRL caps its batch at
    max_num_batched_tokens 4096) and memory outside PyTorch (CUDA graphs, NCCL): the floor is a lower bound by
    that much, said in the notes. None where the model's attention shape is unknown."""
    L, heads = policy.num_layers, policy.num_key_value_heads or policy.num_attention_heads
    head_dim = policy.head_dim or (policy.hidden_size // policy.num_attention_heads
                                   if policy.hidden_size and policy.num_attention_heads else None)
    if not (L and heads and head_dim and gpu_memory > 0):
        return None
    gen = setup.generation
    notes = [("not counted: vLLM's profile-run activations (at most max_num_batched_tokens 4096 tokens) and its "
              "memory outside PyTorch (CUDA graphs, NCCL): the floor is a lower bound")]
    if gen.vllm_max_model_len:  # the context the trainer starts vLLM with, where its arguments give one
        tokens = gen.vllm_max_model_len
    elif gen.max_prompt_length and gen.max_completion_length:
        tokens = gen.max_prompt_length + gen.max_completion_length
    elif sequence_length:
        tokens = sequence_length
        notes.append(f"max_model_len taken as the training sequence ({tokens} tokens): where TRL passes none, vLLM "
                     "takes the model's context, a larger KV cache")
    else:
        return None
    w = 2
    tp = gen.vllm_tensor_parallel_size or 1
    weights = ceil_div(w * policy.parameters, tp)
    kv = 2 * L * max(1, heads // tp) * head_dim * w * ceil_div(tokens, VLLM_BLOCK_TOKENS) * VLLM_BLOCK_TOKENS
    share = ceil_div((weights + kv) * 100, gpu_memory) / 100
    return VllmFloor(weights, kv, tokens, share, tuple(notes))


def vllm_terms(setup: MethodSetup, gpu_memory: int | None, notes: list[str]) -> list[Term]:
    """vLLM colocated on the training GPUs takes ``vllm_gpu_memory_utilization`` of each card (its KV cache and
    weights live inside that share: vllm/worker gpu_worker.py determine_available_memory); in server mode it runs
    on its own GPUs, outside the training world, and adds nothing here."""
    gen = setup.generation
    if not gen.use_vllm:
        return []
    if vllm_mode(setup) != VllmMode.COLOCATE:
        notes.append(f"vLLM in server mode on {gen.vllm_num_gpus or 'its own'} GPU(s) outside the training world: "
                     "not on these cards")
        return []
    share = vllm_share(setup)
    if gpu_memory is None:
        notes.append(f"vLLM colocated takes {share:.0%} of each card: not counted without the card's memory (--gpu)")
        return []
    src = "trl/trainer/grpo_config.py vllm_gpu_memory_utilization; vllm gpu_worker.py determine_available_memory"
    return [Term("vllm", Resource.GPU, int(gpu_memory * share), "vllm_share",
                 "vLLM colocated: its share of the card (weights, KV cache)", f"{share} × card", src)]


def method_notes(setup: MethodSetup, config_has_optimizer: bool, policy: ModelSpec,
                 liger_kernel: bool = False) -> list[str]:
    """The assumptions the method's terms rest on, for the report."""
    if setup.method == Method.SFT:
        return []
    out: list[str] = []
    if setup.trainer in (TrainerFamily.MS_SWIFT, TrainerFamily.AXOLOTL, TrainerFamily.LLAMA_FACTORY):
        out.append(f"{setup.trainer}: its trainers hand the reference/reward models to TRL's deepspeed preparation "
                   "(stage 3 kept, else stage 0), at the TRL release it pins")
    copy = optimizer_copy(setup, config_has_optimizer)
    if copy.bound:
        out.append("TRL release unknown: the reference engine is costed without the config's optimizer block "
                   "(TRL >= 1.9.1 drops it); its bound adds what TRL <= 1.9.0 builds from it (14 B/param at "
                   "stage 0 in bf16; at stage 3 the fp32 and gradient partitions and the IPG bucket)")
    elif copy.expected:
        engine = "teacher's" if setup.method == Method.GKD else "reference"
        out.append(f"{copy.release} copies the config's optimizer block to the {engine} engine "
                   "(TRL's prepare_deepspeed up to 1.9.0, trl/models/utils.py; dropped from 1.9.1)")
    out += _gkd_notes(setup)
    if batch_factor(setup) == 2:
        # the reference clause only where there is one (CPO, ORPO and reward models run none)
        out.append(f"{setup.method}: chosen and rejected concatenated, 2 sequences per sample through the policy"
                   + _reference_pass_words(setup, policy, liger_kernel))
    prompt = ppo_prompt_length(setup) if setup.method == Method.PPO else None
    completion = G.ppo_completion_length(setup)
    if prompt and completion:
        through = ("the policy with its value head" if setup.trainer in VALUE_HEAD_ON_POLICY
                   else "policy and critic")
        out.append(f"PPO trains on query + response: up to {prompt} prompt tokens and {completion} generated, one "
                   f"sequence through {through}")
    kto = kto_note(setup, liger_kernel)
    if kto is not None:
        out.append(kto)
    if setup.method in (Method.DPO, Method.KTO, Method.GRPO) and not has_reference(setup, policy):
        out.append(f"{setup.method}: no reference model (PEFT adapter disabled, precomputed log-probs, beta 0 or "
                   "as the files say)")
    if setup.unused_copy_at_load:
        out.append(f"axolotl loads a second copy of the model for {setup.method} that no trainer gets "
                   "(train.py setup_reference_model; core/builders/rl.py hands it to dpo/ipo only): host RAM "
                   "while the models are built, dropped before training")
    return out


def _reference_pass_words(setup: MethodSetup, policy: ModelSpec, liger_kernel: bool = False) -> str:
    """How the paired method's reference forward is counted (dpo_reference_pass_terms), for method_notes."""
    found = _reference_pass(setup, liger_kernel)
    wpo = (f"; WPO weighting's logsumexp over the logits and twice them counted with it ({WPO_SOURCE})"
           if found is not None and setup.use_weighting and setup.method == Method.DPO else "")
    return _moment_words(setup, policy, found) + wpo


def _moment_words(setup: MethodSetup, policy: ModelSpec, found: LossMoment | None) -> str:
    """_reference_pass_words' clause for the moment ``found``."""
    if found is not None and found.source == TRL_DPO_ROW_SOURCE:
        return (f"; the loss side holds the policy's logits and their saved per-row log-softmax, and the mean of "
                f"the chosen rows' masked logits copies them: {copies(found.copies)} of the logits live at once, up "
                f"to {float(found.bound):g}, what they hold above the backward's loss peak counted ({found.source})")
    if found is not None and found.source in (TRL_COMPUTE_LOSS_SOURCE, TRL_KTO_COMPUTE_LOSS_SOURCE):
        return (f"; the loss side holds the policy's logits, their saved log-softmax and the reference pass's logits "
                f"(with LoRA the adapter disabled) to the metrics: {copies(found.copies)} of the logits live at "
                f"once, what they hold above the backward's loss peak counted ({found.source})")
    if found is not None:
        return ("; the reference pass (with LoRA the adapter disabled) runs under no_grad after the policy's, whose "
                "whole logits and log-softmax stay held, with its own logits, their contiguous shifted copy and "
                f"log-softmax: {copies(found.copies)} of the logits live at once, what they hold above the backward's "
                f"loss peak counted ({found.source})")
    if not has_reference(setup, policy):  # CPO, ORPO and reward models run none
        return ""
    return ("; the reference forward runs under no_grad after the policy's, beside its saved activations and logits "
            "(TRL get_batch_metrics @ v0.7.4, _compute_loss @ v1.9.0); its own transient (one layer, its logits) is "
            "not counted")


# The spelling of a TRL field in each family's own file or flags, where the family reads it (axolotl's trl: block,
# ms-swift's and OpenRLHF's flags); None: TRL's own config file.
def _key(setup: MethodSetup, name: str) -> str:
    if setup.trainer == TrainerFamily.AXOLOTL:
        return f"trl.{name}"
    if setup.trainer in (TrainerFamily.MS_SWIFT, TrainerFamily.OPENRLHF):
        return f"--{name}"
    return name


# The newest release of each family read for the defaults the estimate takes where the release is unknown.
NEWEST_RELEASE: dict[TrainerFamily | None, Version] = {
    None: Version("1.16.0"), TrainerFamily.TRL: Version("1.16.0"), TrainerFamily.LLAMA_FACTORY: Version("0.9.5"),
    TrainerFamily.AXOLOTL: Version("0.18.0"), TrainerFamily.MS_SWIFT: Version("4.6.0"),
    TrainerFamily.OPENRLHF: Version("0.8.11")}
NEWEST_READ = {family: f"{TRAINER_NAMES[family or TrainerFamily.TRL]} {release}"
               for family, release in NEWEST_RELEASE.items()}
# Families whose own settings include TRL's precompute_ref_log_probs (TRL's DPO/KTO configs; ms-swift's
# RLHFArguments take them; axolotl's trl: block); LLaMA-Factory and OpenRLHF have no such setting.
PRECOMPUTES = frozenset({None, TrainerFamily.TRL, TrainerFamily.MS_SWIFT, TrainerFamily.AXOLOTL})


def method_assumptions(setup: MethodSetup, policy: ModelSpec, liger_kernel: bool = False) -> list[AssumedInput]:
    """The method's inputs the estimate assumed (memory/assumed.py INPUTS): the method itself where it was guessed
    from a file's keys (config/method.py origin "guessed from KEY"), the trainer's release where no pin said it,
    and each setting that decides memory here that no file said (None: the trainer's default at its release).
    ``liger_kernel``: the Trainer's use_liger_kernel, beside which some TRL releases refuse precomputed log-probs."""
    if setup.method == Method.SFT:
        if setup.trainer == TrainerFamily.TRL and setup.trainer_version is None:  # memory/trl_sft_loss.py
            return [AssumedInput.of("trainer_version", None, f"TRL's SFT loss as {NEWEST_READ[TrainerFamily.TRL]} "
                                    "runs it, its fused LM head without the full logits (before TRL 1.5 the "
                                    "logits are whole, 12 bytes per token and vocabulary entry)",
                                    key=f"a pin of the trainer, e.g. {DISTRIBUTIONS[TrainerFamily.TRL]}==X in "
                                    "requirements.txt")]
        if setup.trainer == TrainerFamily.OPENRLHF and setup.trainer_version is None:  # openrlhf_fused_ce
            return [AssumedInput.of("trainer_version", None, f"OpenRLHF's SFT loss as "
                                    f"{NEWEST_READ[TrainerFamily.OPENRLHF]} runs it, flash-attn's cross-entropy on "
                                    "fp32 logits, 10 bytes per token and vocabulary entry (before 0.7.0 "
                                    "GPTLMLoss, 12)", key=f"a pin of the trainer, e.g. "
                                    f"{DISTRIBUTIONS[TrainerFamily.OPENRLHF]}==X in requirements.txt")]
        return []
    said = dict(setup.origin)
    out: list[AssumedInput] = []
    guessed = said.get("method", "")
    if guessed.startswith("guessed from "):
        key = guessed.removeprefix("guessed from ")
        out.append(AssumedInput.of("trainer", str(setup.method),
                                   f"guessed from {said.get(key, key)}: no file or launch command names the trainer "
                                   "that reads it"))
    if setup.trainer_version is None:
        dist = DISTRIBUTIONS[setup.trainer or TrainerFamily.TRL]
        out.append(AssumedInput.of("trainer_version", None,
                                   f"{setup.trainer or 'TRL'}'s defaults and code paths as the newest release read, "
                                   f"{NEWEST_READ[setup.trainer]} (the reference engine's optimizer block, the "
                                   "logits' dtype, vLLM's mode)", key=f"a pin of the trainer, e.g. {dist}==X in "
                                   "requirements.txt"))
    if setup.method in (Method.DPO, Method.KTO) and setup.trainer in PRECOMPUTES \
            and setup.precompute_ref_log_probs is None and setup.use_reference is None and has_reference(setup, policy):
        window, trl = TRL_LIGER_PRECOMPUTE.get(setup.method), trl_release(setup)
        refused = window is not None and trl is not None and trl in window and trl_loss_runs(setup, liger_kernel)
        out.append(AssumedInput.of("precompute_ref_log_probs", False,
                                   "the reference model is kept beside the policy (true: its log-probs computed "
                                   "once before training, no reference model"
                                   + (f"; refused by TRL {trl} beside its Liger loss)" if refused else ")"),
                                   key=_key(setup, "precompute_ref_log_probs")))
    if setup.method == Method.PPO and setup.trainer in (None, TrainerFamily.TRL) \
            and not any(p.role == ModelRole.REWARD and p.model for p in setup.placements):
        # examples/scripts/ppo/ppo.py loads both from training_args.reward_model_path, whose PPOConfig default
        # (EleutherAI/pythia-160m, trl/experimental/ppo/ppo_config.py @ v1.9.0; trl/trainer/ppo_config.py @ v0.21.0)
        # has its own 50,304-entry vocabulary: it cannot score another policy's tokens, so a real run names one
        out.append(AssumedInput.of("reward_model_path", "the policy's architecture",
                                   "the reward and the value model each costed as a copy of the policy (PPOConfig's "
                                   "default, EleutherAI/pythia-160m, cannot score this policy's tokens)"))
    return out + _gkd_assumptions(setup) + _generation_assumptions(setup)


def _gkd_notes(setup: MethodSetup) -> list[str]:
    """What TRL GKD's terms rest on, for the report (method_notes)."""
    if setup.method != Method.GKD:
        return []
    trl = trl_release(setup)
    out = [(f"gkd: the teacher prepared as TRL prepares a reference model; the generalized JSD holds "
           f"{gkd_copies(setup)} copies of the logits at the loss (measured: benchmarks/gkd_loss.md)")]
    if trl is not None and trl < GKD_SCORES_EVERY_POSITION:
        out.append(f"gkd at TRL {trl} scores from the batch's prompt width on (compute_loss slices the logits by "
                   "inputs['prompts']): the prompt's share, which the data decides, is counted in the loss (a bound)")
    if setup.seq_kd:
        out.append("gkd: seq_kd has the teacher generate the steps the student does not: its own gather at ZeRO-3 "
                   "for that generation is not counted")
    return out


def _gkd_assumptions(setup: MethodSetup) -> list[AssumedInput]:
    """TRL GKD's settings that decide memory and that no file said (method_assumptions)."""
    if setup.method != Method.GKD:
        return []
    out = []
    if setup.teacher_model is None:
        out.append(AssumedInput.of("teacher_model", "the policy's architecture",
                                   "the teacher costed as a copy of the student, prepared as TRL prepares it"))
    if setup.beta is None:
        out.append(AssumedInput.of("jsd_beta", GKD_DEFAULT_BETA, f"GKDConfig's default: {gkd_copies(setup)} copies of "
                                   "the logits at the loss (0 or 1: a single KL, 9 or 10)"))
    if setup.lmbda is None:
        out.append(AssumedInput.of("lmbda", G.GKD_LMBDA, "GKDConfig's default: some steps generate with the student "
                                   "(0: none, no generation counted)"))
    return out


def _generation_assumptions(setup: MethodSetup) -> list[AssumedInput]:
    """GRPO's and vLLM's settings that decide memory and that no file said (method_assumptions)."""
    out: list[AssumedInput] = []
    gen = setup.generation
    if setup.method == Method.GRPO:
        if setup.beta is None and setup.use_reference is None:
            beta, whose = grpo_default_beta(setup)
            out.append(AssumedInput.of("beta", beta, f"{whose}: " + ("no reference model (beta > 0 loads one)"
                                                                     if beta == 0.0 else "a reference model loaded"),
                                       key="--init_kl_coef" if setup.trainer == TrainerFamily.OPENRLHF
                                       else _key(setup, "beta")))
        # OpenRLHF's actor takes the whole sequence's logits whatever the length (completion_logits): no bound
        # unsaid: unknown, or TRL GRPOConfig's default where the inputs filled it (config/default_lengths.py)
        filled = dict(setup.origin).get("max_completion_length") == CLASS_DEFAULT
        if (gen.max_completion_length is None or filled) and setup.trainer != TrainerFamily.OPENRLHF:
            out.append(AssumedInput.of("max_completion_length", gen.max_completion_length,
                                       f"{_defaults_of(setup)}: the logits over that many completion tokens" if filled
                                       else "the logits counted over the whole sequence (a bound: GRPO keeps only the "
                                       "completion's)", key=_key(setup, "max_completion_length")))
    if setup.method == Method.PPO and setup.trainer in G.TRL_PPO and (
            gen.max_completion_length is None or dict(setup.origin).get("max_completion_length") == CLASS_DEFAULT):
        # TRL's PPOConfig.response_length (53), or ms-swift's own cap filled by the inputs (512 from 3.2.0)
        key = "max_completion_length" if setup.trainer == TrainerFamily.MS_SWIFT else "response_length"
        out.append(AssumedInput.of("max_completion_length", G.ppo_completion_length(setup),
                                   f"{_defaults_of(setup)}: the tokens generated after each query, trained on with "
                                   "it and scored over the vocabulary", key=_key(setup, key)))
    out += _rollout_assumptions(setup)
    if not gen.use_vllm or setup.trainer == TrainerFamily.OPENRLHF:
        return out
    mode = vllm_mode(setup)
    if gen.vllm_mode is None:
        out.append(AssumedInput.of("vllm_mode", str(mode), "vLLM on the training GPUs" if mode == VllmMode.COLOCATE
                                   else "vLLM on GPUs of its own, not counted here", key=_key(setup, "vllm_mode")))
    if mode == VllmMode.COLOCATE and gen.vllm_gpu_memory_utilization is None:
        out.append(AssumedInput.of("vllm_gpu_memory_utilization", default_vllm_share(setup),
                                   ("ms-swift's" if setup.trainer == TrainerFamily.MS_SWIFT else "TRL's")
                                   + " default share of each card for vLLM",
                                   key=_key(setup, "vllm_gpu_memory_utilization")))
    return out


def _defaults_of(setup: MethodSetup) -> str:
    """Whose default a filled generation length is: TRL's config class's or ms-swift's own arguments'."""
    if setup.trainer == TrainerFamily.MS_SWIFT and dict(setup.origin).get("max_completion_length") == CLASS_DEFAULT:
        return "ms-swift's default (RLHFArguments)"
    return f"{config_class(setup)}'s default"


def _rollout_assumptions(setup: MethodSetup) -> list[AssumedInput]:
    """The rollout's settings no file said, where the policy generates or scores here (memory/generation.py):
    TRL's ds3_gather_for_generation (true: the whole policy gathered at ZeRO-3) and OpenRLHF's
    --micro_rollout_batch_size."""
    gen = setup.generation
    out: list[AssumedInput] = []
    trl_generates = not gen.use_vllm and ((setup.method == Method.GRPO and setup.trainer in G.TRL_GRPO)
                                          or (setup.method == Method.PPO and setup.trainer in G.TRL_PPO))
    if trl_generates and gen.ds3_gather_for_generation is None:
        out.append(AssumedInput.of("ds3_gather_for_generation", True, "at ZeRO-3 the whole policy is gathered on "
                                   "every GPU to generate (false: ZeRO-3's per-module gathering, slower)",
                                   key=_key(setup, "ds3_gather_for_generation")))
    # TRL PPO's chunk (local_rollout_forward_batch_size, 64) is not listed: it is the rank's whole rollout batch
    # unless micro x accumulation passes 64
    llama_factory_ppo = setup.method == Method.PPO and setup.trainer == TrainerFamily.LLAMA_FACTORY
    if llama_factory_ppo and gen.max_completion_length is None:
        out.append(AssumedInput.of("max_completion_length", G.LLAMA_FACTORY_MAX_NEW_TOKENS, "LLaMA-Factory's default "
                                   "max_new_tokens generated after each prompt of up to cutoff_len tokens",
                                   key="max_new_tokens"))
    openrlhf = setup.method in G.OPENRLHF_ONLINE and setup.trainer == TrainerFamily.OPENRLHF
    if openrlhf and gen.rollout_batch_size is None:
        out.append(AssumedInput.of("rollout_batch_size", G.OPENRLHF_ROLLOUT_BATCH, "OpenRLHF's default micro batch of "
                                   "generation and the scoring forwards (8 to 0.8.x; 0.11: 1)",
                                   key="--micro_rollout_batch_size"))
    return out
