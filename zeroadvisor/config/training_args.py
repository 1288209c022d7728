"""The Hugging Face Trainer's arguments: what the DeepSpeed integration fills "auto" from, and the training shape.

Three spellings of the same run are read into one :class:`TrainingArgs`:

* ``transformers``: ``TrainingArguments`` fields as ``TrainingArguments.to_json_string()`` writes them
  (JSON or YAML), or as a script's ``--flag value`` words (config/launch.py);
* ``llama-factory``: LLaMA-Factory's training YAML, which HfArgumentParser splits into ModelArguments
  (``model_name_or_path``, ``disable_gradient_checkpointing``), DataArguments (``cutoff_len``, default 2048:
  src/llamafactory/hparams/data_args.py) and its ``Seq2SeqTrainingArguments`` subclass (every
  TrainingArguments field under its own name); gradient checkpointing is ON unless disabled
  (src/llamafactory/model/model_utils/checkpointing.py ``if not model_args.disable_gradient_checkpointing``);
* ``axolotl``: axolotl's YAML (src/axolotl/utils/schemas/config.py and training.py): ``micro_batch_size``
  (default 1) for per_device_train_batch_size, ``sequence_len`` (default 512), ``base_model``,
  ``bf16`` (default "auto": bf16 where the GPU supports it, utils/config normalize_config), ``num_epochs``;
  ``gradient_accumulation_steps`` defaults to ``batch_size // micro_batch_size`` (normalize_config).

Only the fields the integration and the estimate read are kept (:data:`DEFAULTS`); the rest of a file is
ignored. Every value says where it came from (``origin``) so messages can name the flag or key.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, TypeAlias, overload

from zeroadvisor.config.limits import MAX_DIMENSION, MAX_GPUS
from zeroadvisor.config.trainer_errors import (
    TrainerInputError,
    as_bool,
    shown,
)
from zeroadvisor.jsontypes import JSONObject, JSONValue
from zeroadvisor.vocab import ActivationOffload

if TYPE_CHECKING:
    from zeroadvisor.config.method_reader import MethodReading
    from zeroadvisor.config.peft_reader import PeftReading
    from zeroadvisor.config.vision_freeze import VisionFreeze

# Where a key of the arguments came from, for messages: ``per_device_train_batch_size in train.yaml``.
Origin = Callable[[str], str]
# A TrainingArguments field's value as HfArgumentParser types it (None: a field whose default is unset).
ArgValue: TypeAlias = bool | int | float | str

# TrainingArguments (transformers 5.24 training_args.py) defaults of the fields
# HfTrainerDeepSpeedConfig.trainer_config_process/_finalize and the estimate read; the oracle test
# (tests/oracle/test_hf_fill_oracle.py) compares them with the dataclass.
DEFAULTS: dict[str, ArgValue | None] = {
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "max_grad_norm": 1.0,
    "learning_rate": 5e-5,
    "adam_beta1": 0.9,
    "adam_beta2": 0.999,
    "adam_epsilon": 1e-8,
    "weight_decay": 0.0,
    "fp16": False,
    "bf16": False,
    "fp16_full_eval": False,
    "bf16_full_eval": False,
    "save_on_each_node": False,
    "warmup_steps": 0,
    "max_steps": -1,
    "auto_find_batch_size": False,
    "gradient_checkpointing": None,  # deprecated alias of activation_checkpointing
    "activation_checkpointing": None,
    # the client optimizer (memory/step_temporaries.py); 5.24's default with torch >= 2.8. Only a given value is
    # used: the estimate's default is the older adamw_torch (model/spec.py DEFAULT_CLIENT_OPTIMIZER)
    "optim": "adamw_torch_fused",
    # the Liger kernel (memory/liger.py): Trainer.__init__ applies it to the model where this is true (4.45+)
    "use_liger_kernel": False,
    # the data-loader worker processes each rank forks (memory/host.py: host RAM per rank)
    "dataloader_num_workers": 0,
}
# The fields by the type they hold, so that ``TrainingArgs.get`` of a named field is typed; the bool fields are
# not (axolotl's default bf16 is "auto", an unset gradient_checkpointing None). tests/test_training_args.py checks
# these against TYPES.
IntField = Literal["per_device_train_batch_size", "gradient_accumulation_steps", "max_steps",
                   "dataloader_num_workers"]
NumberField = Literal["max_grad_norm", "learning_rate", "adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay",
                      "warmup_steps"]
TextField = Literal["optim"]
# The type HfArgumentParser converts each field's command-line text to (bool: string_to_bool).
TYPES: dict[str, type] = {name: (str if isinstance(value, str) else
                                 float if isinstance(value, float) or name == "warmup_steps" else
                                 bool if value is None or isinstance(value, bool) else int)
                          for name, value in DEFAULTS.items()}


# Keys that give the sequence length, by the project that reads them (the first one present wins).
SEQUENCE_KEYS: dict[str, str] = {
    "cutoff_len": "LLaMA-Factory DataArguments",
    "sequence_len": "axolotl",
    "max_seq_length": "TRL SFTConfig / transformers examples",
    "max_length": "TRL SFTConfig",
    "model_max_length": "FastChat / Stanford Alpaca train.py",
    "block_size": "transformers examples run_clm.py",
}
# How batches are padded (model/spec.py Padding), from the scripts' own arguments: the transformers example
# scripts (run_translation.py, run_summarization.py, run_glue.py, run_ner.py, run_qa.py) pad every batch to the
# maximum only with --pad_to_max_length (default False: DataCollatorForSeq2Seq / DataCollatorWithPadding, whose
# padding=True pads each batch to its longest sample); run_clm.py's group_texts cuts the concatenated texts into
# full blocks of block_size, so every batch is at the full length.
PAD_TO_MAX_KEY = "pad_to_max_length"
FULL_BLOCK_KEYS = ("block_size",)
# The trainers' switches that fill every row to the maximum length, by project: samples packed into blocks of it
# (TRL SFTConfig.packing; LLaMA-Factory DataArguments.packing / neat_packing; axolotl sample_packing; ms-swift
# --packing) or padded to it (axolotl pad_to_sequence_len). Set true, the length is the batches' own, not a maximum.
PACKING_KEYS: dict[str, tuple[str, ...]] = {
    "transformers": ("packing",), "llama-factory": ("packing", "neat_packing"),
    "axolotl": ("sample_packing", "pad_to_sequence_len"), "ms-swift": ("packing",),
}
# axolotl's liger plugin keys for the kernels besides the fused linear cross-entropy, which the one
# liger_kernel input also switches on (memory/liger.py)
LIGER_LAYER_KEYS = ("liger_rms_norm", "liger_glu_activation")
MODEL_KEYS = ("model_name_or_path", "base_model")
# The keys that choose the attention kernel, by project: a named kernel (the values that mean eager attention, whose
# s x s scores are kept: memory/activations.py; any other names a fused kernel: SDPA, FlashAttention, flex), or a
# switch (true: that kernel, fused unless it is eager). None of them: the file does not say.
#  - TRL's ModelConfig.attn_implementation (trl/trainer/model_config.py), handed to from_pretrained;
#  - LLaMA-Factory ModelArguments.flash_attn: auto | disabled | sdpa | fa2 | fa3 (model/model_utils/attention.py
#    configure_attn_implementation: "disabled" -> "eager", @ v0.9.3);
#  - axolotl's switches (utils/schemas/config.py: flash_attention, sdp_attention, flex_attention,
#    xformers_attention, eager_attention @ v0.18.0; loaders/model.py sets attn_implementation from them);
#  - ms-swift --attn_impl (flash_attn | sdpa | eager | ...);
#  - OpenRLHF --flash_attn (store_true, to v0.8.9: without it models/actor.py loads "eager") and
#    --attn_implementation (from v0.8.10, default flash_attention_2; --ds.attn_implementation from v0.10).
ATTENTION_NAMES: dict[str, tuple[str, frozenset[str]]] = {
    "transformers": ("attn_implementation", frozenset({"eager"})),
    "llama-factory": ("flash_attn", frozenset({"disabled"})),
    "ms-swift": ("attn_impl", frozenset({"eager"})),
    "openrlhf": ("attn_implementation", frozenset({"eager"})),
}
ATTENTION_SWITCHES: dict[str, dict[str, bool]] = {
    "axolotl": {"flash_attention": True, "sdp_attention": True, "flex_attention": True, "xformers_attention": True,
                "eager_attention": False},
    "openrlhf": {"flash_attn": True},
}
# The sequence-parallel degree a trainer's own flag gives, by project: ms-swift's Ulysses (--sequence_parallel_size,
# swift/trainers/sequence_parallel: tokens split over the group, attention heads all-to-all; with
# SEQUENCE_PARALLEL_IMPL=ring_attention its ring) and OpenRLHF's ring attention (--ring_attn_size, --ds.ring_attn_size
# at 0.10+: openrlhf/utils/deepspeed/deepspeed.py setup_ring_attn, each sequence split over the ring group) and
# axolotl's ring-flash-attn context parallelism (context_parallel_size, which replaced sequence_parallel_degree:
# utils/schemas/validation.py check_context_parallel_size @ v0.18.0; sequence_parallel_degree from v0.8.0). Each
# keeps DeepSpeed's partitioning over every rank; their exchange buffers are costed as Ulysses' (memory/parallel.py).
# The first key present gives it.
SEQUENCE_PARALLEL_KEYS: dict[str, tuple[str, ...]] = {
    "ms-swift": ("sequence_parallel_size",), "openrlhf": ("ring_attn_size",),
    "axolotl": ("context_parallel_size", "sequence_parallel_degree")}
ATTENTION_KEYS = frozenset({*(key for key, _ in ATTENTION_NAMES.values()),
                            *(key for keys in ATTENTION_SWITCHES.values() for key in keys)})
# axolotl keys whose "auto" its normalize_config resolves on the GPU (utils/config: bf16 "auto" -> bf16 where
# supported; tf32 "auto" likewise), not a bool of the Trainer's
AXOLOTL_AUTO = frozenset({"bf16", "tf32"})
DEEPSPEED_KEY = "deepspeed"
# Activation offloading (memory/activation_offload.py), as each project's file turns it on:
#  - transformers 5.17+ TrainingArguments.gradient_checkpointing_kwargs {"offload": true} (trainer.py pops it and
#    modeling_utils.py _activation_checkpointing_enable wraps each checkpoint in save_on_cpu), from 5.23 named
#    activation_checkpointing_kwargs (the old name its deprecated alias, the new one read first); TRL, ms-swift and
#    axolotl hand the field to the Trainer as it is;
#  - TRL's activation_offloading (SFTConfig 0.18+, RewardConfig 0.24+, DPOConfig 0.29+, KTOConfig 1.8+):
#    OffloadActivations around training_step;
#  - axolotl's activation_offloading (utils/schemas/config.py @ v0.18.0): true/legacy/disk TRL's offloader,
#    hidden_states its own; gradient_checkpointing: offload turns on activation_offloading: true
#    (validation.py check_gradient_checkpointing_w_offload). With an adapter its TRL offloader replaces the
#    recompute (loaders/model.py _apply_activation_checkpointing wraps only full fine-tunes);
#  - LLaMA-Factory's use_unsloth_gc (model/model_utils/checkpointing.py: unsloth's offloaded checkpoint, each
#    layer's input copied to the host).
# axolotl's Cut Cross-Entropy (memory/cut_cross_entropy.py): the plugin listed in ``plugins`` turns it on, its
# ``cut_cross_entropy`` defaulting to true (integrations/cut_cross_entropy/args.py @ v0.18.0; from v0.6.0)
CCE_PLUGIN = "CutCrossEntropyPlugin"
CCE_KEY = "cut_cross_entropy"
OFFLOAD_KWARGS_KEYS = ("activation_checkpointing_kwargs", "gradient_checkpointing_kwargs")
OFFLOAD_KWARGS_PROJECTS = ("transformers", "ms-swift", "axolotl")
AXOLOTL_OFFLOADERS = {"hidden_states": ActivationOffload.HIDDEN_STATES}  # any other true value: TRL's
AXOLOTL_OFFLOAD_CHECKPOINTING = ("offload", "offload_disk")  # gradient_checkpointing's offloading values

# Per project: its own key -> the TrainingArguments field it sets.
RENAMES: dict[str, dict[str, str]] = {
    "transformers": {},
    # ModelArguments.enable_liger_kernel: model/model_utils/liger_kernel.py apply_liger_kernel patches the model
    "llama-factory": {"enable_liger_kernel": "use_liger_kernel"},
    # the liger plugin (axolotl.integrations.liger): its fused linear cross-entropy switch
    "axolotl": {"micro_batch_size": "per_device_train_batch_size", "num_epochs": "num_train_epochs",
                "warmup_ratio": "warmup_steps", "liger_fused_linear_cross_entropy": "use_liger_kernel",
                # axolotl's optimizer is the Trainer's optim (core/builders: training_arguments_kwargs["optim"])
                "optimizer": "optim"},
    # a launch command's flags only (config/launch.py): ms-swift's are TrainingArguments' own names; OpenRLHF's
    # --micro_train_batch_size is the per-GPU batch (openrlhf/cli/train_*.py, its strategy's micro batch)
    "ms-swift": {},
    "openrlhf": {"micro_train_batch_size": "per_device_train_batch_size"},
}
# Per project: defaults that differ from TrainingArguments' (the value the project passes when the key is absent).
PROJECT_DEFAULTS: dict[str, dict[str, ArgValue]] = {
    "transformers": {},
    "llama-factory": {"cutoff_len": 2048, "gradient_checkpointing": True},
    "axolotl": {"per_device_train_batch_size": 1, "sequence_len": 512, "bf16": "auto",
                "gradient_checkpointing": False},
    # ms-swift 3 (swift/llm/argument/base_args/..., TrainArgumentsMixin): per_device_train_batch_size 1,
    # gradient_checkpointing True
    "ms-swift": {"per_device_train_batch_size": 1, "gradient_checkpointing": True},
    # OpenRLHF 0.8 openrlhf/cli/train_dpo.py/train_sft.py: --micro_train_batch_size 8 (train_ppo_ray.py: 4), and
    # --gradient_checkpointing a store_true flag
    "openrlhf": {"per_device_train_batch_size": 8, "gradient_checkpointing": False},
}
# Keys only one project writes: how a file's project is recognised.
MARKERS: dict[str, tuple[str, ...]] = {
    "axolotl": ("base_model", "micro_batch_size", "sequence_len", "num_epochs", "adapter", "datasets"),
    "llama-factory": ("cutoff_len", "finetuning_type", "stage", "template", "disable_gradient_checkpointing",
                      "dataset_dir"),
}


@dataclass(frozen=True)
class TrainingArgs:
    """TrainingArguments values as the Trainer would hold them, plus the shape the estimate needs.

    ``values``: the fields given (TrainingArguments names, converted to their types); ``get`` falls back to
    the project's default, then to TrainingArguments'. ``origin``: field -> the key or flag that gave it.
    """

    values: Mapping[str, ArgValue] = field(default_factory=dict)
    origin: Mapping[str, str] = field(default_factory=dict)
    project: str = "transformers"
    sequence_length: int | None = None
    sequence_key: str = ""  # the key that gave sequence_length ("" when none)
    sequence_from: str = ""  # where that key was given (``cutoff_len in train.yaml``, ``--max_seq_length``)
    checkpointing: bool | None = None
    padding: str | None = None  # "max_length" | "longest" (model/spec.py Padding); None: the arguments do not say
    padding_from: str = ""  # where it was read (``--pad_to_max_length``, ``block_size in args.yaml``)
    model: str | None = None
    deepspeed: str | JSONObject | None = None  # the config path (str) or an inline dict, as given
    notes: tuple[str, ...] = ()
    source: str = ""  # the file or "the launch command"
    # what the arguments say about the training method (config/method_reader.py); None: nothing
    method: MethodReading | None = None
    # the LoRA setup the trainer's file says (config/peft_reader.py); None: trained in full or not said
    peft: PeftReading | None = None
    # what the trainer freezes of a vision-language model (config/vision_freeze.py); None: a trainer that freezes
    # nothing on its own
    vision_freeze: VisionFreeze | None = None
    # True: a fused attention kernel, False: eager attention, as the file's ATTENTION_NAMES/ATTENTION_SWITCHES say;
    # None: it does not say
    attention: bool | None = None
    attention_from: str = ""
    sequence_parallel: int | None = None  # the trainer's own sequence-parallel degree (SEQUENCE_PARALLEL_KEYS)
    sequence_parallel_from: str = ""
    # the offloader that holds the checkpointed layer inputs in host memory (OFFLOAD_KWARGS_KEYS and the trainers'
    # own switches); None: the file does not say
    activation_offload: ActivationOffload | None = None
    activation_offload_from: str = ""
    # transformers 5.16+ every_n_layers in the checkpoint arguments (OFFLOAD_KWARGS_KEYS): every n-th layer
    # checkpointed; None: the file does not say
    checkpoint_every: int | None = None
    checkpoint_every_from: str = ""
    # Cut Cross-Entropy computes the supervised loss (axolotl's plugin); None: the file does not say
    cut_cross_entropy: bool | None = None
    cut_cross_entropy_from: str = ""
    # axolotl's TiledMLP (tiled_mlp, tiled_mlp_num_shards); None: the file does not say
    tiled_mlp: bool | None = None
    tiled_mlp_shards: int | None = None
    tiled_mlp_from: str = ""
    # ms-swift's --vit_gradient_checkpointing (a vision tower's checkpointing); None: the file does not say
    vision_checkpointing: bool | None = None
    vision_checkpointing_from: str = ""

    @overload
    def get(self, name: IntField) -> int: ...
    @overload
    def get(self, name: NumberField) -> float: ...
    @overload
    def get(self, name: TextField) -> str: ...
    @overload
    def get(self, name: str) -> ArgValue | None: ...
    def get(self, name: str) -> ArgValue | None:
        if name in self.values:
            return self.values[name]
        return PROJECT_DEFAULTS[self.project].get(name, DEFAULTS.get(name))

    def given(self, name: str) -> bool:
        return name in self.values

    def label(self, name: str) -> str:
        """How the user gave ``name`` (e.g. ``--bf16`` or ``micro_batch_size in train.yaml``), for messages."""
        return self.origin.get(name, f"{name} (default)")


def coerce(value: object) -> TrainingArgs | None:
    """A TrainingArgs from itself or from a mapping of TrainingArguments fields (rule fixtures, the API)."""
    if value is None or isinstance(value, TrainingArgs):
        return value
    if isinstance(value, Mapping):
        return from_mapping(value, "training arguments")
    raise TrainerInputError(f"training arguments must be a mapping, got {type(value).__name__}")


def read_training_args(path: str | os.PathLike[str]) -> TrainingArgs:
    """A TrainingArguments JSON/YAML, a LLaMA-Factory or an axolotl training YAML (--training-args FILE)."""
    name = os.fspath(path)
    return from_mapping(read_mapping(path, name), name)


def read_mapping(path: str | os.PathLike[str], name: str) -> JSONObject:
    """The file's top-level mapping (JSON or YAML by its suffix, under the config reader's limits)."""
    from zeroadvisor.config.reader import read_document
    from zeroadvisor.config.source import ParseError

    try:
        document = read_document(path, name)
    except ParseError as err:
        where = f"{name}:{err.line}:{err.column}" if err.line else name
        raise TrainerInputError(f"{where}: {err.message}") from None
    if not isinstance(document.data, dict):
        raise TrainerInputError(f"{name}: training arguments must be a mapping of names to values")
    return dict(document.data)


def project_of(data: Mapping[str, JSONValue]) -> str:
    """Which project's keys ``data`` uses (axolotl, llama-factory, or plain transformers)."""
    for project, markers in MARKERS.items():
        if any(key in data for key in markers):
            return project
    return "transformers"


