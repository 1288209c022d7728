"""A candidate change of a run, worded from what it changes: its description, its cost and its actions.

A change is compared part by part with the configured run (stage, each offload device, checkpointing,
micro batch, Ulysses and AutoTP degrees, bucket sizes, the cluster), and every sentence about it is
built from those parts: the cost sentence of a move to ZeRO-1 is ZeRO-1's, an optimizer offload is never
worded as a parameter offload. What the change needs outside the DeepSpeed config (the training script,
an NVMe mount, more GPUs) is an :class:`Action`; the fix's merge patch covers only the config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zeroadvisor.advisor.trainer_settings import TrainerSettings, settings_of
from zeroadvisor.jsontypes import JSONValue
from zeroadvisor.lint.findings import Action, ActionKind
from zeroadvisor.memory.options import Option
from zeroadvisor.model.spec import Checkpointing, TrainingShape
from zeroadvisor.units import DEFAULT_UNIT, format_bytes
from zeroadvisor.vocab import Device

SP_KEY = "sequence_parallel_size"
TP_KEY = "tensor_parallel"
# What DeepSpeed needs but a fix cannot know: where the local NVMe drive is mounted. It is written (DeepSpeed
# asserts on an NVMe offload without nvme_path, offload_config.py) and an action says to point it at the mount.
NVME_PATH_PLACEHOLDER = "/local_nvme"
CHECKPOINTING_LEVELS = tuple(Checkpointing)  # weakest first: the search only strengthens the configured level

# The cost of each part of a change, in words (ZeRO paper §7 for the volumes; field reports DS#1635, DS#6834).
COSTS = {
    "nothing": "none beyond the other fixes reported for this file",
    "buckets": "smaller communication buckets overlap slightly less with compute",
    "stage-down-from-3": "every GPU holds the whole parameters (ZeRO-3 partitions them), for 1x "
                         "instead of 1.5x the data-parallel volume per step (no parameter all-gathers in forward "
                         "and backward)",
    "stage-among-0-2": "the same communication volume: ZeRO-0, 1 and 2 all move 2Ψ per step (ZeRO paper §7)",
    "stage-up-to-3": "ZeRO-3 moves 1.5x the data-parallel volume per step: parameters are all-gathered in "
                     "forward and backward (ZeRO paper §7)",
    "offload_optimizer:none": "none for the optimizer: its step stays on the GPU, nothing crosses PCIe for it",
    "offload_optimizer:cpu": "the optimizer step runs on the CPU and gradients and updated parameters cross "
                             "PCIe every step (DS#1635)",
    "offload_optimizer:nvme": "the optimizer state streams between NVMe and host RAM every step and the step "
                              "runs on the CPU (slower than CPU offload: NVMe bandwidth binds)",
    "offload_param:none": "none for the parameters: they stay on the GPU",
    "offload_param:cpu": "parameters cross PCIe in every forward and backward (DS#6834)",
    "offload_param:nvme": "parameters stream from NVMe in every forward and backward (the slowest option)",
    "checkpointing:selective": "recomputes the attention core in the backward pass (a few % more compute)",
    "checkpointing:full": "recomputes activations in the backward pass (full: about +33% compute)",
    "checkpointing:none": "no recomputation (faster; more activation memory)",
    "micro-batch": "the same global batch in more, smaller steps (lower GPU efficiency)",
    "sequence-parallel": "all-to-alls of q, k, v and the attention output in every attention layer, 4Nh/P per "
                         "link: O(N/P) per GPU, constant when the sequence and the GPUs grow together "
                         "(DeepSpeed-Ulysses, arXiv:2309.14509)",
    "tensor-parallel": "AutoTP all-reduces the activations of every sharded layer: 2 all-reduces per layer in "
                       "forward and 2 in backward over the intra-node link (Megatron-LM, arXiv:1909.08053 §3), so "
                       "the degree stays within a node; the data-parallel degree shrinks by the tensor degree",
    "cluster": "more GPUs (or host RAM, NVMe) to provision",
}

# The training-script side of each part that the config alone does not do.
CHECKPOINTING_ACTION = ("enable {level} activation checkpointing in the training script: "
                        "model.gradient_checkpointing_enable() (HF Trainer: gradient_checkpointing=True){selective}; "
                        "not a ds_config setting: DeepSpeed's activation_checkpointing section configures only "
                        "deepspeed.checkpointing.checkpoint, which Hugging Face models do not call")
SELECTIVE_NOTE = (", checkpointing only the attention core (e.g. Megatron's --recompute-granularity selective); "
                  "without a selective mode, full checkpointing")
NO_CHECKPOINTING_ACTION = "turn activation checkpointing off in the training script"
# the same, where the trainer that runs the job is known (advisor/trainer_settings.py)
TRAINER_CHECKPOINTING_ACTION = "enable {level} activation checkpointing: {setting}{selective}"
TRAINER_NO_CHECKPOINTING_ACTION = "turn activation checkpointing off: {setting}"
TRAINER_MICRO_BATCH_ACTION = ("set {setting}: the config's \"auto\" batch keys take them, and the global batch "
                              "stays the same")
FLAGS_ACTION = "{name} builds its DeepSpeed config from its flags, not from this file: {flags}"
FLAGS_DROPPED = "drop {flags}"
SP_ACTION = ("wrap the attention for Ulysses in the training script: deepspeed.sequence.layer.DistributedAttention, "
             "or with the HF Trainer accelerate's ParallelismConfig(sp_backend=\"deepspeed\", sp_size={degree}) "
             "(DeepSpeed's UlyssesSPAttentionHF); sequence_parallel_size alone splits nothing")
# the same, where the trainer splits sequences with a setting of its own (advisor/trainer_settings.py)
TRAINER_SP_ACTION = ("set {setting}: {name}'s own sequence parallelism splits each sequence over {degree} GPUs "
                     "(not DeepSpeed's sequence_parallel_size, which the config does not get)")
# deepspeed/__init__.py initialize reads tensor_parallel.autotp_size (set_autotp_mode(training=True)), but the
# model is sharded only on DeepSpeed's AutoTP training path: transformers' deepspeed_init (integrations/
# deepspeed.py) calls deepspeed.tp_model_init when autotp_size > 1, and accelerate's Accelerator reads the key.
TP_ACTION = ("run the training script on DeepSpeed's AutoTP training path: deepspeed.initialize with this config "
             "(or deepspeed.tp_model_init first), or the HF Trainer / accelerate, which call deepspeed.tp_model_init "
             "when tensor_parallel.autotp_size > 1; each group of {degree} GPUs shares one micro batch, so the "
             "distinct samples per step become train_batch_size / {degree}")
# The HF Trainer (integrations/deepspeed.py trainer_config_process) fills "auto" batch keys from its arguments, so
# a micro batch change of such a config is made there, not in the file.
TRAINER_BATCH_ACTION = ("pass per_device_train_batch_size={micro_batch} and gradient_accumulation_steps="
                        "{accumulation} to the Trainer (TrainingArguments): the config's \"auto\" batch keys take "
                        "them, and the global batch stays the same")
NVME_ACTION = ("point nvme_path at a local NVMe mount with {space} free per node (the fix writes the placeholder "
               "\"{path}\")")


@dataclass(frozen=True, slots=True)
class ClusterChange:
    """A larger cluster: more GPUs, or more host RAM / NVMe per node (None: as given)."""

    gpus: int | None = None
    gpus_per_node: int | None = None
    cpu_memory: int | None = None
    nvme: int | None = None


@dataclass(frozen=True, slots=True)
class Change:
    """One candidate: the option, shape, micro batch and layout to run with, compared with the configured run."""

    option: Option
    shape: TrainingShape
    micro_batch: int  # the micro batch it runs with
    accumulation: int | None  # the gradient accumulation written with it (None: not written)
    was_option: Option
    was_shape: TrainingShape
    was_micro_batch: int
    # Merge patch of the layout keys (sequence_parallel_size, tensor_parallel), estimated with it.
    config_patch: dict[str, Any] | None = None
    buckets: int | None = None  # reduce/allgather bucket elements written with it
    cluster: ClusterChange | None = None
    nvme_path: str | None = None  # the nvme_path the config will hold (NVMe offload)
    nvme_space: int | None = None  # NVMe per node the option needs
    # the micro batch is the integration's argument (the config's batch keys are "auto"): changed there, not here
    trainer_batch: bool = False
    # what the fix writes besides the change, so its words name all of it (set where it is written: advisor/
    # written.py outcome): the option DeepSpeed runs the config as given with (a lint fix can change it, a
    # misspelt zero_optimization runs ZeRO-0), and what the lint fixes write, (verb, key) pairs
    # (advisor/written.py lint_keys)
    written_option: Option | None = None
    lint_keys: tuple[tuple[str, str], ...] = ()

    @property
    def trainer(self) -> TrainerSettings | None:
        """The settings of the trainer that runs the job, where it is known (advisor/trainer_settings.py)."""
        return settings_of(self.shape.method.trainer)

    @property
    def sequence_parallel(self) -> int | None:
        return (self.config_patch or {}).get(SP_KEY)

    @property
    def tensor_parallel(self) -> int | None:
        block = (self.config_patch or {}).get(TP_KEY)
        return block.get("autotp_size") if isinstance(block, dict) else None

    def _offload_parts(self) -> list[str]:
        """One part per offload device that differs from the configured run's, "offload_param:cpu"."""
        return [f"{which}:{getattr(self.option, which)}" for which in ("offload_optimizer", "offload_param")
                if getattr(self.option, which) != getattr(self.was_option, which)]

    @property
    def parts(self) -> list[str]:
        """What differs from the configured run, one COSTS key each (bucket tuning aside)."""
        out: list[str] = []
        if self.option.stage != self.was_option.stage:
            if self.was_option.stage == 3:
                out.append("stage-down-from-3")
            elif self.option.stage == 3:
                out.append("stage-up-to-3")
            else:
                out.append("stage-among-0-2")
        out += self._offload_parts()
        if self.shape.activation_checkpointing != self.was_shape.activation_checkpointing:
            out.append(f"checkpointing:{self.shape.activation_checkpointing}")
        if self.micro_batch != self.was_micro_batch:
            out.append("micro-batch")
        if self.sequence_parallel:
            out.append("sequence-parallel")
        if self.tensor_parallel:
            out.append("tensor-parallel")
        if self.cluster is not None:
            out.append("cluster")
        return out

    @property
    def changes(self) -> int:
        """How many things change (ties in cost go to fewer)."""
        return len(self.parts)

    @property
    def description(self) -> str:
        given = self.written_option if self.written_option is not None else self.was_option
        trainer = self.trainer
        words = [self.option.words] if self.option != self.was_option or self.option != given else []
        if self.micro_batch != self.was_micro_batch:
            where = f" ({trainer.where})" if trainer is not None and (self.trainer_batch or trainer.builds_config) \
                else " (in the Trainer's arguments)" if self.trainer_batch else ""
            words.append(f"micro batch {self.micro_batch}"
                         + (f" with gradient accumulation {self.accumulation}" if self.accumulation else "") + where)
        if self.shape.activation_checkpointing != self.was_shape.activation_checkpointing:
            where = trainer.where if trainer is not None else "in the training script"
            words.append(f"{self.shape.activation_checkpointing} activation checkpointing ({where})")
        if self.sequence_parallel:
            where = (trainer.sequence_parallel.format(degree=self.sequence_parallel)
                     if trainer is not None and trainer.sequence_parallel else
                     f"sequence_parallel_size {self.sequence_parallel} in ds_config")
            words.append(f"Ulysses sequence parallel {self.sequence_parallel} ({where})")
        if self.tensor_parallel:
            words.append(f"AutoTP tensor parallel {self.tensor_parallel} (tensor_parallel.autotp_size "
                         f"{self.tensor_parallel} in ds_config)")
        if self.buckets is not None:
            words.append(f"reduce/allgather buckets of {self.buckets:,} elements")
        if self.cluster is not None:
            words.append(cluster_words(self.cluster))
        if not words:
            words.append(f"the configured {self.option.words}")
        if self.lint_keys:
            words.append(f"with this file's lint fixes ({lint_words(self.lint_keys)})")
        elif not self.parts and self.buckets is None:
            words.append("with the other fixes reported for this file")
        return ", ".join(words)

    @property
    def cost(self) -> str:
        keys = self.parts or ["nothing"]
        if self.buckets is not None:
            keys = [*self.parts, "buckets"]
        return "; ".join(COSTS[key] for key in keys)

    def actions(self, unit: str = DEFAULT_UNIT) -> list[Action]:
        out: list[Action] = []
        trainer = self.trainer
        level = self.shape.activation_checkpointing
        if level != self.was_shape.activation_checkpointing:
            selective = SELECTIVE_NOTE if level == Checkpointing.SELECTIVE else ""
            if trainer is not None:
                text = (TRAINER_NO_CHECKPOINTING_ACTION.format(setting=trainer.checkpointing_off)
                        if level == Checkpointing.NONE else
                        TRAINER_CHECKPOINTING_ACTION.format(level=level, setting=trainer.checkpointing_on,
                                                            selective=selective))
            else:
                text = NO_CHECKPOINTING_ACTION if level == Checkpointing.NONE else \
                    CHECKPOINTING_ACTION.format(level=level, selective=selective)
            out.append(Action(ActionKind.GRADIENT_CHECKPOINTING, text, {"level": str(level)}))
        if self.trainer_batch and not (trainer is not None and trainer.builds_config):
            text = (TRAINER_MICRO_BATCH_ACTION.format(setting=trainer.micro_batch.format(
                micro_batch=self.micro_batch, accumulation=self.accumulation)) if trainer is not None else
                TRAINER_BATCH_ACTION.format(micro_batch=self.micro_batch, accumulation=self.accumulation))
            out.append(Action(ActionKind.TRAINER_BATCH, text,
                              {"per_device_train_batch_size": self.micro_batch,
                               "gradient_accumulation_steps": self.accumulation}))
        if trainer is not None and trainer.builds_config:
            flags, dropped = self._flags(trainer)
            if flags or dropped:
                words = [*flags, *([FLAGS_DROPPED.format(flags=" ".join(dropped))] if dropped else [])]
                out.append(Action(ActionKind.TRAINER_FLAGS, FLAGS_ACTION.format(name=trainer.name,
                                                                               flags="; ".join(words)),
                                  {"flags": list[JSONValue](flags), "drop": list[JSONValue](dropped)}))
        if self.nvme_path == NVME_PATH_PLACEHOLDER:
            space = format_bytes(self.nvme_space or 0, unit)
            out.append(Action(ActionKind.NVME_PATH, NVME_ACTION.format(space=space, path=NVME_PATH_PLACEHOLDER),
                              {"path": NVME_PATH_PLACEHOLDER, "nvme_per_node": self.nvme_space}))
        flagged = trainer is not None and trainer.builds_config  # its layout is among the trainer's flags
        if self.sequence_parallel and not flagged:
            own = trainer.sequence_parallel if trainer is not None else None
            text = (TRAINER_SP_ACTION.format(setting=own.format(degree=self.sequence_parallel), name=trainer.name,
                                             degree=self.sequence_parallel)
                    if own is not None and trainer is not None else SP_ACTION.format(degree=self.sequence_parallel))
            out.append(Action(ActionKind.SEQUENCE_PARALLEL, text, {"degree": self.sequence_parallel}))
        if self.tensor_parallel and not flagged:
            out.append(Action(ActionKind.TENSOR_PARALLEL, TP_ACTION.format(degree=self.tensor_parallel),
                              {"degree": self.tensor_parallel}))
        if self.cluster is not None:
            values = {k: v for k, v in (("gpus", self.cluster.gpus), ("gpus_per_node", self.cluster.gpus_per_node),
                                        ("cpu_memory", self.cluster.cpu_memory), ("nvme", self.cluster.nvme))
                      if v is not None}
            out.append(Action(ActionKind.CLUSTER, cluster_words(self.cluster, unit), values))
        return out

    def _flags(self, trainer: TrainerSettings) -> tuple[list[str], list[str]]:
        """The trainer's flags to pass and to drop for each part of the config this change moves (a trainer that
        builds its DeepSpeed config from them): the stage, the optimizer offload, the micro batch, the sequence and
        tensor degrees."""
        flags: list[str] = []
        dropped: list[str] = []
        if self.option.stage != self.was_option.stage and trainer.stage:
            flags.append(trainer.stage.format(stage=self.option.stage))
        if self.option.offload_optimizer != self.was_option.offload_optimizer and trainer.optimizer_offload:
            (flags if self.option.offload_optimizer != Device.NONE else dropped).append(trainer.optimizer_offload)
        if self.micro_batch != self.was_micro_batch:
            flags.append(trainer.micro_batch.format(micro_batch=self.micro_batch, accumulation=self.accumulation))
        if self.sequence_parallel and trainer.sequence_parallel:
            flags.append(trainer.sequence_parallel.format(degree=self.sequence_parallel))
        if self.tensor_parallel and trainer.tensor_parallel:
            flags.append(trainer.tensor_parallel.format(degree=self.tensor_parallel))
        return flags, dropped

    def in_training_script_only(self) -> bool:
        """Nothing in the config changes: the whole change is an action."""
        return self.parts == [f"checkpointing:{self.shape.activation_checkpointing}"] and self.buckets is None


