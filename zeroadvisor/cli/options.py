"""Every command's parameters, as data: the typer app is built from these tables (app.py), and
``lint`` parses its argv from the same table without typer when it can (``parse_simple``).

Choices are the library's own tuples, named as ``"module:NAME"`` and imported on use, so that
``lint`` does not import the memory model to learn the ``--accounting`` choices.
"""

from __future__ import annotations

import importlib
import re
import typing
from collections.abc import Iterator
from dataclasses import dataclass

from zeroadvisor.config.project import CLUSTER_KEYS, RUN_KEYS, TRAINING_KEYS
from zeroadvisor.inputs import settings
from zeroadvisor.inputs.command import Command
from zeroadvisor.inputs.values import Spelling


@dataclass(frozen=True)
class Param:
    name: str  # the keyword the command receives
    flags: tuple[str, ...] = ()  # () for a positional argument; "--x/--no-x" for an on/off pair
    help: str = ""
    default: object = None
    kind: type = str  # str, int or bool
    choices: str | None = None  # "module:NAME" of a tuple (or Literal) the library defines
    minimum: int | None = None
    multiple: bool = False  # a positional taking many values, or an option given more than once
    required: bool = False
    metavar: str | None = None
    # an old spelling kept working (hidden from --help): the parameter it gives, merged into it (merge_aliases)
    alias_of: str | None = None

    @property
    def positional(self) -> bool:
        return not self.flags

    def choice_values(self) -> tuple[str, ...] | None:
        return None if self.choices is None else tuple(_values(self.choices))

    @property
    def panel(self) -> str:
        """The --help group it is listed in (PANELS)."""
        return next((title for title, names in PANELS.items() if self.name in names), "Options")

    @property
    def choice_metavar(self) -> str | None:
        """A short placeholder for an option with choices ("FORMAT"), which the help text then lists: the
        choices in the placeholder column would squeeze the help into a few characters at 80 columns."""
        return self.name.upper().replace("_", "-") if self.choices is not None and self.flags else None

    def full_help(self, command: str) -> str:
        """The help text; a parameter with a fallback (inputs/settings.py) says it, and that the project
        configuration may set it (such a parameter has default None, so a given flag can be told apart)."""
        text = self.help
        if self.choice_metavar is not None:
            text += f" One of: {', '.join(self.choice_values() or ())}."
        run = Command.named(command)  # rules and rule have no fallbacks
        fallback = settings.fallback(run, self.name) if self.default is None and run is not None else None
        settable = self.name in PROJECT_KEYS  # only what the project configuration has a key for
        if fallback is settings.NEEDED:
            text += " (or set it in the project configuration)" if settable else ""
        elif fallback is not None:
            text += f" (default: {fallback}, or the project configuration's)" if settable else f" (default: {fallback})"
        return text


@dataclass(frozen=True)
class CommandSpec:
    name: str
    help: str
    params: tuple[Param, ...] = ()

    @property
    def run(self) -> Command | None:
        """The run this command makes (inputs/command.py); None for rules and rule, which read the catalogue."""
        return Command.named(self.name)

    @property
    def epilog(self) -> str | None:
        """What ends --help, at the full width: the GPU names --gpu takes."""
        if not any(p.name == "gpu" for p in self.params):
            return None
        import textwrap

        text = "GPUs for --gpu: " + ", ".join(_values("zeroadvisor.hardware.gpus:GPUS")) + "."
        # "\b": click keeps the paragraph as wrapped here, where names are never broken at their hyphens
        return "\b\n" + "\n".join(textwrap.wrap(text, 76, break_on_hyphens=False))

    def spelling(self) -> Spelling:
        """How messages name this command's inputs: a flag by its long form, an argument by its metavar."""
        return Spelling({p.name: p.flags[0].split("/")[0] if p.flags else (p.metavar or p.name.upper())
                         for p in self.params})


def merge_aliases(command: CommandSpec, values: dict[str, object]) -> dict[str, object]:
    """``values`` with each old spelling's value moved to the parameter it is an alias of; both given and different
    is a usage error (which one was meant is not known), the same value twice is that value."""
    from zeroadvisor.inputs.errors import UsageError

    merged = dict(values)
    for alias in (p for p in command.params if p.alias_of is not None):
        given = merged.pop(alias.name, None)
        target = alias.alias_of or ""
        if given is None:
            continue
        if merged.get(target) not in (None, given):
            spelling = command.spelling()
            raise UsageError(f"give {spelling.label(target)} or {alias.flags[0]}, not both")
        merged[target] = given
    return merged


