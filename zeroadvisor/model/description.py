"""Model descriptions: what the memory model is told about the network and its training.

A description is one of

* a Hugging Face ``config.json`` (recognised by its ``model_type`` key): counted exactly
  by :mod:`zeroadvisor.model.hf`;
* a zeroadvisor YAML or JSON file (JSON is read by the same YAML path) with either
  ``hf_config: path/to/config.json`` (relative to the file) or ``parameters: 7.5B`` plus
  optional architecture fields, and the training shape (``sequence_length``,
  ``activation_checkpointing``, ``flash_attention``).

:data:`FIELDS` is the single source of truth for the description keys: the loader checks
against it and ``tools/gen_model_schema.py`` writes ``zeroadvisor/schemas/model.schema.json`` from it.

Every problem is a one-line :class:`~zeroadvisor.model.errors.ModelError` naming the file,
line and column (1-based) of the offending key, or of its value when the value is wrong.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from zeroadvisor.config.limits import MAX_MODEL_BYTES
from zeroadvisor.jsontypes import JSONObject, JSONValue
from zeroadvisor.model.errors import ModelError
from zeroadvisor.model.frozen import apply as apply_frozen
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.hfconfig import check_dimension, fmt
from zeroadvisor.model.peft import ALL_LINEAR, PEFT_DEFAULT, PEFT_METHODS, QUANTIZATIONS, PeftSettings
from zeroadvisor.model.peft import apply as apply_peft
from zeroadvisor.model.spec import (
    CLIENT_OPTIMIZER_NAMES,
    ZERO_STAGES,
    Checkpointing,
    LoadInputs,
    ModelSpec,
    Padding,
    Precision,
    TrainingShape,
)
from zeroadvisor.model.transformers_release import ReleaseError
from zeroadvisor.model.transformers_release import resolve as resolve_release
from zeroadvisor.vocab import ActivationOffload

if TYPE_CHECKING:  # json and yaml are imported where a file is read
    import json

    from yaml import Node

    from zeroadvisor.config.source import Document
    from zeroadvisor.config.vision_freeze import VisionFreeze

SCHEMA_FILE = "model.schema.json"

CHECKPOINTING: tuple[str, ...] = tuple(level.value for level in Checkpointing)  # ("none", "selective", "full")
PRECISIONS: tuple[str, ...] = get_args(Precision)  # ("fp32", "fp16", "bf16")
PADDINGS: tuple[str, ...] = tuple(way.value for way in Padding)  # ("max_length", "longest")
ACTIVATION_OFFLOADS: tuple[str, ...] = tuple(way.value for way in ActivationOffload)  # memory/activation_offload.py

# A parameter count as text: an integer part (digits with _ separators, or commas between
# groups of exactly three digits, so that "1,5B" cannot silently read as 15B), an optional
# fraction and exponent, then an optional K/M/B/T suffix in either case: 7.5B, 70b, 1.3e9,
# 125M, 6,738,415,616. The schema's pattern and the parser are built from the same pieces.
_INT = r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9][0-9_]*)"
_FRACTION, _EXPONENT, _SUFFIXES = r"(?:\.[0-9]+)?", r"(?:[eE][+-]?[0-9]+)?", "kKmMbBtT"
COUNT_PATTERN = rf"^\s*{_INT}{_FRACTION}{_EXPONENT}\s*[{_SUFFIXES}]?\s*$"
_COUNT = re.compile(
    rf"^(?P<mantissa>{_INT}{_FRACTION})(?:[eE](?P<exp>[+-]?[0-9]+))?\s*(?P<suffix>[{_SUFFIXES}]?)$"
)
_SUFFIX = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}
_MAX_EXACT_FLOAT = 2**53
# 1e30 parameters is not a model (the largest have ~1e12); the bound keeps byte counts in float range.
MAX_PARAMETERS = 10**30  # above this a YAML/JSON float no longer names one integer


@dataclass(frozen=True, slots=True)
class DescriptionField:
    """One key of a model description: its JSON Schema, and the words errors use."""

    name: str
    group: str  # "source" | "architecture" | "training"
    schema: Mapping[str, JSONValue]
    expect: str  # completes "<name> must be ...", e.g. "an integer > 0"
    help: str


_POSITIVE: JSONObject = {"type": "integer", "minimum": 1}

FIELDS: tuple[DescriptionField, ...] = (
    DescriptionField(
        "hf_config",
        "source",
        {"type": "string", "minLength": 1},
        "a path to a Hugging Face config.json",
        "Path (relative to this file) of a Hugging Face config.json or of a model folder holding one, or a Hub id "
        "(meta-llama/Llama-3.1-8B) found as --model finds it (the Hugging Face cache, then zeroadvisor's catalog; "
        "no network); the parameter count and architecture are derived from it exactly.",
    ),
    DescriptionField(
        "parameters",
        "source",
        {
            "anyOf": [
                {"type": "integer", "minimum": 1},
                {"type": "number", "exclusiveMinimum": 0},
                {"type": "string", "pattern": COUNT_PATTERN},
            ]
        },
        "an integer > 0 or a count like 7.5B, 70b, 1.3e9, 125M, 1T",
        "Total parameter count when there is no config.json: an integer or a string with "
        "an optional K/M/B/T suffix (7.5B = 7,500,000,000 exactly).",
    ),
    DescriptionField(
        "num_layers", "architecture", _POSITIVE, "an integer > 0", "Number of transformer layers."
    ),
    DescriptionField(
        "hidden_size", "architecture", _POSITIVE, "an integer > 0", "Model (residual) width."
    ),
    DescriptionField(
        "num_attention_heads", "architecture", _POSITIVE, "an integer > 0", "Attention heads."
    ),
    DescriptionField(
        "num_key_value_heads",
        "architecture",
        _POSITIVE,
        "an integer > 0",
        "Key/value heads (grouped-query attention); defaults to num_attention_heads.",
    ),
    DescriptionField(
        "intermediate_size",
        "architecture",
        _POSITIVE,
        "an integer > 0",
        "MLP width (per expert for mixture-of-experts models).",
    ),
    DescriptionField("vocab_size", "architecture", _POSITIVE, "an integer > 0", "Vocabulary size."),
    DescriptionField(
        "encoder_layers",
        "architecture",
        _POSITIVE,
        "an integer > 0",
        "Encoder-decoder models: layers of the encoder stack (run over the source sequence).",
    ),
    DescriptionField(
        "decoder_layers",
        "architecture",
        _POSITIVE,
        "an integer > 0",
        "Encoder-decoder models: layers of the decoder stack (run over the target sequence, with "
        "cross-attention to the source).",
    ),
    DescriptionField(
        "lm_head",
        "architecture",
        {"type": "boolean"},
        "true or false",
        "Whether the model computes vocabulary-wide logits (a language-model head, as *ForCausalLM, "
        "*ForMaskedLM, *ForConditionalGeneration); false for classifiers. Unknown: assumed true.",
    ),
    DescriptionField(
        "sequence_length",
        "training",
        _POSITIVE,
        "an integer > 0",
        "Training sequence length in tokens.",
    ),
    DescriptionField(
        "activation_checkpointing",
        "training",
        {"enum": list(CHECKPOINTING)},
        "one of " + ", ".join(CHECKPOINTING),
        "Activation checkpointing: none, selective (attention recomputed) or full "
        "(only layer inputs kept).",
    ),
    DescriptionField(
        "flash_attention",
        "training",
        {"type": "boolean"},
        "true or false",
        "Whether attention runs a fused (flash / memory-efficient) kernel that does not "
        "materialise the score matrix.",
    ),
    DescriptionField(
        "target_length",
        "training",
        _POSITIVE,
        "an integer > 0",
        "Encoder-decoder models: target (decoder) sequence length in tokens; default the sequence length.",
    ),
    DescriptionField(
        "image_tokens",
        "training",
        _POSITIVE,
        "an integer > 0",
        "Vision-language models (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): how many of each sample's sequence_length tokens "
        "are image tokens (the vision tower runs over 4 patches per token); default: every token, the most the "
        "sequence holds (counted only where the vision tower trains).",
    ),
    DescriptionField(
        "vision_checkpointing",
        "training",
        {"type": "boolean"},
        "true or false",
        "Vision-language models: whether the vision tower's blocks are checkpointed (ms-swift's "
        "--vit_gradient_checkpointing); default: as the decoder's layers (activation_checkpointing full).",
    ),
    DescriptionField(
        "padding",
        "training",
        {"enum": list(PADDINGS)},
        "one of " + ", ".join(PADDINGS),
        "How the data collator pads each batch: max_length (every batch padded to the sequence length: "
        "--pad_to_max_length, packed or grouped texts) or longest (each batch to its own longest sample, "
        "DataCollatorForSeq2Seq's and DataCollatorWithPadding's default: the sequence and target lengths are "
        "maxima). Default: max_length.",
    ),
    DescriptionField(
        "micro_batch_size",
        "training",
        _POSITIVE,
        "an integer > 0",
        "Samples per GPU per step; fills train_micro_batch_size_per_gpu where the DeepSpeed config "
        "leaves it \"auto\" or out (a different explicit value there is an error).",
    ),
    DescriptionField(
        "precision",
        "training",
        {"enum": list(PRECISIONS)},
        "one of " + ", ".join(PRECISIONS),
        "Training precision; fills fp16/bf16 \"enabled\": \"auto\" (or stands in for a missing config).",
    ),
    DescriptionField(
        "load_dtype",
        "training",
        {"enum": list(PRECISIONS)},
        "one of " + ", ".join(PRECISIONS),
        "The dtype the script loads the weights in (from_pretrained dtype=); default the checkpoint's "
        "dtype from config.json, else fp32.",
    ),
    DescriptionField(
        "transformers_version",
        "source",
        {"type": "string", "minLength": 1, "maxLength": 80},
        "a transformers release (4.41.2), release line (4.41) or PEP 440 range",
        "The transformers release the training runs (a range counts as the newest it admits); default the pin "
        "beside the DeepSpeed config, else 5.24. It decides an MoE model's layout: 4.x builds each routed expert "
        "as nn.Linear modules (quantized by QLoRA, adapted by all-linear), 5.x one fused module of 3-D "
        "parameters per layer (model/transformers_release.py).",
    ),
    DescriptionField(
        "optim",
        "training",
        {"enum": list(CLIENT_OPTIMIZER_NAMES)},
        "a Hugging Face Trainer optim name",
        "The client optimizer where the DeepSpeed config has no optimizer block: the Trainer's optim "
        "(default adamw_torch, whose foreach step builds an fp32 temporary the size of the partition).",
    ),
    DescriptionField(
        "liger_kernel",
        "training",
        {"type": "boolean"},
        "true or false",
        "Whether the Liger kernel is applied (the Trainer's use_liger_kernel, LLaMA-Factory's enable_liger_kernel, "
        "ms-swift's --use_liger_kernel): its fused linear cross-entropy never materialises the tokens x vocabulary "
        "logits, and its RMSNorm/SwiGLU keep less (default false).",
    ),
    DescriptionField(
        "cut_cross_entropy",
        "training",
        {"type": "boolean"},
        "true or false",
        "Whether Cut Cross-Entropy computes the supervised loss (axolotl's CutCrossEntropyPlugin): no tokens x "
        "vocabulary logits, the hidden states' and the head's gradients instead (default false).",
    ),
    DescriptionField(
        "tiled_mlp",
        "training",
        {"type": "boolean"},
        "true or false",
        "Whether each MLP is a TiledMLP (axolotl's tiled_mlp, ALST): under full recomputation it keeps only its input "
        "and its backward recomputes one shard of the sequence at a time (default false).",
    ),
    DescriptionField(
        "tiled_mlp_shards",
        "training",
        _POSITIVE,
        "an integer > 0",
        "TiledMLP's shards (axolotl's tiled_mlp_num_shards); default: axolotl's rule, about 32,768 tokens a shard.",
    ),
    DescriptionField(
        "activation_offload",
        "training",
        {"enum": list(ACTIVATION_OFFLOADS)},
        "one of " + ", ".join(ACTIVATION_OFFLOADS),
        "Which offloader holds the checkpointed layer inputs in host memory under full recomputation: save_on_cpu "
        "(transformers' gradient_checkpointing_kwargs offload, unsloth's offloaded checkpoint), trl (TRL's "
        "activation_offloading), hidden_states (axolotl's), or none (the default).",
    ),
    DescriptionField(
        "checkpoint_every",
        "training",
        _POSITIVE,
        "an integer > 0",
        "Under full recomputation, checkpoint every n-th layer only (transformers 5.16+ every_n_layers in the "
        "checkpoint arguments); the other layers keep their activations. Default 1: every layer.",
    ),
    DescriptionField(
        "zero_init",
        "training",
        {"type": "boolean"},
        "true or false",
        "Stage 3: whether the model is created under deepspeed.zero.Init (default true, as the Hugging "
        "Face Trainer does when the DeepSpeed config is known before from_pretrained).",
    ),
    DescriptionField(
        "meta_load",
        "training",
        {"type": "boolean"},
        "true or false",
        "Whether the model is built on the meta device and its weights materialised straight on the "
        "GPU (e.g. device_map), with no copy in host RAM per rank (default false).",
    ),
    DescriptionField(
        "tensor_parallel",
        "training",
        _POSITIVE,
        "an integer > 0",
        "Tensor-parallel (AutoTP) degree; fills tensor_parallel.autotp_size where the DeepSpeed config leaves "
        "it out (a different value there is an error).",
    ),
    DescriptionField(
        "pipeline_parallel",
        "training",
        _POSITIVE,
        "an integer > 0",
        "Pipeline stages (PipelineModule num_stages, set in code).",
    ),
    DescriptionField(
        "sequence_parallel",
        "training",
        _POSITIVE,
        "an integer > 0",
        "Sequence-parallel (Ulysses) degree; fills sequence_parallel_size where the DeepSpeed config leaves it "
        "out (a different value there is an error).",
    ),
    DescriptionField(
        "expert_parallel",
        "training",
        _POSITIVE,
        "an integer > 0",
        "Expert-parallel degree of the MoE layers (ep_size, set in code).",
    ),
    DescriptionField(
        "peft",
        "training",
        {
            "type": "object",
            "properties": {
                "method": {"enum": list(PEFT_METHODS)},
                "r": {"type": "integer", "minimum": 1},
                "target_modules": {
                    "anyOf": [
                        {"enum": [ALL_LINEAR, PEFT_DEFAULT]},
                        {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
                    ]
                },
                "modules_to_save": {"type": "array", "items": {"type": "string", "minLength": 1}},
                "quantization": {"enum": list(QUANTIZATIONS)},
                "double_quant": {"type": "boolean"},
                "lora_dropout": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
            },
            "required": ["method"],
            "additionalProperties": False,
        },
        "a mapping with method (lora or qlora), r (an integer > 0), target_modules (a list of module names, "
        "all-linear or peft-default), modules_to_save (a list of module names), quantization (4bit or 8bit, "
        "qlora only), double_quant (true or false) and lora_dropout (a probability, 0 <= p < 1)",
        "LoRA/QLoRA (peft LoraConfig): method lora|qlora, r (default 8), target_modules (names matched as peft "
        "does, all-linear, the default, or peft-default: what peft adapts where LoraConfig is given none, e.g. "
        "q_proj and v_proj for llama), modules_to_save, quantization 4bit|8bit for qlora (default 4bit, "
        "bitsandbytes), double_quant (bnb_4bit_use_double_quant, default false) and lora_dropout (peft's "
        "lora_dropout, default 0: each adapted module's input is dropped out into a copy lora_A keeps for "
        "backward; ms-swift and TRL's ModelConfig default to 0.05). Needs hf_config: the trainable parameters "
        "are counted exactly from its layout.",
    ),
    DescriptionField(
        "frozen",
        "training",
        {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
        "a list of module names",
        "Modules frozen without PEFT (requires_grad_(False): a frozen embedding, a vision tower, the first "
        "layers), the rest trained in full: a module is frozen when its name or a parent's equals an entry or "
        "ends with '.' and it (embed_tokens, vision_tower, layers.0). Needs hf_config; not with peft (which "
        "freezes the whole base already).",
    ),
)
_BY_NAME = {f.name: f for f in FIELDS}
ARCHITECTURE_FIELDS = tuple(f.name for f in FIELDS if f.group == "architecture")


def json_schema() -> JSONObject:
    """The JSON Schema (2020-12) of a model description, generated from :data:`FIELDS`."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "zeroadvisor model description",
        "description": (
            "A model description for zeroadvisor: hf_config or parameters, optional "
            "architecture fields (only with parameters) and the training shape. A Hugging "
            "Face config.json (with model_type) is accepted instead and is not described here. "
            "Generated by tools/gen_model_schema.py from zeroadvisor/model/description.py."
        ),
        "type": "object",
        "properties": {f.name: {**f.schema, "description": f.help} for f in FIELDS},
        "additionalProperties": False,
        "oneOf": [{"required": ["hf_config"]}, {"required": ["parameters"]}],
        "if": {"required": ["hf_config"]},
        "then": {"not": {"anyOf": [{"required": [name]} for name in ARCHITECTURE_FIELDS]}},
    }


