"""zeroadvisor.model's counts against transformers itself, for every supported model_type.

Each config below is built by transformers on the meta device (no memory, no download)
and compared EXACTLY with spec_from_hf_config:

* total parameters:   sum(p.numel() for p in model.parameters())  (tied tensors once);
* largest module:     max over model.modules() of sum(p.numel() for p in m.parameters(recurse=False));
* embeddings:         the nn.Embedding tables (each tensor once), T5's relative_attention_bias
                      excluded (an attention bias, not an input embedding);
* module census:      how many modules own how many parameters directly, so that two
                      compensating mistakes cannot pass.

Small dimensions exercise each structural option; a few real shapes (Llama-2-7B, Mixtral-8x7B,
Qwen3-30B-A3B, DeepSeek-V3, ...) are included because the meta device makes size free.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

pytestmark = pytest.mark.oracle

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from zeroadvisor.model.errors import ModelError  # noqa: E402
from zeroadvisor.model.hf import layout_from_hf_config, spec_from_hf_config  # noqa: E402
from zeroadvisor.model.layout import census  # noqa: E402

# When config.json names no class, the count is of this Auto class (what the spec claims).
_DEFAULT_AUTO = {"bert": "AutoModelForMaskedLM", "roberta": "AutoModelForMaskedLM",
                 **dict.fromkeys(("t5", "bart", "mbart", "blenderbot"), "AutoModelForSeq2SeqLM"),
                 **dict.fromkeys(("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"),
                                 "AutoModelForImageTextToText")}


def _build(config: dict[str, Any]) -> Any:
    kwargs = {k: v for k, v in config.items() if k != "model_type"}
    hf_config = transformers.AutoConfig.for_model(config["model_type"], **kwargs)
    archs = config.get("architectures")
    with torch.device("meta"):
        if archs:
            return _class(archs[0])(hf_config)
        auto = getattr(transformers, _DEFAULT_AUTO.get(config["model_type"], "AutoModelForCausalLM"))
        return auto.from_config(hf_config)


def _class(name: str) -> Any:
    """transformers' class of that name; remote-code spellings ("MPTForCausalLM") by case."""
    if hasattr(transformers, name):
        return getattr(transformers, name)
    return next(getattr(transformers, n) for n in dir(transformers) if n.lower() == name.lower())


def _measure(model: Any) -> tuple[int, int, int, Counter[int]]:
    total = sum(p.numel() for p in model.parameters())
    own = [sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules()]
    tables = {
        id(m.weight): m.weight.numel()
        for name, m in model.named_modules()
        # the decoder's input tables: T5's relative_attention_bias and a vision tower's position table (Qwen3-VL's
        # visual.pos_embed) are not the model's input embedding
        if isinstance(m, torch.nn.Embedding) and not name.endswith("relative_attention_bias")
        and ".visual." not in f".{name}."
    }
    return total, max(own), sum(tables.values()), Counter(n for n in own if n)


def _llama(**over: Any) -> dict[str, Any]:
    base = dict(
        model_type="llama",
        vocab_size=1000,
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=3,
        num_attention_heads=8,
    )
    return {**base, **over}


def _small(model_type: str, **over: Any) -> dict[str, Any]:
    return {**_llama(model_type=model_type), **over}


_QWEN2_MOE = dict(
    num_experts=6,
    moe_intermediate_size=24,
    shared_expert_intermediate_size=48,
    num_experts_per_tok=2,
)
_QWEN3_MOE = dict(num_experts=6, moe_intermediate_size=24, num_experts_per_tok=2)
_MLA = dict(
    kv_lora_rank=16,
    qk_nope_head_dim=8,
    qk_rope_head_dim=4,
    v_head_dim=12,
    n_routed_experts=6,
    moe_intermediate_size=24,
    num_experts_per_tok=2,
)
_BERT = dict(
    vocab_size=1000,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    max_position_embeddings=40,
)
_T5 = dict(
    model_type="t5",
    vocab_size=1000,
    d_model=64,
    d_kv=8,
    d_ff=96,
    num_layers=2,
    num_heads=4,
    relative_attention_num_buckets=16,
)

_BART = dict(
    model_type="bart",
    vocab_size=1000,
    d_model=64,
    max_position_embeddings=50,
    encoder_layers=2,
    decoder_layers=3,
    encoder_attention_heads=4,
    decoder_attention_heads=8,
    encoder_ffn_dim=128,
    decoder_ffn_dim=96,
)