def lint_words(keys: tuple[tuple[str, str], ...]) -> str:
    """What lint fixes write, in words: "renames zero_optimisation to zero_optimization; sets bf16.enabled"."""
    verbs = dict.fromkeys(verb for verb, _ in keys)
    return "; ".join(f"{verb} {', '.join(key for v, key in keys if v == verb)}" for verb in verbs)


def cluster_words(cluster: ClusterChange, unit: str = DEFAULT_UNIT) -> str:
    words = []
    if cluster.gpus is not None:
        per_node = cluster.gpus_per_node or cluster.gpus
        nodes = -(-cluster.gpus // per_node)
        words.append(f"run on {cluster.gpus} GPUs" + (f" ({nodes} nodes of {per_node})" if nodes > 1 else ""))
    if cluster.cpu_memory is not None:
        words.append(f"give {format_bytes(cluster.cpu_memory, unit)} of host RAM per node")
    if cluster.nvme is not None:
        words.append(f"give {format_bytes(cluster.nvme, unit)} of NVMe per node")
    return " and ".join(words)


def actions_sentence(actions: list[Action]) -> str:
    """The actions as one clause of a finding's message (every format shows the message)."""
    if not actions:
        return ""
    return "; outside the config: " + "; ".join(f"({i}) {a.text}" for i, a in enumerate(actions, 1))
