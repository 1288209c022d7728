"""What a run's files say about its training method (vocab.Method): the trainer that runs it, that trainer's
release, and the method's own settings that decide memory (the reference model, generation, PPO's placement).

This is the one typed reading that the input readers (TRL config files, LLaMA-Factory and axolotl YAML, ms-swift
and OpenRLHF launch commands, ``--trainer``) produce and the memory model reads (memory/ counts the models and
batches it implies). A field is None where no file or flag said it: the trainer's own default at its release then
decides, and the report shows it as assumed with the flag that sets it. ``origin`` names where each field that was
said came from, for messages ("beta in dpo.yaml").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version

from zeroadvisor.vocab import Method, ModelRole, TrainerFamily, VllmMode


@dataclass(frozen=True, slots=True)
class Generation:
    """GRPO/PPO generation as the trainer's arguments give it (TRL GRPOConfig, OpenRLHF's flags)."""

    num_generations: int | None = None  # completions per prompt
    max_prompt_length: int | None = None
    max_completion_length: int | None = None  # TRL; OpenRLHF --generate_max_len
    use_vllm: bool | None = None
    vllm_mode: VllmMode | None = None
    vllm_gpu_memory_utilization: float | None = None  # the share of each card vLLM takes when colocated
    vllm_num_gpus: int | None = None  # server mode / OpenRLHF --vllm_num_engines x --vllm_tensor_parallel_size
    # the policy's own generation (no vLLM): TRL's ds3_gather_for_generation (default True: the whole policy gathered
    # at ZeRO-3), GRPO's steps_per_generation / generation_batch_size (the generation batch per GPU), and the rollout
    # chunk: TRL PPO's local_rollout_forward_batch_size, OpenRLHF's --micro_rollout_batch_size
    ds3_gather_for_generation: bool | None = None
    steps_per_generation: int | None = None
    generation_batch_size: int | None = None
    rollout_batch_size: int | None = None
    # vLLM colocated asleep while the policy trains: the sleep level (0 none; 1 weights to the host, KV cache
    # dropped; 2 both dropped): TRL's vllm_enable_sleep_mode (level 2), ms-swift's --sleep_level, OpenRLHF's
    # --vllm_enable_sleep (level 1); and what the trainer moves to the host while vLLM generates: ms-swift's
    # --offload_model / --offload_optimizer, OpenRLHF's --deepspeed_enable_sleep (both)
    vllm_sleep_level: int | None = None
    vllm_tensor_parallel_size: int | None = None  # vLLM's own tensor parallelism (each worker holds 1/tp)
    # vLLM's context window where the trainer passes one: TRL's vllm_max_model_length, ms-swift's
    # --vllm_max_model_len, axolotl's vllm: {max_model_len} (memory/method.py vllm_floor: one request's KV cache)
    vllm_max_model_len: int | None = None
    offload_model: bool | None = None
    offload_optimizer: bool | None = None
    # ms-swift's --move_model_batches: the layers synced to vLLM in that many groups (each gathered at once at
    # ZeRO-3); None: the whole model in one (swift/rlhf_trainers/rollout_mixin.py split_batches)
    move_model_batches: int | None = None


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one of the other models runs and how it is prepared, where the trainer's flags say (OpenRLHF:
    ``--ref_num_nodes``/``--ref_num_gpus_per_node``, ``--colocate_all_models``, ``--ref_reward_offload``)."""

    role: ModelRole
    model: str | None = None  # a different model (path or hub id); None: the policy's own
    num_nodes: int | None = None
    gpus_per_node: int | None = None
    offload: bool | None = None  # parameters offloaded to the host (OpenRLHF --ref_reward_offload)
    zero_stage: int | None = None  # a stage the trainer gives this model, where it is not the policy's
    # False: the trainer loads no model of its own for this role (LLaMA-Factory reward_model_type lora: an adapter
    # on the policy; api: a server); None: as the trainer does by default
    loaded: bool | None = None
    # served outside the training processes, so no forward of it runs there (LLaMA-Factory reward_model_type api)
    remote: bool = False