_QWEN2_VL_VISION = dict(depth=2, embed_dim=32, mlp_ratio=3, num_heads=4, hidden_size=64, patch_size=4,
                        temporal_patch_size=2, spatial_merge_size=2)
_QWEN3_VL_VISION = dict(depth=3, hidden_size=32, intermediate_size=48, num_heads=4, out_hidden_size=64, patch_size=4,
                        temporal_patch_size=2, spatial_merge_size=2, num_position_embeddings=16,
                        deepstack_visual_indexes=[0, 2])
_QWEN25_VL_VISION = dict(depth=3, hidden_size=32, intermediate_size=40, num_heads=4, out_hidden_size=64, patch_size=4,
                         temporal_patch_size=2, spatial_merge_size=2)

CASES: dict[str, dict[str, Any]] = {
    # ---- llama: MHA untied (no architectures: AutoModelForCausalLM), GQA + all biases +
    # head_dim override + tied, base model, classifier; real Llama-2-7B and Llama-3-8B.
    "llama-default-head": _llama(),
    "llama-gqa-bias-headdim-tied": _llama(
        architectures=["LlamaForCausalLM"],
        num_key_value_heads=2,
        head_dim=12,
        attention_bias=True,
        mlp_bias=True,
        tie_word_embeddings=True,
    ),
    "llama-base": _llama(architectures=["LlamaModel"], num_key_value_heads=4),
    "llama-seqcls": _llama(
        architectures=["LlamaForSequenceClassification"], id2label={"0": "a", "1": "b", "2": "c"}
    ),
    "llama-2-7b": _llama(
        architectures=["LlamaForCausalLM"],
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
    ),
    "llama-3-8b": _llama(
        architectures=["LlamaForCausalLM"],
        vocab_size=128256,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
    ),
    # ---- mistral: kv heads omitted (class default 8), head_dim null; real Mistral-7B.
    "mistral-kv-default": _small("mistral", num_attention_heads=16),
    "mistral-headdim-null-tied": _small(
        "mistral", num_key_value_heads=2, head_dim=None, tie_word_embeddings=True
    ),
    "mistral-7b": _small(
        "mistral",
        architectures=["MistralForCausalLM"],
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
    ),
    # ---- mixtral: small, and the real 8x7B.
    "mixtral-small": _small("mixtral", num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2),
    "mixtral-8x7b": _small(
        "mixtral",
        architectures=["MixtralForCausalLM"],
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        num_local_experts=8,
    ),
    # ---- qwen2: qkv biases, GQA, tied; head_dim given as an extra key; classifier.
    # Qwen2-VL / Qwen2.5-VL: the vision tower under model.visual, the decoder under model.language_model; hub
    # configs are flat (the decoder's keys at the top level), transformers 5 saves nest them in text_config
    "qwen2_vl-flat": dict(_small("qwen2_vl", num_key_value_heads=2), vision_config=_QWEN2_VL_VISION),
    "qwen2_vl-nested-tied-in-text": dict(model_type="qwen2_vl", vision_config=_QWEN2_VL_VISION,
                                         text_config=_small("qwen2_vl_text", tie_word_embeddings=True)),
    "qwen2_vl-base": dict(_small("qwen2_vl", architectures=["Qwen2VLModel"]), vision_config=_QWEN2_VL_VISION),
    "qwen2_5_vl-flat": dict(_small("qwen2_5_vl", num_key_value_heads=4, architectures=[
        "Qwen2_5_VLForConditionalGeneration"]), vision_config=_QWEN25_VL_VISION),
    "qwen2_5_vl-nested-tied": dict(model_type="qwen2_5_vl", tie_word_embeddings=True,
                                   vision_config=dict(_QWEN25_VL_VISION, spatial_merge_size=3, in_channels=4),
                                   text_config=_small("qwen2_5_vl_text", num_key_value_heads=2)),
    # Qwen3-VL: the decoder's keys nested in text_config only; deepstack mergers beside the merger
    "qwen3_vl-small": dict(model_type="qwen3_vl", vision_config=_QWEN3_VL_VISION,
                           text_config=_small("qwen3_vl_text", num_key_value_heads=2, head_dim=16)),
    "qwen3_vl-tied-bias-base": dict(model_type="qwen3_vl", architectures=["Qwen3VLModel"], tie_word_embeddings=True,
                                    vision_config=dict(_QWEN3_VL_VISION, deepstack_visual_indexes=[0]),
                                    text_config=_small("qwen3_vl_text", attention_bias=True)),
    "qwen3_vl-tied": dict(model_type="qwen3_vl", tie_word_embeddings=True, vision_config=_QWEN3_VL_VISION,
                          text_config=_small("qwen3_vl_text")),
    # Qwen3-VL-MoE: Qwen3-MoE's decoder (one fused experts module per sparse layer) beside the same tower
    "qwen3_vl_moe-small": dict(model_type="qwen3_vl_moe", vision_config=_QWEN3_VL_VISION, text_config=_small(
        "qwen3_vl_moe_text", num_experts=4, moe_intermediate_size=24, num_experts_per_tok=2, num_key_value_heads=2)),
    "qwen3_vl_moe-dense-layers-tied": dict(
        model_type="qwen3_vl_moe", tie_word_embeddings=True, vision_config=_QWEN3_VL_VISION,
        text_config=_small("qwen3_vl_moe_text", num_experts=4, moe_intermediate_size=24, decoder_sparse_step=2,
                           mlp_only_layers=[0], head_dim=16)),
    # Qwen3-VL-8B-Instruct's shapes
    "qwen3_vl-8b": dict(
        model_type="qwen3_vl", architectures=["Qwen3VLForConditionalGeneration"], tie_word_embeddings=False,
        text_config=dict(model_type="qwen3_vl_text", hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936),
        vision_config=dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, out_hidden_size=4096,
                           patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=2304,
                           deepstack_visual_indexes=[8, 16, 24])),
    # Qwen2.5-VL-7B-Instruct's config.json (hub: flat, in_chans a key transformers does not read)
    "qwen2_5_vl-7b": dict(
        model_type="qwen2_5_vl", architectures=["Qwen2_5_VLForConditionalGeneration"], hidden_size=3584,
        intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
        vocab_size=152064, tie_word_embeddings=False,
        vision_config=dict(depth=32, hidden_act="silu", hidden_size=1280, intermediate_size=3420, num_heads=16,
                           in_chans=3, out_hidden_size=3584, patch_size=14, spatial_merge_size=2, window_size=112,
                           fullatt_block_indexes=[7, 15, 23, 31], temporal_patch_size=2)),
    "qwen2-gqa": _small("qwen2", num_key_value_heads=2),
    "qwen2-tied-headdim": _small("qwen2", num_key_value_heads=4, head_dim=16, tie_word_embeddings=True),
    "qwen2-seqcls": _small("qwen2", architectures=["Qwen2ForSequenceClassification"], num_key_value_heads=8),
    # ---- qwen2_moe: shared expert + gate, decoder_sparse_step, mlp_only_layers, qkv_bias
    # off, num_experts 0 (all dense); real Qwen1.5-MoE-A2.7B shape.
    "qwen2moe-sparse-step": _small(
        "qwen2_moe", num_key_value_heads=4, num_hidden_layers=5, decoder_sparse_step=2, **_QWEN2_MOE
    ),
    "qwen2moe-mlp-only-nobias": _small(
        "qwen2_moe",
        num_key_value_heads=8,
        mlp_only_layers=[0, 2],
        qkv_bias=False,
        tie_word_embeddings=True,
        **_QWEN2_MOE,
    ),
    "qwen2moe-no-experts": _small("qwen2_moe", num_key_value_heads=8, **{**_QWEN2_MOE, "num_experts": 0}),
    "qwen1.5-moe-a2.7b": _small(
        "qwen2_moe",
        architectures=["Qwen2MoeForCausalLM"],
        vocab_size=151936,
        hidden_size=2048,
        intermediate_size=5632,
        num_hidden_layers=24,
        num_attention_heads=16,
        num_key_value_heads=16,
        num_experts=60,
        num_experts_per_tok=4,
        moe_intermediate_size=1408,
        shared_expert_intermediate_size=5632,
    ),
    # ---- qwen3: head_dim omitted (class default 128, not hidden/heads), q/k norms,
    # attention_bias, tied; real Qwen3-8B.
    "qwen3-default-headdim": _small("qwen3", num_key_value_heads=2),
    "qwen3-bias-tied": _small(
        "qwen3", num_key_value_heads=4, head_dim=16, attention_bias=True, tie_word_embeddings=True
    ),
    "qwen3-8b": _small(
        "qwen3",
        architectures=["Qwen3ForCausalLM"],
        vocab_size=151936,
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
    ),
    # ---- qwen3_moe: mlp_only_layers + sparse step, num_local_experts spelling; real
    # Qwen3-30B-A3B and Qwen3-235B-A22B shapes.
    "qwen3moe-mixed": _small(
        "qwen3_moe",
        num_key_value_heads=2,
        head_dim=16,
        num_hidden_layers=6,
        decoder_sparse_step=2,
        mlp_only_layers=[1],
        attention_bias=True,
        **_QWEN3_MOE,
    ),
    "qwen3moe-local-experts-key": _small(
        "qwen3_moe",
        num_key_value_heads=2,
        num_local_experts=4,
        moe_intermediate_size=24,
        tie_word_embeddings=True,
    ),
    "qwen3-30b-a3b": _small(
        "qwen3_moe",
        architectures=["Qwen3MoeForCausalLM"],
        vocab_size=151936,
        hidden_size=2048,
        intermediate_size=6144,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        num_experts=128,
        num_experts_per_tok=8,
        moe_intermediate_size=768,
    ),
    "qwen3-235b-a22b": _small(
        "qwen3_moe",
        architectures=["Qwen3MoeForCausalLM"],
        vocab_size=151936,
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=94,
        num_attention_heads=64,
        num_key_value_heads=4,
        head_dim=128,
        num_experts=128,
        num_experts_per_tok=8,
        moe_intermediate_size=1536,
    ),
    # ---- gemma family: tied by default, head_dim default 256, four norms (gemma2/3),
    # q/k norms (gemma3), attention_bias; real Gemma-7B.
    "gemma-defaults": _small("gemma", num_key_value_heads=1),
    "gemma-untied-bias": _small(
        "gemma", num_key_value_heads=8, head_dim=8, attention_bias=True, tie_word_embeddings=False
    ),
    "gemma-7b": _small(
        "gemma",
        architectures=["GemmaForCausalLM"],
        vocab_size=256000,
        hidden_size=3072,
        intermediate_size=24576,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=16,
        head_dim=256,
    ),
    "gemma2-small": _small("gemma2", num_key_value_heads=4, head_dim=16),
    "gemma2-untied-base": _small(
        "gemma2", architectures=["Gemma2Model"], num_key_value_heads=2, head_dim=8
    ),
    "gemma3-text": _small("gemma3_text", num_key_value_heads=2, head_dim=16, attention_bias=True),
    "gemma3-text-seqcls": _small(
        "gemma3_text",
        architectures=["Gemma3TextForSequenceClassification"],
        num_key_value_heads=2,
        head_dim=16,
        num_labels=5,
    ),
    # ---- phi: biases everywhere, one LayerNorm per layer, lm_head bias, qk_layernorm
    # (sized hidden/heads even with a head_dim key), tied; real Phi-2.
    "phi-qk-layernorm": _small("phi", num_key_value_heads=4, qk_layernorm=True),
    "phi-tied-headdim": _small(
        "phi", num_key_value_heads=8, head_dim=16, qk_layernorm=True, tie_word_embeddings=True
    ),
    "phi-2": _small(
        "phi",
        architectures=["PhiForCausalLM"],
        vocab_size=51200,
        hidden_size=2560,
        intermediate_size=10240,
        num_hidden_layers=32,
        num_attention_heads=32,
    ),
    # ---- phi3: fused qkv with GQA, fused gate_up; real Phi-3-mini.
    "phi3-gqa": _small("phi3", num_key_value_heads=2, pad_token_id=None),  # default 32000 > vocab
    "phi3-mini": _small(
        "phi3",
        architectures=["Phi3ForCausalLM"],
        vocab_size=32064,
        hidden_size=3072,
        intermediate_size=8192,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
    ),
    # ---- gpt2: wpe, Conv1D with biases, tied; n_inner null; cross-attention; untied;
    # base model; classifier; real GPT-2 small.
    "gpt2-small": dict(
        model_type="gpt2",
        architectures=["GPT2LMHeadModel"],
        vocab_size=50257,
        n_positions=1024,
        n_embd=768,
        n_layer=12,
        n_head=12,
        n_inner=None,
    ),
    "gpt2-cross-untied": dict(
        model_type="gpt2",
        vocab_size=1000,
        n_positions=64,
        n_embd=64,
        n_layer=2,
        n_head=4,
        n_inner=100,
        add_cross_attention=True,
        tie_word_embeddings=False,
    ),
    "gpt2-base-hf-names": dict(
        model_type="gpt2",
        architectures=["GPT2Model"],
        vocab_size=1000,
        max_position_embeddings=64,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
    ),
    "gpt2-seqcls": dict(
        model_type="gpt2",
        architectures=["GPT2ForSequenceClassification"],
        vocab_size=1000,
        n_positions=64,
        n_embd=64,
        n_layer=2,
        n_head=4,
    ),
    # ---- gpt_neox: attention_bias on/off, tied/untied; real Pythia-1.4B shape.
    "neox-untied": _small("gpt_neox"),
    "neox-nobias-tied": _small("gpt_neox", attention_bias=False, tie_word_embeddings=True),
    "pythia-1.4b": dict(
        model_type="gpt_neox",
        architectures=["GPTNeoXForCausalLM"],
        vocab_size=50304,
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=24,
        num_attention_heads=16,
    ),
    # ---- gptj: lm_head bias, one LayerNorm, n_inner null/given, tied.
    "gptj-untied": dict(model_type="gptj", vocab_size=1000, n_embd=64, n_layer=2, n_head=4, rotary_dim=8),
    "gptj-tied-inner": dict(
        model_type="gptj",
        vocab_size=1000,
        n_embd=64,
        n_layer=2,
        n_head=4,
        rotary_dim=8,
        n_inner=96,
        tie_word_embeddings=True,
    ),
    # ---- falcon: 7B-style multi_query + parallel_attn (one LN); 40B-style
    # new_decoder_architecture (grouped kv, ln_attn + ln_mlp); classic MHA sequential with
    # biases and ffn_hidden_size; parallel with num_ln_in_parallel_attn=2; real Falcon-7B.
    "falcon-7b-style": _small("falcon"),
    "falcon-40b-style": _small(
        "falcon", new_decoder_architecture=True, num_kv_heads=2, tie_word_embeddings=False
    ),
    "falcon-mha-seq-bias": _small(
        "falcon", multi_query=False, parallel_attn=False, bias=True, ffn_hidden_size=96
    ),
    "falcon-parallel-2ln": _small("falcon", multi_query=False, num_ln_in_parallel_attn=2),
    "falcon-7b": dict(
        model_type="falcon",
        architectures=["FalconForCausalLM"],
        vocab_size=65024,
        hidden_size=4544,
        num_hidden_layers=32,
        num_attention_heads=71,
        multi_query=True,
        parallel_attn=True,
        new_decoder_architecture=False,
        bias=False,
    ),
    # ---- bloom: word_embeddings_layernorm, tied; n_embed spelling; untied; real BLOOM-560m.
    "bloom-small": dict(model_type="bloom", vocab_size=1000, hidden_size=64, n_layer=2, n_head=4),
    "bloom-n-embed-untied": dict(
        model_type="bloom", vocab_size=1000, n_embed=64, n_layer=3, num_attention_heads=8, tie_word_embeddings=False
    ),
    "bloom-560m": dict(
        model_type="bloom",
        architectures=["BloomForCausalLM"],
        vocab_size=250880,
        hidden_size=1024,
        n_layer=24,
        n_head=16,
    ),
    # ---- opt: positions + 2, tied; 350m-style projection and post-LN (no final norm);
    # no biases and no LayerNorm affine; legacy _remove_final_layer_norm; classifier;
    # real OPT-125m.
    "opt-125m": dict(
        model_type="opt",
        architectures=["OPTForCausalLM"],
        vocab_size=50272,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        ffn_dim=3072,
        max_position_embeddings=2048,
    ),
    "opt-350m-style": dict(
        model_type="opt",
        vocab_size=1000,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        ffn_dim=96,
        max_position_embeddings=50,
        word_embed_proj_dim=32,
        do_layer_norm_before=False,
    ),
    "opt-nobias-noaffine": dict(
        model_type="opt",
        vocab_size=1000,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        ffn_dim=96,
        max_position_embeddings=50,
        enable_bias=False,
        layer_norm_elementwise_affine=False,
        tie_word_embeddings=False,
    ),
    "opt-remove-final-ln-seqcls": dict(
        model_type="opt",
        architectures=["OPTForSequenceClassification"],
        vocab_size=1000,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        ffn_dim=96,
        max_position_embeddings=50,
        word_embed_proj_dim=48,
        _remove_final_layer_norm=True,
    ),
    # ---- mpt: no biases, bias-less LayerNorms, tied; options transformers ignores.
    "mpt-small": dict(model_type="mpt", vocab_size=1000, d_model=64, n_heads=4, n_layers=2),
    "mpt-ignored-options-untied": dict(
        model_type="mpt",
        architectures=["MPTForCausalLM"],
        vocab_size=1000,
        d_model=64,
        n_heads=4,
        n_layers=3,
        no_bias=False,
        expansion_ratio=2,
        attn_config={"qk_ln": True, "attn_type": "multiquery_attention"},
        tie_word_embeddings=False,
    ),
    # ---- starcoder2: GQA, use_bias on/off, tied/untied; real StarCoder2-3B.
    "starcoder2-bias": _small("starcoder2", num_key_value_heads=2),
    "starcoder2-nobias-untied": _small(
        "starcoder2", num_key_value_heads=4, use_bias=False, tie_word_embeddings=False
    ),
    "starcoder2-3b": _small(
        "starcoder2",
        architectures=["Starcoder2ForCausalLM"],
        vocab_size=49152,
        hidden_size=3072,
        intermediate_size=12288,
        num_hidden_layers=30,
        num_attention_heads=24,
        num_key_value_heads=2,
    ),
    # ---- deepseek_v2: q_lora_rank null (Lite) with a dense first layer and mlp_bias;
    # q_lora_rank given with attention_bias and no dense layer; real DeepSeek-V2-Lite.
    "dsv2-no-qlora-dense-first": _small(
        "deepseek_v2",
        q_lora_rank=None,
        first_k_dense_replace=1,
        mlp_bias=True,
        n_shared_experts=2,
        **{k: v for k, v in _MLA.items() if k != "n_routed_experts"},
        num_experts=6,
    ),
    "dsv2-qlora-bias": _small(
        "deepseek_v2", q_lora_rank=20, attention_bias=True, n_shared_experts=1, **_MLA
    ),
    "deepseek-v2-lite": _small(
        "deepseek_v2",
        architectures=["DeepseekV2ForCausalLM"],
        vocab_size=102400,
        hidden_size=2048,
        intermediate_size=10944,
        num_hidden_layers=27,
        num_attention_heads=16,
        num_key_value_heads=16,
        q_lora_rank=None,
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        n_routed_experts=64,
        n_shared_experts=2,
        moe_intermediate_size=1408,
        num_experts_per_tok=6,
        first_k_dense_replace=1,
    ),
    # ---- deepseek_v3: default first_k_dense_replace (3), q_lora given / null, tied;
    # real DeepSeek-V3 (671B).
    "dsv3-default-dense": _small("deepseek_v3", num_hidden_layers=5, q_lora_rank=20, **_MLA),
    "dsv3-no-qlora-tied": _small(
        "deepseek_v3",
        q_lora_rank=None,
        first_k_dense_replace=0,
        n_shared_experts=2,
        attention_bias=True,
        tie_word_embeddings=True,
        **_MLA,
    ),
    "deepseek-v3": _small(
        "deepseek_v3",
        architectures=["DeepseekV3ForCausalLM"],
        vocab_size=129280,
        hidden_size=7168,
        intermediate_size=18432,
        num_hidden_layers=61,
        num_attention_heads=128,
        num_key_value_heads=128,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        n_routed_experts=256,
        n_shared_experts=1,
        moe_intermediate_size=2048,
        num_experts_per_tok=8,
        first_k_dense_replace=3,
        moe_layer_freq=1,
        num_nextn_predict_layers=1,
    ),
    # ---- gpt_oss: sinks, expert and router biases; attention_bias off; head_dim default
    # (64); real gpt-oss-20b.
    "gptoss-small": _small("gpt_oss", num_key_value_heads=2, head_dim=16, num_local_experts=4),
    "gptoss-nobias-default-headdim": _small(
        "gpt_oss", num_key_value_heads=4, num_experts=4, attention_bias=False, tie_word_embeddings=True
    ),
    "gpt-oss-20b": _small(
        "gpt_oss",
        architectures=["GptOssForCausalLM"],
        vocab_size=201088,
        hidden_size=2880,
        intermediate_size=2880,
        num_hidden_layers=24,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=64,
        num_local_experts=32,
        num_experts_per_tok=4,
    ),
    # ---- t5: relu (t5-small real shape), gated-gelu with a deeper decoder and
    # tie_word_embeddings false (forced tied by transformers 5.24), encoder only, base,
    # the classifier heads.
    "t5-small": dict(
        model_type="t5",
        architectures=["T5ForConditionalGeneration"],
        vocab_size=32128,
        d_model=512,
        d_kv=64,
        d_ff=2048,
        num_layers=6,
        num_heads=8,
    ),
    "t5-gated-asym-untied": dict(
        _T5, feed_forward_proj="gated-gelu", num_decoder_layers=3, tie_word_embeddings=False
    ),
    "t5-encoder": dict(_T5, architectures=["T5EncoderModel"]),
    "t5-base-class": dict(_T5, architectures=["T5Model"], num_decoder_layers=1),
    "t5-default-head": dict(_T5),
    "t5-seqcls": dict(_T5, architectures=["T5ForSequenceClassification"], num_labels=3),
    "t5-tokcls": dict(_T5, architectures=["T5ForTokenClassification"]),
    "t5-qa": dict(_T5, architectures=["T5ForQuestionAnswering"]),
    # ---- bart, mbart, blenderbot: real shapes (bart-large, blenderbot-400M-distill), the base classes, untied
    # embeddings (four tables), encoder and decoder of different widths and depths, no decoder layers.
    "bart-large": dict(
        model_type="bart", architectures=["BartForConditionalGeneration"], vocab_size=50265, d_model=1024,
        max_position_embeddings=1024, encoder_layers=12, decoder_layers=12, encoder_attention_heads=16,
        decoder_attention_heads=16, encoder_ffn_dim=4096, decoder_ffn_dim=4096,
    ),
    "bart-model-untied-asym": dict(_BART, architectures=["BartModel"], tie_word_embeddings=False),
    "bart-untied-lm": dict(_BART, tie_word_embeddings=False),
    "bart-no-decoder-layers": dict(_BART, decoder_layers=0),
    "mbart-default-head": dict(_BART, model_type="mbart"),
    "mbart-model": dict(_BART, model_type="mbart", architectures=["MBartModel"]),
    "blenderbot-400m-distill": dict(
        model_type="blenderbot", architectures=["BlenderbotForConditionalGeneration"], vocab_size=8008,
        d_model=1280, max_position_embeddings=128, encoder_layers=2, decoder_layers=12, encoder_attention_heads=32,
        decoder_attention_heads=32, encoder_ffn_dim=5120, decoder_ffn_dim=5120, scale_embedding=True,
    ),
    "blenderbot-untied-asym": dict(_BART, model_type="blenderbot", tie_word_embeddings=False),
    "blenderbot-model": dict(_BART, model_type="blenderbot", architectures=["BlenderbotModel"]),
    # ---- bert: real bert-base-uncased as BertModel and BertForMaskedLM; every head;
    # untied MLM; decoder with cross-attention.
    "bert-base-model": dict(
        model_type="bert",
        architectures=["BertModel"],
        vocab_size=30522,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        max_position_embeddings=512,
        type_vocab_size=2,
    ),
    "bert-base-mlm": dict(
        model_type="bert",
        architectures=["BertForMaskedLM"],
        vocab_size=30522,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        max_position_embeddings=512,
        type_vocab_size=2,
    ),
    "bert-default-head": dict(model_type="bert", **_BERT),
    "bert-untied-mlm": dict(model_type="bert", architectures=["BertForMaskedLM"], tie_word_embeddings=False, **_BERT),
    "bert-pretraining": dict(model_type="bert", architectures=["BertForPreTraining"], **_BERT),
    "bert-nsp": dict(model_type="bert", architectures=["BertForNextSentencePrediction"], **_BERT),
    "bert-seqcls": dict(model_type="bert", architectures=["BertForSequenceClassification"], num_labels=3, **_BERT),
    "bert-multiple-choice": dict(model_type="bert", architectures=["BertForMultipleChoice"], **_BERT),
    "bert-tokcls": dict(model_type="bert", architectures=["BertForTokenClassification"], num_labels=7, **_BERT),
    "bert-qa": dict(model_type="bert", architectures=["BertForQuestionAnswering"], **_BERT),
    "bert-lmhead-cross": dict(
        model_type="bert",
        architectures=["BertLMHeadModel"],
        is_decoder=True,
        add_cross_attention=True,
        type_vocab_size=3,
        **_BERT,
    ),
    # ---- roberta: real roberta-base (514 positions, 1 token type) and every head.
    "roberta-base-mlm": dict(
        model_type="roberta",
        architectures=["RobertaForMaskedLM"],
        vocab_size=50265,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        max_position_embeddings=514,
        type_vocab_size=1,
    ),
    "roberta-model": dict(model_type="roberta", architectures=["RobertaModel"], type_vocab_size=1, **_BERT),
    "roberta-default-untied": dict(model_type="roberta", tie_word_embeddings=False, **_BERT),
    "roberta-seqcls": dict(model_type="roberta", architectures=["RobertaForSequenceClassification"], **_BERT),
    "roberta-causal": dict(model_type="roberta", architectures=["RobertaForCausalLM"], is_decoder=True, **_BERT),
    "roberta-multiple-choice": dict(model_type="roberta", architectures=["RobertaForMultipleChoice"], **_BERT),
    "roberta-tokcls": dict(model_type="roberta", architectures=["RobertaForTokenClassification"], **_BERT),
    "roberta-qa": dict(model_type="roberta", architectures=["RobertaForQuestionAnswering"], **_BERT),
}