def _values(reference: str) -> list[str]:
    module, _, name = reference.partition(":")
    value = getattr(importlib.import_module(module), name)
    if typing.get_origin(value) is typing.Literal:
        return list(typing.get_args(value))
    return [str(v) for v in value]


# -- parameters shared by commands (one definition each) -----------------------------------

FAIL_ON = Param("fail_on", ("--fail-on",), "Exit 1 on findings of this severity or worse.",
                choices="zeroadvisor.inputs.settings:FAIL_ON")
INTEGRATION = Param("integration", ("--integration",),
                    "Who reads the file: deepspeed, hf-trainer, accelerate, or any (accept what either integration "
                    "fills).", choices="zeroadvisor.lint.context:INTEGRATIONS")
DEEPSPEED_VERSION = Param("deepspeed_version", ("--deepspeed-version",),
                          "Read configs as this DeepSpeed release (0.14.5), release line (0.14) or range "
                          "(>=0.10,<0.17); default: the pin beside the config (requirements, pyproject, locks), "
                          "else the installed DeepSpeed, else the latest.")
TRANSFORMERS_VERSION = Param("transformers_version", ("--transformers-version",),
                             "The transformers release the training runs (4.41.2), release line (4.41) or range "
                             "(>=4.41,<4.46: the newest it admits): an MoE model's experts are nn.Linear modules "
                             "under 4.x (QLoRA quantizes them, all-linear adapts them), one fused module under 5.x; "
                             "default: the pin beside the config, else 5.24.")
TRAINER = Param("trainer", ("--trainer",), "The training method where the trainer's files do not say it (a TRL "
                "config read alone): the models and batches it adds beside the one trained (default: the files' "
                "method, else sft; rloo: TRL's RLOO, costed as GRPO).", choices="zeroadvisor.vocab:TrainerChoice")
SELECT = Param("select", ("--select",), "Only these rules (codes, names or code prefixes).", multiple=True)
IGNORE = Param("ignore", ("--ignore",), "Skip these rules (codes, names or code prefixes).", multiple=True)
MODEL = Param("model", ("--model", "-m"), "A model description (YAML/JSON), a Hugging Face config.json or model "
              "directory, or a Hub id (ORG/NAME: the local HF cache, then the shipped catalog; offline).")
PARAMS = Param("params", ("--params",), "Parameter count instead of --model, e.g. 7.5B.")
GPUS = Param("gpus", ("--gpus",), "Number of GPUs (data-parallel degree).", kind=int, minimum=1)
GPUS_PER_NODE = Param("gpus_per_node", ("--gpus-per-node",), "GPUs per node (default 8).", kind=int, minimum=1)
GPU_MEMORY = Param("gpu_memory", ("--gpu-memory",), "Memory per GPU, e.g. 80GiB.")
GPU = Param("gpu", ("--gpu",), "GPU name instead of --gpu-memory, as nvidia-smi or the cloud names it "
            "(memory as the driver reports it; the cards are listed below).")
CPU_MEMORY = Param("cpu_memory", ("--cpu-memory",), "Host RAM per node, e.g. 1TB.")
NVME = Param("nvme", ("--nvme",), "NVMe space per node, e.g. 4TB.")
ACCOUNTING = Param("accounting", ("--accounting",),
                   "deepspeed: what DeepSpeed allocates; paper: the ZeRO paper's 2 + 2 + K bytes.",
                   default=settings.FALLBACKS["accounting"], choices="zeroadvisor.vocab:ACCOUNTINGS")
UNIT = Param("unit", ("--unit",), "GiB (2^30 bytes, as nvidia-smi and torch print) or GB (10^9 bytes); default GiB, "
             "GB with --accounting paper (the paper's unit).", choices="zeroadvisor.units:FORMAT_UNITS")
SEQ_LEN = Param("seq_len", ("--seq-len",), "Override the sequence length.", kind=int)
CHECKPOINTING = Param("activation_checkpointing", ("--activation-checkpointing",), "Override activation "
                      "checkpointing.", choices="zeroadvisor.model.spec:Checkpointing")