def from_mapping(data: Mapping[str, JSONValue], source: str, project: str | None = None,
                 origin_of: Origin | None = None, notes: tuple[str, ...] = ()) -> TrainingArgs:
    """TrainingArgs from ``data`` (keys as the project spells them). ``origin_of(key)`` names where a key
    came from (default: ``key in <source>``)."""
    project = project or project_of(data)
    where = origin_of or (lambda key: f"{key} in {source}")
    renames = RENAMES[project]
    values: dict[str, ArgValue] = {}
    origin: dict[str, str] = {}
    for key, value in data.items():
        name = renames.get(str(key), str(key))
        if name not in DEFAULTS or value is None:
            continue
        if project == "axolotl" and name in AXOLOTL_AUTO and value == "auto":
            continue  # resolved on the GPU by axolotl's normalize_config (_axolotl)
        if project == "axolotl" and name == "gradient_checkpointing" and value in AXOLOTL_OFFLOAD_CHECKPOINTING:
            continue  # checkpointing with the layer inputs offloaded (_with_checkpointing, _with_activation_offload)
        values[name] = _typed(name, value, where(key))
        origin[name] = where(key)
    out_notes = list(notes)
    if project == "axolotl":
        _axolotl(data, values, origin, where, out_notes)
    sequence_length, sequence_key = _sequence(data, project, where)
    sequence_from = where(sequence_key) if sequence_key in data else f"{project}'s default {sequence_key}"
    if sequence_key and sequence_key not in data:
        out_notes.append(f"sequence length {sequence_length}: {project}'s default {sequence_key}")
    model = next((str(data[k]) for k in MODEL_KEYS if isinstance(data.get(k), str) and data[k]), None)
    deepspeed = data.get(DEEPSPEED_KEY)
    if deepspeed is not None and not isinstance(deepspeed, (str, dict)):
        raise TrainerInputError(f"{where(DEEPSPEED_KEY)}: expected a DeepSpeed config path or mapping, got "
                                f"{deepspeed!r}")
    padding, padding_from = _padding(data, sequence_key, where, project)
    from zeroadvisor.config.method_reader import read_mapping as read_method
    from zeroadvisor.config.peft_reader import read_peft
    from zeroadvisor.config.vision_freeze import read_vision_freeze

    method = read_method(data, project, where)
    args = TrainingArgs(values, origin, project, sequence_length, sequence_key, sequence_from if sequence_key else "",
                        None, padding, padding_from, model, deepspeed or None, tuple(out_notes), source,
                        None if method.empty else method, read_peft(data, project, where),
                        read_vision_freeze(data, project, where))
    attention, attention_from = _attention(data, project, where)
    sp_key = next((key for key in SEQUENCE_PARALLEL_KEYS.get(project, ()) if data.get(key) is not None), None)
    sp = _as_int(data[sp_key], where(sp_key)) if sp_key is not None else None
    if sp is not None and not 1 <= sp <= MAX_GPUS:
        raise TrainerInputError(f"{where(sp_key or '')}: expected a sequence-parallel degree of 1 to {MAX_GPUS:,}, "
                                f"got {sp}")
    args = replace(_with_checkpointing(args, data, where), attention=attention, attention_from=attention_from,
                   sequence_parallel=sp, sequence_parallel_from=where(sp_key) if sp is not None and sp_key else "")
    args = _with_tiled_mlp(_with_cut_cross_entropy(_with_activation_offload(args, data, where), data, where), data,
                           where)
    return _with_vision_checkpointing(args, data, where)


