"""Exact ModelSpec from a Hugging Face ``config.json`` dict, without torch or transformers.

The counts are those of the model transformers 5.24 builds from the config
(``AutoModelForCausalLM.from_config`` or the class ``config["architectures"][0]`` names):
``parameters`` = ``sum(p.numel() for p in model.parameters())`` (tied tensors once),
``largest_layer_parameters`` = the most parameters one module owns directly, and
``embedding_parameters`` = the input embedding tables. See families.py for the table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from zeroadvisor.jsontypes import JSONValue
from zeroadvisor.model.activation_facts import LM_HEADS, layer_facts
from zeroadvisor.model.errors import GIVE_PARAMETERS, ModelError
from zeroadvisor.model.families import (
    CAUSAL_LM,
    FAMILIES,
    MLM,
    PRETRAINING,
    SEQ2SEQ_LM,
    TRANSFORMERS_VERSION,
    Arch,
    Family,
)
from zeroadvisor.model.hfconfig import Cfg, fmt, resolve
from zeroadvisor.model.layout import Layout, Module, parameter_sizes, totals
from zeroadvisor.model.spec import ModelSpec, VisionTower
from zeroadvisor.model.transformers_release import fused_experts

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(FAMILIES))

_LM_HEADS = {CAUSAL_LM, MLM, PRETRAINING, SEQ2SEQ_LM}  # heads with an output embedding


def layout_from_hf_config(
    config: Mapping[str, JSONValue], transformers: str | None = None,
) -> tuple[Family, str, list[Module], Arch, list[str]]:
    """The family, architecture class, module list, Arch and notes for ``config``
    (the parts of :func:`spec_from_hf_config`, exposed for tests and debugging); ``transformers``: the
    release built as (model/transformers_release.py; None: the modelled one)."""
    if not isinstance(config, Mapping):
        raise ModelError("a Hugging Face config must be a JSON object")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ModelError(
            f"model_type must be a non-empty string, got {fmt(model_type)}", key="model_type"
        )
    family = FAMILIES.get(model_type)
    if family is None:
        # Multimodal wrappers (gemma3, llava, ...) nest the language model in text_config.
        text = config.get("text_config")
        inner = text.get("model_type") if isinstance(text, Mapping) else None
        hint = (
            f" (its text_config is a {inner} config, which is supported on its own; the vision tower is not)"
            if inner in FAMILIES
            else ""
        )
        raise ModelError(
            f"model_type {model_type!r} is not supported{hint} (supported: "
            f"{', '.join(SUPPORTED_MODEL_TYPES)}); {GIVE_PARAMETERS}",
            key="model_type",
        )
    notes: list[str] = []
    arch_class, head = _head(family, config, notes)
    decoder_keys = text_config(family, config)
    extra: dict[str, JSONValue] = {"num_labels": _num_labels(config), "fused_experts": fused_experts(transformers)}
    if family.vision is not None:
        nested = decoder_keys if family.vision.flat_text and decoder_keys is not config else None
        extra["tie_word_embeddings"] = _vl_tied(config, nested)
    cfg = _located(decoder_keys is not config, lambda: resolve(model_type, family.fields, decoder_keys, extra))
    if family.divisible_heads and cfg.hidden_size % cfg.num_attention_heads:
        raise cfg.fail(
            "num_attention_heads",
            f"hidden_size {cfg.hidden_size} is not a multiple of num_attention_heads "
            f"{cfg.num_attention_heads} (transformers refuses this {model_type} config)",
        )
    layout = Layout()
    vision = _vision(family, config, layout) if family.vision is not None else None  # first, as transformers
    arch = family.build(cfg, layout, head)
    if vision is not None:
        arch = dataclasses.replace(arch, vision=vision)
        notes.append(f"vision tower counted: {vision.parameters:,} parameters ({vision.depth} blocks of width "
                     f"{vision.width}, {vision.merge}x{vision.merge} patches per image token)")

    if head in _LM_HEADS and "tie_word_embeddings" in family.fields and not cfg.given(
        "tie_word_embeddings"
    ):
        notes.append(
            f"tie_word_embeddings not set: the {model_type} default "
            f"({str(cfg.tie_word_embeddings).lower()}) applies"
        )
    if "quantization_config" in config:
        notes.append(
            "quantization_config ignored: counted the unquantized model transformers "
            "builds from this config"
        )
    if family.notes is not None:
        notes.extend(family.notes(config, cfg))
    notes.extend(arch.notes)
    return family, arch_class, layout.modules, arch, notes


def spec_from_hf_config(config: Mapping[str, JSONValue], source: str = "", transformers: str | None = None
                        ) -> ModelSpec:
    """The exact ModelSpec of the model ``config`` describes, as transformers ``transformers`` builds it (a
    release; None: the modelled 5.24, an assumption where the layout depends on it: ``release_dependent``).

    Raises ModelError (with ``key`` set when one config key is at fault) for an unsupported
    model_type or architecture class, a missing required key, or a malformed value.
    """
    family, arch_class, modules, arch, notes = layout_from_hf_config(config, transformers)
    head = family.heads[arch_class]
    t = totals(modules)
    dependent = arch.release_dependent
    counted_as = transformers if dependent and transformers is not None else TRANSFORMERS_VERSION
    given = f" ({transformers} given: the same layout)" if transformers is not None and not dependent else ""
    notes.insert(
        0,
        f"counted {arch_class} as transformers {counted_as} builds it{given} "
        f"({family.modeling}); largest module: {t.largest_name} ({t.largest:,} parameters)",
    )
    return ModelSpec(
        parameters=t.total,
        model_type=family.model_type,
        num_layers=arch.num_layers,
        hidden_size=arch.hidden_size,
        num_attention_heads=arch.heads,
        num_key_value_heads=arch.kv_heads,
        head_dim=arch.head_dim,
        intermediate_size=arch.intermediate,
        vocab_size=arch.vocab,
        gated_mlp=arch.gated,
        num_experts=arch.experts,
        experts_per_token=arch.top_k,
        shared_expert_size=arch.shared_expert_width,
        latent_ranks=arch.latent_ranks,
        value_head_dim=arch.value_head_dim,
        largest_layer_parameters=t.largest,
        embedding_parameters=t.embedding,
        tied_embeddings=arch.tied,
        checkpoint_dtype=checkpoint_dtype(config),
        source=source,
        notes=tuple(notes),
        parameter_sizes=parameter_sizes(modules),
        encoder_layers=arch.encoder_layers,
        decoder_layers=arch.decoder_layers,
        lm_head=head in LM_HEADS,
        modules_with_parameters=sum(m.count for m in modules if m.own),
        layer_facts=layer_facts(family.model_type, text_config(family, config), head, transformers, moe_v4=dependent),
        layout=tuple(modules),
        transformers_version=transformers,
        release_dependent=dependent,
        vision=arch.vision,
        vision_trains=arch.vision is not None,  # every parameter trains until frozen or PEFT says otherwise
    )


# config.json dtype names -> the memory model's names (other dtypes: None, not one of these)
_CHECKPOINT_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def checkpoint_dtype(config: Mapping[str, JSONValue]) -> str | None:
    """The dtype config.json saves the weights in: ``dtype``, else the older ``torch_dtype``
    (transformers configuration_utils.py: ``self.dtype if self.dtype is not None else torch_dtype``)."""
    value = config.get("dtype")
    if value is None:
        value = config.get("torch_dtype")
    return _CHECKPOINT_DTYPES.get(value) if isinstance(value, str) else None


def _head(family: Family, config: Mapping[str, JSONValue], notes: list[str]) -> tuple[str, str]:
    """The architecture class to count and its head kind."""
    archs = config.get("architectures")
    if archs is None or archs == []:
        kind = family.heads[family.default_head]
        notes.append(
            f"config.json names no architectures: counted {family.default_head}"
            + (" (the causal-LM head)" if kind == CAUSAL_LM else "")
        )
        return family.default_head, kind
    names = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
    if not isinstance(archs, list) or len(names) != len(archs):
        raise ModelError(
            f"architectures must be a list of class names, got {fmt(archs)}", key="architectures"
        )
    name = names[0]
    if len(archs) > 1:
        notes.append(f"architectures lists {len(archs)} classes: counted the first, {name}")
    if name in family.heads:
        return name, family.heads[name]
    # Remote-code class names differ in case only (MPT's "MPTForCausalLM"): same layout.
    folded = {k.lower(): k for k in family.heads}
    if name.lower() in folded:
        known = folded[name.lower()]
        notes.append(f"architectures[0] {name} counted as transformers' {known}")
        return known, family.heads[known]
    supported = ", ".join(sorted(family.heads))
    raise ModelError(
        f"architecture {name!r} is not supported for model_type {family.model_type} "
        f"(supported: {supported}); {GIVE_PARAMETERS}",
        key="architectures",
    )


def text_config(family: Family, config: Mapping[str, JSONValue]) -> Mapping[str, JSONValue]:
    """Where a family's decoder keys are read: a multimodal config's ``text_config`` where it nests one (transformers
    5 saves), else the top level (flat hub configs, which Qwen2VLConfig.__post_init__ pops into its text config)."""
    if family.vision is None:
        return config
    nested = config.get("text_config")
    if nested is None and not family.vision.flat_text:
        raise ModelError(f"model_type {family.model_type} reads its decoder's sizes from text_config only "
                         "(its config class does not take them from the top level): text_config is missing",
                         key="text_config")
    if nested is None:
        return config
    if not isinstance(nested, Mapping):
        raise ModelError(f"text_config must be a mapping, got {fmt(nested)}", key="text_config")
    return nested


def _vl_tied(config: Mapping[str, JSONValue], text: Mapping[str, JSONValue] | None) -> bool:
    """A vision-language config's tie_word_embeddings: the top-level value, or the nested ``text`` config's where it
    is true (Qwen2VLConfig's / Qwen2_5_VLConfig's backward-compatible forward in __post_init__: pre-v5 saves placed it
    inside text_config); None: the top only (Qwen3-VL's config classes, or a flat config)."""
    values = [config.get("tie_word_embeddings", False)] + ([text.get("tie_word_embeddings", False)]
                                                         if text is not None else [])
    for where, value in zip(("tie_word_embeddings", "text_config.tie_word_embeddings"), values, strict=False):
        if not isinstance(value, bool):
            raise ModelError(f"{where} must be true or false, got {fmt(value)}", key=where.rsplit(".", 1)[-1])
    return any(values)


def _vision(family: Family, config: Mapping[str, JSONValue], layout: Layout) -> VisionTower:
    """The vision tower's modules (under ``model.visual``) from ``vision_config``."""
    assert family.vision is not None
    raw = config.get("vision_config")
    if not isinstance(raw, Mapping):
        raise ModelError(f"vision_config must be a mapping with the vision tower's sizes for model_type "
                         f"{family.model_type}, got {fmt(raw)}", key="vision_config")
    row = family.vision
    vcfg = _located(True, lambda: resolve(f"{family.model_type} vision_config", row.fields, raw), "vision_config")
    return row.build(vcfg, layout.sub("model.visual"))


def _located(nested: bool, read: Callable[[], Cfg], where: str = "text_config") -> Cfg:
    """``read()``, its errors naming the nested mapping the key sits in."""
    try:
        return read()
    except ModelError as err:
        if not nested:
            raise
        raise ModelError(f"{where}: {err.message}", key=err.key) from None


def _num_labels(config: Mapping[str, JSONValue]) -> int:
    """PretrainedConfig's num_labels: len(id2label) if given, else num_labels, else 2."""
    id2label = config.get("id2label")
    if id2label is not None:
        if not isinstance(id2label, Mapping) or not id2label:
            raise ModelError(
                f"id2label must be a non-empty mapping, got {fmt(id2label)}", key="id2label"
            )
        return len(id2label)
    n = config.get("num_labels", 2)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ModelError(f"num_labels must be an integer > 0, got {fmt(n)}", key="num_labels")
    return n


__all__ = ["SUPPORTED_MODEL_TYPES", "layout_from_hf_config", "spec_from_hf_config"]