def test_every_supported_model_type_is_exercised() -> None:
    from zeroadvisor.model.hf import SUPPORTED_MODEL_TYPES

    assert {c["model_type"] for c in CASES.values()} == set(SUPPORTED_MODEL_TYPES)
    assert len(SUPPORTED_MODEL_TYPES) == 33


@pytest.mark.parametrize("name", sorted(CASES))
def test_counts_match_transformers(name: str) -> None:
    config = CASES[name]
    spec = spec_from_hf_config(config)
    model = _build(config)
    total, largest, embedding, model_census = _measure(model)
    assert spec.parameters == total
    assert spec.largest_layer_parameters == largest
    assert spec.embedding_parameters == embedding
    _, _, modules, _, _ = layout_from_hf_config(config)
    assert census(modules) == model_census
    # The class zeroadvisor says it counted is the class transformers built.
    assert spec.notes[0].startswith(f"counted {type(model).__name__} ")


# Configs transformers refuses (at config validation or model construction): zeroadvisor
# must refuse them too rather than count a model that cannot exist.
REFUSED: dict[str, dict[str, Any]] = {
    "llama-heads-not-dividing-even-with-head-dim": _llama(hidden_size=68, head_dim=8),
    "gemma2-heads-not-dividing": _small("gemma2", hidden_size=70, head_dim=16, num_key_value_heads=2),
    "gemma3-heads-not-dividing": _small("gemma3_text", hidden_size=70, head_dim=16, num_key_value_heads=2),
    "neox-heads-not-dividing": _small("gpt_neox", hidden_size=70),
    "dsv2-heads-not-dividing": _small("deepseek_v2", hidden_size=70, q_lora_rank=None, **_MLA),
    "gpt2-heads-not-dividing": dict(model_type="gpt2", vocab_size=100, n_positions=8, n_embd=70, n_layer=1, n_head=8),
    "gptj-heads-not-dividing": dict(model_type="gptj", vocab_size=100, n_embd=70, n_layer=1, n_head=8, rotary_dim=4),
    "bloom-heads-not-dividing": dict(model_type="bloom", vocab_size=100, hidden_size=70, n_layer=1, n_head=8),
    "falcon-heads-not-dividing": _small("falcon", hidden_size=70),
    "opt-heads-not-dividing": dict(
        model_type="opt", vocab_size=100, hidden_size=70, num_hidden_layers=1, num_attention_heads=8,
        ffn_dim=8, max_position_embeddings=8,
    ),
    "bert-heads-not-dividing": dict(model_type="bert", **{**_BERT, "hidden_size": 70}),
    "bert-cross-attention-without-decoder": dict(model_type="bert", add_cross_attention=True, **_BERT),
    "t5-bad-feed-forward-proj": dict(_T5, feed_forward_proj="gated-gelu-new"),
    "bart-heads-not-dividing": dict(_BART, d_model=70),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_like_transformers(name: str) -> None:
    config = REFUSED[name]
    with pytest.raises(Exception):  # noqa: B017 - transformers raises ValueError or its own types
        _build(config)
    with pytest.raises(ModelError) as info:
        spec_from_hf_config(config)
    assert "\n" not in str(info.value)