# ms-swift's switch for a vision tower's checkpointing (swift/trainers/arguments.py @ 3.x-4.x: None follows
# gradient_checkpointing; mixin.py dynamic_gradient_checkpointing applies it to the tower's blocks)
VISION_CHECKPOINTING_KEY = "vit_gradient_checkpointing"


def _with_vision_checkpointing(args: TrainingArgs, data: Mapping[str, JSONValue], where: Origin) -> TrainingArgs:
    """ms-swift's ``vit_gradient_checkpointing`` where the file says it."""
    if args.project != "ms-swift" or data.get(VISION_CHECKPOINTING_KEY) is None:
        return args
    key = VISION_CHECKPOINTING_KEY
    return replace(args, vision_checkpointing=as_bool(data[key], where(key)), vision_checkpointing_from=where(key))


def _with_tiled_mlp(args: TrainingArgs, data: Mapping[str, JSONValue], where: Origin) -> TrainingArgs:
    """axolotl's ``tiled_mlp`` and ``tiled_mlp_num_shards`` (loaders/patch_manager.py _apply_tiled_mlp @ v0.18.0)."""
    if args.project != "axolotl" or data.get("tiled_mlp") is None:
        return args
    on = as_bool(data["tiled_mlp"], where("tiled_mlp"))
    shards = data.get("tiled_mlp_num_shards")
    count = _as_int(shards, where("tiled_mlp_num_shards")) if shards is not None and not isinstance(shards, bool) \
        else None
    if shards is not None and (count is None or not 1 <= count <= MAX_DIMENSION):
        raise TrainerInputError(f"{where('tiled_mlp_num_shards')}: expected a whole number of at least 1, got "
                                f"{shown(shards)}")
    return replace(args, tiled_mlp=on, tiled_mlp_shards=count if on else None, tiled_mlp_from=where("tiled_mlp"))