FLASH = Param("flash_attention", ("--flash-attention/--no-flash-attention",), "Override FlashAttention.", kind=bool)
# Inputs the DeepSpeed config may leave open ("auto", or no config): each fills only that, and the
# model description has the same field (model/description.py FIELDS; memory/assumed.py INPUTS).
TARGET_LEN = Param("target_len", ("--target-len",), "Encoder-decoder models: the target (decoder) length "
                   "(default: the sequence length).", kind=int, minimum=1)
IMAGE_TOKENS = Param("image_tokens", ("--image-tokens",), "Vision-language models: the image tokens in each sample's "
                     "sequence (the vision tower runs over 4 patches per token; default: every token, the most the "
                     "sequence holds).", kind=int, minimum=1)
VISION_CHECKPOINTING = Param("vision_checkpointing", ("--vision-checkpointing/--no-vision-checkpointing",),
                             "Vision-language models: whether the vision tower's blocks are checkpointed (ms-swift's "
                             "--vit_gradient_checkpointing; default: as the decoder's layers).", kind=bool)
PADDING = Param("padding", ("--padding",), "How each batch is padded: max_length (every batch to the sequence "
                "length) or longest (to its own longest sample, the HF data collators' default: the lengths are "
                "maxima, and a run that fits only shorter is unknown, not does-not-fit). Default: max_length.",
                choices="zeroadvisor.model.description:PADDINGS")
MICRO_BATCH = Param("micro_batch", ("--micro-batch",), "Micro batch per GPU where the config says \"auto\" or "
                    "leaves it out.", kind=int, minimum=1)
PRECISION = Param("precision", ("--precision",), "Training precision where fp16/bf16 \"enabled\" is \"auto\" "
                  "(or there is no config).", choices="zeroadvisor.model.description:PRECISIONS")
STAGE = Param("stage", ("--stage",), "ZeRO stage where zero_optimization.stage is \"auto\".",
              choices="zeroadvisor.model.spec:ZERO_STAGES")
LOAD_DTYPE = Param("load_dtype", ("--load-dtype",), "The dtype the script loads the weights in "
                   "(default: the checkpoint's, else fp32).", choices="zeroadvisor.model.description:PRECISIONS")
ZERO_INIT = Param("zero_init", ("--zero-init/--no-zero-init",), "Stage 3: whether the model is created under "
                  "deepspeed.zero.Init (default: yes, as the HF Trainer).", kind=bool)
META_LOAD = Param("meta_load", ("--meta-load/--no-meta-load",), "Whether the model is built on the meta device "
                  "and loaded straight to the GPU (default: no).", kind=bool)
OPTIM = Param("optim", ("--optim",), "The client optimizer where the config has no optimizer block: the HF "
              "Trainer's optim name, e.g. adamw_torch (the default: its foreach step builds an fp32 temporary the "
              "size of the partition) or adamw_torch_fused (none).", metavar="NAME")
LIGER = Param("liger_kernel", ("--liger-kernel/--no-liger-kernel",), "Whether the Liger kernel is applied (the "
              "Trainer's use_liger_kernel): no tokens x vocabulary logits, smaller RMSNorm/SwiGLU (default: no).",
              kind=bool)
CUT_CROSS_ENTROPY = Param("cut_cross_entropy", ("--cut-cross-entropy/--no-cut-cross-entropy",), "Whether Cut "
                          "Cross-Entropy computes the supervised loss (axolotl's CutCrossEntropyPlugin): no tokens x "
                          "vocabulary logits (default: no).", kind=bool)
TILED_MLP = Param("tiled_mlp", ("--tiled-mlp/--no-tiled-mlp",), "Whether each MLP is a TiledMLP (axolotl's "
                  "tiled_mlp): it keeps only its input, its backward one shard at a time (default: no).", kind=bool)
TILED_MLP_SHARDS = Param("tiled_mlp_shards", ("--tiled-mlp-shards",), "TiledMLP's shards (axolotl's "
                         "tiled_mlp_num_shards; default: about 32,768 tokens a shard).", kind=int, minimum=1)
ACTIVATION_OFFLOAD = Param("activation_offload", ("--activation-offload",), "Which offloader holds the "
                           "checkpointed layer inputs in host memory (full recomputation): save_on_cpu "
                           "(transformers' gradient_checkpointing_kwargs offload), trl (TRL's activation_offloading), "
                           "hidden_states (axolotl's), none (default).",
                           choices="zeroadvisor.model.description:ACTIVATION_OFFLOADS")