# --------------------------------------------------------------------------- counts


def parse_count(value: object, what: str = "parameters") -> int:
    """A parameter count, exactly: ``7.5B`` -> 7_500_000_000, ``1.3e9``, ``125M``, ``70b``.

    Accepts an int, an integral float (up to 2**53, where floats stop being exact) or a
    string; rejects zero, negatives and fractional counts (``1.5``, ``1.2345K``).
    Decimal arithmetic keeps ``7.5B`` exact (a float would give 7499999999.999999...).
    """
    if isinstance(value, bool):
        raise ModelError(f"{what} must be a count like 7.5B, got {fmt(value)}")
    if isinstance(value, int):
        count = Fraction(value)
    elif isinstance(value, float):
        if not math.isfinite(value) or abs(value) > _MAX_EXACT_FLOAT:
            raise ModelError(
                f"{what} {value!r} is not an exact count; write it as an integer or a "
                "string like 7.5B"
            )
        count = Fraction(value)
    elif isinstance(value, str):
        count = _parse_count_text(value, what)
    else:
        raise ModelError(f"{what} must be a count like 7.5B, got {fmt(value)}")
    if count <= 0:
        raise ModelError(f"{what} must be > 0, got {fmt(value)}")
    if count.denominator != 1:
        raise ModelError(f"{what} {fmt(value)} is not a whole number of parameters")
    if count > MAX_PARAMETERS:
        raise ModelError(f"{what} {fmt(value)} is out of range (at most 1e30)")
    return int(count)


