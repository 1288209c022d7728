"""LoRA / QLoRA on a parameter layout: trainable parameters exactly as the ``peft`` package counts
them, and the bytes of the frozen base as it is stored.

Trainable parameters (peft 0.21, ``tuners/lora/layer.py`` ``LoraLayer.update_layer``): every targeted
``nn.Linear``/``Conv1D`` (fan_in -> fan_out) gets ``lora_A = Linear(fan_in, r, bias=False)`` and
``lora_B = Linear(r, fan_out, bias=False)``: ``r * (fan_in + fan_out)`` parameters. Which modules are
targeted (``tuners/tuners_utils.py`` ``check_target_module_exists``): a module whose full name equals a
target or ends with ``"." + target``; ``"all-linear"`` (``_maybe_include_all_linear_layers``) = every
Linear/Conv1D except the output embedding (``model.get_output_embeddings()``); a module matched by
``modules_to_save`` is never adapted. ``modules_to_save`` (``utils/other.py`` ``_set_trainable``: a
module whose name ends with the entry, plain suffix) wraps the module in ``ModulesToSaveWrapper``: the
original stays (frozen) and a deep copy is trainable, so both count in ``all``.
``print_trainable_parameters`` (``peft_model.py`` ``get_nb_trainable_parameters``) sums
``named_parameters()``, tied tensors once: ``all`` = base parameters + adapters + copies.

The frozen base (QLoRA): transformers' bitsandbytes integration (``integrations/bitsandbytes.py``
``replace_with_bnb_linear``) swaps every Linear/Conv1D except the output embedding (and the modules
tied to it: ``get_keys_to_not_convert``) for ``Linear4bit``/``Linear8bitLt``; embeddings, norms and the
head stay floating point; biases stay floating point. Bytes per quantized weight of n elements:

* 4-bit (bitsandbytes ``functional.py`` ``quantize_4bit``, ``blocksize=64``): packed data
  ``(n + 1) // 2`` uint8; absmax one fp32 per 64-element block; the 16-entry fp32 NF4/FP4 code
  (``get_4bit_type``) per weight. With double quantization (``compress_statistics``, transformers'
  ``BitsAndBytesConfig.bnb_4bit_use_double_quant``, default False): the absmax becomes uint8 per block
  plus ``quantize_blockwise(blocksize=256)``'s fp32 absmax per 256 blocks and one fp32 offset (the
  256-entry dynamic code is shared: ``name2qmap["dynamic"]``, not counted per weight).
* 8-bit LLM.int8 (``Int8Params``/``int8_vectorwise_quant``): int8 data (1 B/element) + one fp32 scale
  per output row (``SCB``).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from zeroadvisor.model.errors import ModelError
from zeroadvisor.model.layout import Module, TorchClass
from zeroadvisor.model.spec import ModelSpec
from zeroadvisor.model.transformers_release import fused_experts
from zeroadvisor.vocab import SavedModules

PeftMethod = Literal["lora", "qlora"]
Quantization = Literal["4bit", "8bit"]
PEFT_METHODS: tuple[str, ...] = ("lora", "qlora")
QUANTIZATIONS: tuple[str, ...] = ("4bit", "8bit")
ALL_LINEAR = "all-linear"  # peft's INCLUDE_LINEAR_LAYERS_SHORTHAND
# ms-swift's modules_to_save words (swift/pipelines/train/tuner.py get_modules_to_save @ 3602360): each stands for
# the modules swift/utils/transformers_utils.py finds, every nn.Embedding (find_embedding) or every nn.LayerNorm
# and module whose class name holds "rmsnorm" (find_norm), before peft sees the list. The input and output
# embeddings (get_input_embeddings, get_output_embeddings: LLaMA-Factory's resize_vocab) are found by _saved_names.
SAVED_CLASSES: dict[SavedModules, frozenset[TorchClass]] = {
    SavedModules.ALL_EMBEDDING: frozenset({TorchClass.EMBEDDING}),
    SavedModules.ALL_NORM: frozenset({TorchClass.LAYER_NORM, TorchClass.RMS_NORM}),
}
# LoraConfig without target_modules (TRL's ModelConfig.lora_target_modules None): peft adapts its default modules
# for the model type (tuners/tuners_utils.py _prepare_adapter_config), and refuses a model type it has none for.
PEFT_DEFAULT = "peft-default"
# peft 0.21.2 utils/constants.py TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING, its list entries (gemma4's is a
# regular expression over the multimodal model: not listed, so asked for); checked against peft by
# tests/oracle/test_peft_default_targets_oracle.py.
LORA_DEFAULT_TARGETS: dict[str, tuple[str, ...]] = {
    "t5": ("q", "v"), "mt5": ("q", "v"), "bart": ("q_proj", "v_proj"), "gpt2": ("c_attn",),
    "bloom": ("query_key_value",), "blip-2": ("q", "v", "q_proj", "v_proj"), "opt": ("q_proj", "v_proj"),
    "gptj": ("q_proj", "v_proj"), "gpt_neox": ("query_key_value",), "gpt_neo": ("q_proj", "v_proj"),
    "bert": ("query", "value"), "roberta": ("query", "value"), "xlm-roberta": ("query", "value"),
    "electra": ("query", "value"), "deberta-v2": ("query_proj", "value_proj"), "deberta": ("in_proj",),
    "layoutlm": ("query", "value"), "llama": ("q_proj", "v_proj"), "llama4": ("q_proj", "v_proj"),
    "chatglm": ("query_key_value",), "gpt_bigcode": ("c_attn",), "mpt": ("Wqkv",),
    "RefinedWebModel": ("query_key_value",), "RefinedWeb": ("query_key_value",), "falcon": ("query_key_value",),
    "btlm": ("c_proj", "c_attn"), "codegen": ("qkv_proj",), "mistral": ("q_proj", "v_proj"),
    "mixtral": ("q_proj", "v_proj"), "stablelm": ("q_proj", "v_proj"), "phi": ("q_proj", "v_proj", "fc1", "fc2"),
    "gemma": ("q_proj", "v_proj"), "gemma2": ("q_proj", "v_proj"), "gemma3_text": ("q_proj", "v_proj"),
    "qwen2": ("q_proj", "v_proj"), "qwen3": ("q_proj", "v_proj"),
    "nemotron_h": ("q_proj", "k_proj", "v_proj", "o_proj"), "rwkv": ("key", "value", "receptance", "output"),
    "rwkv7": ("r_proj", "k_proj", "v_proj", "o_proj", "key", "value"),
}

FP32 = 4
BNB_4BIT_BLOCKSIZE = 64  # bitsandbytes Params4bit / quantize_4bit default blocksize
BNB_NESTED_BLOCKSIZE = 256  # quantize_4bit(compress_statistics=True): quantize_blockwise(absmax, blocksize=256)
BNB_4BIT_CODE_ENTRIES = 16  # get_4bit_type("nf4"/"fp4"): a 16-entry fp32 table per QuantState

# The layout (families.py) names a few modules generically; transformers 5.24's own names, per
# model_type, so that peft's name matching sees what it sees in the real model (last name component).
REAL_NAMES: dict[str, dict[str, str]] = {
    # gpt2/modeling_gpt2.py GPT2Attention.c_attn/c_proj, GPT2MLP.c_fc/c_proj
    "gpt2": {"qkv_proj": "c_attn", "o_proj": "c_proj", "fc_in": "c_fc", "fc_out": "c_proj"},
    # gpt_neox/modeling_gpt_neox.py: query_key_value, dense, dense_h_to_4h, dense_4h_to_h (the head is lm_head in 5.24)
    "gpt_neox": {"qkv_proj": "query_key_value", "o_proj": "dense", "fc_in": "dense_h_to_4h",
                 "fc_out": "dense_4h_to_h"},
    "gptj": {"o_proj": "out_proj"},  # gptj/modeling_gptj.py GPTJAttention.out_proj (MLP fc_in/fc_out)
    "falcon": {"fc_in": "dense_h_to_4h", "fc_out": "dense_4h_to_h"},  # falcon/modeling_falcon.py FalconMLP
    "bloom": {"qkv_proj": "query_key_value", "o_proj": "dense", "fc_in": "dense_h_to_4h",
              "fc_out": "dense_4h_to_h"},  # bloom/modeling_bloom.py
    "opt": {"o_proj": "out_proj", "fc_in": "fc1", "fc_out": "fc2"},  # opt/modeling_opt.py
    "mpt": {"qkv_proj": "Wqkv", "o_proj": "out_proj", "fc_in": "up_proj", "fc_out": "down_proj"},
    "starcoder2": {"fc_in": "c_fc", "fc_out": "c_proj"},  # starcoder2/modeling_starcoder2.py Starcoder2MLP
    "phi": {"o_proj": "dense", "fc_in": "fc1", "fc_out": "fc2"},  # phi/modeling_phi.py
}
# (Under transformers 4.x, model/transformers_release.py, the experts are Linears and none of this applies.)
# MoE families whose transformers-5 experts are one module of 3-D parameters and whose router is a
# custom module (no nn.Linear): peft 0.21 (utils/transformers_weight_conversion.py
# _convert_peft_config_moe, for the model types transformers' conversion_mapping lists) maps the v4
# Linear names onto LoRA on those parameters ("target_parameters"): each v4 name -> the v5 parameter.
# The v4 names are removed from target_modules, so a dense MLP or shared expert with the same leaf name
# is NOT adapted; "all-linear" resolves to the Linear leaf names plus every v4 name.
_MOE_V4_NAMES: dict[str, dict[str, str]] = {
    "mixtral": {"gate": "router", "w1": "gate_up_proj", "w3": "gate_up_proj", "w2": "down_proj"},
    "qwen2_moe": {"gate": "router", "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj",
                  "down_proj": "down_proj"},
}
# model_type -> the conversion pattern (transformers conversion_mapping._MODEL_TO_CONVERSION_PATTERN as
# peft extends it); qwen2_moe itself is not listed there, so its experts take no LoRA.
_MOE_CONVERSION = {"mixtral": "mixtral", "qwen3_moe": "qwen2_moe", "deepseek_v2": "qwen2_moe",
                   "deepseek_v3": "qwen2_moe"}

# The output embedding (get_output_embeddings()) by its layout name: all-linear skips it and
# bitsandbytes keeps it in floating point.
OUTPUT_HEADS = frozenset({"lm_head", "cls.predictions.decoder", "lm_head.decoder"})


@dataclass(frozen=True, slots=True)
class PeftSettings:
    """A LoRA/QLoRA setup as the description's ``peft:`` block or the flags give it."""

    method: PeftMethod = "lora"
    r: int = 8  # LoraConfig.r default
    target_modules: tuple[str, ...] | None = None  # None: all-linear
    modules_to_save: tuple[str, ...] = ()
    quantization: Quantization | None = None  # qlora: default 4bit
    double_quant: bool = False  # BitsAndBytesConfig.bnb_4bit_use_double_quant default
    dropout: float = 0.0  # LoraConfig.lora_dropout default (peft 0.21 tuners/lora/config.py)
    # target_modules not given to LoraConfig (PEFT_DEFAULT): peft's own for the model type, resolved by apply
    default_targets: bool = False
    # modules left out of the targets, each matching the modules whose dotted name holds its segments in a row (as
    # LLaMA-Factory's patch_target_modules tests ``forbidden in name``): what a trainer freezes of a vision-language
    # model (config/vision_freeze.py), and who said it, for the note
    exclude_modules: tuple[str, ...] = ()
    excluded_by: str = ""

    @property
    def quant(self) -> Quantization | None:
        if self.method != "qlora":
            return None
        return self.quantization or "4bit"