def _with_cut_cross_entropy(args: TrainingArgs, data: Mapping[str, JSONValue], where: Origin) -> TrainingArgs:
    """axolotl's Cut Cross-Entropy plugin (CCE_PLUGIN listed in ``plugins``, CCE_KEY not false)."""
    plugins = data.get("plugins")
    if args.project != "axolotl" or not isinstance(plugins, list):
        return args
    listed = next((p for p in plugins if isinstance(p, str) and p.strip().endswith(CCE_PLUGIN)), None)
    if listed is None:
        return args
    if data.get(CCE_KEY) is not None and not as_bool(data[CCE_KEY], where(CCE_KEY)):
        return replace(args, cut_cross_entropy=False, cut_cross_entropy_from=where(CCE_KEY))
    return replace(args, cut_cross_entropy=True, cut_cross_entropy_from=f"{CCE_PLUGIN} in {where('plugins')}")


def _with_activation_offload(args: TrainingArgs, data: Mapping[str, JSONValue], where: Origin) -> TrainingArgs:
    """The offloader the file turns on (OFFLOAD_KWARGS_KEYS and the trainers' switches), and the checkpointing it
    implies; ``args`` as it is where the file says nothing of it."""
    project = args.project
    if project == "llama-factory":
        if data.get("use_unsloth_gc") is not None and as_bool(data["use_unsloth_gc"], where("use_unsloth_gc")):
            return replace(args, activation_offload=ActivationOffload.SAVE_ON_CPU,
                           activation_offload_from=where("use_unsloth_gc"))
        return args
    if project == "axolotl":
        raw = data.get("activation_offloading")
        if data.get("gradient_checkpointing") in AXOLOTL_OFFLOAD_CHECKPOINTING and raw in (None, False):
            raw, key = True, "gradient_checkpointing"
        else:
            key = "activation_offloading"
        on = raw is not None and ((isinstance(raw, str) and raw in ("legacy", "disk", "hidden_states"))
                                  or as_bool(raw, where(key)))
        if on:
            mode = AXOLOTL_OFFLOADERS.get(str(raw), ActivationOffload.TRL)
            # an adapter's offload replaces the recompute; a full fine-tune keeps it (loaders/model.py @ v0.18.0)
            adapter = bool(data.get("adapter")) and mode == ActivationOffload.TRL
            return replace(args, activation_offload=mode, activation_offload_from=where(key),
                           checkpointing=not adapter)
    elif data.get("activation_offloading") is not None and as_bool(data["activation_offloading"],
                                                                   where("activation_offloading")):
        return replace(args, activation_offload=ActivationOffload.TRL,
                       activation_offload_from=where("activation_offloading"))
    given = next((k for k in OFFLOAD_KWARGS_KEYS if data.get(k) is not None), None)
    if project in OFFLOAD_KWARGS_PROJECTS and given is not None:
        kwargs = _checkpointing_kwargs(data[given], where(given))
        args = _with_every(args, kwargs.get("every_n_layers"), f"every_n_layers in {where(given)}")
        offload = kwargs.get("offload")
        if offload is not None and as_bool(offload, f"offload in {where(given)}"):
            return replace(args, activation_offload=ActivationOffload.SAVE_ON_CPU,
                           activation_offload_from=f"offload in {where(given)}")
    return args