CHECKPOINT_EVERY = Param("checkpoint_every", ("--checkpoint-every",), "Under full recomputation, checkpoint every "
                         "n-th layer only (transformers' every_n_layers); the others keep their activations "
                         "(default 1).", kind=int, minimum=1)
# Parallel degrees (memory/parallel.py): tensor and sequence fill what the config leaves out
# (tensor_parallel.autotp_size, sequence_parallel_size); pipeline and expert are set in code only.
TENSOR_PARALLEL = Param("tensor_parallel", ("--tensor-parallel",), "Tensor-parallel (AutoTP) degree where the "
                        "config has no tensor_parallel.autotp_size.", kind=int, minimum=1)
PIPELINE_PARALLEL = Param("pipeline_parallel", ("--pipeline-parallel",), "Pipeline stages (PipelineModule "
                          "num_stages, set in code).", kind=int, minimum=1)
SEQUENCE_PARALLEL = Param("sequence_parallel", ("--sequence-parallel",), "Sequence-parallel (Ulysses) degree "
                          "where the config has no sequence_parallel_size.", kind=int, minimum=1)
EXPERT_PARALLEL = Param("expert_parallel", ("--expert-parallel",), "Expert-parallel degree (MoE ep_size, set "
                        "in code).", kind=int, minimum=1)
RUN_INPUTS = (TARGET_LEN, IMAGE_TOKENS, VISION_CHECKPOINTING, PADDING, MICRO_BATCH, PRECISION, STAGE, LOAD_DTYPE,
              ZERO_INIT, META_LOAD, OPTIM, LIGER, CUT_CROSS_ENTROPY, TILED_MLP, TILED_MLP_SHARDS, ACTIVATION_OFFLOAD,
              CHECKPOINT_EVERY, TRANSFORMERS_VERSION, TENSOR_PARALLEL, PIPELINE_PARALLEL, SEQUENCE_PARALLEL,
              EXPERT_PARALLEL)
# LoRA/QLoRA (model/peft.py): the same keys as the model description's peft: block, which they override.
PEFT_INPUTS = (
    Param("peft", ("--peft",), "Train LoRA adapters on a frozen base (qlora: on a bitsandbytes-quantized base); "
          "needs a config.json.", choices="zeroadvisor.model.peft:PEFT_METHODS"),
    Param("lora_r", ("--lora-r",), "LoRA rank r (default 8).", kind=int, minimum=1),
    Param("lora_target_modules", ("--lora-target-modules",), "Modules LoRA adapts, matched as peft does "
          "(comma-separated or repeated), all-linear (the default), or peft-default (peft's own for the model type, "
          "as LoraConfig without target_modules: q_proj,v_proj for llama).", multiple=True),
    Param("lora_modules_to_save", ("--lora-modules-to-save",), "Modules trained in full beside the adapters "
          "(peft's modules_to_save: a trainable copy of each, e.g. embed_tokens,lm_head; comma-separated or "
          "repeated; ms-swift's all-embedding and all-norm name every embedding and every norm, input-embeddings and "
          "output-embeddings the token table and the LM head).", multiple=True),
    Param("quantization", ("--quantization",), "QLoRA base quantization (default 4bit).",
          choices="zeroadvisor.model.peft:QUANTIZATIONS"),
    Param("double_quant", ("--double-quant/--no-double-quant",), "QLoRA 4-bit: bitsandbytes' double quantization "
          "of the block constants (bnb_4bit_use_double_quant; default: no).", kind=bool),
    Param("lora_dropout", ("--lora-dropout",), "LoRA dropout probability, 0 <= p < 1 (peft's lora_dropout, default "
          "0; ms-swift and TRL default to 0.05): each adapted module's input is kept dropped out for backward."),
)


