"""The training method (config/method.py MethodSetup) as the trainers' own files and flags say it.

Each trainer spells it its own way; each spelling is read here into one :class:`MethodReading`, which the run's
builder (inputs/method.py) completes with ``--trainer`` and the pins:

* TRL config files (``trl dpo --config f.yaml``): DPOConfig, KTOConfig, ORPOConfig, CPOConfig, GRPOConfig and
  RewardConfig fields (trl 0.21 trl/trainer/*_config.py) and ModelConfig's ``use_peft``
  (trl/scripts/dpo.py main: no ``ref_model`` is loaded where ``get_peft_config`` gives a PEFT config). The file
  does not say which trainer reads it: the launch command does (``trl dpo``, ``trl/scripts/grpo.py``), else
  ``--trainer``; where neither does and its keys are a preference trainer's, the method is guessed from them
  (``guessed_from``) and said with the flag that sets it.
* LLaMA-Factory YAML (src/llamafactory/hparams/finetuning_args.py): ``stage`` (sft, pt, rm, ppo, dpo, kto),
  ``pref_loss`` (orpo and simpo train without a reference model: finetuning_args.py ``use_ref_model``,
  train/dpo/workflow.py ``create_ref_model`` only where it holds), ``pref_beta``, ``ref_model``,
  ``finetuning_type: lora`` without ``ref_model`` (train/dpo/workflow.py: the reference pass disables the adapter,
  no second model), ``reward_model``.
* axolotl YAML (src/axolotl/utils/schemas/enums.py RLType, schemas/trl.py TRLConfig): ``rl`` (dpo, ipo, kto,
  orpo, simpo, grpo), ``rl_beta``, and its ``trl:`` block (beta, num_generations, use_vllm, vllm_mode,
  vllm_gpu_memory_utilization, max_completion_length).
* ms-swift's and OpenRLHF's launch flags, read by config/launch.py into the same keys (:data:`SWIFT_METHODS`,
  :data:`OPENRLHF_MODULES`).

Every value read is checked here (a number where a number is due), with a one-line TrainerInputError naming the
key and file; unknown keys are left to the readers that know them (config/training_args.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace

from zeroadvisor.config.method import Generation, MethodSetup, Placement
from zeroadvisor.config.trainer_errors import TrainerInputError, as_bool, shown
from zeroadvisor.config.trainer_refusals import read_refusals
from zeroadvisor.jsontypes import JSONValue
from zeroadvisor.vocab import Method, ModelRole, TrainerFamily, VllmMode

Origin = Callable[[str], str]

# LLaMA-Factory's stage -> the method (finetuning_args.py FinetuningArguments.stage: pt, sft, rm, ppo, dpo, kto).
LLAMA_FACTORY_STAGES: dict[str, Method] = {"pt": Method.SFT, "sft": Method.SFT, "rm": Method.REWARD,
                                           "ppo": Method.PPO, "dpo": Method.DPO, "kto": Method.KTO}
# LLaMA-Factory pref_loss values that train without a reference model (finetuning_args.py __post_init__:
# ``self.use_ref_model = self.stage == "dpo" and self.pref_loss not in ["orpo", "simpo"]``), and the method each is.
LLAMA_FACTORY_NO_REFERENCE: dict[str, Method] = {"orpo": Method.ORPO, "simpo": Method.CPO}
# axolotl's rl: (utils/schemas/enums.py RLType) -> (the method, the TRL loss_type it sets where it is not the
# method's own).
# gdpo (from 0.14.0) is GRPO's trainer with each reward normalized on its own (core/builders/rl.py @ v0.18.0:
# multi_objective_aggregation normalize_then_sum): the same models and batches as grpo.
AXOLOTL_RL: dict[str, tuple[Method, str | None]] = {
    "dpo": (Method.DPO, None), "ipo": (Method.DPO, "ipo"), "kto": (Method.KTO, None), "orpo": (Method.ORPO, None),
    "simpo": (Method.CPO, "simpo"), "grpo": (Method.GRPO, None), "gdpo": (Method.GRPO, None)}
# ms-swift's --rlhf_type (swift/llm/argument/rlhf_args.py RLHFArguments.rlhf_type) -> (the method, its loss_type).
SWIFT_METHODS: dict[str, tuple[Method, str | None]] = {
    "dpo": (Method.DPO, None), "kto": (Method.KTO, None), "orpo": (Method.ORPO, None), "cpo": (Method.CPO, None),
    "simpo": (Method.CPO, "simpo"), "grpo": (Method.GRPO, None), "ppo": (Method.PPO, None),
    "rm": (Method.REWARD, None)}
# ms-swift commands that train one model (swift sft, swift pt): SFT.
SWIFT_SFT_COMMANDS = ("sft", "pt")
# TRL's scripts and CLI commands (trl/cli.py; trl/scripts/*.py; the repository's examples/scripts/*.py) -> method.
TRL_SCRIPTS: dict[str, Method] = {"sft": Method.SFT, "dpo": Method.DPO, "kto": Method.KTO, "orpo": Method.ORPO,
                                  "cpo": Method.CPO, "grpo": Method.GRPO, "ppo": Method.PPO,
                                  "reward": Method.REWARD, "reward_modeling": Method.REWARD}
# TRL's example scripts (examples/scripts/*.py @ v0.21.0) that run one of those trainers under another name: gspo.py
# is GRPOTrainer with importance_sampling_level "sequence".
# examples/scripts/ppo/ppo.py and ppo_tldr.py (@ v0.12.0 to v1.9.0) are its PPOTrainer, in a folder of their own.
# examples/scripts/gkd.py (@ v0.11.0 to v1.9.0) runs GKDTrainer (trl/trainer/gkd_trainer.py, trl/experimental/gkd
# from 0.26), which has no CLI command.
TRL_EXAMPLE_SCRIPTS: dict[str, Method] = {"gspo": Method.GRPO, "ppo/ppo": Method.PPO, "ppo/ppo_tldr": Method.PPO,
                                          "gkd": Method.GKD}
# TRL's trainers zeroadvisor does not cost, as their scripts name them (trl/scripts/rloo.py @ v1.9.0; examples/
# scripts/*.py @ v0.21.0): another model beside the policy (a teacher, a judge, a reference) or generation the
# estimate does not count; their runs get a one-line error, not an SFT estimate.
# trl/scripts/rloo.py (0.22+, `trl rloo`): RLOOTrainer, GRPO's sibling (MethodSetup.rloo); the examples/scripts/rloo/
# scripts are the RLOO of 0.21 and before, a PPO-style trainer, not costed.
TRL_SIBLING_SCRIPTS: dict[str, Method] = {"rloo": Method.GRPO}
TRL_UNCOSTED_SCRIPTS: dict[str, str] = {"bco": "BCO", "dpo_online": "online DPO",
                                        "nash_md": "Nash-MD", "xpo": "XPO", "prm": "PRM", "alignprop": "AlignProp",
                                        "ddpo": "DDPO", "rloo/rloo": "RLOO", "rloo/rloo_tldr": "RLOO"}
# OpenRLHF's entry points (openrlhf/cli/train_*.py, 0.8) -> method.
OPENRLHF_MODULES: dict[str, Method] = {"train_sft": Method.SFT, "train_dpo": Method.DPO, "train_kto": Method.KTO,
                                       "train_rm": Method.REWARD, "train_ppo": Method.PPO,
                                       "train_ppo_ray": Method.PPO}
RAY_MODULE = "train_ppo_ray"  # the one entry point that puts the other models on Ray actors of their own

# TRL config fields (trl 0.21 trl/trainer/*_config.py) and the kind each holds; ms-swift and OpenRLHF flags are read
# into the same names by config/launch.py.
_FLOATS = ("beta", "vllm_gpu_memory_utilization", "rpo_alpha", "lmbda")
_INTS = ("max_length", "max_prompt_length", "max_completion_length", "num_generations", "steps_per_generation",
         "generation_batch_size", "local_rollout_forward_batch_size", "sleep_level", "vllm_tensor_parallel_size",
         "vllm_max_model_length", "vllm_max_model_len", "move_model_batches")
_BOOLS = ("precompute_ref_log_probs", "use_vllm", "use_peft", "ds3_gather_for_generation", "vllm_enable_sleep_mode",
          "offload_model", "offload_optimizer", "use_liger_loss", "use_weighting", "seq_kd")
_TEXTS = ("loss_type", "vllm_mode", "ref_model", "teacher_model_name_or_path")
# Keys only a preference/RL trainer's config has, in the order they decide the guess where no file names the
# method: (key, the loss_type values it needs or None for any value, the method). trl 0.21 and 1.x *_config.py: only
# GRPOConfig has num_generations and the vllm_* fields; desirable_weight is KTOConfig's, cpo_alpha and simpo_gamma
# CPOConfig's, center_rewards_coefficient RewardConfig's, response_length, vf_coef, cliprange_value and num_ppo_epochs
# PPOConfig's; beta and precompute_ref_log_probs are DPO's and its kin's.
# max_completion_length is not one (DPO, KTO, ORPO and CPO have it too), nor loss_type "nll"/"dft" (SFTConfig's).
HINT_RULES: tuple[tuple[str, tuple[str, ...] | None, Method], ...] = (
    ("num_generations", None, Method.GRPO), ("use_vllm", None, Method.GRPO), ("vllm_mode", None, Method.GRPO),
    ("vllm_gpu_memory_utilization", None, Method.GRPO),
    ("desirable_weight", None, Method.KTO), ("undesirable_weight", None, Method.KTO),
    ("loss_type", ("kto", "apo_zero_unpaired"), Method.KTO),
    ("cpo_alpha", None, Method.CPO), ("simpo_gamma", None, Method.CPO), ("loss_type", ("simpo",), Method.CPO),
    ("center_rewards_coefficient", None, Method.REWARD),
    # PPOConfig's own (trl/trainer/ppo_config.py @ v0.21.0, trl/experimental/ppo/ppo_config.py @ v1.9.0)
    ("response_length", None, Method.PPO), ("vf_coef", None, Method.PPO), ("cliprange_value", None, Method.PPO),
    ("num_ppo_epochs", None, Method.PPO), ("reward_model_path", None, Method.PPO),
    # GKDConfig's own (trl/trainer/gkd_config.py @ v0.21.0, trl/experimental/gkd/gkd_config.py @ v1.9.0), before
    # beta: GKD's beta is the generalized JSD's interpolation
    ("teacher_model_name_or_path", None, Method.GKD), ("lmbda", None, Method.GKD), ("seq_kd", None, Method.GKD),
    ("beta", None, Method.DPO), ("precompute_ref_log_probs", None, Method.DPO),
    ("ref_model_init_kwargs", None, Method.DPO))
SFT_LOSSES = ("nll", "dft")  # SFTConfig.loss_type (trl 1.x): not a preference loss
PLAIN_FIELDS = frozenset({"max_length", "loss_type"})  # SFTConfig's too: alone they read no method's fields


# OpenRLHF's flags read by launch (0.8 openrlhf/cli/train_ppo_ray.py, train_dpo.py), with the 0.10+ dotted spellings
# (``--ref.num_nodes``) they were renamed to.
OPENRLHF_KEYS: tuple[str, ...] = (
    "ref_num_nodes", "ref_num_gpus_per_node", "reward_num_nodes", "reward_num_gpus_per_node", "critic_num_nodes",
    "critic_num_gpus_per_node", "actor_num_nodes", "actor_num_gpus_per_node", "colocate_all_models",
    "colocate_actor_ref", "colocate_critic_reward",
    "vllm_num_engines", "vllm_tensor_parallel_size", "ref_reward_offload", "ref_offload", "reward_pretrain",
    "critic_pretrain", "ref_pretrain", "pretrain", "init_kl_coef", "n_samples_per_prompt", "prompt_max_len",
    "generate_max_len", "max_len", "zero_stage", "micro_train_batch_size", "adam_offload", "lora_rank", "ipo",
    "micro_rollout_batch_size", "vllm_enable_sleep", "deepspeed_enable_sleep", "advantage_estimator", "remote_rm_url",
    "param_dtype", "async_train", "entropy_loss_coef",
    # what get_ds_train_config builds the DeepSpeed config from besides the stage and the offload
    # (config/openrlhf_config.py FLAGS)
    "zpg", "overlap_comm", "grad_accum_dtype", "max_norm", "train_batch_size", "ring_attn_size",
    "ds_tensor_parallel_size", "use_dynamic_batch")
OPENRLHF_BOOLS = ("colocate_all_models", "colocate_actor_ref", "colocate_critic_reward", "ref_reward_offload",
                  "ref_offload", "adam_offload", "ipo",
                  "vllm_enable_sleep", "deepspeed_enable_sleep", "async_train", "overlap_comm", "use_dynamic_batch")
DOTTED: dict[str, str] = {"ref.num_nodes": "ref_num_nodes", "ref.num_gpus_per_node": "ref_num_gpus_per_node",
                          "reward.num_nodes": "reward_num_nodes",
                          "reward.num_gpus_per_node": "reward_num_gpus_per_node",
                          "critic.num_nodes": "critic_num_nodes",
                          "critic.num_gpus_per_node": "critic_num_gpus_per_node",
                          "actor.num_nodes": "actor_num_nodes", "actor.num_gpus_per_node": "actor_num_gpus_per_node",
                          "ds.zero_stage": "zero_stage", "ds.adam_offload": "adam_offload",
                          "data.max_len": "max_len", "rollout.micro_batch_size": "micro_rollout_batch_size",
                          "ref.offload": "ref_offload", "reward.offload": "reward_offload",
                          # the groups of openrlhf/cli/train_ppo_ray.py @ v0.11.0 that decide memory
                          "actor.model_name_or_path": "pretrain", "critic.model_name_or_path": "critic_pretrain",
                          "reward.model_name_or_path": "reward_pretrain", "train.colocate_all": "colocate_all_models",
                          "train.colocate_actor_ref": "colocate_actor_ref",
                          "train.colocate_critic_reward": "colocate_critic_reward",
                          "train.micro_batch_size": "micro_train_batch_size", "vllm.num_engines": "vllm_num_engines",
                          "vllm.tensor_parallel_size": "vllm_tensor_parallel_size",
                          "vllm.gpu_memory_utilization": "vllm_gpu_memory_utilization",
                          "vllm.enable_sleep": "vllm_enable_sleep", "ds.enable_sleep": "deepspeed_enable_sleep",
                          "rollout.n_samples_per_prompt": "n_samples_per_prompt",
                          "rollout.max_new_tokens": "generate_max_len", "algo.kl.init_coef": "init_kl_coef",
                          "ds.lora.rank": "lora_rank", "ds.lora.target_modules": "target_modules",
                          "ds.lora.dropout": "lora_dropout", "ds.load_in_4bit": "load_in_4bit",
                          # which models exist (a critic for gae only, no reward model with a remote one) and what
                          # the Trainer's arguments read (checkpointing, attention, dtype, Liger, workers) @ v0.11.0;
                          # train_dpo / train_sft / train_kto spell the model's group "model."
                          "reward.remote_url": "remote_rm_url", "algo.advantage.estimator": "advantage_estimator",
                          "actor.gradient_checkpointing_enable": "gradient_checkpointing",
                          "model.gradient_checkpointing_enable": "gradient_checkpointing",
                          "ds.attn_implementation": "attn_implementation", "ds.param_dtype": "param_dtype",
                          "ds.use_liger_kernel": "use_liger_kernel",
                          "data.dataloader_num_workers": "dataloader_num_workers",
                          "model.model_name_or_path": "pretrain", "ref.model_name_or_path": "ref_pretrain",
                          "model.beta": "beta", "model.ipo_enable": "ipo", "ds.ring_attn_size": "ring_attn_size",
                          "train.async_enable": "async_train", "actor.entropy_coef": "entropy_loss_coef",
                          # get_ds_train_config's inputs @ v0.11.0 (config/openrlhf_config.py)
                          "ds.zpg": "zpg", "ds.overlap_comm": "overlap_comm", "ds.grad_accum_dtype": "grad_accum_dtype",
                          "actor.max_norm": "max_norm", "model.max_norm": "max_norm",
                          "train.batch_size": "train_batch_size", "ds.tensor_parallel_size": "ds_tensor_parallel_size",
                          "train.dynamic_batch_enable": "use_dynamic_batch"}
# The keys a launch command's script arguments give for the method (config/launch.py reads them), bool ones apart.
# ms-swift's older names for max_completion_length, in the precedence it reads them (swift/arguments/rlhf_args.py
# RLHFArguments._init_max_completion_length @ v4.6.0: response_length or max_new_tokens or max_completion_length)
SWIFT_COMPLETION_KEYS = ("response_length", "max_new_tokens")
# The reward model a run loads. PPO's reward and value models: TRL's PPOConfig.reward_model_path (its ppo.py loads
# value_model and reward_model from it, examples/scripts/ppo/ppo.py @ v0.21.0, v1.9.0), ms-swift's --reward_model
# (swift/pipelines/train/rlhf.py: the value model from it too, @ 4.x; swift/llm/train/rlhf.py @ v3.8.0); GRPO's
# reward model: trl/scripts/grpo.py's reward_model_name_or_path (@ v0.21.0, v1.9.0), which GRPOTrainer loads as
# AutoModelForSequenceClassification and prepares with prepare_deepspeed as the reference.
REWARD_MODEL_KEYS = ("reward_model_path", "reward_model", "reward_model_name_or_path")
# ms-swift's flags that decide its GRPO scoring path (MethodSetup.padding_free, entropy_computed)
SWIFT_SCORING_BOOLS = ("padding_free", "log_entropy")
METHOD_KEYS: tuple[str, ...] = (*_FLOATS, *_INTS, *_BOOLS, *_TEXTS, "rlhf_type", "train_type", "tuner_type",
                                "init_kl_coef", *SWIFT_COMPLETION_KEYS, *REWARD_MODEL_KEYS,
                                *OPENRLHF_KEYS, *SWIFT_SCORING_BOOLS, "top_entropy_quantile")
METHOD_BOOLS: tuple[str, ...] = (*_BOOLS, *OPENRLHF_BOOLS, *SWIFT_SCORING_BOOLS)


@dataclass(frozen=True)
class MethodReading:
    """What one file or command says about the method. ``setup.method`` is meaningful only where ``said`` names
    where it was said (else SFT, unless ``guessed``); ``hints``: the keys that point to a preference method."""

    setup: MethodSetup = field(default_factory=MethodSetup)
    said: str = ""  # where the method was said ("stage in train.yaml", "trl dpo"); "" where nothing said it
    # (key, the method it points to) of a preference/RL trainer's keys present, in HINT_RULES' order: the first
    # decides the guess where nothing says the method
    hints: tuple[tuple[str, Method], ...] = ()

    @property
    def empty(self) -> bool:
        return self == MethodReading()


def read_mapping(data: Mapping[str, JSONValue], project: str, where: Origin) -> MethodReading:
    """The method a training-arguments file says (``project``: config/training_args.py project_of)."""
    if project == "llama-factory":
        return _llama_factory(data, where)
    if project == "axolotl":
        return _axolotl(data, where)
    return _trl_fields(data, where, TrainerFamily.TRL if _trl_hints(data) else None)


def _trl_hints(data: Mapping[str, JSONValue]) -> tuple[tuple[str, Method], ...]:
    found: dict[str, Method] = {}
    loss = data.get("loss_type")
    losses = [str(item).lower() for item in (loss if isinstance(loss, list) else [loss] if loss is not None else [])]
    for key, values, method in HINT_RULES:
        if key in found or data.get(key) is None:
            continue
        if key == "loss_type" and (all(item in SFT_LOSSES for item in losses) or
                                   (values is not None and not set(losses) & set(values))):
            continue
        found[key] = method
    if "loss_type" not in found and losses and not all(item in SFT_LOSSES for item in losses):
        found["loss_type"] = Method.DPO  # another preference loss (sigmoid, ipo, hinge, ...): DPOConfig's
    return tuple(found.items())


# vLLM's sleep level where the trainer puts it to sleep between generations: TRL's vllm_enable_sleep_mode calls
# llm.sleep(level=2) (trl/generation/vllm_generation.py @ v1.9.0); ms-swift passes --sleep_level (0, 1, 2) to
# engine.sleep (swift/rlhf_trainers/rollout_mixin.py @ v4.5.2); OpenRLHF's --vllm_enable_sleep sleeps at level 1
# (openrlhf/trainer/ray/vllm_engine.py sleep @ v0.8.5).
TRL_SLEEP_LEVEL = 2
OPENRLHF_SLEEP_LEVEL = 1
SLEEP_LEVELS = (0, 1, 2)


def _sleep_level(read: _Reader) -> int | None:
    level = read.whole("sleep_level", zero=True)
    if level is not None and level not in SLEEP_LEVELS:
        raise TrainerInputError(f"{read.where('sleep_level')}: expected 0, 1 or 2, got {level}")
    if level is None and read.flag("vllm_enable_sleep_mode") is not None:
        return TRL_SLEEP_LEVEL if read.flag("vllm_enable_sleep_mode") else 0
    return level


def _trl_fields(data: Mapping[str, JSONValue], where: Origin, trainer: TrainerFamily | None) -> MethodReading:
    """TRL's fields (and ms-swift's, which it names the same: swift/llm/argument/rlhf_args.py), the method not said."""
    read = _Reader(data, where)
    share = read.number("vllm_gpu_memory_utilization")
    if share is not None and not 0 < share <= 1:
        raise TrainerInputError(f"{where('vllm_gpu_memory_utilization')}: expected a share above 0 and at most 1, "
                                f"got {shown(data['vllm_gpu_memory_utilization'])}")
    generation = Generation(num_generations=read.whole("num_generations"),
                            max_prompt_length=read.whole("max_prompt_length"),
                            # PPOConfig names its cap response_length (trl/trainer/ppo_config.py @ v0.21.0), GKDConfig
                            # max_new_tokens (trl/experimental/gkd/gkd_config.py @ v1.9.0)
                            max_completion_length=read.whole("max_completion_length") or read.whole("response_length")
                            or read.whole("max_new_tokens"),
                            use_vllm=read.flag("use_vllm"), vllm_mode=_vllm_mode(read.text("vllm_mode"), where),
                            vllm_gpu_memory_utilization=share,
                            ds3_gather_for_generation=read.flag("ds3_gather_for_generation"),
                            steps_per_generation=read.whole("steps_per_generation"),
                            generation_batch_size=read.whole("generation_batch_size"),
                            rollout_batch_size=read.whole("local_rollout_forward_batch_size"),
                            vllm_sleep_level=_sleep_level(read),
                            vllm_tensor_parallel_size=read.whole("vllm_tensor_parallel_size"),
                            # TRL's GRPOConfig name, then ms-swift's (rlhf_args.py passes it as vLLM's max_model_len)
                            vllm_max_model_len=read.whole("vllm_max_model_length") or read.whole("vllm_max_model_len"),
                            offload_model=read.flag("offload_model"), offload_optimizer=read.flag("offload_optimizer"),
                            move_model_batches=read.whole("move_model_batches"))
    lmbda = read.number("lmbda")
    if lmbda is not None and not 0 <= lmbda <= 1:  # GKDConfig.__post_init__ raises outside [0, 1]
        raise TrainerInputError(f"{where('lmbda')}: expected a share from 0 to 1, got {shown(data['lmbda'])}")
    use_reference: bool | None = None
    peft = read.flag("use_peft")
    if peft is True:  # trl/scripts/dpo.py, kto.py: ref_model = None with a PEFT config
        use_reference = False
        why = f"{where('use_peft')} (the adapter is disabled for the reference pass)"
        read.origin.append(("use_reference", why))
    losses = data.get("loss_type")
    loss = ",".join(_text(item, where("loss_type")) for item in losses) if isinstance(losses, list) \
        else read.text("loss_type")  # DPOConfig.loss_type: a list of losses (trl 0.21)
    if isinstance(losses, list):
        read.origin.append(("loss_type", where("loss_type")))
    reward_path = read.text("reward_model_path")  # PPOConfig's: the reward and the value model
    grpo_reward = read.text("reward_model_name_or_path")  # trl/scripts/grpo.py's: a reward model only
    placements = _reward_placements(reward_path, critic=True) or _reward_placements(grpo_reward, critic=False)
    setup = MethodSetup(trainer=trainer, use_reference=use_reference, reference_model=read.text("ref_model"),
                        precompute_ref_log_probs=read.flag("precompute_ref_log_probs"), beta=read.number("beta"),
                        loss_type=loss, max_length=read.whole("max_length"), generation=generation,
                        liger_loss=read.flag("use_liger_loss"), rpo_alpha=read.number("rpo_alpha"),
                        use_weighting=read.flag("use_weighting"), placements=placements,
                        teacher_model=read.text("teacher_model_name_or_path"), lmbda=lmbda,
                        seq_kd=read.flag("seq_kd"),
                        origin=tuple(o for o in read.origin if o[0] != "use_peft"))
    hints = _trl_hints(data)
    said = {name for name, _ in setup.origin}
    setup = replace(setup, origin=(*setup.origin, *((key, where(key)) for key, _ in hints if key not in said)))
    # a plain TrainingArguments / SFTConfig file (max_length alone) says nothing of a method: no reading; a file whose
    # method's fields carry no hint (GRPO's max_completion_length, DPO's max_prompt_length) keeps them for the method a
    # launch command or --trainer says (stated, inputs/method.py resolve: without either it is still plain SFT)
    fields = any(name not in PLAIN_FIELDS for name, _ in setup.origin)
    return MethodReading(setup, "", hints) if trainer is not None or hints or fields else MethodReading()


def _reward_placements(model: str | None, *, critic: bool) -> tuple[Placement, ...]:
    """The reward model loaded from ``model`` (REWARD_MODEL_KEYS) and, with ``critic`` (PPO), the value model too."""
    if model is None:
        return ()
    reward = Placement(ModelRole.REWARD, model)
    return (reward, Placement(ModelRole.CRITIC, model)) if critic else (reward,)


def _llama_factory(data: Mapping[str, JSONValue], where: Origin) -> MethodReading:
    stage_text = data.get("stage")
    if stage_text is None:  # FinetuningArguments.stage defaults to "sft": the method unsaid, the trainer known
        refused = read_refusals(data, TrainerFamily.LLAMA_FACTORY)
        return MethodReading(MethodSetup(trainer=TrainerFamily.LLAMA_FACTORY, refusals=refused))
    stage = _text(stage_text, where("stage")).lower()
    if stage not in LLAMA_FACTORY_STAGES:
        raise TrainerInputError(f"{where('stage')}: expected one of {', '.join(LLAMA_FACTORY_STAGES)} (LLaMA-Factory's "
                                f"stages), got {shown(stage_text)}")
    method = LLAMA_FACTORY_STAGES[stage]
    origin = [("method", where("stage"))]
    loss = _text(data["pref_loss"], where("pref_loss")) if data.get("pref_loss") is not None else None
    reference = _text(data["ref_model"], where("ref_model")) if data.get("ref_model") is not None else None
    use_reference: bool | None = None
    notes: list[str] = []
    # FinetuningArguments.finetuning_type: "lora" by default (hparams/finetuning_args.py @ v0.9.3)
    if data.get("finetuning_type") is None:
        tuner, tuner_from = "lora", "LLaMA-Factory's default finetuning_type lora"
    else:
        tuner = _text(data["finetuning_type"], where("finetuning_type")).lower()
        if tuner not in LLAMA_FACTORY_TUNERS:  # HfArgumentParser refuses any other (a Literal field)
            raise TrainerInputError(f"{where('finetuning_type')}: expected one of {', '.join(LLAMA_FACTORY_TUNERS)} "
                                    f"(LLaMA-Factory's finetuning types), got {shown(data['finetuning_type'])}")
        tuner_from = f"{where('finetuning_type')} {tuner}"
    if method is Method.DPO and loss in LLAMA_FACTORY_NO_REFERENCE:
        method, use_reference = LLAMA_FACTORY_NO_REFERENCE[loss], False
        origin.append(("use_reference", f"{where('pref_loss')} (no reference model)"))
    elif method in (Method.DPO, Method.KTO, Method.PPO) and reference is None and tuner == "lora":
        # train/trainer_utils.py create_ref_model: ``if finetuning_type == "lora": ref_model = None`` without
        # ref_model (DPO, KTO and PPO workflows call it)
        use_reference = False
        why = f"{tuner_from} without ref_model (the adapter is disabled for the reference pass)"
        origin.append(("use_reference", why))
    beta = _number(data["pref_beta"], where("pref_beta")) if data.get("pref_beta") is not None else None
    # PPO generates up to GeneratingArguments.max_new_tokens after each prompt (hparams/generating_args.py @ v0.9.3;
    # 0 hands the length to max_length instead, which is not read: None)
    new_tokens = (_int(data["max_new_tokens"], where("max_new_tokens"), zero=True) or None) \
        if method is Method.PPO and data.get("max_new_tokens") is not None else None
    placements: tuple[Placement, ...] = ()
    reward = data.get("reward_model")
    if method is Method.PPO and reward is not None:
        # create_reward_model: reward_model_type "lora" (the default) loads an adapter on the policy and "api" calls
        # a server; only "full" loads a second model
        kind = _reward_model_type(data, tuner, where)
        placements = (Placement(ModelRole.REWARD, _text(reward, where("reward_model")), loaded=kind == "full",
                                remote=kind == "api"),)
        origin.append(("placements", f"{where('reward_model')} (reward_model_type {kind})"))
    quantization, double = _reference_quantization(data, reference, where, notes)
    origin += [(name, where(key)) for name, key, value in (("loss_type", "pref_loss", loss),
                                                           ("reference_model", "ref_model", reference),
                                                           ("reference_quantization", "ref_model_quantization_bit",
                                                            quantization),
                                                           ("beta", "pref_beta", beta),
                                                           ("max_completion_length", "max_new_tokens", new_tokens))
               if value is not None]
    return MethodReading(MethodSetup(method, TrainerFamily.LLAMA_FACTORY, use_reference=use_reference,
                                     reference_model=reference, reference_quantization=quantization,
                                     reference_double_quant=double, beta=beta, loss_type=loss, placements=placements,
                                     generation=Generation(max_completion_length=new_tokens),
                                     refusals=read_refusals(data, TrainerFamily.LLAMA_FACTORY),
                                     origin=tuple(origin), notes=tuple(notes)), where("stage"))


def _reference_quantization(data: Mapping[str, JSONValue], reference: str | None, where: Origin,
                            notes: list[str]) -> tuple[str | None, bool]:
    """LLaMA-Factory's ref_model_quantization_bit (4 or 8: hparams/finetuning_args.py __post_init__), which
    train/trainer_utils.py create_ref_model applies to the ref_model it loads, and only to it; the 4-bit double
    quantization is the policy's ModelArguments.double_quantization (True by default), copied with the rest."""
    bits = data.get("ref_model_quantization_bit")
    if bits is None:
        return None, True
    if not isinstance(bits, (int, str)) or isinstance(bits, bool) or str(bits).strip() not in ("4", "8"):
        raise TrainerInputError(f"{where('ref_model_quantization_bit')}: expected 4 or 8 (LLaMA-Factory accepts no "
                                f"other), got {shown(bits)}")
    if reference is None:
        notes.append(f"{where('ref_model_quantization_bit')}: ignored without ref_model (create_ref_model quantizes "
                     "only a reference model it loads from ref_model)")
        return None, True
    written = data.get("double_quantization")
    double = True if written is None else as_bool(written, where("double_quantization"))
    return f"{str(bits).strip()}bit", double