def _with_every(args: TrainingArgs, value: JSONValue, where: str) -> TrainingArgs:
    """transformers' every_n_layers (_activation_checkpointing_enable pops it from the checkpoint arguments)."""
    if value is None:
        return args
    every = _as_int(value, where) if not isinstance(value, bool) else 0
    if not 1 <= every <= MAX_DIMENSION:
        raise TrainerInputError(f"{where}: expected a whole number of at least 1, got {shown(value)}")
    return replace(args, checkpoint_every=every, checkpoint_every_from=where)


def _checkpointing_kwargs(value: JSONValue, where: str) -> Mapping[str, JSONValue]:
    """gradient_checkpointing_kwargs as a mapping: a file's own, or the JSON text a command line gives
    (HfArgumentParser reads a dict field's text with json.loads)."""
    if isinstance(value, str):
        import json

        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise TrainerInputError(f"{where}: expected a JSON object, got {shown(value)}") from None
    if not isinstance(value, dict):
        raise TrainerInputError(f"{where}: expected a mapping of checkpoint arguments, got {shown(value)}")
    return value


def _attention(data: Mapping[str, JSONValue], project: str, where: Origin) -> tuple[bool | None, str]:
    """Whether the file asks for a fused attention kernel (True) or eager attention (False), and where it says so
    (ATTENTION_NAMES, ATTENTION_SWITCHES); (None, "") where it does not."""
    named = ATTENTION_NAMES.get(project)
    if named is not None and data.get(named[0]) not in (None, ""):
        key, eager = named
        value = data[key]
        if isinstance(value, (dict, list, bool)):
            raise TrainerInputError(f"{where(key)}: expected an attention implementation name, got {shown(value)}")
        return str(value).strip().lower() not in eager, f"{where(key)} {shown(str(value))}"
    for key, fused in ATTENTION_SWITCHES.get(project, {}).items():
        if data.get(key) is not None and as_bool(data[key], where(key)):
            return fused, where(key)
    return None, ""