# The step-time model's machine facts (hardware/machine.py DEFAULTS states each default and why).
THROUGHPUT_INPUTS = (
    Param("inter_node_bandwidth", ("--inter-node-bandwidth",), "Network bandwidth per node, one direction, e.g. "
          "25GB/s or 200Gb/s (default 25GB/s: one 200 Gb/s NIC)."),
    Param("cpu_cores", ("--cpu-cores",), "CPU cores per node for the offloaded optimizer step (default 48).",
          kind=int, minimum=1),
    Param("nvme_bandwidth", ("--nvme-bandwidth",), "NVMe bandwidth per node, e.g. 3GB/s (default 3GB/s: one "
          "PCIe gen3 x4 drive)."),
    Param("efficiency", ("--efficiency",), "Share of the GPU's dense peak the training kernels reach, e.g. 0.4 "
          "or 40% (default 0.4)."),
    Param("launcher", ("--launcher",), "What starts the GPU processes, for the CPU optimizer's threads per process "
          "(default torchrun: one thread each, as accelerate launch; deepspeed shares the node's cores).",
          choices="zeroadvisor.hardware.machine:LAUNCHERS"),
)


# The inputs the project configuration can set (config/project.py), by parameter name.
PROJECT_KEYS = frozenset({*RUN_KEYS.values(), *CLUSTER_KEYS.values(), *TRAINING_KEYS.values()})

# The --help groups, in order: each parameter's name in one (the rest are "Options").
PANELS: dict[str, tuple[str, ...]] = {
    "Model and training shape": ("model", "params", "seq_len", "activation_checkpointing", "flash_attention",
                                 "target_len", "image_tokens", "vision_checkpointing", "padding", "micro_batch",
                                 "precision", "stage", "load_dtype", "zero_init", "meta_load", "optim",
                                 "liger_kernel", "cut_cross_entropy", "tiled_mlp", "tiled_mlp_shards",
                                 "activation_offload", "checkpoint_every", "transformers_version", "training_args",
                                 "launch", "trainer"),
    "Parallelism and LoRA": ("tensor_parallel", "pipeline_parallel", "sequence_parallel", "expert_parallel", "peft",
                             "lora_r", "lora_target_modules", "lora_modules_to_save", "quantization", "double_quant",
                             "lora_dropout"),
    "Cluster": ("gpus", "gpus_per_node", "gpu", "gpu_memory", "cpu_memory", "nvme", "headroom"),
    "Step time (the machine fixes are ranked on)": ("efficiency", "inter_node_bandwidth", "cpu_cores",
                                                    "nvme_bandwidth", "launcher"),
    "Rules and fixes": ("select", "ignore", "integration", "suggest", "fix", "diff", "only_configs", "exclude",
                        "no_default_excludes"),
    "Output": ("format", "fail_on", "unit", "accounting", "explain", "verbose", "all_options"),
}


def _format(choices: str) -> Param:
    return Param("format", ("--format", "-f"), "Output format.", choices=choices)


# One margin for every capacity (memory/verdict.py): "fits" leaves it free, inside it is "tight".
HEADROOM = Param("headroom", ("--headroom",), "Share of each capacity a \"fits\" leaves free (inside it: "
                 "\"tight\"), e.g. 10% or 0.1.")

EXPLAIN = Param("explain", ("--explain",), "Show every term of the configured option (phase, bytes, formula, "
                "source, kind) and the DeepSpeed-vs-paper notes.", default=False, kind=bool)

VERBOSE = Param("verbose", ("--verbose", "-v"), "Text: the whole report (the findings in full, the memory by row, "
                "the bars, the notes); by default one screen.", default=False, kind=bool)

ALL_OPTIONS = Param("all_options", ("--all",), "Text: show every stage/offload option (default: the configured, the "
                    "recommended and the stages without offload).", default=False, kind=bool)

# How folders are walked (config/excludes.py); a file named on the command line is always read.
EXCLUDE = Param("exclude", ("--exclude",), "Leave out of folder walks the files and folders matching this "
                "gitignore-style pattern (a name, or a path relative to the current folder; repeatable).",
                multiple=True, metavar="PATTERN")
NO_DEFAULT_EXCLUDES = Param("no_default_excludes", ("--no-default-excludes",), "Walk into hidden folders, virtual "
                            "environments, node_modules, build output and what .gitignore leaves out.",
                            default=False, kind=bool)