# FinetuningArguments.finetuning_type (hparams/finetuning_args.py: Literal["lora", "freeze", "full"] @ v0.9.3,
# "oft" added @ v0.9.4); only "lora" drops the reference copy (train/trainer_utils.py create_ref_model @ v0.9.5)
LLAMA_FACTORY_TUNERS = ("lora", "oft", "freeze", "full")
# FinetuningArguments.reward_model_type (hparams/finetuning_args.py @ v0.9.3: Literal["lora", "full", "api"])
LLAMA_FACTORY_REWARD_TYPES = ("lora", "full", "api")


def _reward_model_type(data: Mapping[str, JSONValue], tuner: str, where: Origin) -> str:
    """LLaMA-Factory's reward_model_type, checked as its FinetuningArguments.__post_init__ checks it: "lora" (the
    default) only with finetuning_type lora (``ValueError("`reward_model_type` cannot be lora for Freeze/Full PPO
    training.")`` @ v0.9.3)."""
    written = data.get("reward_model_type")
    kind = "lora" if written is None else _text(written, where("reward_model_type")).lower()
    if kind not in LLAMA_FACTORY_REWARD_TYPES:
        raise TrainerInputError(f"{where('reward_model_type')}: expected one of {', '.join(LLAMA_FACTORY_REWARD_TYPES)}"
                                f" (LLaMA-Factory's reward model types), got {shown(written)}")
    if kind == "lora" and tuner != "lora":
        key = "reward_model_type" if written is not None else "finetuning_type"
        raise TrainerInputError(f"{where(key)}: reward_model_type lora{'' if written else ' (the default)'} needs "
                                f"finetuning_type lora, got {tuner}: LLaMA-Factory refuses it (\"cannot be lora for "
                                "Freeze/Full PPO training\"); set reward_model_type full or api")
    return kind