def _axolotl(data: Mapping[str, JSONValue], values: dict[str, ArgValue], origin: dict[str, str], where: Origin,
             notes: list[str]) -> None:
    """axolotl's normalize_config: accumulation from batch_size, bf16 "auto" resolved on the GPU."""
    batch = data.get("batch_size")
    if "gradient_accumulation_steps" not in values and isinstance(batch, int):
        micro = values.get("per_device_train_batch_size", PROJECT_DEFAULTS["axolotl"]["per_device_train_batch_size"])
        if isinstance(micro, bool) or not isinstance(micro, int) or micro < 1:  # axolotl would divide by it
            raise TrainerInputError(f"{origin.get('per_device_train_batch_size', where('micro_batch_size'))}: "
                                    f"expected a whole number of at least 1 (axolotl divides batch_size by it), got "
                                    f"{micro!r}")
        values["gradient_accumulation_steps"] = batch // micro
        origin["gradient_accumulation_steps"] = f"{where('batch_size')} // micro_batch_size"
    bf16 = data.get("bf16", "auto")
    if bf16 == "auto" and values.get("fp16") is True:
        # utils/config resolve_dtype: ``if cfg.fp16 and cfg.bf16 == "auto": cfg.bf16 = False``
        values["bf16"] = False
        origin["bf16"] = f"{where('bf16')} \"auto\" with fp16 on (axolotl trains fp16)"
    elif bf16 == "auto":
        # resolve_dtype: bf16 where is_torch_bf16_gpu_available(), else fp16 (if fp16 is unset)
        values["bf16"] = True
        origin["bf16"] = f"{where('bf16')} \"auto\" (bf16 on a GPU that supports it)" if "bf16" in data else \
            "axolotl's default bf16: auto (bf16 on a GPU that supports it)"
        notes.append("axolotl bf16 \"auto\": taken as bf16, what axolotl chooses on a bf16-capable GPU (Ampere or "
                     "newer); on older GPUs it trains fp16")
    if values.get("use_liger_kernel") is True:
        off = [key for key in LIGER_LAYER_KEYS if not data.get(key)]
        if off:
            notes.append(f"axolotl liger plugin: {', '.join(off)} not on: its norms/MLP are costed as Liger's all "
                         "the same (a little under the run's)")
    if values.get("bf16") is True and values.get("fp16") is True:
        values["fp16"] = False  # normalize_config: ``if cfg.bf16: cfg.fp16 = False``
        origin["fp16"] = "axolotl: fp16 is dropped when bf16 is on"


