"""Assumed inputs: the values the estimate took because nobody gave them, each naming how to give it.

Every input that changes the verdict and that neither the DeepSpeed config decides nor a flag or
the model description gave becomes one :class:`AssumedInput`. ``estimate`` carries them as
``Estimate.assumed`` (JSON ``assumed``), the ``assumed-input`` rule (ZA808) reports each as a
warning, and verdict code asks :func:`activations_unknown`.

:data:`INPUTS` is the one table of what sets each input: the flag (cli/options.py) and the model
description field (model/description.py FIELDS); tests check both exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from zeroadvisor.jsontypes import JSONObject, JSONValue
from zeroadvisor.memory.ds_changes import CHANGES, OFFLOAD_STEP_COPY, OVERFLOW_CHECK, Change, era, releases_of
from zeroadvisor.model.spec import LoadInputs, ModelSpec, TrainingShape
from zeroadvisor.vocab import Device

if TYPE_CHECKING:
    from collections.abc import Iterable

    from zeroadvisor.deepspeed.settings import Config
    from zeroadvisor.hardware.machine import Hardware
    from zeroadvisor.memory.options import Option


@dataclass(frozen=True, slots=True)
class Input:
    """How a user gives one input: a flag and a model-description field ("" where there is none), or the key of
    the trainer's own file that sets it (``key``: the preference/RL method's settings, config/method.py)."""

    words: str  # what it is, for messages
    flag: str
    field: str
    key: str = ""


INPUTS: dict[str, Input] = {
    "sequence_length": Input("sequence length", "--seq-len", "sequence_length"),
    "architecture": Input("layer count and hidden size", "--model", "num_layers, hidden_size"),
    "target_length": Input("target (decoder) length", "--target-len", "target_length"),
    "image_tokens": Input("image tokens per sample", "--image-tokens", "image_tokens"),
    "padding": Input("padding", "--padding", "padding"),  # memory/padding.py: only where it changes the verdict
    "micro_batch_size": Input("micro batch per GPU", "--micro-batch", "micro_batch_size"),
    "precision": Input("training precision", "--precision", "precision"),
    "zero_stage": Input("ZeRO stage", "--stage", ""),
    "optimizer": Input("optimizer", "", ""),  # only the config sets it: optimizer.type
    "optim": Input("client optimizer (the HF Trainer's optim)", "--optim", "optim"),
    "load_dtype": Input("load dtype", "--load-dtype", "load_dtype"),
    "zero_init": Input("zero.Init at load", "--zero-init/--no-zero-init", "zero_init"),
    "meta_device": Input("meta-device load", "--meta-load/--no-meta-load", "meta_load"),
    "tensor_parallel": Input("tensor-parallel degree", "--tensor-parallel", "tensor_parallel"),
    "pipeline_parallel": Input("pipeline-parallel degree", "--pipeline-parallel", "pipeline_parallel"),
    "sequence_parallel": Input("sequence-parallel degree", "--sequence-parallel", "sequence_parallel"),
    "expert_parallel": Input("expert-parallel degree", "--expert-parallel", "expert_parallel"),
    # the machine facts of the step time (hardware/machine.py DEFAULTS names the same flags)
    "efficiency": Input("GPU efficiency (share of dense peak)", "--efficiency", ""),
    "inter_node_bandwidth": Input("inter-node bandwidth (GB/s per node)", "--inter-node-bandwidth", ""),
    "cpu_cores": Input("CPU cores per node", "--cpu-cores", ""),
    "nvme_bandwidth": Input("NVMe bandwidth (GB/s per node)", "--nvme-bandwidth", ""),
    "launcher": Input("launcher (CPU optimizer threads per GPU process)", "--launcher", ""),
    # a --gpu name meaning several cards of one memory: which one the step time takes (hardware/gpus.py)
    "gpu_variant": Input("GPU variant", "--gpu", ""),
    # the release whose defaults the estimate reads where no pin, installed DeepSpeed or flag said it
    # (inputs/release.py); only a default that moves host memory makes it count (release_assumption)
    "deepspeed_version": Input("DeepSpeed release (its offload pin_memory default, where stage 1/2 flatten)",
                               "--deepspeed-version", ""),
    # the transformers release an MoE model's layout was counted as where no flag, description field or pin said
    # it (model/transformers_release.py): 4.x per-expert nn.Linear modules, 5.x one fused module per layer
    "transformers_version": Input("transformers release (an MoE model's expert layout)", "--transformers-version",
                                  "transformers_version"),
    # the run's allocator settings: read from the environment and the launch command's VAR=value prefixes
    # (memory/allocator.py); no flag or model field sets it
    "alloc_conf": Input("PYTORCH_CUDA_ALLOC_CONF", "", ""),
    # the preference/RL method (config/method.py MethodSetup; memory/method.py method_assumptions): the method where
    # it was guessed from a file's keys, and the method's settings that decide memory where no file said them (the
    # trainer's defaults at its release apply); ``key`` is the TRL spelling, the family's own where it differs
    "trainer": Input("training method", "--trainer", ""),
    "trainer_version": Input("trainer release", "", "", "a pin of the trainer, e.g. trl==X in requirements.txt"),
    "precompute_ref_log_probs": Input("reference log-probs precomputed", "", "", "precompute_ref_log_probs"),
    "beta": Input("KL coefficient beta", "", "", "beta"),
    "vllm_mode": Input("vLLM mode", "", "", "vllm_mode"),
    "vllm_gpu_memory_utilization": Input("vLLM share of the card", "", "", "vllm_gpu_memory_utilization"),
    "max_completion_length": Input("completion length", "", "", "max_completion_length"),
    # the rollout without vLLM (memory/generation.py): TRL's whole-policy gather at ZeRO-3, the rollout chunk
    "ds3_gather_for_generation": Input("policy gathered whole for generation (ZeRO-3)", "", "",
                                       "ds3_gather_for_generation"),
    "rollout_batch_size": Input("rollout micro batch", "", "", "--micro_rollout_batch_size"),
    # TRL's PPO loads its reward and value models from PPOConfig.reward_model_path (memory/method.py
    # method_assumptions): where no file names one they are costed as the policy's architecture
    "reward_model_path": Input("reward and value models", "", "", "reward_model_path"),
    # TRL's GKD (memory/method.py method_assumptions): its teacher, its JSD's beta and its on-policy share
    "teacher_model": Input("teacher model", "", "", "teacher_model_name_or_path"),
    "jsd_beta": Input("generalized JSD's beta", "", "", "beta"),
    "lmbda": Input("on-policy share of the steps (lmbda)", "", "", "lmbda"),
}

# Hardware field -> INPUTS key, for the step-time defaults (hardware/machine.py Hardware.defaulted).
HARDWARE_INPUTS = {"efficiency": "efficiency", "inter_node_gb_s": "inter_node_bandwidth", "cpu_cores": "cpu_cores",
                   "nvme_gb_s": "nvme_bandwidth", "launcher": "launcher"}

# The inputs without which the activation term is 0: the verdict then covers everything but activations.
ACTIVATION_INPUTS = ("sequence_length", "architecture")
# The inputs of the load phase alone (memory/phases.py load_phase): they move the verdict only where it binds.
LOAD_INPUTS = ("load_dtype", "zero_init", "meta_device")
# The inputs of the optimizer step's temporaries alone (memory/step_temporaries.py): they move the verdict only
# where that term is counted.
STEP_INPUTS = ("optim",)
# The inputs that move only the host-RAM rows (pinned or pageable offload buffers): they matter where host RAM
# is checked (--cpu-memory).
HOST_INPUTS = ("deepspeed_version",)


class Reach(StrEnum):
    """What an assumed input can change (``reach``)."""

    ACTIVATIONS = "activations"  # the verdict is unknown without it
    LOAD = "load"  # the load phase's peak
    STEP = "step"  # the optimizer step's temporaries
    STEP_TIME = "step time"  # the machine facts: the ranking of fixes
    HOST = "host"  # the host-RAM rows
    VERDICT = "verdict"  # every phase


def reach(name: str) -> Reach:
    """What the assumed input ``name`` can change."""
    if name in ACTIVATION_INPUTS:
        return Reach.ACTIVATIONS
    if name in LOAD_INPUTS:
        return Reach.LOAD
    if name in STEP_INPUTS:
        return Reach.STEP
    if name in HOST_INPUTS:
        return Reach.HOST
    return Reach.STEP_TIME if name in HARDWARE_INPUTS.values() else Reach.VERDICT


@dataclass(frozen=True, slots=True)
class AssumedInput:
    """One input the estimate assumed. ``value`` is what it used (None: the term it feeds is not
    counted); ``pointer`` is the config key whose "auto" it fills ("" when none); ``effect`` says in
    one line what the assumption does to the estimate."""

    name: str  # a key of INPUTS
    value: JSONValue
    flag: str
    field: str
    pointer: str
    effect: str
    key: str = ""  # the trainer's file key that sets it (INPUTS' key, spelled as the run's trainer spells it)

    @classmethod
    def of(cls, name: str, value: JSONValue, effect: str, pointer: str = "", key: str | None = None) -> AssumedInput:
        source = INPUTS[name]
        return cls(name, value, source.flag, source.field, pointer, effect, source.key if key is None else key)

    @property
    def words(self) -> str:
        return INPUTS[self.name].words

    def how_to_set(self) -> str:
        ways = [f"flag {self.flag}" if self.flag else "",
                f"model-description field {self.field}" if self.field else "",
                (self.key if self.name == "trainer_version" else f"the trainer's key {self.key}") if self.key else ""]
        ways = [w for w in ways if w]
        if self.name == "alloc_conf":
            return "set it in the environment the run has, or as a VAR=value prefix of the launch command"
        if not ways:
            return "set it in the DeepSpeed config"
        return "set it with " + " or ".join(ways)

    def shown_value(self) -> str:
        if self.value is None:
            return "unknown"
        if isinstance(self.value, bool):
            return "on" if self.value else "off"
        return str(self.value)

    def message(self) -> str:
        """One line for reports: what was assumed, what it does, how to give it."""
        where = f" for {self.pointer.lstrip('/').replace('/', '.')}" if self.pointer else ""
        if self.value is None:
            return f"{self.words} not given{where}: {self.effect}; {self.how_to_set()}"
        return f"assumed {self.words} {self.shown_value()}{where}: {self.effect}; {self.how_to_set()}"

    def brief(self) -> str:
        """An item of the assumptions block: the flag that sets it and the value taken ("--load-dtype fp16");
        without a flag, what it is and where it is set ("optimizer AdamW (the DeepSpeed config)")."""
        if self.name == "architecture":  # --model gives a whole model, not this value: "--model unknown" misleads
            return f"{self.words} {self.shown_value()} ({self.flag})"
        if self.flag:
            return f"{self.flag.split('/')[0]} {self.shown_value()}"
        where = (f"model field {self.field}" if self.field else "the environment" if self.name == "alloc_conf"
                 else "a pin" if self.name == "trainer_version" else self.key if self.key else "the DeepSpeed config")
        return f"{self.words} {self.shown_value()} ({where})"

    def to_dict(self) -> JSONObject:
        out: JSONObject = {"name": self.name, "value": self.value, "flag": self.flag, "field": self.field,
                           "pointer": self.pointer, "effect": self.effect}
        if self.key:  # the method's settings: the trainer's file key
            out["key"] = self.key
        return out


def activations_unknown(assumed: list[AssumedInput]) -> bool:
    """Whether the activation term is missing from the estimate for lack of an input."""
    return any(a.name in ACTIVATION_INPUTS for a in assumed)


NOT_COUNTED = ("activations are NOT counted, so the verdict is only about model states, gathered parameters, "
               "buffers and overhead")


def shape_assumptions(model: ModelSpec, shape: TrainingShape, configured_stage: int | None) -> list[AssumedInput]:
    """The inputs of the training shape and the load phase that were not given (deepspeed accounting).

    ``configured_stage``: the stage the config runs (None without a config); zero.Init is only an
    input at stage 3.
    """
    out: list[AssumedInput] = []
    if not shape.sequence_length:
        out.append(AssumedInput.of("sequence_length", None, NOT_COUNTED))
    elif not (model.num_layers and model.hidden_size):
        out.append(AssumedInput.of("architecture", None, NOT_COUNTED + " (give an hf_config or the architecture "
                                   "fields)"))
    if model.encoder_decoder and shape.target_length is None:
        out.append(AssumedInput.of("target_length", shape.sequence_length,
                                   "the decoder stack is costed at the sequence length (the encoder's)"))
    if model.vision is not None and model.vision_trains and shape.image_tokens is None and shape.sequence_length:
        out.append(AssumedInput.of("image_tokens", shape.sequence_length,
                                   "the vision tower trains and keeps its activations: costed with every token of "
                                   "the sequence an image token (the most it holds), an upper bound where the "
                                   "samples hold text too"))
    out += load_assumptions(model, shape.load, configured_stage)
    release = release_assumption_model(model)
    return out + ([release] if release is not None else [])


def release_assumption_model(model: ModelSpec) -> AssumedInput | None:
    """The modelled transformers release, where nothing gave one and the layout counted depends on it (an MoE
    model: model/transformers_release.py)."""
    from zeroadvisor.model.transformers_release import MODELLED

    if not model.release_dependent or model.transformers_version is not None:
        return None
    return AssumedInput.of("transformers_version", MODELLED,
                           "the routed experts counted as transformers 5's one fused module per layer (QLoRA leaves "
                           "it unquantized, all-linear adapts it only through peft's MoE conversion, ZeRO-3 gathers it "
                           "whole); 4.x builds one nn.Linear MLP per expert")


def load_assumptions(model: ModelSpec, load: LoadInputs, configured_stage: int | None) -> list[AssumedInput]:
    """Defaults for the load inputs not given: the Hugging Face Trainer with transformers 5.24."""
    out: list[AssumedInput] = []
    if load.load_dtype is None:
        if model.checkpoint_dtype is not None:
            # from_pretrained(dtype=None) becomes "auto", which reads config.dtype
            # (transformers/modeling_utils.py from_pretrained and _get_dtype).
            out.append(AssumedInput.of("load_dtype", model.checkpoint_dtype,
                                       "from_pretrained loads in the checkpoint's dtype from config.json "
                                       "(transformers 5 dtype=\"auto\")"))
        else:
            # Without a dtype in config.json, torch.get_default_dtype() (fp32) is transformers 4's default
            # and the widest a checkpoint is saved in: a bound.
            out.append(AssumedInput.of("load_dtype", "fp32", "the checkpoint's dtype is unknown: loaded in fp32, "
                                       "torch's default dtype (a bound: a 16-bit checkpoint loads in half)"))
    if model.quantized_parameters:
        # bitsandbytes decides both: no zero.Init for a quantized model, and the weights are loaded onto the
        # current GPU (modeling_utils.py get_init_context; quantizers/quantizer_bnb_4bit.py update_device_map)
        return out
    zero_init = configured_stage == 3 and load.zero_init is not False
    if load.zero_init is None and configured_stage == 3:
        # modeling_utils.py get_init_context enters deepspeed.zero.Init when
        # integrations/deepspeed.py is_deepspeed_zero3_enabled(): the Trainer's TrainingArguments with
        # the stage-3 config exist before from_pretrained.
        out.append(AssumedInput.of("zero_init", True, "parameters are created partitioned under deepspeed.zero.Init "
                                   "(the HF Trainer with the config known before from_pretrained)"))
    if load.meta_device is None and not zero_init:  # under zero.Init no rank builds the whole model
        # Without a device_map, from_pretrained builds on the meta device and materialises the weights in
        # host RAM (modeling_utils.py get_init_context, torch.device("meta")); every local rank does so.
        out.append(AssumedInput.of("meta_device", False, "every local rank materialises the weights in host RAM "
                                   "(from_pretrained without a device_map)"))
    return out


def hardware_notes(hw: Hardware) -> list[str]:
    """The same defaults as one note line each, for the step time's own notes."""
    from zeroadvisor.hardware.machine import DEFAULTS

    out = []
    for field_name in hw.defaulted:
        given = INPUTS[HARDWARE_INPUTS[field_name]]
        out.append(f"assumed {given.flag.lstrip('-').replace('-', ' ')} {getattr(hw, field_name)}: "
                   f"{DEFAULTS[field_name][1]}; set it with flag {given.flag}")
    if hw.gpu is not None and hw.gpu.assumed_variant:
        out.append(f"{hw.gpu.assumed_variant}; give the card's full name with --gpu")
    return out