def _axolotl(data: Mapping[str, JSONValue], where: Origin) -> MethodReading:
    rl = data.get("rl")
    refusals = read_refusals(data, TrainerFamily.AXOLOTL)
    if rl is None or rl is False:  # SFT: the method unsaid, the trainer known (its own refusals apply)
        return MethodReading(MethodSetup(trainer=TrainerFamily.AXOLOTL, refusals=refusals))
    name = _text(rl, where("rl")).lower()
    if name not in AXOLOTL_RL:
        raise TrainerInputError(f"{where('rl')}: expected one of {', '.join(AXOLOTL_RL)} (axolotl's rl: types that "
                                f"zeroadvisor reads), got {shown(rl)}")
    method, loss = AXOLOTL_RL[name]
    block = data.get("trl")
    if block is not None and not isinstance(block, dict):
        raise TrainerInputError(f"{where('trl')}: expected a mapping of TRL settings, got {shown(block)}")
    trl = _trl_fields(block or {}, lambda key: where(f"trl.{key}"), TrainerFamily.AXOLOTL).setup
    beta = trl.beta
    origin = [("method", where("rl")), *trl.origin]
    if beta is None and data.get("rl_beta") is not None:
        beta = _number(data["rl_beta"], where("rl_beta"))
        origin.append(("beta", where("rl_beta")))
    if loss is not None:
        origin.append(("loss_type", where("rl")))
    generation = _axolotl_vllm(data, trl.generation, where, origin)
    use_reference = trl.use_reference
    # train.py setup_reference_model @ v0.18.0: with an adapter no reference model is loaded (TRL disables the
    # adapter for the reference pass) unless rl_adapter_ref_model asks for one; dpo/ipo then pass it to the trainer
    # (core/builders/rl.py), and TRL uses a given ref_model even with PEFT
    ask = data.get("rl_adapter_ref_model")
    asked = ask is not None and as_bool(ask, where("rl_adapter_ref_model"))
    if asked and isinstance(data.get("adapter"), str) and method is Method.DPO:
        use_reference = True
        why = f"{where('rl_adapter_ref_model')} (a separate reference model beside the adapter)"
        origin.append(("use_reference", why))
    # the same function loads that model for kto, simpo and grpo too, but core/builders/rl.py hands model_ref to the
    # dpo/ipo trainers only: nothing keeps it once setup_model_and_trainer returns (TRL's KTO and GRPO trainers
    # build their own reference)
    unused = method in (Method.KTO, Method.CPO, Method.GRPO) and (asked or not isinstance(data.get("adapter"), str))
    # its trl: block's use_liger_loss is GRPO's (core/trainers/grpo/__init__.py); DPO's Liger loss is
    # dpo_use_liger_kernel, passed as DPOConfig's use_liger_kernel (core/trainers/dpo/__init__.py @ v0.18.0)
    liger_loss = trl.liger_loss if method is Method.GRPO else None
    weighting = trl.use_weighting
    if data.get("dpo_use_weighting") is not None and method is Method.DPO:  # DPOConfig.use_weighting (dpo/__init__.py)
        weighting = as_bool(data["dpo_use_weighting"], where("dpo_use_weighting"))
        origin.append(("use_weighting", where("dpo_use_weighting")))
    liger = data.get("dpo_use_liger_kernel")
    if liger is not None:
        dpo_liger = as_bool(liger, where("dpo_use_liger_kernel"))
        if method is Method.DPO:
            liger_loss = dpo_liger
            origin.append(("liger_loss", where("dpo_use_liger_kernel")))
    return MethodReading(replace(trl, method=method, trainer=TrainerFamily.AXOLOTL, beta=beta, generation=generation,
                                 liger_loss=liger_loss, use_weighting=weighting,
                                 loss_type=loss or trl.loss_type, origin=tuple(origin), use_reference=use_reference,
                                 unused_copy_at_load=unused, refusals=refusals),
                         where("rl"))