@dataclass(frozen=True, slots=True)
class PeftCount:
    trainable: int  # what print_trainable_parameters calls "trainable params"
    all: int  # ... and "all params"
    adapted_modules: int  # Linear modules with a LoRA adapter (counting repeats)
    # (numel, count) of the trainable tensors, smallest first (layout.tensor_sizes' multiset): one entry per
    # distinct size, not per tensor, so a model of 2^30 layers costs what one of 2 does (issue 20, defect 8)
    trainable_tensors: tuple[tuple[int, int], ...]
    quantized_elements: int  # base Linear weight elements stored quantized (QLoRA), else 0
    quantized_bytes: int  # their bytes with quantization constants
    # Per token, the input features of every adapted Linear over the model (fan_in x repeats; a routed expert's by
    # the share of tokens it sees, experts_per_token / num_experts): what lora_dropout copies (_adapted_inputs).
    adapted_inputs: int = 0
    # Per token, the features of the layer inputs that no module keeps under this LoRA (_unkept_inputs).
    unkept_inputs: int = 0
    head_saved: bool = False  # the output head is in modules_to_save: its trainable copy gets a weight gradient
    # a vision-language model's tower (ModelSpec.vision): the adapted Linears in it (counting repeats), which run
    # per image patch, not per token of the sequence; and whether an adapter or a saved copy trains through its
    # blocks (VisionTower.trains_through)
    vision_adapted: int = 0
    vision_trains: bool = False