# Hardware field -> what a run must have for that machine fact to enter its step time (step.py): the network
# between nodes only with more than one node, the CPU cores and launcher only with the optimizer on the CPU,
# the NVMe bandwidth only with something on NVMe. The GPU efficiency scales every step.
NEEDS = {"inter_node_gb_s": "nodes", "cpu_cores": "cpu", "launcher": "cpu", "nvme_gb_s": "nvme"}


def machine_uses(options: Iterable[Option], nodes: int) -> frozenset[str]:
    """What the runs of ``options`` on ``nodes`` nodes have of NEEDS (hardware_assumptions ``uses``)."""
    from zeroadvisor.vocab import Device

    chosen = list(options)
    devices = {d for o in chosen for d in (o.offload_optimizer, o.offload_param)}
    return frozenset({"nodes"} if nodes > 1 else set()) | ({"cpu"} if Device.CPU in devices else set()) | \
        ({"nvme"} if Device.NVME in devices else set())


def hardware_assumptions(hw: Hardware, uses: frozenset[str] = frozenset({"nodes", "cpu", "nvme"})
                         ) -> list[AssumedInput]:
    """The step-time defaults ``hw`` (hardware/machine.py Hardware) used because no flag gave them, of those that
    can enter a step time of the runs judged: ``uses`` names what they have (NEEDS: "nodes", "cpu", "nvme").

    Call it only where a step time was computed: without one, these inputs change nothing."""
    from zeroadvisor.hardware.machine import DEFAULTS  # the one table of flags, defaults and reasons

    out = []
    for field_name in hw.defaulted:
        if NEEDS.get(field_name, "") not in uses | {""}:
            continue
        _default, why = DEFAULTS[field_name]
        out.append(AssumedInput.of(HARDWARE_INPUTS[field_name], getattr(hw, field_name),
                                   f"the step time uses it ({why})"))
    if hw.gpu is not None and hw.gpu.assumed_variant:  # the memory is the same whichever card was meant
        out.append(AssumedInput.of("gpu_variant", hw.gpu.name, hw.gpu.assumed_variant))
    return out