def _axolotl_vllm(data: Mapping[str, JSONValue], generation: Generation, where: Origin,
                  origin: list[tuple[str, str]]) -> Generation:
    """axolotl's ``vllm:`` block (utils/schemas/vllm.py VllmConfig): its gpu_memory_utilization where ``trl:`` gives
    none ("0.9 for vllm-serve and TRL's 0.3 in colocate mode" by default), and in server mode the GPUs ``axolotl
    vllm-serve`` takes, tensor_parallel_size x data_parallel_size."""
    block = data.get("vllm")
    if block is None:
        return generation
    if not isinstance(block, dict):
        raise TrainerInputError(f"{where('vllm')}: expected a mapping of vLLM settings, got {shown(block)}")
    read = _Reader(block, lambda key: where(f"vllm.{key}"))
    share = read.number("gpu_memory_utilization")
    if share is not None and not 0 < share <= 1:
        raise TrainerInputError(f"{where('vllm.gpu_memory_utilization')}: expected a share above 0 and at most 1, "
                                f"got {shown(block['gpu_memory_utilization'])}")
    tensor, data_parallel = read.whole("tensor_parallel_size"), read.whole("data_parallel_size")
    server = generation.vllm_mode is VllmMode.SERVER
    gpus = (tensor or 1) * (data_parallel or 1) if server and (tensor or data_parallel) else None
    context = read.whole("max_model_len")  # VllmConfig.max_model_len: the context axolotl starts vLLM with
    origin += [(f"vllm.{key}", label) for key, label in read.origin]
    return replace(generation, vllm_gpu_memory_utilization=generation.vllm_gpu_memory_utilization or share,
                   vllm_num_gpus=gpus, vllm_max_model_len=generation.vllm_max_model_len or context)