# train_ppo_ray's argparse defaults for every model's Ray group, the actor's too: --X_num_nodes 1,
# --X_num_gpus_per_node 8 (openrlhf/cli/train_ppo_ray.py @ v0.8.5; --X.num_nodes ... @ v0.11.0)
RAY_GROUP_NODES, RAY_GROUP_GPUS_PER_NODE = 1, 8


def ray_group(setup: MethodSetup, role: ModelRole) -> tuple[int, int]:
    """The (nodes, GPUs per node) of ``role``'s Ray group: its flags, else train_ppo_ray's defaults."""
    place = next((p for p in setup.placements if p.role == role), None)
    return (place.num_nodes if place is not None and place.num_nodes else RAY_GROUP_NODES,
            place.gpus_per_node if place is not None and place.gpus_per_node else RAY_GROUP_GPUS_PER_NODE)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A setting the trainer's own code refuses to run under DeepSpeed at ``stages`` (config/trainer_refusals.py):
    the run stops before training, whatever its memory. ``since`` / ``before``: the releases that make the check
    (the first that does, the first that no longer does; None: every release read)."""

    words: str  # what the trainer raises, for which setting, and where
    stages: frozenset[int]
    since: str | None = None
    before: str | None = None
    offload_optimizer_runs: bool = False  # the check passes where the optimizer is offloaded to the host
    deepspeed_through: str | None = None  # refused only with DeepSpeed releases up to this one

    def applies(self, stage: int, release: Version | None, offloads_optimizer: bool = False,
                deepspeed: Version | None = None) -> bool:
        """Refused at ``stage`` by ``release`` (None: unknown, the newest release read decides), for an option
        that offloads the optimizer or not, with the DeepSpeed release the run reads (None: not known here)."""
        if stage not in self.stages or (self.offload_optimizer_runs and offloads_optimizer):
            return False
        if self.deepspeed_through is not None and deepspeed is not None and deepspeed > Version(self.deepspeed_through):
            return False
        if release is None:
            return self.before is None
        return (self.since is None or release >= Version(self.since)) and \
            (self.before is None or release < Version(self.before))


@dataclass(frozen=True, slots=True)
class MethodSetup:
    """The training method and what the files say about it; the default is plain SFT (one model)."""

    method: Method = Method.SFT
    trainer: TrainerFamily | None = None  # None: not said by any file (the estimate assumes TRL's behaviour)
    trainer_version: str | None = None  # the trainer's release from the pins (PEP 440 text), None: unknown
    # the TRL release beside a trainer whose method runs TRL's own trainer and checks its release (LLaMA-Factory's PPO:
    # memory/method.py LLAMA_FACTORY_PPO_TRL), from the pins or the installed trl; None: not read or unknown
    trl_version: str | None = None
    use_reference: bool | None = None  # explicit: a file says whether a reference model is loaded
    reference_model: str | None = None  # a different reference model (LLaMA-Factory ref_model, TRL ref_model)
    # LLaMA-Factory ref_model_quantization_bit: that reference loaded by bitsandbytes ("4bit" | "8bit"), with its
    # 4-bit double quantization (ModelArguments.double_quantization, copied from the policy's)
    reference_quantization: str | None = None
    reference_double_quant: bool = True
    precompute_ref_log_probs: bool | None = None
    beta: float | None = None  # TRL beta / LLaMA-Factory pref_beta (GRPO beta 0.0: no reference model)
    loss_type: str | None = None  # TRL loss_type / LLaMA-Factory pref_loss (e.g. "simpo", "orpo")
    max_length: int | None = None  # the preference trainer's own max_length (chosen/rejected), where said
    use_weighting: bool | None = None  # TRL DPOConfig.use_weighting (WPO): logsumexp over the logits twice
    rpo_alpha: float | None = None  # TRL DPOConfig.rpo_alpha (0.15-0.28: an NLL over the chosen rows beside DPO's)
    # the trainer's own switch for Liger's fused preference loss, where a file says it: TRL's use_liger_loss (DPOConfig
    # 0.19-0.27, KTOConfig 0.17-0.27), axolotl's dpo_use_liger_kernel (memory/liger.py trl_loss_runs; TRL's
    # use_liger_kernel is the Trainer's, read with the training arguments)
    liger_loss: bool | None = None
    # OpenRLHF's --entropy_loss_coef (--actor.entropy_coef from 0.10): the actor's entropy with its graph, in the loss
    # where it is not 0 (openrlhf/trainer/ray/ppo_actor.py training_step @ v0.8.5, v0.11.0)
    entropy_coef: float | None = None
    # TRL's RLOOTrainer (trl rloo, 0.22+), GRPO's sibling: the same completion scoring, generation, vLLM and reference
    # handling and batch checks (trl/trainer/rloo_trainer.py, rloo_config.py @ v0.22.0, v1.9.0), costed as GRPO with
    # RLOOConfig's own defaults (beta 0.05, num_generations 2) and without Liger's GRPO loss, which it never runs
    rloo: bool = False
    # ms-swift's GRPO scoring path (memory/method.py swift_grpo_scoring): --padding_free (its local forward from 4.0,
    # not TRL's method), and whether it computes the completion's entropy (``self.compute_entropy =
    # self.args.log_entropy or self.top_entropy_quantile < 1.0``, swift/rlhf_trainers/grpo_trainer.py @ v4.5.2,
    # swift/trainers/rlhf_trainer/grpo_trainer.py @ v3.8.0); None: not said (ms-swift's defaults: neither)
    padding_free: bool | None = None
    entropy_computed: bool | None = None
    # TRL's GKD (GKDConfig): the teacher (teacher_model_name_or_path; None: the policy's architecture), the share of
    # steps that generate on-policy with the student (lmbda, 0.5 by default) and whether the teacher generates the
    # others (seq_kd, false by default): trl/experimental/gkd/gkd_config.py @ v1.9.0, trl/trainer/gkd_config.py
    # @ v0.21.0
    teacher_model: str | None = None
    lmbda: float | None = None
    seq_kd: bool | None = None
    generation: Generation = field(default_factory=Generation)
    placements: tuple[Placement, ...] = ()  # the other models' placement where the trainer's flags say
    colocate_all_models: bool | None = None  # OpenRLHF --colocate_all_models (or one process: no Ray)
    # OpenRLHF's Ray trainer: the reference on the actor's GPUs (--colocate_actor_ref), the reward model on the
    # critic's (--colocate_critic_reward): openrlhf/cli/train_ppo_ray.py train, the placement groups @ v0.8.5
    colocate_actor_ref: bool | None = None
    colocate_critic_reward: bool | None = None
    # axolotl loads a second copy of the model that its trainer never gets (train.py setup_reference_model for kto,
    # simpo and grpo): read during setup, dropped when setup returns, before the policy's engine exists
    unused_copy_at_load: bool = False
    # what the trainer's own code refuses under DeepSpeed among the file's settings, at some stages or all
    # (LLaMA-Factory's use_unsloth under ZeRO-3, axolotl's Muon optimizer at every stage: config/trainer_refusals.py)
    refusals: tuple[Refusal, ...] = ()
    origin: tuple[tuple[str, str], ...] = ()  # (field, where it was said) for messages
    notes: tuple[str, ...] = ()  # what was read and assumed, one line each

    @property
    def release(self) -> Version | None:
        """``trainer_version`` as a release to compare; None where it is unknown or not a PEP 440 version."""
        return release_of(self.trainer_version)


def release_of(text: str | None) -> Version | None:
    """A trainer's pinned version (PEP 440 text) as a release to compare; None where unknown or not PEP 440."""
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None