def _parse_count_text(text: str, what: str) -> Fraction:
    stripped = text.strip()
    if stripped.startswith("-"):
        raise ModelError(f"{what} must be > 0, got {fmt(text)}")
    match = _COUNT.match(stripped)
    if not match:
        raise ModelError(f"{what} must be a count like 7.5B, 70b, 1.3e9, 125M or 1T, got {fmt(text)}")
    try:
        mantissa = Decimal(match["mantissa"].replace("_", "").replace(",", ""))
    except InvalidOperation:  # pragma: no cover - the regex admits only decimal digits
        raise ModelError(f"{what} must be a count like 7.5B, got {fmt(text)}") from None
    exponent = int(match["exp"] or 0)
    if abs(exponent) > 30:  # 1e30 parameters is not a model; also bounds the arithmetic
        raise ModelError(f"{what} {fmt(text)} is out of range")
    scale = Fraction(10) ** exponent * _SUFFIX[match["suffix"].lower()]
    return Fraction(mantissa) * scale


def spec_from_params(n: int | str, source: str = "--params") -> ModelSpec:
    """A ModelSpec that knows only the parameter count (e.g. from ``--params 7B``)."""
    return ModelSpec(parameters=parse_count(n, "--params"), source=source)


def apply_overrides(
    shape: TrainingShape,
    seq_len: int | None = None,
    checkpointing: str | None = None,
    flash: bool | None = None,
    *,
    target_len: int | None = None,
    image_tokens: int | None = None,
    vision_checkpointing: bool | None = None,
    padding: str | None = None,
    micro_batch: int | None = None,
    precision: str | None = None,
    stage: int | None = None,
    load_dtype: str | None = None,
    zero_init: bool | None = None,
    meta_load: bool | None = None,
    optim: str | None = None,
    liger_kernel: bool | None = None,
    cut_cross_entropy: bool | None = None,
    tiled_mlp: bool | None = None,
    tiled_mlp_shards: int | None = None,
    activation_offload: str | None = None,
    checkpoint_every: int | None = None,
    tensor_parallel: int | None = None,
    pipeline_parallel: int | None = None,
    sequence_parallel: int | None = None,
    expert_parallel: int | None = None,
) -> TrainingShape:
    """``shape`` with the CLI's --seq-len / --activation-checkpointing / --flash-attention|--no-flash-attention /
    --target-len / --image-tokens / --vision-checkpointing / --padding / --micro-batch / --precision / --stage /
    --load-dtype / --zero-init / --meta-load / --optim / --liger-kernel / --cut-cross-entropy / --tiled-mlp /
    --tiled-mlp-shards / --activation-offload / --checkpoint-every applied (None leaves a value as it is)."""
    changes: dict[str, Any] = _positive_overrides((
        ("--seq-len", "sequence_length", seq_len), ("--target-len", "target_length", target_len),
        ("--image-tokens", "image_tokens", image_tokens),
        ("--micro-batch", "micro_batch_size", micro_batch), ("--tensor-parallel", "tensor_parallel", tensor_parallel),
        ("--pipeline-parallel", "pipeline_parallel", pipeline_parallel),
        ("--sequence-parallel", "sequence_parallel", sequence_parallel),
        ("--expert-parallel", "expert_parallel", expert_parallel),
        ("--checkpoint-every", "checkpoint_every", checkpoint_every),
        ("--tiled-mlp-shards", "tiled_mlp_shards", tiled_mlp_shards)))
    changes.update(_choice_overrides(precision, load_dtype, padding, activation_offload))
    if optim is not None:
        if optim not in CLIENT_OPTIMIZER_NAMES:
            raise ModelError(f"--optim must be a Hugging Face Trainer optim name (adamw_torch, adamw_torch_fused, "
                             f"...), got {fmt(optim)}")
        changes["optim"] = optim
    if stage is not None:
        if isinstance(stage, bool) or stage not in ZERO_STAGES:
            raise ModelError(f"--stage must be one of {', '.join(map(str, ZERO_STAGES))}, got {fmt(stage)}")
        changes["zero_stage"] = stage
    load = _load_overrides(load_dtype, zero_init, meta_load)
    if load:
        changes["load"] = dataclasses.replace(shape.load, **load)
    if checkpointing is not None:
        if checkpointing not in CHECKPOINTING:
            raise ModelError(
                f"--activation-checkpointing must be one of {', '.join(CHECKPOINTING)}, "
                f"got {fmt(checkpointing)}"
            )
        changes["activation_checkpointing"] = checkpointing
    changes.update(_switch_overrides((("--flash-attention", "flash_attention", flash),
                                      ("--liger-kernel", "liger_kernel", liger_kernel),
                                      ("--cut-cross-entropy", "cut_cross_entropy", cut_cross_entropy),
                                      ("--tiled-mlp", "tiled_mlp", tiled_mlp),
                                      ("--vision-checkpointing", "vision_checkpointing", vision_checkpointing))))
    return dataclasses.replace(shape, **changes) if changes else shape