def read_swift(command: str, data: Mapping[str, JSONValue], where: Origin) -> MethodReading:
    """``swift rlhf --rlhf_type T ...`` / ``swift sft ...``: the method and ms-swift's TRL-named arguments
    (swift/llm/argument/rlhf_args.py RLHFArguments: beta, loss_type, ref_model, num_generations, use_vllm, ...)."""
    read = _trl_fields(data, where, TrainerFamily.MS_SWIFT).setup
    read = replace(read, refusals=read_refusals(data, TrainerFamily.MS_SWIFT))
    if command in SWIFT_SFT_COMMANDS:
        return MethodReading(replace(read, method=Method.SFT, trainer=TrainerFamily.MS_SWIFT), f"swift {command}")
    kind = data.get("rlhf_type")
    if kind is None:  # RLHFArguments.rlhf_type's default
        kind, said = "dpo", "ms-swift's default --rlhf_type dpo (swift rlhf)"
    else:
        said = f"{where('rlhf_type')} {kind}"
    name = _text(kind, said).lower()
    if name not in SWIFT_METHODS:
        raise TrainerInputError(f"{said}: expected one of {', '.join(SWIFT_METHODS)} (ms-swift's rlhf types that "
                                f"zeroadvisor reads), got {shown(kind)}")
    method, loss = SWIFT_METHODS[name]
    use_reference = read.use_reference
    origin = [("method", said), *read.origin]
    kind_key = "tuner_type" if data.get("tuner_type") is not None else "train_type"  # renamed after 3.x
    if data.get(kind_key) is not None:
        tuner, tuner_from = _text(data[kind_key], where(kind_key)).lower(), f"{where(kind_key)} {data[kind_key]}"
    else:  # swift/llm/argument/tuner_args.py TunerArguments.train_type: 'lora' by default (3.x docs, 4.x too)
        tuner, tuner_from = "lora", "ms-swift's default --train_type lora"
    # the adapter itself is read by config/peft_reader.py
    if tuner in ("lora", "qlora", "lora_llm") and read.reference_model is None and method in (Method.DPO, Method.KTO):
        use_reference = False  # a LoRA run's reference pass disables the adapter: no second model
        origin.append(("use_reference", f"{tuner_from} without --ref_model"))
    generation = read.generation
    names = _Reader(data, where)
    completion = next((n for n in (names.whole(key) for key in SWIFT_COMPLETION_KEYS) if n is not None), None)
    if completion is not None:
        generation = replace(generation, max_completion_length=completion)
        origin += [("max_completion_length", src) for _key, src in names.origin[:1]]
    placements = read.placements
    log_entropy, quantile = names.flag("log_entropy"), names.number("top_entropy_quantile")
    if quantile is not None and not 0 < quantile <= 1:
        raise TrainerInputError(f"{where('top_entropy_quantile')}: expected a share above 0 and at most 1, "
                                f"got {shown(data['top_entropy_quantile'])}")
    entropy = None if log_entropy is None and quantile is None else bool(log_entropy) or (quantile or 1.0) < 1.0
    reward = names.text("reward_model") if method in (Method.PPO, Method.GRPO) else None
    if reward is not None:
        # PPO: the reward and the value model; GRPO: a reward model among its reward functions, prepared as the
        # reference is (swift/rlhf_trainers/grpo_trainer.py: prepare_deepspeed(reward_func, ...) @ v4.5.2;
        # swift/trainers/rlhf_trainer/grpo_trainer.py @ v3.8.0)
        placements = _reward_placements(reward, critic=method == Method.PPO)
        origin.append(("placements", where("reward_model")))
    return MethodReading(replace(read, method=method, use_reference=use_reference, loss_type=loss or read.loss_type,
                                 generation=generation, placements=placements, origin=tuple(origin), notes=(),
                                 padding_free=names.flag("padding_free"), entropy_computed=entropy),
                         said)


