"""Where a change is made for the trainer that runs the job: its own setting for activation checkpointing and the
micro batch, and, for a trainer that builds its DeepSpeed config from its flags (OpenRLHF), the flags for the stage,
the optimizer offload and the parallel degrees, since a change written into a config file never reaches such a run.

One row per trainer family (config/method.py MethodSetup.trainer); a run whose trainer is not known (the plain HF
Trainer, a script of its own) keeps the generic words of advisor/change.py. Each row is read from the trainer's
argument definitions:

* TRL: TrainingArguments' ``gradient_checkpointing``, ``per_device_train_batch_size`` and
  ``gradient_accumulation_steps``, in its config file (``trl dpo --config``) or on its command line.
* LLaMA-Factory: checkpointing is on unless ``disable_gradient_checkpointing: true`` (hparams/model_args.py
  ModelArguments, model/model_utils/checkpointing.py @ v0.9.4); the batch keys are TrainingArguments'.
* axolotl: ``gradient_checkpointing``, ``micro_batch_size`` and ``gradient_accumulation_steps``
  (utils/schemas/config.py @ v0.18.0).
* ms-swift: ``--gradient_checkpointing`` (true by default: swift/trainers/arguments.py @ v4.5.2), the
  TrainingArguments batch flags, and its own Ulysses, ``--sequence_parallel_size`` (swift/trainers/sequence_parallel,
  its own groups: not DeepSpeed's ``sequence_parallel_size``).
* axolotl's context parallelism: ``context_parallel_size`` (``sequence_parallel_degree`` from v0.8.0 until it was
  renamed: utils/schemas/validation.py check_context_parallel_size @ v0.18.0), ring-flash-attn groups of its own.
* OpenRLHF: ``--gradient_checkpointing`` (``--actor.gradient_checkpointing_enable`` / ``--model.`` from 0.10),
  ``--micro_train_batch_size`` (the accumulation follows from ``--train_batch_size``), and the DeepSpeed config
  built from ``--zero_stage``, ``--adam_offload``, ``--ring_attn_size`` and ``--ds_tensor_parallel_size``
  (openrlhf/utils/deepspeed/deepspeed.py get_ds_train_config @ v0.8.5: parameters never offloaded).
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroadvisor.memory.options import Option
from zeroadvisor.vocab import Device, TrainerFamily


@dataclass(frozen=True, slots=True)
class TrainerSettings:
    """How one trainer is told each part of a change; ``{...}`` fields are filled by advisor/change.py."""

    name: str
    where: str  # where its settings live, for the change's words: "in the axolotl YAML"
    checkpointing_on: str
    checkpointing_off: str
    micro_batch: str  # {micro_batch}, {accumulation}
    # a trainer that builds the DeepSpeed config from its flags: each part of the config a change moves, as a flag
    # (the optimizer offload's switch is passed to offload and dropped not to)
    stage: str | None = None  # {stage}
    optimizer_offload: str | None = None
    # its own sequence parallelism ({degree}): set there, not as DeepSpeed's sequence_parallel_size in the config
    # (a flag of OpenRLHF's built config; ms-swift's and axolotl's own groups)
    sequence_parallel: str | None = None
    tensor_parallel: str | None = None  # {degree}

    @property
    def builds_config(self) -> bool:
        return self.stage is not None


_TRAINER_BATCH = "per_device_train_batch_size {micro_batch} and gradient_accumulation_steps {accumulation}"

TRAINER_SETTINGS: dict[TrainerFamily, TrainerSettings] = {
    TrainerFamily.TRL: TrainerSettings(
        "TRL", "in the TRL config", "gradient_checkpointing: true in the TRL config (--gradient_checkpointing)",
        "gradient_checkpointing: false in the TRL config", _TRAINER_BATCH + " in the TRL config"),
    TrainerFamily.LLAMA_FACTORY: TrainerSettings(
        "LLaMA-Factory", "in the LLaMA-Factory YAML",
        "remove disable_gradient_checkpointing: true from the LLaMA-Factory YAML (it checkpoints by default)",
        "disable_gradient_checkpointing: true in the LLaMA-Factory YAML",
        _TRAINER_BATCH + " in the LLaMA-Factory YAML"),
    TrainerFamily.AXOLOTL: TrainerSettings(
        "axolotl", "in the axolotl YAML", "gradient_checkpointing: true in the axolotl YAML",
        "gradient_checkpointing: false in the axolotl YAML",
        "micro_batch_size {micro_batch} and gradient_accumulation_steps {accumulation} in the axolotl YAML",
        sequence_parallel="context_parallel_size: {degree} in the axolotl YAML (sequence_parallel_degree in "
                          "releases before the rename)"),
    TrainerFamily.MS_SWIFT: TrainerSettings(
        "ms-swift", "on the swift command line", "--gradient_checkpointing true (ms-swift's default)",
        "--gradient_checkpointing false",
        "--per_device_train_batch_size {micro_batch} --gradient_accumulation_steps {accumulation}",
        sequence_parallel="--sequence_parallel_size {degree}"),
    TrainerFamily.OPENRLHF: TrainerSettings(
        "OpenRLHF", "on the OpenRLHF command line",
        "--gradient_checkpointing (--actor.gradient_checkpointing_enable from 0.10)",
        "drop --gradient_checkpointing from the OpenRLHF command",
        # the accumulation follows from --train_batch_size, which keeps the global batch (get_ds_train_config)
        "--micro_train_batch_size {micro_batch}",
        stage="--zero_stage {stage}", optimizer_offload="--adam_offload", sequence_parallel="--ring_attn_size {degree}",
        tensor_parallel="--ds_tensor_parallel_size {degree}"),
}


# What the flags of a trainer that builds its DeepSpeed config can set: OpenRLHF's get_ds_train_config calls
# get_train_ds_config(offload=False, adam_offload=--adam_offload) (openrlhf/utils/deepspeed/deepspeed.py @ v0.8.5,
# v0.11.0): the trained models' parameters are never offloaded, the optimizer only to the CPU.
SETTABLE: dict[TrainerFamily, tuple[frozenset[Device], frozenset[Device]]] = {
    TrainerFamily.OPENRLHF: (frozenset({Device.NONE, Device.CPU}), frozenset({Device.NONE})),
}


def can_set(trainer: TrainerFamily | None, option: Option) -> bool:
    """Whether the trainer's own flags can give ``option`` (SETTABLE); any option where the config is the user's."""
    settable = SETTABLE.get(trainer) if trainer is not None else None
    return settable is None or (option.offload_optimizer in settable[0] and option.offload_param in settable[1])


def builds_config(trainer: TrainerFamily | None) -> bool:
    """Whether the trainer builds the DeepSpeed config from its flags: then only what they set is a fix (its
    bucket sizes, for one, are DeepSpeed's defaults: OpenRLHF writes them "auto")."""
    settings = settings_of(trainer)
    return settings is not None and settings.builds_config


def settings_of(trainer: TrainerFamily | None) -> TrainerSettings | None:
    """The trainer's row; None for a run whose trainer is not known (the generic words apply)."""
    return TRAINER_SETTINGS.get(trainer) if trainer is not None else None


# Trainers that cannot split a sequence over GPUs at all: LLaMA-Factory's trainers (the ``stage:`` YAMLs,
# src/llamafactory/train/ @ v0.9.4) set up no Ulysses and pass no accelerate ParallelismConfig, so DeepSpeed's
# sequence_parallel_size would split nothing (its sequence parallelism is in the separate v1 trainer only).
NO_SEQUENCE_PARALLEL = frozenset({TrainerFamily.LLAMA_FACTORY})


def offers_sequence_parallel(trainer: TrainerFamily | None) -> bool:
    """Whether a Ulysses change can be made for the trainer's runs (NO_SEQUENCE_PARALLEL)."""
    return trainer not in NO_SEQUENCE_PARALLEL


def own_sequence_parallel(trainer: TrainerFamily | None) -> bool:
    """Whether the trainer splits sequences with a setting of its own (TrainerSettings.sequence_parallel): a Ulysses
    change is made there, and DeepSpeed's sequence_parallel_size is not written into the config."""
    settings = settings_of(trainer)
    return settings is not None and settings.sequence_parallel is not None