LINT = CommandSpec("lint", "Lint DeepSpeed config files.", (
    Param("paths", help="Config files, directories or glob patterns; - reads standard input.", multiple=True,
          required=True, metavar="PATH"),
    _format("zeroadvisor.report:LINT_FORMATS"),
    FAIL_ON,
    Param("gpus", ("--gpus",), "Data-parallel world size: check the batch exactly.", kind=int, minimum=1),
    INTEGRATION, DEEPSPEED_VERSION, SELECT, IGNORE,
    Param("only_configs", ("--only-configs",), "Skip named files whose content is not a DeepSpeed or Accelerate "
          "config, as files found in a directory are (for pre-commit hooks).", default=False, kind=bool),
    EXCLUDE, NO_DEFAULT_EXCLUDES,
    Param("fix", ("--fix",), "Write the lint fixes into each file (atomically, every other byte kept), then report "
          "what remains.", default=False, kind=bool),
    Param("diff", ("--diff",), "Print the lint fixes as a unified diff and write nothing (the exit code is lint's; "
          "--format does not apply).", default=False, kind=bool),
))

ESTIMATE = CommandSpec("estimate", "Estimate memory per GPU and per node for every ZeRO stage and offload option.", (
    # positional, as lint and check take it; --config/-c, the spelling before, still works (hidden)
    Param("config", help="The DeepSpeed config (default: DeepSpeed's defaults, fp16 Adam).", metavar="CONFIG"),
    Param("config_flag", ("--config", "-c"), "The DeepSpeed config (the old spelling of CONFIG).",
          alias_of="config"),
    MODEL, PARAMS, GPUS, GPUS_PER_NODE, GPU_MEMORY, GPU, CPU_MEMORY, NVME, HEADROOM, ACCOUNTING,
    _format("zeroadvisor.inputs.settings:ESTIMATE_FORMATS"),
    UNIT, SEQ_LEN, CHECKPOINTING, FLASH, EXPLAIN, DEEPSPEED_VERSION, *RUN_INPUTS, *PEFT_INPUTS, *THROUGHPUT_INPUTS,
    ALL_OPTIONS, TRAINER,
))

CHECK = CommandSpec("check", "Pre-flight check: lint findings and memory advice, with fixes as a diff.", (
    Param("config", help="The DeepSpeed configs to check (each one against the same model and cluster): files, "
          "directories or glob patterns.", required=True, multiple=True, metavar="CONFIG"),
    MODEL, PARAMS, GPUS, GPU_MEMORY, GPU, GPUS_PER_NODE, CPU_MEMORY, NVME,
    HEADROOM,
    _format("zeroadvisor.report:CHECK_FORMATS"),
    FAIL_ON,
    Param("suggest", ("--suggest",), "Print the fixes as a unified diff of each CONFIG (without --model: the lint "
          "fixes alone).", default=False, kind=bool),
    Param("fix", ("--fix",), "Write the fixes into each CONFIG (atomically; without --model: the lint fixes alone, "
          "no memory advice).", default=False, kind=bool),
    INTEGRATION, DEEPSPEED_VERSION, SELECT, IGNORE, EXCLUDE, NO_DEFAULT_EXCLUDES, ACCOUNTING, UNIT, SEQ_LEN,
    CHECKPOINTING, FLASH, EXPLAIN, VERBOSE,
    *RUN_INPUTS,
    *PEFT_INPUTS, *THROUGHPUT_INPUTS, ALL_OPTIONS, TRAINER,
))

RULES = CommandSpec("rules", "List every rule: code, name, default severity and summary.")

RULE = CommandSpec("rule", "Explain one rule, with a failing and a passing example.", (
    Param("name", help="A rule code (ZA101) or name (unknown-key).", required=True, metavar="RULE"),
))

# -- the Hugging Face Trainer's inputs (config/training_args.py, config/launch.py) ----------------
TRAINING_ARGS = Param("training_args", ("--training-args",), "The Hugging Face Trainer's arguments: a "
                      "TrainingArguments JSON/YAML, or a LLaMA-Factory or axolotl training YAML (fills \"auto\" as "
                      "the Trainer does, reports the values it rejects, gives the training shape).")
LAUNCH = Param("launch", ("--launch",), "The launch command (deepspeed, torchrun, accelerate launch or python "
               "running a Trainer script) as one quoted string; or give its words after --.")
_TRAINER_INPUTS = {Command.LINT: (TRAINING_ARGS,), Command.ESTIMATE: (TRAINING_ARGS,),
                   Command.CHECK: (TRAINING_ARGS, LAUNCH)}