def _switch_overrides(given: tuple[tuple[str, str, object], ...]) -> dict[str, bool]:
    """The (flag, TrainingShape field, value) switches given (not None), each checked to be true or false."""
    return {name: _flag_bool(flag, value) for flag, name, value in given if value is not None}


def _choice_overrides(precision: str | None, load_dtype: str | None, padding: str | None,
                      activation_offload: str | None = None) -> dict[str, Any]:
    """The TrainingShape fields --precision, --padding and --activation-offload give, with --load-dtype checked as
    --precision is."""
    if activation_offload is not None and activation_offload not in ACTIVATION_OFFLOADS:
        raise ModelError(f"--activation-offload must be one of {', '.join(ACTIVATION_OFFLOADS)}, "
                         f"got {fmt(activation_offload)}")
    for flag, dtype in (("--precision", precision), ("--load-dtype", load_dtype)):
        if dtype is not None and dtype not in PRECISIONS:
            raise ModelError(f"{flag} must be one of {', '.join(PRECISIONS)}, got {fmt(dtype)}")
    if padding is not None and padding not in PADDINGS:
        raise ModelError(f"--padding must be one of {', '.join(PADDINGS)}, got {fmt(padding)}")
    changes: dict[str, Any] = {}
    if precision is not None:
        changes["precision"] = precision
    if padding is not None:
        changes["padding"] = Padding(padding)
    if activation_offload is not None:
        changes["activation_offload"] = ActivationOffload(activation_offload)
    return changes