def _sequence(data: Mapping[str, JSONValue], project: str, where: Origin) -> tuple[int | None, str]:
    for key in SEQUENCE_KEYS:
        if key in data and data[key] is not None:
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                try:
                    value = int(str(value))
                except ValueError:
                    raise TrainerInputError(f"{where(key)}: expected a positive integer, got {shown(value)}") from None
                if value <= 0:
                    raise TrainerInputError(f"{where(key)}: expected a positive integer, got {shown(value)}")
            if value > MAX_DIMENSION:  # bounded where it is read, and said as given (not as --seq-len)
                raise TrainerInputError(f"{where(key)}: {value:,} tokens is longer than the memory model estimates "
                                        f"(at most {MAX_DIMENSION:,})")
            return value, key
    for key in SEQUENCE_KEYS:
        default = PROJECT_DEFAULTS[project].get(key)
        if isinstance(default, int):  # a project's default length (none has another kind)
            return default, key
    return None, ""


def _padding(data: Mapping[str, JSONValue], sequence_key: str, where: Origin,
             project: str = "transformers") -> tuple[str | None, str]:
    """How the script pads its batches, where its arguments say (PAD_TO_MAX_KEY, FULL_BLOCK_KEYS, PACKING_KEYS)."""
    for key in PACKING_KEYS.get(project, ()):
        if data.get(key) is not None and as_bool(data[key], where(key)):
            return "max_length", f"{where(key)} (every row filled to the maximum length)"
    if data.get(PAD_TO_MAX_KEY) is not None:
        on = as_bool(data[PAD_TO_MAX_KEY], where(PAD_TO_MAX_KEY))
        return ("max_length" if on else "longest"), where(PAD_TO_MAX_KEY)
    if sequence_key in FULL_BLOCK_KEYS and sequence_key in data:
        return "max_length", f"{where(sequence_key)} (texts grouped into full blocks)"
    return None, ""