def _with_trainer_inputs(command: CommandSpec) -> CommandSpec:
    """``command`` taking the Trainer's inputs; for check, CONFIG and --gpus may come from the launch command."""
    from dataclasses import replace

    run = command.run
    if run is None:
        raise ValueError(f"{command.name} takes no Trainer inputs")
    params = tuple(replace(p, required=False) if run is Command.CHECK and p.name in ("config", "gpus") else p
                   for p in command.params)
    return replace(command, params=params + _TRAINER_INPUTS[run])


LINT, ESTIMATE, CHECK = (_with_trainer_inputs(c) for c in (LINT, ESTIMATE, CHECK))


def launch_words_to_flag(argv: list[str]) -> list[str]:
    """``check ... -- deepspeed ...``: the words after ``--`` become ``--launch 'deepspeed ...'``."""
    import shlex

    if argv[:1] != ["check"] or "--" not in argv:
        return argv
    split = argv.index("--")
    return [*argv[:split], "--launch", shlex.join(argv[split + 1:])]


COMMANDS: tuple[CommandSpec, ...] = (LINT, RULES, RULE, ESTIMATE, CHECK)


# -- the fast path ---------------------------------------------------------------------------

_DIGITS = re.compile(r"[0-9]+")
# A number of more digits is past every bound (the largest, the model's parameters, is 10**30) and int() refuses
# past 4,300: typer parses it, and says so in one line.
_MAX_DIGITS = 40


def parse_simple(command: CommandSpec, argv: list[str]) -> dict[str, object] | None:
    """The keyword values typer would pass for ``argv``, or None when ``argv`` is anything but plain.

    Plain: known long or short flags, each value as the next word or after ``=``, valid choices and
    numbers, every required parameter given. Anything else (--help, a typo, a bad value, bundled short
    flags) returns None and typer parses it, so help and error messages come from one place.
    """
    by_flag = _flag_table(command)
    values: dict[str, object] = {p.name: ([] if p.multiple and p.positional else p.default) for p in command.params}
    positionals: list[str] = []
    words = iter(argv)
    for word in words:
        if word == "--":
            positionals.extend(words)
            break
        if word == "-" or not word.startswith("-"):
            positionals.append(word)
            continue
        if not _take_flag(by_flag, word, words, values):
            return None
    if not _place(command, positionals, values):
        return None
    if any(p.required and values[p.name] in (None, []) for p in command.params):
        return None
    return values


def _flag_table(command: CommandSpec) -> dict[str, tuple[Param, bool]]:
    """Each of the command's flags -> its parameter, and for a switch ``--on/--off`` the value each half sets."""
    by_flag: dict[str, tuple[Param, bool]] = {}
    for param in command.params:
        for flag in param.flags:
            on, _, off = flag.partition("/")
            by_flag[on] = (param, True)
            if off:
                by_flag[off] = (param, False)
    return by_flag


def _take_flag(by_flag: dict[str, tuple[Param, bool]], word: str, words: Iterator[str],
               values: dict[str, object]) -> bool:
    """Read the flag ``word`` (its value attached after ``=`` or the next of ``words``) into ``values``; False
    when it is not plain (parse_simple)."""
    flag, equals, attached = word.partition("=")
    if flag not in by_flag:
        return False
    param, switch = by_flag[flag]
    if param.kind is bool:
        if equals:
            return False
        values[param.name] = switch
        return True
    value = _value(param, attached if equals else next(words, None))
    if value is None:
        return False
    if param.multiple:  # the values so far: a list (None: none yet)
        earlier = values[param.name]
        values[param.name] = [*(earlier if isinstance(earlier, list) else ()), value]
    else:
        values[param.name] = value
    return True


def _value(param: Param, text: str | None) -> str | int | None:
    if text is None or (text.startswith("-") and text != "-"):
        return None  # typer decides what a flag-looking value means
    if param.kind is int:
        if not _DIGITS.fullmatch(text) or len(text) > _MAX_DIGITS:  # typer says what is wrong with it
            return None
        number = int(text)
        return None if param.minimum is not None and number < param.minimum else number
    choices = param.choice_values()
    if choices is not None and text not in choices:
        return None
    return text


def _place(command: CommandSpec, positionals: list[str], values: dict[str, object]) -> bool:
    slots = [p for p in command.params if p.positional]
    for param in slots:
        if param.multiple:
            values[param.name], positionals = positionals, []
        elif positionals:
            values[param.name], positionals = positionals[0], positionals[1:]
    return not positionals