def read_openrlhf(module: str, data: Mapping[str, JSONValue], where: Origin) -> MethodReading:
    """OpenRLHF's entry point (``openrlhf.cli.train_ppo_ray``) and its flags (0.8 cli/train_*.py argparse)."""
    method = OPENRLHF_MODULES[module.rsplit(".", 1)[-1]]
    read = _Reader(data, where)
    read.origin.append(("method", module))
    beta = read.number("beta") if method is not Method.PPO else read.number("init_kl_coef")
    ref_offload = read.flag("ref_reward_offload") or read.flag("ref_offload")
    # no critic but for GAE (``if args.advantage_estimator not in ["gae"]: args.critic_pretrain = None``), no reward
    # model with a remote one (``if not args.remote_rm_url: ... RewardModelActor``): train_ppo_ray.py @ v0.5.9.post1,
    # v0.8.5
    estimator, remote = read.text("advantage_estimator"), read.text("remote_rm_url")
    absent = {ModelRole.CRITIC: estimator is not None and estimator != "gae", ModelRole.REWARD: remote is not None}
    placements: list[Placement] = []
    for role, prefix in ((ModelRole.REFERENCE, "ref"), (ModelRole.REWARD, "reward"), (ModelRole.CRITIC, "critic")):
        if method is not Method.PPO and role is not ModelRole.REFERENCE:
            continue
        model = read.text(f"{prefix}_pretrain")
        nodes, gpus = read.whole(f"{prefix}_num_nodes"), read.whole(f"{prefix}_num_gpus_per_node")
        offload = ref_offload if role is not ModelRole.CRITIC else None
        loaded = False if absent.get(role) else None
        if any(v is not None for v in (model, nodes, gpus, offload, loaded)):
            placements.append(Placement(role, model, nodes, gpus, offload, loaded=loaded))
    # --vllm_num_engines 0: no vLLM (the actor generates)
    engines, tensor = read.whole("vllm_num_engines", zero=True), read.whole("vllm_tensor_parallel_size")
    vllm_gpus = engines * (tensor or 1) if engines is not None else None
    colocate = read.flag("colocate_all_models")
    if module.rsplit(".", 1)[-1] != RAY_MODULE:
        # the DeepSpeed launcher's entry points (no Ray): one process builds the policy and every other model and
        # prepares each with strategy.prepare, so every model is on every GPU of the training world
        # (openrlhf/cli/train_ppo.py train @ v0.5.1, gone by 0.8; cli/train_dpo.py, train_kto.py ``ref_model``
        # @ v0.8.5 and v0.11.0)
        colocate = True
        read.origin.append(("colocate_all_models", f"{module}: every model in the one training process"))
    # --async_train (0.8.0+; --train.async_enable from 0.11): "Using --colocate_all_models in async RLHF only
    # colocates DeepSpeed models": the vLLM engines get no share of the actor's placement group, GPUs of their own
    # (cli/train_ppo_ray.py train: create_vllm_engines(..., pg if args.colocate_all_models and not args.async_train
    # else None) @ v0.8.0, v0.8.5; the same with args.train.* @ v0.11.0)
    vllm_colocated = colocate and not read.flag("async_train")
    generation = Generation(num_generations=read.whole("n_samples_per_prompt"),
                            max_prompt_length=read.whole("prompt_max_len"),
                            max_completion_length=read.whole("generate_max_len"),
                            use_vllm=bool(vllm_gpus) if vllm_gpus is not None else None,
                            vllm_mode=(VllmMode.COLOCATE if vllm_colocated else VllmMode.SERVER) if vllm_gpus
                            else None,
                            vllm_gpu_memory_utilization=read.number("vllm_gpu_memory_utilization"),
                            vllm_num_gpus=vllm_gpus or None,
                            rollout_batch_size=read.whole("micro_rollout_batch_size"),
                            vllm_sleep_level=OPENRLHF_SLEEP_LEVEL if read.flag("vllm_enable_sleep") else None,
                            offload_model=read.flag("deepspeed_enable_sleep"),
                            offload_optimizer=read.flag("deepspeed_enable_sleep"))
    actor_ref, critic_reward = read.flag("colocate_actor_ref"), read.flag("colocate_critic_reward")
    loss = "ipo" if read.flag("ipo") else None
    reference = next((p.model for p in placements if p.role is ModelRole.REFERENCE), None)
    use_reference = False if method is Method.PPO and beta is not None and beta <= 0 else None
    if use_reference is False:  # train_ppo_ray.py: ``if args.init_kl_coef <= 0: ref_model = None``
        read.origin.append(("use_reference", f"{where('init_kl_coef')} {beta} (no reference model)"))
    return MethodReading(MethodSetup(method, TrainerFamily.OPENRLHF, use_reference=use_reference,
                                     reference_model=reference, beta=beta, loss_type=loss,
                                     entropy_coef=read.number("entropy_loss_coef"),
                                     max_length=read.whole("max_len"), generation=generation,
                                     placements=tuple(placements), colocate_all_models=colocate,
                                     colocate_actor_ref=actor_ref, colocate_critic_reward=critic_reward,
                                     refusals=read_refusals(data, TrainerFamily.OPENRLHF),
                                     origin=tuple(dict.fromkeys(read.origin))), module)


