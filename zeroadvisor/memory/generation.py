"""The rollout moment of an online method (GRPO, PPO) on the training GPUs: the policy generating and scoring.

Between optimizer steps an online trainer generates completions with the policy and scores them with no-grad
forwards. That moment holds what the training step does not: the policy gathered whole for generation (TRL at
ZeRO-3), the KV cache of the generation batch, and full-vocabulary logits of the scoring forwards; the training
step's activations, its gathered layers and the optimizer step's temporaries are freed by then (the weights,
optimizer states and buffers persist through both). So the train phase's peak is the larger of the two moments,
never their sum: :func:`generation_terms` adds only what the rollout holds beyond the step (as
memory/method.py critic_activation_terms counts the larger of actor and critic steps).

What each trainer generates with, read at the releases named in each source:

* TRL's GRPO (and axolotl's, which runs TRL's GRPOTrainer) without vLLM, and TRL's PPO (ms-swift's PPOTrainer is
  TRL's): ``unwrap_model_for_generation(model, accelerator, gather_deepspeed3_params=args.ds3_gather_for_generation)``
  (trl/models/utils.py @ v0.21.0, v1.9.0): at ZeRO-3 with ``ds3_gather_for_generation`` (default True) the whole
  policy is gathered on every GPU (``deepspeed.zero.GatheredParameters(model.parameters())``: each non-persistent
  parameter all-gathered into its own full tensor, zero/partition_parameters.py _allgather_params_coalesced), else
  it generates under ZeRO-3's per-module gathering (the gathered-parameters row already counts that).
  With vLLM (colocated or server) TRL never calls ``model.generate``; the policy's scoring forwards run at
  ``per_device_train_batch_size`` under no_grad with ``logits_to_keep``, within the training forward's logits
  (completion_logits_terms, or the whole sequence's in the activations). What the rollout holds then is the weight
  sync's gather at ZeRO-3 (:func:`vllm_sync_moment`).
* GRPO's generation batch per GPU is the *generation* batch, ``per_device_train_batch_size x
  steps_per_generation`` rows (trl/trainer/grpo_trainer.py _get_train_sampler / get_train_dataloader @ v0.21.0,
  v1.9.0: "batch_size = self._train_batch_size * steps_per_generation"); steps_per_generation defaults to
  gradient_accumulation_steps, or is generation_batch_size / (per_device_train_batch_size x processes)
  (trl/trainer/grpo_config.py __post_init__ @ v0.21.0, v1.9.0).
* TRL's PPO generates the rank's whole rollout batch (per_device_train_batch_size x gradient_accumulation_steps)
  in chunks of ``local_rollout_forward_batch_size`` (default 64) with ``output_scores=True``: every generated
  step's fp32 scores are kept and padded into one tensor (trl/trainer/utils.py generate, batch_generation @
  v0.21.0; trl/experimental/ppo @ v1.9.0), inside the gathered context; then chunk by chunk the reference forward's
  full logits in the model dtype beside them (trl/trainer/ppo_trainer.py PPOTrainer.train @ v0.21.0).
* LLaMA-Factory's PPO generates through TRL 0.9.6's PPOTrainer: ``ppo_train`` walks the rollout batch in mini
  batches of ``per_device_train_batch_size`` rows (``mini_batch_size``; ``batch_size`` is that x
  gradient_accumulation_steps x ppo_buffer_size) and ``get_inputs`` generates each one inside
  ``unwrap_model_for_generation(self.model, self.accelerator)`` with the value-head model, moving the queries and
  responses to the host after each (llamafactory/train/ppo/trainer.py CustomPPOTrainer.__init__, ppo_train,
  get_inputs @ v0.9.3). TRL 0.9.6's context has no ds3_gather_for_generation: at ZeRO-3 it always gathers
  ``model.parameters()`` whole (trl/models/utils.py @ v0.9.6; the value head, hidden + 1, is in them and not
  counted). The prompt is truncated to ``cutoff_len`` (data/processor/unsupervised.py infer_seqlen @ v0.9.3, the
  shape's length) and up to ``max_new_tokens`` (GeneratingArguments, default 1024, hparams/generating_args.py @
  v0.9.3) are generated. ``get_rewards`` then scores the same rows inside the same kind of gather with the
  value-head model (the reward adapter swapped onto the policy, or a full reward model's own engine), whose
  forward upcasts its logits to fp32 (trl/models/modeling_value_head.py @ v0.9.6); not for a reward served by an
  API (reward_model_type api).
* OpenRLHF generates with HF ``generate`` on the actor (no whole-model gather) at ``--micro_rollout_batch_size``
  (default 8) where no vLLM engine does, then runs actor, initial (reference), critic and reward forwards one
  after another on each micro batch under no_grad; the actor's and the reference's logits are full-vocabulary
  over the whole sequence (openrlhf/trainer/ppo_utils/experience_maker.py generate_samples, make_experience @
  v0.5.1; openrlhf/models/actor.py forward: log_probs_from_logits, a full log_softmax in the model dtype @ v0.5.1;
  from v0.5.6 the logits are upcast first, ``output["logits"].to(torch.float32)``, and log-softmaxed by rows or
  chunks @ v0.5.9, v0.8.5). With vLLM (train_ppo_ray) the actor still runs its scoring forward on its own GPUs.
  OpenRLHF's GRPO is the same loop (train_ppo_ray --advantage_estimator group_norm: the same experience maker and
  actor, no critic; cli/train_ppo_ray.py @ v0.8.5), so it is counted as its PPO is.

The KV cache is transformers' DynamicCache: 2 (K, V) x layers x key/value heads x head dim x the model dtype per
token of prompt + completion, every row of the batch kept to the longest (generation stops when the last row
does): a bound, reached when one row runs to the maximum length.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from zeroadvisor.config.method import MethodSetup
from zeroadvisor.memory import bytes as B
from zeroadvisor.memory.options import Option
from zeroadvisor.memory.persistence import persistent
from zeroadvisor.memory.settings import Settings
from zeroadvisor.memory.terms import Term, ceil_div
from zeroadvisor.model.spec import ModelSpec
from zeroadvisor.vocab import Device, Method, ModelRole, Resource, TermKind, TrainerFamily

FP32_BYTES = 4
KEY = "generation_moment"
# Who runs TRL's GRPOTrainer generation (axolotl hands the run to it) and TRL's PPOTrainer.train (ms-swift's
# PPOTrainer subclasses it: swift/trainers/rlhf_trainer/ppo_trainer.py @ v3.8.0).
TRL_GRPO = frozenset({None, TrainerFamily.TRL, TrainerFamily.AXOLOTL})
TRL_PPO = frozenset({None, TrainerFamily.TRL, TrainerFamily.MS_SWIFT})
TRL_PPO_ROLLOUT_BATCH = 64  # PPOConfig.local_rollout_forward_batch_size (trl/trainer/ppo_config.py @ v0.21.0, v1.9.0)
TRL_PPO_RESPONSE = 53  # PPOConfig.response_length's default, the same releases
# OpenRLHF's GRPO is its PPO loop: train_ppo_ray with --advantage_estimator group_norm, the same experience maker
# and actor (cli/train_ppo_ray.py, trainer/ppo_utils/experience_maker.py @ v0.8.5), only without a critic
OPENRLHF_ONLINE = frozenset({Method.PPO, Method.GRPO})
OPENRLHF_ROLLOUT_BATCH = 8  # --micro_rollout_batch_size (cli/train_ppo.py @ v0.5.1, cli/train_ppo_ray.py @ v0.8.5)
# The first OpenRLHF release whose actor upcasts the scoring logits to fp32 (openrlhf/models/actor.py forward:
# v0.5.5 has no upcast, v0.5.6 to v0.8.11 ``output["logits"] = output["logits"].to(torch.float32)``).
OPENRLHF_FP32_LOGITS = Version("0.5.6")

UNWRAP_SOURCE = "trl/models/utils.py unwrap_model_for_generation @ v0.21.0, v1.9.0"
GRPO_SOURCE = (f"{UNWRAP_SOURCE}; trl/trainer/grpo_trainer.py _generate_single_turn @ v1.9.0 (_generate_and_score_"
               "completions @ v0.21.0), generation batch per_device_train_batch_size × steps_per_generation")
PPO_SOURCE = (f"{UNWRAP_SOURCE}; trl/trainer/utils.py generate, batch_generation and trl/trainer/ppo_trainer.py "
              "PPOTrainer.train @ v0.21.0 (trl/experimental/ppo @ v1.9.0)")
LLAMA_FACTORY_MAX_NEW_TOKENS = 1024  # GeneratingArguments.max_new_tokens (hparams/generating_args.py @ v0.9.3)
LLAMA_FACTORY_PPO_SOURCE = ("llamafactory/train/ppo/trainer.py CustomPPOTrainer.__init__ (mini_batch_size = "
                            "per_device_train_batch_size), ppo_train, get_inputs, get_rewards @ v0.9.3; "
                            "trl/models/utils.py unwrap_model_for_generation, trl/models/modeling_value_head.py "
                            "AutoModelForCausalLMWithValueHead.forward (lm_logits.float()) @ v0.9.6")
OPENRLHF_SOURCE = ("openrlhf/trainer/ppo_utils/experience_maker.py generate_samples, make_experience @ v0.5.1; "
                   "openrlhf/models/actor.py forward @ v0.5.1, v0.8.5")


# What PPO generates after each query where no file says (the assumed input), by the code that runs it: LLaMA-Factory's
# max_new_tokens, TRL's PPOConfig.response_length (ms-swift's PPOTrainer is TRL's; from ms-swift 3.2.0 the inputs fill
# its own 512, config/default_lengths.py); OpenRLHF's --generate_max_len default is the inputs' (default_lengths.py)
PPO_DEFAULT_COMPLETION: dict[TrainerFamily | None, int] = {
    TrainerFamily.LLAMA_FACTORY: LLAMA_FACTORY_MAX_NEW_TOKENS, **dict.fromkeys(TRL_PPO, TRL_PPO_RESPONSE)}


def ppo_completion_length(setup: MethodSetup) -> int | None:
    """The most tokens PPO generates after each query: the files' (TRL's response_length, LLaMA-Factory's
    max_new_tokens, OpenRLHF's --generate_max_len), else the trainer's default (PPO_DEFAULT_COMPLETION)."""
    return setup.generation.max_completion_length or PPO_DEFAULT_COMPLETION.get(setup.trainer)


@dataclass(frozen=True, slots=True)
class Moment:
    """What the rollout holds on one GPU at its peak, beyond the weights, states and buffers that persist:
    ``nbytes`` and how it was counted (``formula``), ``whole_gather`` whether the policy is gathered whole (the
    training step's gathered layers are then part of it, not beside it)."""

    nbytes: int
    formula: str
    what: str
    source: str
    whole_gather: bool = False
    row: str = "activations"  # the row its term is shown in (the weight sync's: gathered parameters)
    key: str = KEY



def kv_cache_bytes(policy: ModelSpec, rows: int, tokens: int, w: int) -> int | None:
    """DynamicCache's K and V for ``rows`` sequences of ``tokens``; None where the attention shape is unknown."""
    heads = policy.num_key_value_heads or policy.num_attention_heads
    head_dim = policy.head_dim or (policy.hidden_size // policy.num_attention_heads
                                   if policy.hidden_size and policy.num_attention_heads else None)
    if not (policy.num_layers and heads and head_dim):
        return None
    return 2 * policy.num_layers * heads * head_dim * w * rows * tokens


def _prefill(policy: ModelSpec, rows: int, prompt: int, w: int) -> int:
    """One layer's MLP intermediates during the prompt's forward (gate, up and their product, no_grad)."""
    return 3 * rows * prompt * (policy.intermediate_size or 0) * w


def _gathered(s: Settings, option: Option, spec: ModelSpec, P: int, N: int, setup: MethodSetup,
              critic: int = 0) -> tuple[int, str]:
    """The policy gathered whole for generation at ZeRO-3 (ds3_gather_for_generation, default True): the
    non-persistent parameters' full tensors (the persistent ones are whole anyway), and with offload_param the
    partitions copied to the GPU for the all-gather; (0, "") where it does not happen. ``critic``: the value
    model's parameters where it shares the policy's engine (TRL's PPO wraps both in PolicyAndValueWrapper and
    gathers ``model.parameters()`` of that engine)."""
    if option.stage != 3 or setup.generation.ds3_gather_for_generation is False:
        return 0, ""
    return _gathered_share(s, option, spec, P, N, Fraction(1), critic)


def _gathered_share(s: Settings, option: Option, spec: ModelSpec, P: int, N: int, share: Fraction,
                    critic: int = 0) -> tuple[int, str]:
    """``share`` of the policy's non-persistent parameters gathered at once at ZeRO-3 (GatheredParameters over
    them: each its own full tensor, zero/partition_parameters.py _allgather_params_coalesced), with offload_param
    their partitions staged on the GPU for the all-gather."""
    w = B.nbytes(s.precision)
    P_np = max(P - persistent(spec, s.param_persistence_threshold, s.model_persistence_threshold, N, []).elements, 0)
    P_np = int(P_np * share) + critic
    staged = w * ceil_div(P_np, N) if option.offload_param != Device.NONE else 0
    whose = "policy and value model" if critic else "policy"
    how = "gathered whole" if share == 1 else f"gathered, its largest sync group ({float(share):.0%} of it)"
    formula = f"{whose} {how} {w} B × {P_np:,}" + (f" + partitions staged {w} B × P/{N}" if staged else "")
    return w * P_np + staged, formula


# The vLLM weight sync at ZeRO-3 (use_vllm, colocated or server): what is gathered at once before it is handed to vLLM.
# TRL (and axolotl, which runs TRL's GRPOTrainer) gathers every parameter at once when the policy is a PEFT model, to
# merge the adapters ("With PEFT and FSDP/DeepSpeed ZeRO Stage 3, we must gather the full model at once before
# merging"), and one parameter at a time otherwise: trl/generation/vllm_generation.py VLLMGeneration.sync_weights @
# v1.9.0, trl/trainer/grpo_trainer.py _move_model_to_vllm @ v0.21.0. ms-swift gathers each --move_model_batches group
# at once, the whole model where it is not given (the layers split into that many groups, the embeddings and head in
# one more: split_batches), for a PEFT model and, from 3.10, a full one (_move_full_model_to_vllm); 3.9 and earlier
# synced a full model one parameter at a time: swift/rlhf_trainers/rollout_mixin.py @ v4.5.2,
# swift/trainers/rlhf_trainer/rollout_mixin.py @ v3.10.0, grpo_trainer.py _move_model_to_vllm @ v3.8.0. From 3.12.1 to
# 3.12.5 _move_full_model_to_vllm gathered every parameter once around the groups' loop, whatever move_model_batches
# says (the full model's sync, and a LoRA model's first): rollout_mixin.py @ v3.12.1, v3.12.5, per group again @
# v3.12.6 (ms-swift#7986: "forces DeepSpeed to materialize the ENTIRE model"). OpenRLHF gathers one parameter at a
# time, a LoRA policy's base weights included (no merge), with one clone of it under CUDA IPC: openrlhf/trainer/ray/
# ppo_actor.py broadcast_to_vllm @ v0.5.9, v0.8.5 and v0.11.0 (GatheredParameters([param])), within the step's own.
SYNC_KEY = "vllm_weight_sync"
SYNC_TRL_SOURCE = ("trl/generation/vllm_generation.py VLLMGeneration.sync_weights @ v1.9.0 "
                   "(trl/trainer/grpo_trainer.py _move_model_to_vllm @ v0.21.0): with PEFT every parameter gathered "
                   "at once, then merge_adapter")
SYNC_SWIFT_SOURCE = ("swift/rlhf_trainers/rollout_mixin.py _move_model_to_vllm, split_batches @ v4.5.2 "
                     "(@ v3.10.0 under swift/trainers/rlhf_trainer): each move_model_batches group gathered at once")
SWIFT_GROUPED_FULL_SYNC = Version("3.10.0")  # the first ms-swift release that syncs a full model by groups
SWIFT_WHOLE_SYNC = SpecifierSet(">=3.12.1,<3.12.6")  # the releases that gather it whole, groups notwithstanding


def vllm_sync_moment(setup: MethodSetup, policy: ModelSpec, s: Settings, option: Option, spec: ModelSpec, P: int,
                     N: int) -> Moment | None:
    """The vLLM weight sync of an online method at ZeRO-3, where it gathers more than one parameter at once (the
    comment above); None elsewhere (one parameter at a time is within the step's gathered layers)."""
    gen = setup.generation
    if option.stage != 3 or not gen.use_vllm or setup.method != Method.GRPO:
        return None
    peft = policy.adapters
    if setup.trainer in TRL_GRPO:
        grouped, source = peft, SYNC_TRL_SOURCE
    elif setup.trainer == TrainerFamily.MS_SWIFT:
        grouped = peft or setup.release is None or setup.release >= SWIFT_GROUPED_FULL_SYNC
        source = SYNC_SWIFT_SOURCE
    else:
        return None
    if not grouped:
        return None
    share = Fraction(1)
    whole = setup.trainer == TrainerFamily.MS_SWIFT and setup.release is not None and setup.release in SWIFT_WHOLE_SYNC
    batches = gen.move_model_batches if setup.trainer == TrainerFamily.MS_SWIFT and not whole else None
    if batches and spec.num_layers:
        # the largest group: ceil(L / batches) layers, or the embeddings, head and final norm together
        outside = (spec.embedding_parameters or 0) * (1 if spec.tied_embeddings is not False else 2)
        layers = max(P - outside, 0)
        per_group = ceil_div(spec.num_layers, batches)
        share = max(Fraction(min(per_group, spec.num_layers), spec.num_layers) * Fraction(layers, max(P, 1)),
                    Fraction(outside, max(P, 1)))
    gathered, how = _gathered_share(s, option, spec, P, N, share)
    if policy.quantized_parameters:  # QLoRA: bitsandbytes' Linear weights are gathered in their packed bytes
        packed = int((B.nbytes(s.precision) * policy.quantized_parameters - policy.quantized_bytes) * share)
        gathered -= max(packed, 0)
        how += f" less the quantized weights' packing {max(packed, 0):,} B"
    ignored = (f" (ms-swift {setup.trainer_version} gathers it whole, move_model_batches notwithstanding: "
               "by groups again from 3.12.6)") if whole else ""
    how_gathered = "whole" if share == 1 else f"by move_model_batches {batches}"
    what = f"vLLM weight sync at ZeRO-3: the policy's parameters gathered {how_gathered} before vLLM gets them{ignored}"
    return Moment(gathered, how, what, source, whole_gather=True, row="gathered_parameters", key=SYNC_KEY)


def generation_batch(setup: MethodSetup, micro_batch: int, accumulation: int, processes: int) -> int:
    """GRPO's generation batch per GPU: per_device_train_batch_size × steps_per_generation (its default the
    gradient accumulation; generation_batch_size divided by the global batch where that is given)."""
    gen = setup.generation
    steps = gen.steps_per_generation
    if steps is None and gen.generation_batch_size:
        steps = max(gen.generation_batch_size // max(micro_batch * processes, 1), 1)
    return micro_batch * (steps or accumulation)


def rollout_moment(setup: MethodSetup, policy: ModelSpec, s: Settings, option: Option, spec: ModelSpec, P: int,
                   N: int, sequence: int | None, accumulation: int, processes: int,
                   critic: int = 0) -> Moment | None:
    """The rollout's peak on one training GPU for this option (the module docstring); None where the method
    does not generate or score with the policy here, or the sizes are unknown. ``critic``: the value model's
    parameters (TRL's PPO gathers them with the policy's)."""
    gen = setup.generation
    sync = vllm_sync_moment(setup, policy, s, option, spec, P, N)
    if sync is not None:  # generation and scoring run in vLLM; the scoring forwards stay within the step's logits
        return sync
    if setup.method == Method.GRPO and setup.trainer in TRL_GRPO and not gen.use_vllm:
        return _trl_grpo(setup, policy, s, option, spec, P, N, sequence, accumulation, processes)
    if setup.method == Method.PPO and setup.trainer in TRL_PPO and not gen.use_vllm:
        return _trl_ppo(setup, policy, s, option, spec, P, N, sequence, accumulation, critic)
    if setup.method in OPENRLHF_ONLINE and setup.trainer == TrainerFamily.OPENRLHF:
        return _openrlhf(setup, policy, B.nbytes(s.precision), sequence)
    if setup.method == Method.PPO and setup.trainer == TrainerFamily.LLAMA_FACTORY:
        return _llama_factory_ppo(setup, policy, s, option, spec, P, N, sequence)
    generates = setup.method == Method.GKD and setup.trainer in TRL_GRPO and gkd_generates(setup)
    return _trl_gkd(setup, policy, s, option, spec, P, N, sequence) if generates else None


GKD_LMBDA = 0.5  # GKDConfig.lmbda: the share of steps that generate on-policy (trl/experimental/gkd @ v1.9.0)
GKD_SOURCE = (f"{UNWRAP_SOURCE}; trl/experimental/gkd/gkd_trainer.py training_step, generate_on_policy_outputs "
              "@ v1.9.0 (trl/trainer/gkd_trainer.py @ v0.21.0)")


def gkd_generates(setup: MethodSetup) -> bool:
    """Whether TRL's GKD generates with the student in some steps: ``random.random() <= self.lmbda`` (lmbda 0.5
    unset), so any lmbda above 0 (training_step)."""
    return (setup.lmbda if setup.lmbda is not None else GKD_LMBDA) > 0


def _trl_gkd(setup: MethodSetup, policy: ModelSpec, s: Settings, option: Option, spec: ModelSpec, P: int, N: int,
             sequence: int | None) -> Moment | None:
    """TRL's GKD generating on-policy with the student (training_step: the micro batch's prompts, max_new_tokens
    more, inside unwrap_model_for_generation's whole gather at ZeRO-3), counted as TRL GRPO's generation: the KV
    cache over the sequence (prompt and completion within it)."""
    new = setup.generation.max_completion_length
    if not sequence or not new:
        return None
    return _generate(setup, policy, s, option, spec, P, N, s.micro_batch, sequence, max(sequence - new, 1),
                     ("GKD's on-policy generation with the student", ("the student gathered whole (ZeRO-3, "
                      "unwrap_model_for_generation)")), GKD_SOURCE)


def _trl_grpo(setup: MethodSetup, policy: ModelSpec, s: Settings, option: Option, spec: ModelSpec, P: int, N: int,
              sequence: int | None, accumulation: int, processes: int) -> Moment | None:
    """TRL's GRPO generating with the policy (no vLLM): its generation batch's KV cache, next-token scores and
    prefill, inside the whole gather at ZeRO-3 (ds3_gather_for_generation)."""
    gen = setup.generation
    completion = gen.max_completion_length
    tokens = (gen.max_prompt_length + completion if gen.max_prompt_length and completion else sequence)
    if not tokens:
        return None
    rows = generation_batch(setup, s.micro_batch, accumulation, processes)
    return _generate(setup, policy, s, option, spec, P, N, rows, tokens, tokens - (completion or 0),
                     ("GRPO generation with the policy (no vLLM)", ("the policy gathered whole (ZeRO-3, "
                      "ds3_gather_for_generation)")), GRPO_SOURCE)


def _generate(setup: MethodSetup, policy: ModelSpec, s: Settings, option: Option, spec: ModelSpec, P: int, N: int,
              rows: int, tokens: int, prompt: int, what: tuple[str, str], source: str) -> Moment | None:
    """``rows`` sequences of ``tokens`` (``prompt`` of them the prompt) generated by the policy with TRL's
    model.generate: the KV cache, the next-token logits in fp32 and the processed copy, the prompt's prefill MLP,
    inside the whole gather at ZeRO-3; ``what``: the moment and its gather, in words."""
    w = B.nbytes(s.precision)
    kv = kv_cache_bytes(policy, rows, tokens, w)
    if kv is None:
        return None
    gathered, how = _gathered(s, option, spec, P, N, setup)
    scores = 2 * FP32_BYTES * rows * (policy.vocab_size or 0)  # the next-token logits in fp32 and the processed copy
    prefill = _prefill(policy, rows, prompt, w)
    parts = [how] if how else []
    parts += [f"KV cache {rows} rows × {tokens} tokens ({kv:,} B)", f"fp32 next-token scores 2 × 4 B × {rows} × V",
              f"prefill MLP 3 × {rows} × {prompt} × ffn × {w} B"]
    return Moment(gathered + kv + scores + prefill, " + ".join(parts), what[0] + (f": {what[1]}" if how else ""),
                  source, bool(how))


def _llama_factory_ppo(setup: MethodSetup, policy: ModelSpec, s: Settings, option: Option, spec: ModelSpec, P: int,
                       N: int, prompt: int | None) -> Moment | None:
    """LLaMA-Factory's get_inputs (the module docstring): one mini batch of per_device_train_batch_size prompts of
    up to cutoff_len tokens (the setup's max_prompt_length, memory/method.py method_shape; else ``prompt``, the
    shape's length) generating max_new_tokens, inside TRL 0.9.6's whole gather at ZeRO-3; the KV cache, the
    next-token scores in fp32 and the prompt's prefill MLP, as TRL GRPO's. Then get_rewards scores the same rows
    (query + response) with the value-head model inside the same kind of gather (the policy with its reward adapter
    swapped in, or a full reward model of the policy's size prepared by TRL at the policy's stage), its logits in
    the model dtype and their fp32 upcast; not for a reward served by an API: the larger moment."""
    prompt = setup.generation.max_prompt_length or prompt
    if not prompt:
        return None
    w = B.nbytes(s.precision)
    rows = s.micro_batch
    completion = ppo_completion_length(setup) or LLAMA_FACTORY_MAX_NEW_TOKENS  # LLaMA-Factory's: never None
    tokens = prompt + completion
    kv = kv_cache_bytes(policy, rows, tokens, w)
    if kv is None:
        return None
    gathered, how = _gathered(s, option, spec, P, N, setup)
    scores = 2 * FP32_BYTES * rows * (policy.vocab_size or 0)
    prefill = _prefill(policy, rows, prompt, w)
    generating = kv + scores + prefill
    reward = next((p for p in setup.placements if p.role == ModelRole.REWARD), None)
    scoring = 0 if reward is not None and reward.remote else (w + FP32_BYTES) * rows * tokens * (policy.vocab_size or 0)
    parts = [how] if how else []
    parts += [f"max(KV cache {rows} rows × ({prompt} + {completion}) tokens ({kv:,} B) + fp32 next-token scores "
              f"2 × 4 B × {rows} × V + prefill MLP 3 × {rows} × {prompt} × ffn × {w} B"
              + (f", reward scoring logits ({w} + 4) B × {rows} × {tokens} × V)" if scoring else ")")]
    return Moment(gathered + max(generating, scoring), " + ".join(parts),
                  "PPO rollout with the policy (LLaMA-Factory get_inputs, get_rewards)"
                  + (": the model gathered whole (ZeRO-3, TRL 0.9.6 unwrap_model_for_generation)" if how else ""),
                  LLAMA_FACTORY_PPO_SOURCE, bool(how))


def _trl_ppo_sizes(setup: MethodSetup, s: Settings, accumulation: int) -> tuple[int, int, int]:
    """(the rank's rollout batch, the generation chunk, the response length) of TRL's PPOTrainer.train."""
    gen = setup.generation
    local = s.micro_batch * accumulation
    return local, min(gen.rollout_batch_size or TRL_PPO_ROLLOUT_BATCH, local), ppo_completion_length(setup) or 0


def held_scores_terms(setup: MethodSetup, policy: ModelSpec, s: Settings, accumulation: int) -> list[Term]:
    """TRL's PPO keeps the rollout's fp32 scores (``logitss``, rollout batch x response x V) through the whole
    update: PPOTrainer.train never deletes them (its ``del`` lists leave ``logitss`` out, trl/trainer/ppo_trainer.py
    @ v0.21.0, trl/experimental/ppo/ppo_trainer.py @ v1.9.0), and the next rollout's replace them only when
    batch_generation returns. So they sit beside the training step, the checkpoint save and the next generation.
    Counted in the buffers row: held between steps, not freed with the activations."""
    if setup.method != Method.PPO or setup.trainer not in TRL_PPO or setup.generation.use_vllm \
            or not policy.vocab_size:
        return []
    local, _, R = _trl_ppo_sizes(setup, s, accumulation)
    return [Term("buffers", Resource.GPU, FP32_BYTES * local * R * policy.vocab_size, "ppo_rollout_scores",
                 "PPO rollout's fp32 scores, kept through the update (never deleted)",
                 f"4 B × {local} (micro × accumulation) × {R} × V {policy.vocab_size:,}", PPO_SOURCE)]


def _trl_ppo(setup: MethodSetup, policy: ModelSpec, s: Settings, option: Option, spec: ModelSpec, P: int, N: int,
             sequence: int | None, accumulation: int, critic: int) -> Moment | None:
    """TRL's PPOTrainer.train rollout: generation of the local batch in chunks with every step's fp32 scores kept,
    padded into one tensor inside the gathered context, beside the previous rollout's (held_scores_terms counts
    those); then per chunk the reference's full logits in the model dtype."""
    w = B.nbytes(s.precision)
    V = policy.vocab_size or 0
    if not sequence:
        return None
    local, chunk, R = _trl_ppo_sizes(setup, s, accumulation)
    kv = kv_cache_bytes(policy, chunk, sequence, w)
    if kv is None:
        return None
    gathered, how = _gathered(s, option, spec, P, N, setup, critic)
    scores = FP32_BYTES * local * R * V
    last = FP32_BYTES * chunk * R * V  # the last chunk's scores tuple beside its torch.stack
    generating = kv + _prefill(policy, chunk, max(sequence - R, 0), w) + scores + last
    padded = 2 * scores  # batch_generation's pad(logitss): the chunks and the padded copy
    # after the context the new scores are the held ones: the reference forward's logits beside them
    scoring = w * chunk * sequence * V
    nbytes = max(gathered + max(generating, padded), scoring)
    formula = (f"max({how + ' + ' if how else ''}max(KV cache {chunk} rows × {sequence} tokens + new fp32 scores "
               f"4 B × ({local} + {chunk}) × {R} × V, 2 × 4 B × {local} × {R} × V), reference logits {w} B × "
               f"{chunk} × {sequence} × V)")
    return Moment(nbytes, formula, "PPO rollout: generation with every step's fp32 scores kept"
                  + (", the policy gathered whole (ZeRO-3)" if how else "") + ", then the reference's logits",
                  PPO_SOURCE, bool(how) and gathered + max(generating, padded) >= scoring)


def _openrlhf(setup: MethodSetup, policy: ModelSpec, w: int, sequence: int | None) -> Moment | None:
    """OpenRLHF's make_experience at --micro_rollout_batch_size: HF generate where no vLLM engine generates, then
    the actor's and the reference's scoring forwards with full-vocabulary logits (the larger moment)."""
    gen = setup.generation
    if not sequence or not policy.vocab_size:
        return None
    rows = gen.rollout_batch_size or OPENRLHF_ROLLOUT_BATCH
    V = policy.vocab_size
    release = setup.release
    per = 2 * w if release is not None and release < OPENRLHF_FP32_LOGITS else w + FP32_BYTES
    scoring = per * rows * sequence * V
    how = (f"scoring logits ({'2 × ' + str(w) if per == 2 * w else f'{w} + 4'} B) × {rows} × {sequence} × V")
    if gen.use_vllm:
        return Moment(scoring, how, "PPO scoring forward of the actor (full-vocabulary logits)", OPENRLHF_SOURCE)
    kv = kv_cache_bytes(policy, rows, sequence, w) or 0
    prompt = gen.max_prompt_length or max(sequence - (gen.max_completion_length or 0), 0)
    generating = kv + 2 * FP32_BYTES * rows * V + _prefill(policy, rows, prompt, w)
    return Moment(max(generating, scoring), f"max(KV cache {rows} rows × {sequence} tokens + fp32 next-token scores "
                  f"+ prefill MLP, {how})", "PPO rollout: HF generate, then the actor's and the reference's "
                  "scoring forwards (full-vocabulary logits)", OPENRLHF_SOURCE)


def generation_terms(moment: Moment | None, step: int) -> list[Term]:
    """What the rollout moment holds beyond the training step's transients (``step``: its activations, the
    optimizer step's temporaries, and where the policy is gathered whole the step's gathered layers): the train
    phase's peak is the larger of the two."""
    if moment is None or moment.nbytes <= step:
        return []
    return [Term(moment.row, Resource.GPU, moment.nbytes - step, moment.key,
                 f"{moment.what}: beyond the training step's activations and temporaries (the larger moment is the "
                 "peak)", f"max(0, {moment.formula} - step {step:,} B)", moment.source, kind=TermKind.BOUND)]


VLLM_KEY = "vllm_share"  # memory/method.py vllm_terms
SLEEP_SOURCE = ("trl/generation/vllm_generation.py (enable_sleep_mode: llm.sleep(level=2) after generating, wake_up "
                "before) @ v1.9.0; swift/rlhf_trainers/rollout_mixin.py (sleep_level, offload_model, "
                "offload_optimizer) @ v4.5.2; vllm LLM.sleep (level 1: weights to host RAM, KV cache dropped; level 2: "
                "both dropped)")
# what each of the trainer's offload switches moves to the host while vLLM generates (the training engine's rows)
OFFLOADED_ROWS = {"offload_model": ("parameters",), "offload_optimizer": ("optimizer_states",)}


def sleeping_vllm_terms(setup: MethodSetup, terms: list[Term], step: int, policy_parameters: int,
                        synced: tuple[int, int] | None = None) -> list[Term]:
    """``terms`` with vLLM's colocated share as a moment of its own where the trainer puts vLLM to sleep while the
    policy trains (Generation.vllm_sleep_level > 0): awake, it holds its share (and the training engine keeps its
    rows, less what --offload_model / --offload_optimizer move to the host meanwhile); asleep, nothing on the GPU.
    So the share counts only beyond the training step's transients (``step``) and the rollout's excess over them
    (generation_terms), the largest moment being the peak;
    at level 1 its weights wait in host RAM (2 B per policy parameter, in the model dtype vLLM loads).
    ``synced``: the weight sync's gather (vllm_sync_moment) and the step's transients it replaces, gathered layers
    included: the sync runs with vLLM's weights woken and the policy on the GPU, its KV cache still asleep (ms-swift
    _fast_infer: wake_up(tags=['weights']), _move_model_to_vllm, then the offload context and wake_up(tags=
    ['kv_cache']) @ v4.5.2; TRL vllm_generation.py the same order @ v1.9.0), so that moment holds the gather and
    vLLM's 16-bit weights (its tensor-parallel shard)."""
    gen = setup.generation
    share = next((t for t in terms if t.key == VLLM_KEY), None)
    if share is None or not gen.vllm_sleep_level:
        return terms
    rows = [row for flag, moved in OFFLOADED_ROWS.items() if getattr(gen, flag) for row in moved]
    offloaded = sum(t.nbytes for t in terms if t.device == Resource.GPU and t.row in rows)
    # the rollout's scoring forwards (generation_terms: what they hold beyond the step) run after vLLM sleeps
    # again (OpenRLHF experience_maker.py generate_samples @ v0.8.5): a third moment, so the share counts only
    # beyond the larger of the step and the rollout, never beside both
    rollout = sum(t.nbytes for t in terms if t.key == KEY and t.device == Resource.GPU)
    awake = max(0, share.nbytes - offloaded - step - rollout)
    sync_formula = ""
    tp = gen.vllm_tensor_parallel_size or 1  # each vLLM worker holds and offloads its shard
    weights = ceil_div(2 * policy_parameters, tp)
    if synced is not None:  # the sync moment: its gather and vLLM's weights, where the step's transients were
        gather, replaced = synced
        counted = sum(t.nbytes for t in terms if t.key == SYNC_KEY and t.device == Resource.GPU)  # beyond the step
        during_sync = max(0, weights + gather - replaced - counted)
        if during_sync > awake:
            awake = during_sync
            beyond = f" - sync beyond the step {counted:,} B" if counted else ""
            sync_formula = (f"vLLM's weights 2 B × P{f' / {tp}' if tp > 1 else ''} + weight sync {gather:,} B - step "
                            f"{replaced:,} B{beyond} (its weights woken for the sync)")
    moved = f", {' and '.join(r.replace('_', ' ') for r in rows)} moved to the host meanwhile" if rows else ""
    out = [t for t in terms if t is not share]
    out.append(Term("vllm", Resource.GPU, awake, VLLM_KEY,
                    f"vLLM colocated, asleep while the policy trains (sleep level {gen.vllm_sleep_level}): its share "
                    f"({share.nbytes:,} B) only while it generates{moved}; beyond the training step's transients "
                    "(the larger moment is the peak)",
                    sync_formula or (f"max(0, {share.formula} - offloaded {offloaded:,} B - step {step:,} B"
                                     + (f" - rollout beyond the step {rollout:,} B)" if rollout else ")")),
                    SLEEP_SOURCE))
    if gen.vllm_sleep_level == 1:
        out.append(Term("vllm", Resource.CPU, weights, "vllm_sleep_weights",
                        "vLLM's weights kept in host RAM while it sleeps (level 1)",
                        "2 B × P" + (f" / vLLM tensor parallel {tp}" if tp > 1 else ""), SLEEP_SOURCE))
    return out


def asleep_between_steps(setup: MethodSetup, terms: list[Term]) -> tuple[int, int]:
    """vLLM's GPU row where it sleeps between generations (sleeping_vllm_terms), expected and bound: like the
    step's transients it is gone by the time a checkpoint is saved between optimizer steps (vLLM went back to sleep
    after generating: TRL vllm_generation.py, ms-swift rollout_mixin.py, OpenRLHF experience_maker.py); (0, 0) where
    vLLM stays awake."""
    if not setup.generation.vllm_sleep_level:
        return 0, 0
    rows = [t for t in terms if t.key == VLLM_KEY and t.device == Resource.GPU]
    return sum(t.nbytes for t in rows), sum(t.upper for t in rows)