OFFLOADS = ("offload_optimizer", "offload_param")


def release_assumption(config: Config, release: str, flatten_binds: bool = False, offload12: bool = False,
                       boundary_counts: bool = False) -> AssumedInput | None:
    """The assumed DeepSpeed release, where it decides what the estimate counts: an offload section that
    leaves ``pin_memory`` unset (its default is false before 0.19.5 and true from it: runtime/zero/
    offload_config.py ``pin_memory``), so pinned host buffers are counted or not by the release alone;
    ``flatten_binds``: the configured stage 1/2 run peaks at load where the parameters are flattened beside the
    model on the GPU, which releases before 0.19.0 do on the host; ``offload12``: the configured run is stage 1/2
    with the optimizer offloaded, whose step some releases run through an fp32 partition on the GPU; and
    ``boundary_counts``: its backward boundary adds to its peak, where older releases test the whole gradient for
    overflow elementwise (memory/ds_changes.py)."""
    from zeroadvisor.deepspeed.settings import as_settings

    effects: list[str] = []
    pointer = ""
    zero = as_settings(config).zero_config
    for section, offload in zip(OFFLOADS, (zero.offload_optimizer, zero.offload_param), strict=True):
        # a section written as an object with the device as lower-case text (not the cpu_offload booleans)
        if not offload.legacy and offload.written in (Device.CPU, Device.NVME) and not offload.pin_memory_written:
            pinned = offload.pin_memory is True  # not written: DeepSpeed's default, a bool
            effects.append(f"{section}.pin_memory read as DeepSpeed {release}'s default, {str(pinned).lower()}: "
                           f"host buffers counted {'pinned' if pinned else 'pageable'}")
            pointer = f"/zero_optimization/{section}/pin_memory"
            break
    if flatten_binds:
        since = CHANGES[Change.FLATTEN_ON_ACCELERATOR].since
        effects.append(f"the load's peak read as DeepSpeed {release} builds it: the parameters flattened beside "
                       f"them on the GPU (from {since}; earlier releases flatten on the host)")
    for eras, counts, what, size in ((OFFLOAD_STEP_COPY, offload12, "the offload step", "B per parameter / GPUs"),
                                     (OVERFLOW_CHECK, boundary_counts, "backward's accumulation boundary",
                                      "B per element of the largest gradient")):
        ran = era(eras, release)
        heavy = max(eras, key=lambda e: e.bytes_per_element)
        if counts and ran is not heavy:
            effects.append(f"{what} read as DeepSpeed {release} runs it; DeepSpeed "
                           f"{releases_of(eras, heavy)} allocate {heavy.bytes_per_element} {size} more on the GPU "
                           f"({heavy.source})")
    if not effects:
        return None
    return AssumedInput.of("deepspeed_version", release, "; ".join(effects), pointer)