# -- values --------------------------------------------------------------------------------------


class _Reader:
    """The values of ``data`` each read as its kind, once, recording where each came from (``origin``)."""

    def __init__(self, data: Mapping[str, JSONValue], where: Origin) -> None:
        self.data, self.where = data, where
        self.origin: list[tuple[str, str]] = []

    def _raw(self, key: str) -> JSONValue:
        raw = self.data.get(key)
        if raw is not None:
            self.origin.append((key, self.where(key)))
        return raw

    def number(self, key: str) -> float | None:
        raw = self._raw(key)
        return None if raw is None else _number(raw, self.where(key))

    def whole(self, key: str, *, zero: bool = False) -> int | None:
        raw = self._raw(key)
        return None if raw is None else _int(raw, self.where(key), zero=zero)

    def flag(self, key: str) -> bool | None:
        raw = self._raw(key)
        return None if raw is None else as_bool(raw, self.where(key))

    def text(self, key: str) -> str | None:
        raw = self._raw(key)
        return None if raw is None or isinstance(raw, list) else _text(raw, self.where(key))


def _vllm_mode(value: str | None, where: Origin) -> VllmMode | None:
    if value is None:
        return None
    text = value.lower()
    try:
        return VllmMode(text)
    except ValueError:
        raise TrainerInputError(f"{where('vllm_mode')}: expected colocate or server, got {shown(value)}") from None