def _positive_overrides(given: tuple[tuple[str, str, int | None], ...]) -> dict[str, int]:
    """The (flag, TrainingShape field, value) given (not None), each checked to be a whole number > 0."""
    changes: dict[str, int] = {}
    for flag, name, value in given:
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ModelError(f"{flag} must be an integer > 0, got {fmt(value)}")
        check_dimension(flag, value)
        changes[name] = value
    return changes


def _load_overrides(load_dtype: str | None, zero_init: bool | None, meta_load: bool | None) -> dict[str, Any]:
    """The LoadInputs fields the flags give."""
    load: dict[str, Any] = {}
    if load_dtype is not None:
        load["load_dtype"] = load_dtype
    for flag, name, value in (("--zero-init", "zero_init", zero_init), ("--meta-load", "meta_device", meta_load)):
        if value is not None:
            load[name] = _flag_bool(flag, value)
    return load


def _flag_bool(flag: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ModelError(f"{flag} must be true or false, got {fmt(value)}")
    return value


# --------------------------------------------------------------------------- files


@dataclass(frozen=True, slots=True)
class _Where:
    key: tuple[int, int]  # 1-based line, column of the key
    value: tuple[int, int]  # ... and of its value


@dataclass(frozen=True, slots=True)
class _Document:
    file: str
    # the top level, a mapping (the readers refuse anything else); read as model.schema.json types it once
    # _validate has checked it, so not narrowed again at each field
    data: Any
    where: Mapping[str, _Where]  # top-level keys

    def error(self, message: str, key: str | None = None, at_value: bool = True) -> ModelError:
        where = self.where.get(key) if key is not None else None
        line, column = (where.value if at_value else where.key) if where else (None, None)
        return ModelError(message, file=self.file, line=line, column=column, key=key)

    def locate(self, err: ModelError) -> ModelError:
        """An error from the counting code, placed at the config key it names."""
        where = self.where.get(err.key) if err.key is not None else None
        line, column = where.value if where else (None, None)
        return err.located(self.file, line, column)


def _read(path: Path) -> _Document:
    """Parse a YAML or JSON file, keeping where each top-level key sits."""
    from zeroadvisor.config.source import ParseError
    from zeroadvisor.config.yaml_source import load_yaml

    file = str(path)
    text = _read_text(path, file)
    if path.suffix.lower() == ".json":  # config.json: JSON, as transformers reads it
        return _read_json(text, file)
    # One YAML reading for descriptions: aliases bounded, JSON-view values.
    try:
        node, data = load_yaml(text, syntax="YAML/JSON")
    except ParseError as err:
        raise ModelError(err.message, file=file, line=err.line, column=err.column) from None
    if node is None or data is None:
        raise ModelError("is empty: expected hf_config or parameters", file=file)
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        raise ModelError(
            f"must be a mapping of keys (hf_config: or parameters: ...), got {kind}",
            file=file,
            line=node.start_mark.line + 1,
            column=node.start_mark.column + 1,
        )
    return _Document(file, data, _key_positions(node, file))


def _read_json(text: str, file: str) -> _Document:
    """A ``.json`` file read as transformers reads config.json (configuration_utils.py
    ``_dict_from_json_file``: ``json.loads``), in C and in one pass: the YAML reader took 58 s and 1.3 GB
    for a 12 MB config.json (issue 20, defect 8). Keys given twice are an error (json.loads would keep
    the last one silently); the top-level keys' positions are kept for error messages."""
    import json

    from zeroadvisor.config.source import Document

    doc = Document(name=file, text=text)
    decoder = json.JSONDecoder(object_pairs_hook=_no_duplicates)
    try:
        return _Document(file, *_json_object(text, decoder, doc, file))
    except ModelError:  # already one line, placed (a ValueError too, so before the last clause)
        raise
    except json.JSONDecodeError as err:
        line, column = doc.position(err.pos)
        raise ModelError(f"invalid JSON: {err.msg}", file=file, line=line, column=column) from None
    except _DuplicateKey as err:
        raise ModelError(f"duplicate key {err.key} in a nested object", file=file) from None
    except RecursionError:
        raise ModelError("nested too deeply to read", file=file) from None
    except ValueError:  # json's only other error: an integer beyond int()'s digit limit
        raise ModelError(f"invalid JSON: an integer with more than {sys.get_int_max_str_digits()} digits",
                         file=file) from None


class _DuplicateKey(Exception):
    def __init__(self, key: str):
        self.key = key


def _no_duplicates(pairs: list[tuple[str, JSONValue]]) -> JSONObject:
    """An object's members as a dict; a key given twice is refused (json.loads would keep the last)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _json_object(text: str, decoder: json.JSONDecoder, doc: Document,
                 file: str) -> tuple[JSONObject, dict[str, _Where]]:
    """The top-level object of a JSON text and where each of its keys and values sits: the members are
    decoded one by one (``raw_decode``), so every position comes from the same single pass."""
    i = _json_space(text, 0)
    if not text.startswith("{", i):
        root, _ = decoder.raw_decode(text, i)  # a list or a scalar: decoded only to say what it is
        kind = "a list" if isinstance(root, list) else f"a {type(root).__name__}"
        line, column = doc.position(i)
        raise ModelError(f"must be a mapping of keys (hf_config: or parameters: ...), got {kind}", file=file,
                         line=line, column=column)
    data: JSONObject = {}
    where: dict[str, _Where] = {}
    i = _json_space(text, i + 1)
    end = "}" if text.startswith("}", i) else ","
    while end == ",":
        key_at = i
        key, i = _json_key(text, i, decoder)
        value_at = i
        data[key], i = decoder.raw_decode(text, i)
        spot = _Where(doc.position(key_at), doc.position(value_at))
        if key in where:
            line, column = spot.key
            raise ModelError(f"duplicate key {key} (first given on line {where[key].key[0]})", file=file,
                             line=line, column=column, key=key)
        where[key] = spot
        i, end = _json_separator(text, i)
    i = _json_space(text, i + 1)
    if i != len(text):
        raise _json_error("Extra data", text, i)
    return data, where


_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _json_space(text: str, i: int) -> int:
    """The offset of the first non-whitespace character at or after ``i`` (JSON's four spaces)."""
    match = _JSON_SPACE.match(text, i)
    return match.end() if match else i


def _json_key(text: str, i: int, decoder: json.JSONDecoder) -> tuple[str, int]:
    """An object member's key at ``i``, and the offset of its value."""
    if not text.startswith('"', i):
        raise _json_error("Expecting property name enclosed in double quotes", text, i)
    key: str
    key, i = decoder.raw_decode(text, i)  # a JSON string: '"' starts one
    i = _json_space(text, i)
    if not text.startswith(":", i):
        raise _json_error("Expecting ':' delimiter", text, i)
    return key, _json_space(text, i + 1)


def _json_separator(text: str, i: int) -> tuple[int, str]:
    """After a member: the offset of the next key and ",", or of the closing brace and "}"."""
    i = _json_space(text, i)
    if text.startswith("}", i):
        return i, "}"
    if not text.startswith(",", i):
        raise _json_error("Expecting ',' delimiter", text, i)
    return _json_space(text, i + 1), ","


def _json_error(message: str, text: str, i: int) -> Exception:
    import json

    return json.JSONDecodeError(message, text, i)


def _read_text(path: Path, file: str) -> str:
    """The file's text: a regular file within MAX_MODEL_BYTES, UTF-8 (a BOM allowed), not blank."""
    from zeroadvisor.config import reader

    try:  # the same reading as for configs: never blocks on a FIFO, refuses non-files
        raw = reader.read_bytes(path, file, limit=MAX_MODEL_BYTES)
    except reader.NotAFile as err:
        reason = "is a directory, not a model description" if os.path.isdir(path) else err.reason
        raise ModelError(reason, file=file) from None
    except reader.InputError as err:
        raise ModelError(err.reason, file=file) from None
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ModelError("is UTF-16 (it starts with a UTF-16 byte-order mark): save it as UTF-8", file=file)
    if len(raw) > MAX_MODEL_BYTES:
        raise ModelError(f"larger than {MAX_MODEL_BYTES // (1024 * 1024)} MiB: not a model description", file=file)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise ModelError(
            f"not UTF-8 (byte 0x{raw[err.start]:02x} at offset {err.start})", file=file, line=line
        ) from None
    if not text.strip():
        raise ModelError("is empty: expected hf_config or parameters", file=file)
    return text


def _key_positions(node: Node, file: str) -> dict[str, _Where]:
    """Where each top-level key of the mapping ``node`` (a YAML node) and its value sit; a key given twice
    is an error at its second place."""
    where: dict[str, _Where] = {}
    for key_node, value_node in node.value:
        key = str(key_node.value)
        spot = _Where(
            (key_node.start_mark.line + 1, key_node.start_mark.column + 1),
            (value_node.start_mark.line + 1, value_node.start_mark.column + 1),
        )
        if key in where:
            line, column = spot.key
            first = where[key].key[0]
            raise ModelError(
                f"duplicate key {key} (first given on line {first})",
                file=file,
                line=line,
                column=column,
                key=key,
            )
        where[key] = spot
    return where


def load_hf_config(path: str | Path, transformers: str | None = None) -> tuple[JSONObject, ModelSpec]:
    """A Hugging Face config.json and its exact ModelSpec as transformers ``transformers`` builds it (None: the
    modelled release); errors are located in the file."""
    doc = _read(Path(path))
    if "model_type" not in doc.data:
        raise ModelError("not a Hugging Face config.json: it has no model_type key", file=doc.file)
    try:
        return doc.data, spec_from_hf_config(doc.data, source=doc.file, transformers=transformers)
    except ModelError as err:
        raise doc.locate(err) from None


def _merged_peft(block: JSONValue, overrides: Mapping[str, JSONValue] | None) -> JSONValue:
    """The description's ``peft:`` block with the CLI's PEFT flags (None values: not given) on top."""
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    if not given:
        return block
    merged = dict(block) if isinstance(block, Mapping) else {}
    merged.update(given)
    merged.setdefault("method", "qlora" if merged.get("quantization") else "lora")
    return merged


def has_peft_block(name: str | os.PathLike[str]) -> bool:
    """Whether ``name`` is a model description file (YAML) with a ``peft:`` block: what it says of LoRA wins over
    the trainer's files (inputs/run.py). A config.json, a directory or a Hub id has none."""
    path = Path(name)
    if path.suffix.lower() not in (".yaml", ".yml") or not path.is_file():
        return False
    data = _read(path).data
    return isinstance(data, Mapping) and data.get("peft") is not None


def load_description(path: str | Path, peft: Mapping[str, JSONValue] | None = None,
                     transformers: str | None = None, vision_freeze: VisionFreeze | None = None
                     ) -> tuple[ModelSpec, TrainingShape]:
    """The ModelSpec and TrainingShape a model description (or a config.json) gives; ``peft``: the CLI's
    PEFT flags as ``peft:`` keys (method, r, target_modules, quantization), overriding the description;
    ``transformers``: the release asked for (--transformers-version or a pin), over the description's
    transformers_version; ``vision_freeze``: what the trainer's files freeze of a vision-language model
    (config/vision_freeze.py), applied where the model has a vision tower."""
    path = Path(path)
    doc = _read(path)
    data: JSONObject = doc.data
    if "model_type" in data:  # a Hugging Face config.json given directly
        return _spec_of_hf_config_file(doc, peft, transformers, vision_freeze), TrainingShape()
    if peft and any(v is not None for v in peft.values()):
        data = {**data, "peft": _merged_peft(data.get("peft"), peft)}
        doc = _Document(doc.file, data, doc.where)
    if transformers is not None:
        data = {**data, "transformers_version": transformers}
        doc = _Document(doc.file, data, doc.where)
    _check_description(doc)
    spec = _spec_from_hf_config_key(doc, path, vision_freeze) if "hf_config" in data else _spec_from_parameters(doc)
    return spec, _training_shape(data)


def load_model(name: str, peft: Mapping[str, JSONValue] | None = None,
               environ: Mapping[str, str] | None = None, transformers: str | None = None,
               vision_freeze: VisionFreeze | None = None) -> tuple[ModelSpec, TrainingShape]:
    """``--model NAME``: the ModelSpec and TrainingShape, from wherever model/hub.py ``resolve`` finds it (a
    path, a model directory, the Hugging Face cache, the catalog), read as a description."""
    from zeroadvisor.model.hub import resolve  # importlib.resources and the catalog: only for --model

    found = resolve(name, environ)
    spec, shape = load_description(found.path, peft, transformers, vision_freeze)
    if found.origin in ("hf-cache", "catalog"):
        notes = ((found.note,) if found.note else ()) + spec.notes
        spec = dataclasses.replace(spec, source=found.source, notes=notes)
    return spec, shape


def _spec_of_hf_config_file(doc: _Document, peft: Mapping[str, JSONValue] | None,
                            transformers: str | None = None, vision_freeze: VisionFreeze | None = None) -> ModelSpec:
    data = doc.data
    try:
        spec = spec_from_hf_config(data, source=doc.file, transformers=_release(transformers))
    except ModelError as err:
        raise doc.locate(err) from None
    block = _merged_peft(None, peft)
    if isinstance(block, dict):  # None: no PEFT flag given
        return apply_peft(spec, spec.layout or (), _excluding(spec, peft_settings(block), vision_freeze))
    return _trainer_frozen(spec, [], vision_freeze)


def _excluding(spec: ModelSpec, settings: PeftSettings, vision_freeze: VisionFreeze | None) -> PeftSettings:
    """LoRA's settings with the modules the trainer freezes of a vision-language model left out of its targets
    (LLaMA-Factory's patch_target_modules, ms-swift's get_multimodal_target_regex: config/vision_freeze.py)."""
    entries = vision_freeze.entries(spec.model_type) if vision_freeze is not None else ()
    if spec.vision is None or vision_freeze is None or not entries:
        return settings
    return dataclasses.replace(settings, exclude_modules=(*settings.exclude_modules, *entries),
                               excluded_by=vision_freeze.words())


def _trainer_frozen(spec: ModelSpec, entries: list[str], vision_freeze: VisionFreeze | None) -> ModelSpec:
    """A full fine-tune with the description's ``frozen`` entries and the modules the trainer freezes of a
    vision-language model (config/vision_freeze.py) frozen."""
    trainer = vision_freeze if vision_freeze is not None and spec.vision is not None else None
    entries = [*entries, *(trainer.entries(spec.model_type) if trainer is not None else ())]
    if not entries:
        return spec
    spec = apply_frozen(spec, spec.layout or (), entries)
    return dataclasses.replace(spec, notes=(*spec.notes, trainer.words())) if trainer is not None else spec


def _check_description(doc: _Document) -> None:
    """The description's keys: each known, hf_config or parameters (not both), no architecture field beside
    hf_config, every value as the schema says and every dimension in range."""
    data = doc.data
    for key in data:
        if str(key) not in _BY_NAME:
            close = difflib.get_close_matches(str(key), list(_BY_NAME), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            known = ", ".join(_BY_NAME)
            raise doc.error(
                f"unknown key {key}{hint}; a model description has: {known}", str(key), at_value=False
            )
    if "hf_config" in data and "parameters" in data:
        raise doc.error(
            "give either hf_config or parameters, not both (the config.json already fixes the count)",
            "parameters",
            at_value=False,
        )
    if "hf_config" not in data and "parameters" not in data:
        raise doc.error("needs hf_config (a config.json) or parameters (a count like 7.5B)")
    given_with_hf_config = [name for name in ARCHITECTURE_FIELDS if name in data] if "hf_config" in data else []
    if given_with_hf_config:
        name = given_with_hf_config[0]
        raise doc.error(
            f"{name} cannot be given with hf_config: the config.json defines it "
            "(remove it, or use parameters: instead of hf_config:)",
            name,
            at_value=False,
        )
    _validate(doc)
    for field in FIELDS:
        if field.schema is _POSITIVE and field.name in data:
            try:
                check_dimension(field.name, data[field.name])
            except ModelError as err:
                raise doc.error(err.message, field.name) from None


def _spec_from_hf_config_key(doc: _Document, path: Path, vision_freeze: VisionFreeze | None = None) -> ModelSpec:
    """``hf_config:``: a config.json (or a model folder holding one) beside the description, or a Hub id found as
    ``--model`` finds it (model/hub.py resolve: a local path first, then the Hugging Face cache, then the
    catalog; no network), with the description's ``peft:``."""
    from zeroadvisor.model.hub import resolve

    data = doc.data
    try:
        found = resolve(str(data["hf_config"]), relative_to=path.parent)
    except ModelError as err:
        named = f"{err.file} " if err.file else ""
        raise doc.error(f"hf_config {named}{err.message}", "hf_config") from None
    target = found.path
    if not target.is_file():
        raise doc.error(f"hf_config {target} does not exist", "hf_config")
    try:
        release = _release(data.get("transformers_version"))
    except ModelError as err:
        raise doc.error(err.message, "transformers_version") from None
    _, spec = load_hf_config(target, release)
    if found.origin in ("hf-cache", "catalog"):
        notes = ((found.note,) if found.note else ()) + spec.notes
        spec = dataclasses.replace(spec, source=f"{doc.file} -> {found.source}", notes=notes)
    else:
        spec = dataclasses.replace(spec, source=f"{doc.file} -> {target}")
    if "peft" in data:
        if "frozen" in data:
            raise doc.error("frozen and peft: peft freezes every base parameter already (list modules it should "
                            "train under peft.modules_to_save)", "frozen", at_value=False)
        try:
            return apply_peft(spec, spec.layout or (), _excluding(spec, peft_settings(data["peft"]), vision_freeze))
        except ModelError as err:
            raise doc.error(err.message, "peft") from None
    try:
        return _trainer_frozen(spec, list(data.get("frozen", [])), vision_freeze)
    except ModelError as err:
        raise doc.error(err.message, "frozen") from None


def _spec_from_parameters(doc: _Document) -> ModelSpec:
    """``parameters:`` and the architecture fields given beside it."""
    data = doc.data
    if "peft" in data:
        raise doc.error("peft needs hf_config: the trainable parameters are counted from the model's layout "
                        "(a parameter count alone does not say which Linear layers exist)", "peft", at_value=False)
    if "frozen" in data:
        raise doc.error("frozen needs hf_config: the frozen parameters are counted from the model's layout "
                        "(a parameter count alone does not say which modules exist)", "frozen", at_value=False)
    try:
        count = parse_count(data["parameters"])
    except ModelError as err:
        raise doc.error(err.message, "parameters") from None
    stacks = [data[name] for name in ("encoder_layers", "decoder_layers") if name in data]
    if stacks and "num_layers" in data and data["num_layers"] != sum(stacks):
        raise doc.error(
            f"num_layers {data['num_layers']} is not encoder_layers + decoder_layers ({sum(stacks)})",
            "num_layers",
        )
    spec = ModelSpec(
        parameters=count,
        source=doc.file,
        **{name: data[name] for name in ARCHITECTURE_FIELDS if name in data},
    )
    if stacks and spec.num_layers is None:
        spec = dataclasses.replace(spec, num_layers=sum(stacks))
    return spec


def _training_shape(data: Mapping[str, Any]) -> TrainingShape:
    """The training shape the description's keys give (the defaults where it says nothing)."""
    return TrainingShape(
        sequence_length=data.get("sequence_length"),
        activation_checkpointing=data.get("activation_checkpointing", "none"),
        flash_attention=data.get("flash_attention", True),
        target_length=data.get("target_length"),
        image_tokens=data.get("image_tokens"),
        vision_checkpointing=data.get("vision_checkpointing"),
        padding=Padding(data["padding"]) if data.get("padding") is not None else None,
        micro_batch_size=data.get("micro_batch_size"),
        precision=data.get("precision"),
        optim=data.get("optim"),
        liger_kernel=data.get("liger_kernel", False),
        cut_cross_entropy=data.get("cut_cross_entropy", False),
        tiled_mlp=data.get("tiled_mlp", False),
        tiled_mlp_shards=data.get("tiled_mlp_shards"),
        activation_offload=ActivationOffload(data.get("activation_offload", ActivationOffload.NONE)),
        checkpoint_every=data.get("checkpoint_every", 1),
        load=LoadInputs(load_dtype=data.get("load_dtype"), zero_init=data.get("zero_init"),
                        meta_device=data.get("meta_load")),
        tensor_parallel=data.get("tensor_parallel"),
        pipeline_parallel=data.get("pipeline_parallel"),
        sequence_parallel=data.get("sequence_parallel"),
        expert_parallel=data.get("expert_parallel"),
    )


def _release(request: object) -> str | None:
    """The transformers release a request counts as (model/transformers_release.py), None where none given."""
    if request is None:
        return None
    try:
        return resolve_release(str(request))
    except ReleaseError as err:
        raise ModelError(f"transformers_version {err}") from None


def peft_settings(block: Mapping[str, Any]) -> PeftSettings:
    """PeftSettings from a schema-valid ``peft:`` block (or the CLI's equivalent)."""
    targets = block.get("target_modules", ALL_LINEAR)
    method = block["method"]
    if block.get("quantization") is not None and method != "qlora":
        raise ModelError("peft.quantization applies to method qlora only (lora trains on the unquantized base)")
    if block.get("double_quant") and (method != "qlora" or block.get("quantization", "4bit") != "4bit"):
        raise ModelError("peft.double_quant applies to qlora with 4bit quantization only")
    return PeftSettings(
        method=method,
        r=block.get("r", 8),
        target_modules=None if targets in (ALL_LINEAR, PEFT_DEFAULT) else tuple(targets),
        default_targets=targets == PEFT_DEFAULT,
        modules_to_save=tuple(block.get("modules_to_save", ())),
        quantization=block.get("quantization"),
        double_quant=bool(block.get("double_quant", False)),
        dropout=float(block.get("lora_dropout", 0.0)),
    )


def _validate(doc: _Document) -> None:
    """Check the description against zeroadvisor/schemas/model.schema.json, one error at a time, in
    file order; the message is the field's own wording, located at its value."""
    import jsonschema

    from zeroadvisor.deepspeed.schema import load

    validator = jsonschema.Draft202012Validator(load(SCHEMA_FILE))
    errors = list(validator.iter_errors(doc.data))
    if not errors:
        return

    def order(err: jsonschema.ValidationError) -> tuple[int, int, int]:
        key = str(err.absolute_path[0]) if err.absolute_path else None
        where = doc.where.get(key) if key is not None else None
        return (0, *where.key) if where else (1, 0, 0)  # errors about a key first

    first = min(errors, key=order)
    if first.absolute_path:
        key = str(first.absolute_path[0])
        field = _BY_NAME[key]
        raise doc.error(f"{key} must be {field.expect}, got {fmt(doc.data[key])}", key)
    raise doc.error(first.message)  # pragma: no cover - the checks above come first


__all__ = [
    "ARCHITECTURE_FIELDS",
    "CHECKPOINTING",
    "COUNT_PATTERN",
    "FIELDS",
    "PRECISIONS",
    "apply_overrides",
    "json_schema",
    "load_description",
    "load_hf_config",
    "load_model",
    "parse_count",
    "peft_settings",
    "spec_from_params",
]