def real_name(model_type: str | None, name: str) -> str:
    head, _, last = name.rpartition(".")
    renamed = REAL_NAMES.get(model_type or "", {}).get(last, last)
    return f"{head}.{renamed}" if head else renamed


def _targets(key: str, targets: Iterable[str]) -> bool:
    # peft check_target_module_exists: exact full name, or a dotted suffix
    return any(key == t or key.endswith(f".{t}") for t in targets)


def _saved(key: str, modules_to_save: Sequence[str]) -> bool:
    # peft _set_trainable matches any module (containers too) whose name ends with the entry: a module
    # is inside a trainable copy when its name or one of its parent names ends with an entry.
    parts = key.split(".")
    prefixes = (".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return any(p.endswith(m) for p in prefixes for m in modules_to_save)


def quantized_bytes(fan_in: int, fan_out: int, quant: Quantization, double_quant: bool) -> int:
    """Bytes of one bitsandbytes-quantized Linear weight (fan_out x fan_in), constants included."""
    n = fan_in * fan_out
    if quant == "8bit":
        return n + FP32 * fan_out  # int8 CB + fp32 SCB per row
    blocks = -(-n // BNB_4BIT_BLOCKSIZE)
    data = (n + 1) // 2
    code = FP32 * BNB_4BIT_CODE_ENTRIES
    if not double_quant:
        return data + FP32 * blocks + code
    nested = -(-blocks // BNB_NESTED_BLOCKSIZE)
    return data + blocks + FP32 * nested + FP32 + code  # uint8 absmax, fp32 nested absmax, fp32 offset


def _moe_conversion(
    named: Sequence[tuple[str, Module]], targets: tuple[str, ...] | None, v4: dict[str, str], saved: Sequence[str]
) -> tuple[tuple[str, ...], dict[str, int]]:
    """peft's _convert_peft_config_moe: the remaining target_modules, and the v5 parameters targeted with
    their rank multiplier (gate_up_proj fuses two v4 projections: rank r * 2 when both are targeted)."""
    if targets is None:  # all-linear: the Linear leaf names (output head excluded) plus every v4 name
        leaves = {key.rpartition(".")[2] for key, m in named
                  if m.linear is not None and m.name not in OUTPUT_HEADS and not (saved and _saved(key, saved))}
        targets = tuple(sorted(leaves | set(v4)))
    remaining: list[str] = []
    fused: dict[str, set[str]] = {}
    for t in targets:
        hit = next((old for old in v4 if t == old or t.endswith(f".{old}")), None)
        if hit is None:
            remaining.append(t)
        else:
            fused.setdefault(v4[hit], set()).add(hit)
    required = {new: {old for old, n in v4.items() if n == new} for new in fused}
    for new, present in fused.items():
        if len(present) < len(required[new]):
            missing = ", ".join(sorted(required[new] - present))
            raise ModelError(f"peft cannot target {', '.join(sorted(present))} without {missing}: they are fused "
                             f"into {new} in transformers 5 (peft raises ValueError)", key="peft")
    return tuple(remaining), {new: len(present) for new, present in fused.items()}


def _moe_adapter(named: Sequence[tuple[str, Module]], params: dict[str, int], r: int, experts: int, hidden: int,
                 width: int, numels: Counter[int]) -> int:
    """LoRA on the MoE parameters (peft tuners/lora/layer.py ParamWrapper): a parameter (E, out, in) gets
    lora_A (r*E, in) and lora_B (out, r*E); the router weight (E, h) is one (out=E, in=h) matrix. Their
    tensor sizes are added to ``numels``."""
    total = 0
    for key, m in named:
        leaf = key.rpartition(".")[2]
        shapes: list[tuple[int, int, int]] = []  # (rank multiplier x E, in, out)
        if leaf == "gate" and "router" in params:
            shapes.append((r, hidden, experts))
        if leaf == "experts":
            if "gate_up_proj" in params:  # (E, 2w, h)
                shapes.append((r * params["gate_up_proj"] * experts, hidden, 2 * width))
            if "down_proj" in params:  # (E, h, w)
                shapes.append((r * experts, width, hidden))
        for rank, fan_in, fan_out in shapes:
            total += m.count * rank * (fan_in + fan_out)
            numels[rank * fan_in] += m.count
            numels[fan_out * rank] += m.count
    return total


def count(modules: Sequence[Module], settings: PeftSettings, spec: ModelSpec) -> PeftCount:
    """The exact trainable/all counts peft prints for ``settings`` on the model ``modules`` describe."""
    if settings.r < 1:
        raise ModelError(f"peft.r must be an integer > 0, got {settings.r}", key="peft")
    model_type = spec.model_type
    named = [(real_name(model_type, m.name), m) for m in modules]
    saved = _saved_names(named, settings.modules_to_save)
    linear_targets, embeddings = _embedding_targets(named, settings.target_modules, saved)
    settings = dataclasses.replace(settings, target_modules=linear_targets)
    targets, checked, moe_params = _moe_targets(named, settings, saved, spec)
    excluded = settings.exclude_modules
    adapted = [a for a in _adapted_linears(named, targets, saved) if not _excluded(a[1].name, excluded)]
    if checked is not None:
        _check_targets(named, checked, model_type)
    _check_saved(named, saved, model_type)
    r = settings.r
    numels: Counter[int] = Counter()
    adapter = _lora_adapters(adapted, r, numels) + _embedding_adapters(embeddings, r, numels)
    if moe_params:
        assert spec.hidden_size is not None and spec.intermediate_size is not None
        adapter += _moe_adapter(named, moe_params, r, spec.num_experts or 0, spec.hidden_size,
                                spec.intermediate_size, numels)
    copy = 0
    head_saved = False
    for key, m in named:
        if saved and _saved(key, saved):
            head_saved = head_saved or m.name in OUTPUT_HEADS
            copy += m.count * m.own  # a deep copy owns every tensor, tied ones included
            for p in m.params:
                numels[p.numel] += m.count
    q_elements, q_bytes = _quantized_base(named, settings)
    trainable = adapter + copy
    tower = spec.vision
    # the per-token terms are the decoder's (memory/activations.py): a tower's modules run per image patch
    # (memory/vision.py), so they are left out of them
    in_tower = [a for a in adapted if tower is not None and tower.owns(a[1].name)]
    lm_named = [(k, m) for k, m in named if tower is None or not tower.owns(m.name)]
    lm_adapted = [a for a in adapted if tower is None or not tower.owns(a[1].name)]
    vision_trains = tower is not None and (any(tower.trains_through(m.name) for _, m, _ in in_tower) or any(
        tower.trains_through(m.name) for key, m in named if saved and _saved(key, saved)))
    return PeftCount(
        trainable=trainable,
        all=spec.parameters + trainable,
        adapted_modules=sum(m.count for _, m, _ in adapted),  # Linear modules (MoE parameters not included)
        trainable_tensors=tuple(sorted((numel, n) for numel, n in numels.items() if n)),
        quantized_elements=q_elements,
        quantized_bytes=q_bytes,
        adapted_inputs=_adapted_inputs(lm_adapted, spec),
        unkept_inputs=_unkept_inputs(lm_named, lm_adapted, settings.dropout > 0),
        head_saved=head_saved,
        vision_adapted=sum(m.count for _, m, _ in in_tower),
        vision_trains=vision_trains,
    )


# The Linears of one decoder layer that read the same tensor, which nothing but their lora_A keeps under a frozen
# base (a frozen Linear needs its weight, not its input, for the input's gradient): the attention's input (the
# norm's output: RMSNorm/LayerNorm keep their input, not their output), the MLP's input (likewise) and the down
# projection's input (act(gate) * up: the product's backward keeps its factors). The attention output, the
# out-projection's input, is the attention kernel's own output, which its backward keeps, so it is not among them.
# Leaf names as the layouts of Llama-style families give them (model/families.py).
_SHARED_INPUTS: dict[str, str] = {"q_proj": "attention", "k_proj": "attention", "v_proj": "attention",
                                  "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "down"}


def _excluded(name: str, entries: Sequence[str]) -> bool:
    """Whether the layout name ``name`` holds one of ``entries``' segments in a row."""
    parts = name.split(".")
    for entry in entries:
        want = entry.split(".")
        if any(parts[i:i + len(want)] == want for i in range(len(parts) - len(want) + 1)):
            return True
    return False


def _unkept_inputs(named: Sequence[tuple[str, Module]], adapted: Sequence[tuple[str, Module, tuple[int, int]]],
                   dropout: bool) -> int:
    """Per token, the features of the layer inputs (_SHARED_INPUTS) that no module keeps for backward under LoRA,
    which a full fine-tune keeps (memory/activations.py counts them): an input none of whose readers is adapted
    (the frozen base keeps no input), and with lora_dropout every one, since each adapted module's lora_A keeps its
    dropped-out copy instead (peft tuners/lora/layer.py Linear.forward: lora_A(dropout(x))). Routed experts (a
    per-expert gather of the tokens) and other families' names are not among them: counted as a full fine-tune."""
    adapted_keys = {key for key, _, _ in adapted}
    groups: dict[tuple[str, int], tuple[int, bool]] = {}  # (group, repeats) -> (the input's features, adapted)
    for key, m in named:
        group = _SHARED_INPUTS.get(key.rpartition(".")[2])
        if group is None or m.linear is None or "experts" in key:
            continue
        width, any_adapted = groups.get((group, m.count), (m.linear[0], False))
        groups[(group, m.count)] = (width, any_adapted or key in adapted_keys)
    return sum(count * width for (_, count), (width, any_adapted) in groups.items() if dropout or not any_adapted)


def _adapted_inputs(adapted: Sequence[tuple[str, Module, tuple[int, int]]], spec: ModelSpec) -> int:
    """Per token, the input features of the adapted Linears (PeftCount.adapted_inputs). A transformers-4.x routed
    expert (``experts.*``) sees experts_per_token / num_experts of the tokens; transformers 5's fused experts are
    adapted as parameters (peft's ParamWrapper), not Linears, and are not here."""
    total = Fraction(0)
    for key, m, (fan_in, _) in adapted:
        share = Fraction(1)
        if "experts.*" in key and spec.num_experts:
            share = Fraction(spec.experts_per_token or 1, spec.num_experts)
        total += m.count * fan_in * share
    return int(total)


def _moe_targets(named: Sequence[tuple[str, Module]], settings: PeftSettings, saved: Sequence[str],
                 spec: ModelSpec) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None, dict[str, int]]:
    """(the target modules after peft's MoE conversion, the given ones still looked up among the modules,
    the MoE parameters targeted with their rank multiplier); no conversion outside MoE families."""
    targets = settings.target_modules
    v4 = _MOE_V4_NAMES.get(_MOE_CONVERSION.get(spec.model_type or "", ""), {})
    # Under transformers 4.x the experts are nn.Linear modules with the v4 names (families.py MoeV4) and peft
    # converts nothing (its conversion imports transformers 5's conversion_mapping): plain name matching.
    if not (v4 and spec.num_experts) or not fused_experts(spec.transformers_version):
        return targets, targets, {}
    converted, moe_params = _moe_conversion(named, targets, v4, saved)
    # the names peft maps are not looked up among the modules
    checked = tuple(t for t in targets if t in converted) if targets is not None else None
    return converted, checked, moe_params


def _adapted_linears(named: Sequence[tuple[str, Module]], targets: tuple[str, ...] | None,
                     saved: Sequence[str]) -> list[tuple[str, Module, tuple[int, int]]]:
    """The Linear modules LoRA wraps, with their (fan_in, fan_out): the targets (None: all linear layers but
    the output head), none inside a module that is saved whole."""
    adapted: list[tuple[str, Module, tuple[int, int]]] = []
    for key, m in named:
        if m.linear is None or (saved and _saved(key, saved)):
            continue
        if (m.name not in OUTPUT_HEADS) if targets is None else _targets(key, targets):
            adapted.append((key, m, m.linear))
    return adapted


def _check_targets(named: Sequence[tuple[str, Module]], checked: tuple[str, ...], model_type: str | None) -> None:
    """Each target module names some Linear layer of the model, as peft requires."""
    for t in checked:
        hits = [key for key, m in named if _targets(key, [t])]
        if not hits:
            raise ModelError(f"peft target module {t!r} matches no module of this {model_type or ''} model "
                             "(peft raises 'Target modules ... not found in the base model')", key="peft")
        if not any(m.linear is not None for key, m in named if _targets(key, [t])):
            raise ModelError(f"peft target module {t!r} matches {hits[0]}, which is not a Linear layer: only "
                             "LoRA on Linear layers is modelled", key="peft")


def _saved_names(named: Sequence[tuple[str, Module]], entries: Sequence[str]) -> tuple[str, ...]:
    """``entries`` with the words of SavedModules (ms-swift's, by SAVED_CLASSES; the input and output embeddings)
    replaced by the full names of the modules they stand for (a full name matches its own module only, as the
    trainers' short names do through peft's suffix match); a word that finds no module adds none, as ms-swift's
    find_layers returns an empty list."""
    names: list[str] = []
    for entry in entries:
        if entry in SAVED_CLASSES:
            classes = SAVED_CLASSES[SavedModules(entry)]
            names += [key for key, m in named if m.torch_class in classes and m.params]
        elif entry == SavedModules.INPUT_EMBEDDINGS:  # the token table: the largest input embedding
            tables = [(m.own, key) for key, m in named if m.embedding]
            names += [max(tables)[1]] if tables else []
        elif entry == SavedModules.OUTPUT_EMBEDDINGS:  # none for a model without an LM head
            names += [key for key, m in named if m.name in OUTPUT_HEADS]
        else:
            names.append(entry)
    return tuple(dict.fromkeys(names))


def _embedding_targets(named: Sequence[tuple[str, Module]], targets: tuple[str, ...] | None, saved: Sequence[str]
                       ) -> tuple[tuple[str, ...] | None, list[tuple[int, tuple[int, int]]]]:
    """ms-swift's target word all-embedding (swift/pipelines/train/tuner.py get_target_modules: find_embedding's
    names join target_modules, so peft puts a LoRA Embedding on every nn.Embedding): the targets left for the
    Linear modules (all-linear among them: every Linear but the head, None) and the embeddings adapted, as (repeats,
    (num_embeddings, embedding_dim)), none inside a module saved whole."""
    if targets is None or SavedModules.ALL_EMBEDDING not in targets:
        return targets, []
    embeddings = [(m.count, m.embedding_shape) for key, m in named
                  if m.embedding_shape is not None and not (saved and _saved(key, saved))]
    rest = tuple(t for t in targets if t != SavedModules.ALL_EMBEDDING)
    return (None if ALL_LINEAR in rest else rest), embeddings


def _embedding_adapters(embeddings: Sequence[tuple[int, tuple[int, int]]], r: int, numels: Counter[int]) -> int:
    """peft's LoRA on an nn.Embedding(num, dim) (tuners/lora/layer.py Embedding.update_layer): lora_embedding_A
    (r, num) and lora_embedding_B (dim, r), r x (num + dim) parameters; their sizes are added to ``numels``."""
    adapter = 0
    for repeats, (num, dim) in embeddings:
        adapter += repeats * r * (num + dim)
        numels[r * num] += repeats
        numels[dim * r] += repeats
    return adapter


def _check_saved(named: Sequence[tuple[str, Module]], saved: Sequence[str], model_type: str | None) -> None:
    for entry in saved:
        if not any(_saved(key, [entry]) for key, _ in named):
            raise ModelError(f"peft modules_to_save entry {entry!r} matches no parameter-owning module of this "
                             f"{model_type or ''} model", key="peft")


def _lora_adapters(adapted: Sequence[tuple[str, Module, tuple[int, int]]], r: int, numels: Counter[int]) -> int:
    """The parameters of lora_A (r, in) and lora_B (out, r) on each adapted Linear; their tensor sizes are added
    to ``numels``. A module repeated ``count`` times (every layer) is one entry: count x its adapter."""
    adapter = 0
    for _, m, (fan_in, fan_out) in adapted:
        adapter += m.count * r * (fan_in + fan_out)
        numels[r * fan_in] += m.count
        numels[fan_out * r] += m.count
    return adapter


def quantized_base(spec: ModelSpec, quant: Quantization, double_quant: bool) -> tuple[int, int] | None:
    """(elements, bytes) of the Linear weights bitsandbytes stores quantized when ``spec`` is loaded with
    ``quant`` (every Linear but the output head, as for QLoRA's base); None without a layout to find them in."""
    if spec.layout is None:
        return None
    named = [(real_name(spec.model_type, m.name), m) for m in spec.layout]
    return _quantized_base(named, PeftSettings(method="qlora", quantization=quant, double_quant=double_quant))


def _quantized_base(named: Sequence[tuple[str, Module]], settings: PeftSettings) -> tuple[int, int]:
    """(elements, bytes) of the Linear weights QLoRA quantizes (every Linear but the output head)."""
    quant = settings.quant
    if quant is None:
        return 0, 0
    q_elements = q_bytes = 0
    for _, m in named:
        if m.linear is None or m.name in OUTPUT_HEADS:
            continue
        fan_in, fan_out = m.linear
        q_elements += m.count * fan_in * fan_out
        q_bytes += m.count * quantized_bytes(fan_in, fan_out, quant, settings.double_quant)
    return q_elements, q_bytes


__all__ = ["ALL_LINEAR", "PEFT_METHODS", "QUANTIZATIONS", "PeftCount", "PeftSettings", "count", "quantized_base",
           "quantized_bytes", "real_name"]


def describe(settings: PeftSettings) -> str:
    targets = (PEFT_DEFAULT if settings.default_targets else ALL_LINEAR if settings.target_modules is None
               else ", ".join(settings.target_modules))
    method = "QLoRA" if settings.method == "qlora" else "LoRA"
    quant = f" ({settings.quant}{' double-quant' if settings.double_quant else ''} base)" if settings.quant else ""
    saved = f"; modules_to_save {', '.join(settings.modules_to_save)}" if settings.modules_to_save else ""
    dropout = f", lora_dropout {settings.dropout:g}" if settings.dropout > 0 else ""
    return f"{method} r={settings.r} on {targets}{quant}{dropout}{saved}"


def with_default_targets(settings: PeftSettings, spec: ModelSpec) -> PeftSettings:
    """``settings`` with peft's default target modules for the model type where they give none (PEFT_DEFAULT);
    ModelError where peft refuses the run: no default for the type (lora/model.py _prepare_adapter_config: "Please
    specify `target_modules`"), or an MoE family whose fused experts peft converts under transformers 5, where
    its conversion leaves nothing targeted (tuners_utils.py inject_adapter: "No `target_modules` passed but also
    no `target_parameters` found"; Mixtral, peft 0.21.2: tests/oracle/test_peft_oracle.py)."""
    if not settings.default_targets:
        return settings
    model_type = spec.model_type
    targets = LORA_DEFAULT_TARGETS.get(model_type or "")
    if targets is None:
        raise ModelError(f"peft has no default LoRA target modules for model type {model_type!r} (it asks for "
                         "target_modules): give the modules to adapt (lora_target_modules)", key="peft")
    if model_type in _MOE_CONVERSION and spec.num_experts and fused_experts(spec.transformers_version):
        raise ModelError(f"peft refuses LoRA without target modules on {model_type} under transformers 5 (its MoE "
                         "conversion leaves no module targeted): give the modules to adapt (lora_target_modules)",
                         key="peft")
    return dataclasses.replace(settings, target_modules=targets, default_targets=False)


def apply(spec: ModelSpec, modules: Sequence[Module], settings: PeftSettings) -> ModelSpec:
    """``spec`` trained with ``settings``: trainable counts and the quantized base filled in."""
    defaulted = settings.default_targets
    settings = with_default_targets(settings, spec)
    c = count(modules, settings, spec)
    largest_q = 0
    if settings.quant is not None:
        largest_q = max((m.linear[0] * m.linear[1] for m in modules
                         if m.linear is not None and m.name not in OUTPUT_HEADS), default=0)
    default = f" (peft's default target modules for {spec.model_type})" if defaulted else ""
    note = (f"{describe(settings)}{default}: {c.trainable:,} trainable of {c.all:,} parameters as peft counts them "
            f"({c.adapted_modules:,} adapted Linear modules); the {spec.parameters:,} base parameters are frozen")
    if settings.exclude_modules:
        note += f"; {', '.join(settings.exclude_modules)} left out of the targets: {settings.excluded_by}"
    return dataclasses.replace(
        spec,
        trainable_parameters=c.trainable,
        largest_trainable_parameter=max((numel for numel, _ in c.trainable_tensors), default=0),
        quantized_parameters=c.quantized_elements,
        quantized_bytes=c.quantized_bytes,
        largest_quantized_parameters=largest_q,
        quantization=settings.quant,
        peft=describe(settings),
        lora_dropout_inputs=c.adapted_inputs if settings.dropout > 0 else 0,
        peft_head_saved=c.head_saved,
        lora_unkept_inputs=c.unkept_inputs,
        lora_rank_features=settings.r * (c.adapted_modules - c.vision_adapted),
        vision_trains=c.vision_trains,
        notes=(*spec.notes, note, *_vision_note(spec, c)),
    )


def _vision_note(spec: ModelSpec, c: PeftCount) -> tuple[str, ...]:
    """What LoRA does to a vision-language model's tower, for the report."""
    if spec.vision is None:
        return ()
    if c.vision_trains:
        return ((f"LoRA adapts {c.vision_adapted:,} Linear modules of the vision tower: the gradient flows through "
                 "it, so it keeps its activations (memory/vision.py counts them as a full fine-tune's, a bound)"),)
    return ("LoRA adapts no module of the vision tower: it runs without a graph",)


__all__ += ["LORA_DEFAULT_TARGETS", "PEFT_DEFAULT", "apply", "describe", "with_default_targets"]