def _with_checkpointing(args: TrainingArgs, data: Mapping[str, JSONValue], where: Origin) -> TrainingArgs:
    """Activation checkpointing: TrainingArguments' activation_checkpointing or its alias
    gradient_checkpointing, LLaMA-Factory's disable_gradient_checkpointing, axolotl's gradient_checkpointing
    (``offload``/``offload_disk`` also recompute)."""

    if args.project == "llama-factory":
        disabled = data.get("disable_gradient_checkpointing", False)
        on = not _typed("gradient_checkpointing", disabled, where("disable_gradient_checkpointing"))
        return replace(args, checkpointing=on)
    raw = data.get("gradient_checkpointing")
    if args.project == "axolotl" and raw in AXOLOTL_OFFLOAD_CHECKPOINTING:
        return replace(args, checkpointing=True)
    flags = [args.values.get(name) for name in ("activation_checkpointing", "gradient_checkpointing")]
    if any(flag is True for flag in flags):
        return replace(args, checkpointing=True)
    if any(flag is False for flag in flags):
        return replace(args, checkpointing=False)
    # True, False or none. The HF Trainer's own default (False) is no statement: the script may call
    # model.gradient_checkpointing_enable() itself (gpjt/fine-tune-2024-04's measure scripts do), so where the
    # arguments are silent the model description or --activation-checkpointing decides.
    default = PROJECT_DEFAULTS[args.project].get("gradient_checkpointing")
    return replace(args, checkpointing=default if isinstance(default, bool) else None)


def _typed(name: str, value: JSONValue, where: str) -> bool | int | float | str:
    """``value`` as the field's type, as HfArgumentParser converts command-line text (YAML may also hold
    a number as text: PyYAML reads ``5e-5`` as a string)."""
    kind = TYPES.get(name, str)
    if kind is str:
        if isinstance(value, (dict, list, bool)):
            raise TrainerInputError(f"{where}: expected a name, got {shown(value)}")
        return str(value).strip()
    if kind is bool:
        return as_bool(value, where)
    if isinstance(value, bool):
        raise TrainerInputError(f"{where}: expected a number, got {shown(value)}")
    return _as_int(value, where) if kind is int else _as_number(value, where)



def _as_int(value: JSONValue, where: str) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    try:
        return int(str(value).strip())
    except ValueError:
        raise TrainerInputError(f"{where}: expected an integer, got {shown(value)}") from None


def _as_number(value: JSONValue, where: str) -> int | float:
    if isinstance(value, (int, float)):
        return value
    try:
        return float(str(value).strip())
    except ValueError:
        raise TrainerInputError(f"{where}: expected a number, got {shown(value)}") from None


def merge(base: TrainingArgs, over: TrainingArgs) -> TrainingArgs:
    """``base`` (a --training-args file) with what ``over`` (the launch command) gives on top."""
    return replace(
        base, values={**base.values, **over.values}, origin={**base.origin, **over.origin},
        sequence_length=over.sequence_length if over.sequence_key else base.sequence_length,
        sequence_key=over.sequence_key or base.sequence_key,
        sequence_from=over.sequence_from if over.sequence_key else base.sequence_from,
        checkpointing=over.checkpointing if any(k in over.values for k in ("gradient_checkpointing",
                                                                           "activation_checkpointing"))
        else base.checkpointing,
        padding=over.padding or base.padding, padding_from=over.padding_from if over.padding else base.padding_from,
        attention=base.attention if over.attention is None else over.attention,
        attention_from=base.attention_from if over.attention is None else over.attention_from,
        sequence_parallel=base.sequence_parallel if over.sequence_parallel is None else over.sequence_parallel,
        sequence_parallel_from=base.sequence_parallel_from if over.sequence_parallel is None
        else over.sequence_parallel_from,
        activation_offload=base.activation_offload if over.activation_offload is None else over.activation_offload,
        checkpoint_every=base.checkpoint_every if over.checkpoint_every is None else over.checkpoint_every,
        cut_cross_entropy=base.cut_cross_entropy if over.cut_cross_entropy is None else over.cut_cross_entropy,
        tiled_mlp=base.tiled_mlp if over.tiled_mlp is None else over.tiled_mlp,
        tiled_mlp_shards=base.tiled_mlp_shards if over.tiled_mlp is None else over.tiled_mlp_shards,
        tiled_mlp_from=base.tiled_mlp_from if over.tiled_mlp is None else over.tiled_mlp_from,
        vision_checkpointing=base.vision_checkpointing if over.vision_checkpointing is None
        else over.vision_checkpointing,
        vision_checkpointing_from=base.vision_checkpointing_from if over.vision_checkpointing is None
        else over.vision_checkpointing_from,
        cut_cross_entropy_from=base.cut_cross_entropy_from if over.cut_cross_entropy is None
        else over.cut_cross_entropy_from,
        checkpoint_every_from=base.checkpoint_every_from if over.checkpoint_every is None
        else over.checkpoint_every_from,
        activation_offload_from=base.activation_offload_from if over.activation_offload is None
        else over.activation_offload_from,
        model=over.model or base.model, deepspeed=over.deepspeed or base.deepspeed,
        notes=base.notes + over.notes, method=_merged_method(base.method, over.method),
        peft=over.peft or base.peft, vision_freeze=over.vision_freeze or base.vision_freeze)


def _merged_method(base: MethodReading | None, over: MethodReading | None) -> MethodReading | None:
    """The file's method reading with the launch command's over it (config/method_reader.py merged)."""
    if base is None or over is None:
        return over or base
    from zeroadvisor.config.method_reader import merged

    return merged(base, over)
