"""The words for memory rows and stage/offload options, once for every report and message.

Rows are the keys of ``memory/terms.py`` ROWS. Options are anything with ``stage``,
``offload_optimizer`` and ``offload_param`` (``memory.options.Option``); this module imports
nothing from the memory model, so ``Option`` itself can use it.

The closed sets these words are keyed by are defined here, at the bottom of the pipeline: the verdicts
(memory/verdict.py), the offload devices (memory/options.py), the training precisions and the ZeRO stages.
They are ``StrEnum``s (the stage an ``IntEnum``): a member equals its string (number), so configs, flags and
the JSON contract read and write the same text.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import Protocol


class Verdict(StrEnum):
    """A peak against a capacity (memory/verdict.py), best to worst."""

    FITS = "fits"
    TIGHT = "tight"  # fits, inside the headroom
    DOES_NOT_FIT = "does-not-fit"
    # What is counted fits, but something that can change the answer is not counted (activations without a
    # sequence length, host RAM or NVMe not given for an option that uses them): no "fits" is said.
    UNKNOWN = "unknown"


class SavedModules(StrEnum):
    """Words a LoRA run's modules_to_save may hold that stand for a set of modules, expanded over the model's layout
    (model/peft.py) as the trainer expands them before peft sees the list."""

    ALL_EMBEDDING = "all-embedding"  # ms-swift: every nn.Embedding (swift/utils/transformers_utils.py find_embedding)
    ALL_NORM = "all-norm"  # ms-swift: every LayerNorm and RMSNorm (find_norm)
    INPUT_EMBEDDINGS = "input-embeddings"  # model.get_input_embeddings(): what LLaMA-Factory's resize_vocab saves
    OUTPUT_EMBEDDINGS = "output-embeddings"  # model.get_output_embeddings(), with it


class Device(StrEnum):
    """Where an offload block puts its tensors (DeepSpeed's OffloadDeviceEnum): "none" keeps them on the GPU."""

    NONE = "none"
    CPU = "cpu"
    NVME = "nvme"


class Resource(StrEnum):
    """Where a memory term's bytes live (memory/terms.py ``Term.device``): the GPU, the host RAM of the process
    that drives one GPU, or NVMe."""

    GPU = "gpu"
    CPU = "cpu"
    NVME = "nvme"

    @classmethod
    def of(cls, device: Device) -> Resource:
        """Where an offload ``device`` keeps its tensors: no offload keeps them on the GPU."""
        return _OFFLOAD_RESOURCE[device]


_OFFLOAD_RESOURCE = {Device.NONE: Resource.GPU, Device.CPU: Resource.CPU, Device.NVME: Resource.NVME}


class Capacity(StrEnum):
    """What a peak is judged against (memory/verdict.py): one GPU's memory, host RAM per node, NVMe per node, and
    the share of each card a colocated vLLM is given (its weights and one request's KV cache must fit in it)."""

    GPU = "gpu"
    HOST = "host"
    NVME = "nvme"
    VLLM_SHARE = "vllm_share"


class Phase(StrEnum):
    """A phase of a run whose peak is estimated on its own (memory/phases.py), in the order they happen."""

    LOAD = "load"
    TRAIN = "train"
    SAVE = "save"


class TermKind(StrEnum):
    """How a memory term's bytes are known: computed from the code, an upper bound, or a stated allowance."""

    EXACT = "exact"
    BOUND = "bound"
    ALLOWANCE = "allowance"


class Precision(StrEnum):
    """The dtype the model trains in (engine.py: fp16 is checked before bf16; neither enabled is fp32)."""

    FP16 = "fp16"
    BF16 = "bf16"
    FP32 = "fp32"

    @property
    def mixed(self) -> bool:
        """A 16-bit model with fp32 master weights (DeepSpeed's fp16 / bf16 optimizers)."""
        return self is not Precision.FP32


class Stage(IntEnum):
    """A ZeRO stage (DeepSpeed's ZeroStageEnum, runtime/zero/config.py): an ``IntEnum``, so it equals its number."""

    DISABLED = 0
    OPTIMIZER_STATES = 1
    GRADIENTS = 2
    WEIGHTS = 3


class Checkpointing(StrEnum):
    """Activation checkpointing, weakest first: what the backward pass recomputes (memory/activations.py)."""

    NONE = "none"
    SELECTIVE = "selective"  # the attention core
    FULL = "full"  # each layer from its input


class ActivationOffload(StrEnum):
    """Which offloader holds the activations saved for backward in host memory (memory/activation_offload.py).

    ``save_on_cpu``: torch's ``save_on_cpu`` around each checkpointed layer (transformers'
    ``gradient_checkpointing_kwargs={"offload": true}``, 5.17+; unsloth's offloaded checkpoint, LLaMA-Factory's
    ``use_unsloth_gc``, axolotl's ``gradient_checkpointing: offload`` before 0.18), a blocking copy of each layer's
    input; ``trl``: TRL's OffloadActivations (``activation_offloading``), every saved tensor of 1 KiB or more on a
    transfer stream; ``hidden_states``: axolotl's ``activation_offloading: hidden_states``, the checkpointed layer
    inputs only, on a transfer stream."""

    NONE = "none"
    SAVE_ON_CPU = "save_on_cpu"
    TRL = "trl"
    HIDDEN_STATES = "hidden_states"


class Padding(StrEnum):
    """How the data collator pads a batch, which decides what the sequence length is (memory/padding.py).

    ``max_length``: every batch is padded to the sequence length (``padding="max_length"``: the example scripts'
    ``--pad_to_max_length``; texts grouped or packed into full blocks: run_clm.py group_texts, TRL packing), so
    every step runs at it. ``longest``: each batch is padded to its own longest sample (transformers 5.24
    data/data_collator.py DataCollatorWithPadding and DataCollatorForSeq2Seq, default ``padding=True``, i.e.
    "longest"), so the sequence length is a maximum (truncation) and the data decides each step's length.
    """

    MAX_LENGTH = "max_length"
    LONGEST = "longest"


ROW_LABELS = {
    "parameters": "parameters",
    "gradients": "gradients",
    "optimizer_states": "optimizer states",
    "model_states": "model states",
    "gathered_parameters": "gathered parameters",
    "buffers": "buffers",
    "activations": "activations",
    "overhead": "overhead",
    "total": "total per GPU",
}
# The rows a preference/RL method adds beside the policy (memory/terms.py METHOD_ROWS), named by role
METHOD_ROW_LABELS = {
    "reference_model": "reference model",
    "reward_model": "reward model",
    "critic": "critic",
    "teacher_model": "teacher model",
    "vllm": "vLLM",
}
# The environment variable that configures torch's CUDA caching allocator (memory/allocator.py reads its value; a
# launcher may set it: config/launch.py).
ALLOC_CONF_ENV = "PYTORCH_CUDA_ALLOC_CONF"
SUBTOTAL_ROW = "model_states"  # parameters + gradients + optimizer states


def row_label(row: str) -> str:
    """A memory row in words: ROW_LABELS, or a preference/RL run's model row (METHOD_ROW_LABELS)."""
    return ROW_LABELS[row] if row in ROW_LABELS else METHOD_ROW_LABELS[row]
TOTAL_ROW = "total"
# The rows a short breakdown names (the markdown table, the does-not-fit message): the subtotal
# and what comes on top of it.
BREAKDOWN_ROWS = ("model_states", "gathered_parameters", "buffers", "activations", "overhead")
HOST_RAM_PER_NODE = "host RAM / node"
NVME_PER_NODE = "NVMe / node"
FITS = "fits"  # the row of the text table that holds each option's verdict mark

# The verdict marks (memory/verdict.py), Unicode and ASCII; None: no capacity given.
VERDICT_MARKS = {Verdict.FITS: ("✓", "yes"), Verdict.TIGHT: ("~", "tight"), Verdict.DOES_NOT_FIT: ("✗", "NO"),
                 Verdict.UNKNOWN: ("?", "?"), None: ("-", "-")}
VERDICT_WORDS = {Verdict.FITS: "fits", Verdict.TIGHT: "tight (fits, inside the headroom)",
                 Verdict.DOES_NOT_FIT: "does not fit", Verdict.UNKNOWN: "unknown (what is counted fits)",
                 None: "not judged (no capacity given)"}
# unknown where what is counted is tight: over the usable memory, inside the headroom (not "fits")
UNKNOWN_TIGHT_WORDS = "unknown (what is counted is tight: inside the headroom)"
# unknown where what is counted does not fit but a feature that can only lower it is not counted (memory/estimate.py)
UNKNOWN_OVER_WORDS = "unknown (what is counted does not fit; what is not counted can only lower it)"
PEAK_GPU = "peak per GPU"
PEAK_HOST = "peak host / node"
# the phase whose host RAM is the peak, and the host RAM while the training loop runs: a host figure a user
# measured in the loop (RSS during the epoch) compares with the latter, not with a peak set at load or save
PEAK_HOST_PHASE = "peak host phase"
TRAIN_HOST = "host / node, train"
BINDING_PHASE = "peak phase"  # the phase (load, train, save) whose peak decides the verdict
STEP_TIME = "step time vs *"  # estimated step time over the configured option's
# What a verdict may leave out (memory/estimate.py StageEstimate.uncounted), and how to give it.
UNCOUNTED_SHORT = {"activations": "activations not counted: give --seq-len",
                   "host": "host RAM not checked: give --cpu-memory",
                   "nvme": "NVMe space not checked: give --nvme",
                   "experts": "experts not split: give --model with its num_experts",
                   "expert_tensor_parallel": "expert_parallel.expert_tensor_parallel_size > 1 not costed",
                   "zenflow": "ZenFlow's GPU top-k columns not costed",
                   "deepcompile": "DeepCompile's memory passes not costed",
                   "module_granularity": "stage3_module_granularity_threshold not costed",
                   "activation_offload": "activation offloading without checkpointing not costed",
                   "deepspeed_checkpointing": "partition_activations/cpu_checkpointing not costed"}
UNCOUNTED_WORDS = {"activations": "activations not counted (no sequence length or architecture: --seq-len, "
                                  "--model with an hf_config)",
                   "host": "host RAM not checked (the offload keeps its states there: give --cpu-memory)",
                   "nvme": "NVMe space not checked (the offload keeps its states there: give --nvme)",
                   "experts": ("experts not split (expert parallel > 1 but the model's expert layout is unknown: "
                               "--model with an hf_config, or num_experts and the layer shapes in a model "
                               "description)"),
                   "expert_tensor_parallel": ("expert_parallel.expert_tensor_parallel_size > 1 not costed (AutoEP "
                                              "splits each expert over etp ranks and the expert-data group is world "
                                              "/ (ep x etp): module_inject/auto_ep_folding.py build_folding_spec)"),
                   "zenflow": ("zero_optimization.zenflow not costed (ZenFlow keeps the top topk_ratio of each "
                               "matrix's gradient columns on the GPU with their own Adam moments and index and "
                               "gradient buffers per bucket: runtime/zenflow/zenflow_stage_1_and_2.py; the column "
                               "counts are not known here)"),
                   "deepcompile": ("compile.deepcompile not costed (DeepCompile keeps parameters gathered and "
                                   "offloads activations, optimizer states or parameters by the free memory its "
                                   "profiler measures at run time: compile/passes/selective_gather.py, "
                                   "offload_*.py)"),
                   "module_granularity": ("zero_optimization.stage3_module_granularity_threshold not costed "
                                          "(ZeRO-3 fetches each module below it whole as a leaf module: the "
                                          "gathered working set is the largest such module, which the module tree "
                                          "decides: runtime/zero/parameter_offload.py)"),
                   "activation_offload": ("activation offloading without checkpointing not costed (TRL's "
                                          "OffloadActivations moves every saved tensor to host memory and keeps "
                                          "what its transfer stream has not drained: trl/models/"
                                          "activation_offloading.py; costed as if they stayed on the GPU)"),
                   "deepspeed_checkpointing": ("activation_checkpointing.partition_activations / cpu_checkpointing "
                                               "not costed (they apply only if the model checkpoints with "
                                               "deepspeed.checkpointing.checkpoint, as Megatron-DeepSpeed does; "
                                               "transformers uses torch.utils.checkpoint, which ignores them: "
                                               "costed as torch's checkpointing)")}
# Activations are left out for want of a sequence length or of the architecture (memory/assumed.py
# ACTIVATION_INPUTS; --params gives a count alone): each missing input, how to give it (short, in words).
ACTIVATIONS_MISSING = {"sequence_length": ("--seq-len", "no sequence length: --seq-len"),
                       "architecture": ("--model (no layer count or hidden size)",
                                        ("no layer count or hidden size: --model with an hf_config, or num_layers and "
                                         "hidden_size in a model description"))}


def uncounted_words(uncounted: tuple[str, ...], activations_missing: tuple[str, ...], short: bool = True) -> list[str]:
    """What a verdict leaves out (``uncounted`` rows), one phrase each; the activations name the inputs missing
    (``activations_missing``, ACTIVATIONS_MISSING's keys), never one that was given."""
    out = []
    for row in uncounted:
        missing = [ACTIVATIONS_MISSING[name][0 if short else 1] for name in activations_missing
                   if name in ACTIVATIONS_MISSING]
        if row != "activations" or not missing:
            out.append((UNCOUNTED_SHORT if short else UNCOUNTED_WORDS)[row])
        elif short:
            out.append(f"activations not counted: give {' and '.join(missing)}")
        else:
            out.append(f"activations not counted ({'; '.join(missing)})")
    return out

# Where a phase's peak happens, for sentences (memory/phases.py, memory/verdict.py).
PHASE_WORDS = {
    Phase.LOAD: "at load (the model handed to deepspeed.initialize)",
    Phase.TRAIN: "while training",
    Phase.SAVE: "while saving a checkpoint",
}

DEVICE_NAMES = {Device.CPU: "CPU", Device.NVME: "NVMe"}


class OptionLike(Protocol):
    @property
    def stage(self) -> int: ...

    @property
    def offload_optimizer(self) -> Device: ...

    @property
    def offload_param(self) -> Device: ...


def table_label(row: str) -> str:
    """A row as the text table shows it: the subtotal marked with "=", the total in capitals."""
    label = ROW_LABELS[row] if row in ROW_LABELS else METHOD_ROW_LABELS[row]
    if row == SUBTOTAL_ROW:
        return f"= {label}"
    if row == TOTAL_ROW:
        first, _, rest = label.partition(" ")
        return f"{first.upper()} {rest}"
    return label


def option_header_lines(option: OptionLike) -> tuple[str, str]:
    """A compact column header on two lines: "Z3 +opt:cpu" over "+par:nvme" ("" when no second)."""
    first = f"Z{option.stage}"
    if option.offload_optimizer != Device.NONE:
        first += f" +opt:{option.offload_optimizer}"
    second = f"+par:{option.offload_param}" if option.offload_param != Device.NONE else ""
    return first, second


def change_suffix(micro_batch: int | None, checkpointing: str | None, sequence_parallel: int | None,
                  tensor_parallel: int | None, buckets: bool = False) -> str:
    """What a recommended run changes besides its option, for a column header: "+mb:1 +ckpt:full +sp:2"
    (each given part only: None where it is as configured)."""
    parts = [f"+mb:{micro_batch}" if micro_batch is not None else "",
             f"+ckpt:{checkpointing}" if checkpointing is not None else "",
             f"+sp:{sequence_parallel}" if sequence_parallel else "",
             f"+tp:{tensor_parallel}" if tensor_parallel else "",
             "+buckets" if buckets else ""]
    return " ".join(part for part in parts if part)


def option_header(option: OptionLike) -> str:
    """The compact label: Z2, Z2 +opt:cpu, Z3 +opt:cpu +par:nvme (``Option.label``, the JSON "label")."""
    return " ".join(part for part in option_header_lines(option) if part)


def option_plain(option: OptionLike) -> str:
    """The option in short plain words: "ZeRO-3 + CPU optimizer offload", "ZeRO-3 + CPU optimizer and parameter
    offload", "ZeRO-3 + CPU optimizer + NVMe parameter offload" (for the verdict line and the short table)."""
    opt, par = option.offload_optimizer, option.offload_param
    words = f"ZeRO-{option.stage}"
    if opt != Device.NONE and opt == par:
        return f"{words} + {_device(opt)} optimizer and parameter offload"
    if Device.NONE not in (opt, par):
        return f"{words} + {_device(opt)} optimizer + {_device(par)} parameter offload"
    if opt != Device.NONE:
        return f"{words} + {_device(opt)} optimizer offload"
    return f"{words} + {_device(par)} parameter offload" if par != Device.NONE else words


def option_words(option: OptionLike) -> str:
    """The option in a sentence: "ZeRO-3 with optimizer offload to CPU and parameter offload to NVMe"."""
    offloads = []
    if option.offload_optimizer != Device.NONE:
        offloads.append(f"optimizer offload to {_device(option.offload_optimizer)}")
    if option.offload_param != Device.NONE:
        offloads.append(f"parameter offload to {_device(option.offload_param)}")
    words = f"ZeRO-{option.stage}"
    return f"{words} with {' and '.join(offloads)}" if offloads else words


def _device(device: Device) -> str:
    return DEVICE_NAMES.get(device, device)


class Accounting(StrEnum):
    """What an estimate counts (``--accounting``)."""

    DEEPSPEED = "deepspeed"  # what DeepSpeed allocates: model states, buffers, activations, allowances
    PAPER = "paper"  # the ZeRO paper's model states alone


ACCOUNTINGS = tuple(Accounting)


class Method(StrEnum):
    """The training method: what a preference/RL trainer runs beside the model being trained (config/method.py
    MethodSetup; memory/ counts the other models and batches it implies). ``--trainer`` takes these words."""

    SFT = "sft"  # supervised fine-tuning / pre-training: one model
    DPO = "dpo"  # TRL DPOTrainer and kin: a reference model, chosen+rejected concatenated
    KTO = "kto"  # unpaired batches, a reference model
    ORPO = "orpo"  # no reference model (odds-ratio term on the policy)
    CPO = "cpo"  # CPO / SimPO: no reference model
    GRPO = "grpo"  # generation (num_generations per prompt, optionally vLLM), a reference model when beta != 0
    PPO = "ppo"  # actor, critic, reward and reference models
    REWARD = "reward"  # reward-model training: a scalar head, two forwards per pair
    GKD = "gkd"  # TRL's GKDTrainer: a teacher model beside the student, both models' logits under a generalized JSD


class TrainerChoice(StrEnum):
    """``--trainer``'s words (the project configuration's ``trainer``, the API's ``trainer=``): each Method, and
    TRL's RLOO, costed as GRPO, its sibling (config/method.py MethodSetup.rloo)."""

    SFT = "sft"
    DPO = "dpo"
    KTO = "kto"
    ORPO = "orpo"
    CPO = "cpo"
    GRPO = "grpo"
    RLOO = "rloo"
    PPO = "ppo"
    REWARD = "reward"
    GKD = "gkd"

    @property
    def method(self) -> Method:
        """The method the estimate costs this choice as."""
        return Method.GRPO if self is TrainerChoice.RLOO else Method(self.value)


class TrainerFamily(StrEnum):
    """Who runs the method: the trainer code whose preparation decides what each model holds."""

    TRL = "trl"
    LLAMA_FACTORY = "llama-factory"
    AXOLOTL = "axolotl"
    MS_SWIFT = "ms-swift"
    OPENRLHF = "openrlhf"


# Each trainer as its own docs name it, for messages.
TRAINER_NAMES: dict[TrainerFamily, str] = {
    TrainerFamily.TRL: "TRL", TrainerFamily.LLAMA_FACTORY: "LLaMA-Factory", TrainerFamily.AXOLOTL: "axolotl",
    TrainerFamily.MS_SWIFT: "ms-swift", TrainerFamily.OPENRLHF: "OpenRLHF"}


class VllmMode(StrEnum):
    """Where vLLM generates for GRPO/PPO: on the training GPUs (a share of each card) or on its own GPUs."""

    COLOCATE = "colocate"
    SERVER = "server"


class ModelRole(StrEnum):
    """A model a run holds besides (or as) the one being trained; memory rows are named by it."""

    POLICY = "policy"
    REFERENCE = "reference"
    REWARD = "reward"
    CRITIC = "critic"
    TEACHER = "teacher"  # GKD's teacher: frozen, prepared as the reference is