def _text(value: JSONValue, where: str) -> str:
    if isinstance(value, (dict, list, bool)) or value is None:
        raise TrainerInputError(f"{where}: expected a name, got {shown(value)}")
    text = str(value).strip()
    if not text or not text.isprintable():
        raise TrainerInputError(f"{where}: expected a name, got {shown(value)}")
    return text



def _int(value: JSONValue, where: str, *, zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str, float)):
        raise TrainerInputError(f"{where}: expected a whole number, got {shown(value)}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        raise TrainerInputError(f"{where}: expected a whole number, got {shown(value)}")
    number = int(text)
    if number < (0 if zero else 1):
        raise TrainerInputError(f"{where}: expected a whole number of at least 1, got {shown(value)}")
    return number


def _number(value: JSONValue, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TrainerInputError(f"{where}: expected a number, got {shown(value)}")
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (ValueError, OverflowError):
        raise TrainerInputError(f"{where}: expected a number, got {shown(value)}") from None
    if not math.isfinite(number) or number < 0:
        raise TrainerInputError(f"{where}: expected a number of at least 0, got {shown(value)}")
    return number


# -- combining readings ----------------------------------------------------------------------------


def merged(base: MethodReading, over: MethodReading) -> MethodReading:
    """``base`` (a training-arguments file) with what ``over`` (the launch command) says on top: each field over
    gives replaces base's; the method is over's where over says it."""
    setup = _over(base.setup, over.setup)
    said = over.said or base.said
    method = over.setup.method if over.said else base.setup.method
    trainer = over.setup.trainer or base.setup.trainer
    setup = replace(setup, method=method, trainer=trainer,
                    origin=tuple(dict.fromkeys((*base.setup.origin, *over.setup.origin))),
                    notes=tuple(dict.fromkeys((*base.setup.notes, *over.setup.notes))))
    return MethodReading(setup, said, tuple(dict.fromkeys((*base.hints, *over.hints))))


def _over(base: MethodSetup, over: MethodSetup) -> MethodSetup:
    """Each field of ``over`` that is not its default, over ``base``'s (Generation field by field)."""
    default, plain = MethodSetup(), Generation()
    generation = replace(base.generation, **{name: getattr(over.generation, name)
                                             for name in (f.name for f in fields(Generation))
                                             if getattr(over.generation, name) != getattr(plain, name)})
    given = {f.name: getattr(over, f.name) for f in fields(MethodSetup)
             if f.name not in ("generation", "origin", "notes") and getattr(over, f.name) != getattr(default, f.name)}
    return replace(base, generation=generation, **given)


def stated(reading: MethodReading | None, method: Method, trainer: TrainerFamily, said: str,
           rloo: bool = False) -> MethodReading:
    """``reading`` (the arguments' fields) with the method a launch command says (``trl dpo``, a TRL script);
    ``rloo``: TRL's RLOOTrainer, costed as GRPO (MethodSetup.rloo)."""
    base = reading or MethodReading()
    setup = replace(base.setup, method=method, trainer=trainer, rloo=rloo,
                    origin=(*(o for o in base.setup.origin if o[0] != "method"), ("method", said)))
    return MethodReading(setup, said, base.hints)
