"""Modules frozen without PEFT (model/frozen.py, the model description's ``frozen:``): the trainable parameters
counted from the layout, and the memory DeepSpeed allocates for them (issue 34: a frozen embedding or vision
tower gets no gradient, master weight or optimizer state; stage_1_and_2.py / stage3.py build those from the
optimizer's groups, which hold only parameters that require grad)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.model.description import load_description
from zeroadvisor.model.errors import ModelError
from zeroadvisor.model.frozen import apply
from zeroadvisor.model.hf import layout_from_hf_config, spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape

LLAMA_2_7B = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 32000, "hidden_size": 4096,
    "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
}
BASE, H, F, V = 6_738_415_616, 4096, 11008, 32000
LAYER = 4 * H * H + 3 * H * F + 2 * H  # one decoder layer: q/k/v/o, gate/up/down, two RMSNorms
# Qwen2.5-0.5B ties its head to the input embedding (tie_word_embeddings true)
QWEN_TIED = {
    "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "vocab_size": 151936, "hidden_size": 896,
    "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
    "tie_word_embeddings": True,
}


def frozen(config: dict, *entries: str):
    return apply(spec_from_hf_config(config), layout_from_hf_config(config)[2], entries)


def test_frozen_embedding_counts_exactly():
    spec = frozen(LLAMA_2_7B, "embed_tokens")
    assert spec.trainable_parameters == BASE - V * H
    assert spec.largest_trainable_parameter == V * H  # the untied lm_head still trains
    assert spec.frozen == "embed_tokens" and spec.peft is None
    both = frozen(LLAMA_2_7B, "embed_tokens", "lm_head")
    assert both.trainable_parameters == BASE - 2 * V * H
    assert both.largest_trainable_parameter == H * F
    # a prefix freezes every module under it: the first two decoder layers
    first = frozen(LLAMA_2_7B, "layers.0", "model.layers.1")
    assert first.trainable_parameters == BASE - 2 * LAYER
    # a Linear by its transformers name in a family that renames the layout's (gpt2's c_attn is qkv_proj)
    gpt2 = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 50257, "n_embd": 768,
            "n_layer": 12, "n_head": 12, "n_positions": 1024}
    attn = frozen(gpt2, "c_attn")
    assert attn.trainable_parameters == spec_from_hf_config(gpt2).parameters - 12 * (768 * 3 * 768 + 3 * 768)
    # everything under model. (the embedding, every layer, the final norm): the untied head trains alone
    assert frozen(LLAMA_2_7B, "model").trainable_parameters == V * H


def test_a_tied_head_and_its_embedding_are_one_tensor():
    qwen = spec_from_hf_config(QWEN_TIED)
    for entry in ("embed_tokens", "lm_head"):
        spec = frozen(QWEN_TIED, entry)
        assert spec.trainable_parameters == qwen.parameters - 151936 * 896, entry


@pytest.mark.parametrize(("entries", "words"), [
    (("vision_tower",), "'vision_tower' names no module"),
    (("model", "lm_head"), "no parameter to train"),
    (("experts.0",), "names no module"),
    (("layers.40",), "names no module"),  # past the stack of 32
    ((), "at least one module"),
])
def test_bad_entries_are_one_line_errors(entries, words):
    with pytest.raises(ModelError, match=words):
        frozen(LLAMA_2_7B, *entries)


def _stage_terms(spec, stage: int, gpus: int = 4) -> dict[str, int]:
    ds = {"bf16": {"enabled": True}, "optimizer": {"type": "AdamW"}, "zero_optimization": {"stage": stage}}
    est = estimate(ds, spec, TrainingShape(sequence_length=512, micro_batch_size=1), Cluster(gpus=gpus))
    st = next(s for s in est.stages if s.configured)
    out: dict[str, int] = {}
    for t in st.terms:
        if t.phase == "train" and t.device == "gpu":
            out[t.key] = out.get(t.key, 0) + t.nbytes
    return out


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_frozen_modules_cost_their_weights_only(stage):
    full = spec_from_hf_config(LLAMA_2_7B)
    part = frozen(LLAMA_2_7B, "embed_tokens")
    got, whole = _stage_terms(part, stage), _stage_terms(full, stage)
    n = 4
    share = (lambda x: -(-x // n)) if stage == 3 else (lambda x: x)
    # the frozen embedding stays in bf16 beside the trained parameters (whole at stage 1/2, 1/N at stage 3)
    assert got["frozen_params"] == 2 * share(V * H)
    # the fp32 master weights and Adam's two moments cover the trained parameters only: 12 B over N
    master = {k: v for k, v in got.items() if "master" in k or "optim" in k or "adam" in k}
    master_full = {k: v for k, v in whole.items() if k in master}
    assert master and sum(master_full.values()) - sum(master.values()) == pytest.approx(12 * V * H / n, rel=1e-6)
    # every 16-bit weight is still there: trained + frozen = the whole model
    lp = next(k for k in whole if k.startswith("lp_params") or k == "lp_params")
    assert got[lp] + got["frozen_params"] == whole[lp]


def test_description_key_and_its_errors(tmp_path: Path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_2_7B))
    desc = tmp_path / "model.yaml"
    desc.write_text("hf_config: config.json\nfrozen: [embed_tokens]\n")
    spec, _ = load_description(desc)
    assert spec.trainable_parameters == BASE - V * H and spec.frozen == "embed_tokens"
    desc.write_text("hf_config: config.json\nfrozen: [embed_tokens]\npeft: {method: lora}\n")
    with pytest.raises(ModelError, match="peft freezes every base parameter"):
        load_description(desc)
    desc.write_text("parameters: 7B\nfrozen: [embed_tokens]\n")
    with pytest.raises(ModelError, match="frozen needs hf_config"):
        load_description(desc)
    desc.write_text("hf_config: config.json\nfrozen: [vision_tower]\n")
    with pytest.raises(ModelError, match="names no module") as err:
        load_description(desc)
    assert err.value.line == 2
