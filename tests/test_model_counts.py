"""Exact parameter counts from config.json, checked against hand calculations (no torch).

Every expected number below is either worked out in the comment next to it from the
published architecture, or quoted from the source named there. None is the code's output
pasted back. (tests/oracle/ compares with transformers itself, module by module.)
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_run import cli_process
from zeroadvisor.model.errors import ModelError
from zeroadvisor.model.hf import SUPPORTED_MODEL_TYPES, spec_from_hf_config


def llama(**over):
    return {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        **over,
    }


# --------------------------------------------------------------------------- totals


def test_llama_2_7b():
    # meta-llama/Llama-2-7b-hf config.json. Per layer: q,k,v,o 4 * 4096^2 = 67,108,864;
    # gate/up/down 3 * 4096 * 11008 = 135,266,304; two RMSNorms 8,192 -> 202,383,360.
    # 32 layers = 6,476,267,520; embed_tokens + untied lm_head 2 * 32000 * 4096 =
    # 262,144,000; final norm 4,096. Total 6,738,415,616 (the figure HF reports for it).
    spec = spec_from_hf_config(llama())
    assert spec.parameters == 6_738_415_616
    assert spec.embedding_parameters == 32000 * 4096
    assert spec.largest_layer_parameters == 32000 * 4096  # embed_tokens (= lm_head)
    assert spec.tied_embeddings is False
    assert (spec.num_layers, spec.hidden_size, spec.head_dim, spec.gated_mlp) == (32, 4096, 128, True)


def test_mistral_7b_v01():
    # mistralai/Mistral-7B-v0.1: GQA 32 q heads / 8 kv heads of 128. Per layer: q, o
    # 2 * 4096^2 = 33,554,432; k, v 2 * 4096 * 1024 = 8,388,608; MLP 3 * 4096 * 14336 =
    # 176,160,768; norms 8,192 -> 218,112,000; x32 = 6,979,584,000; + 262,144,000 (embed +
    # lm_head) + 4,096 = 7,241,732,096.
    spec = spec_from_hf_config(
        {
            "model_type": "mistral",
            "architectures": ["MistralForCausalLM"],
            "vocab_size": 32000,
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
        }
    )
    assert spec.parameters == 7_241_732_096
    assert spec.num_key_value_heads == 8


def test_mixtral_8x7b_experts_are_one_module():
    # mistralai/Mixtral-8x7B-v0.1. Per layer: attention as Mistral 41,943,040; 8 experts
    # 8 * 3 * 4096 * 14336 = 1,409,286,144 (ONE MixtralExperts module in transformers 5);
    # router 8 * 4096 = 32,768; norms 8,192 -> 1,451,270,144; x32 = 46,440,644,608;
    # + 262,144,000 + 4,096 = 46,702,792,704 ("46.7B" in Mistral's announcement).
    spec = spec_from_hf_config(
        {
            "model_type": "mixtral",
            "vocab_size": 32000,
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
        }
    )
    assert spec.parameters == 46_702_792_704
    assert spec.largest_layer_parameters == 8 * 3 * 4096 * 14336
    assert (spec.num_experts, spec.experts_per_token, spec.intermediate_size) == (8, 2, 14336)


def test_gpt2_small():
    # openai-community/gpt2: wte 50257 * 768 = 38,597,376; wpe 1024 * 768 = 786,432.
    # Per block: ln_1 + ln_2 3,072; c_attn 768 * 2304 + 2304 = 1,771,776; attn c_proj
    # 590,592; c_fc 768 * 3072 + 3072 = 2,362,368; mlp c_proj 3072 * 768 + 768 = 2,360,064
    # -> 7,087,872; x12 = 85,054,464; ln_f 1,536; lm_head tied. Total 124,439,808.
    spec = spec_from_hf_config(
        {
            "model_type": "gpt2",
            "architectures": ["GPT2LMHeadModel"],
            "vocab_size": 50257,
            "n_positions": 1024,
            "n_embd": 768,
            "n_layer": 12,
            "n_head": 12,
        }
    )
    assert spec.parameters == 124_439_808
    assert spec.embedding_parameters == 38_597_376 + 786_432  # token + position tables
    assert spec.tied_embeddings is True
    assert spec.intermediate_size == 3072 and spec.gated_mlp is False


BERT_BASE = {
    "model_type": "bert",
    "vocab_size": 30522,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
}


def test_bert_base_uncased_model_and_mlm():
    # google-bert/bert-base-uncased. Embeddings: word 30522 * 768 = 23,440,896, position
    # 512 * 768 = 393,216, token type 2 * 768 = 1,536, LayerNorm 1,536 -> 23,837,184.
    # Per layer: q,k,v,o 4 * (768^2 + 768) = 2,362,368; 2 LayerNorms 3,072; intermediate
    # 2,362,368; output 2,360,064 -> 7,087,872; x12 = 85,054,464. Pooler 590,592.
    # BertModel: 109,482,240.
    assert spec_from_hf_config({**BERT_BASE, "architectures": ["BertModel"]}).parameters == 109_482_240
    # BertForMaskedLM: no pooler (-590,592), plus transform dense 590,592, LayerNorm 1,536
    # and the output bias 30,522 (decoder weight tied to the word embedding) -> 109,514,298.
    mlm = spec_from_hf_config({**BERT_BASE, "architectures": ["BertForMaskedLM"]})
    assert mlm.parameters == 109_514_298
    # The decoder Linear owns the tied weight AND the tied bias: 30522 * 768 + 30522.
    assert mlm.largest_layer_parameters == 30522 * 768 + 30522


def test_t5_small():
    # google-t5/t5-small: shared 32128 * 512 = 16,449,536 (lm_head and both embed_tokens
    # tied to it). Encoder block: attention 4 * 512^2 = 1,048,576, FF 2 * 512 * 2048 =
    # 2,097,152, 2 norms 1,024 -> 3,146,752; x6 + relative bias 32 * 8 + final norm 512 =
    # 18,881,280. Decoder block adds cross-attention + norm: 4,195,840; x6 + 256 + 512 =
    # 25,175,808. Total 60,506,624.
    spec = spec_from_hf_config(
        {
            "model_type": "t5",
            "architectures": ["T5ForConditionalGeneration"],
            "vocab_size": 32128,
            "d_model": 512,
            "d_kv": 64,
            "d_ff": 2048,
            "num_layers": 6,
            "num_heads": 8,
        }
    )
    assert spec.parameters == 60_506_624
    assert spec.num_layers == 12  # 6 encoder + 6 decoder blocks
    assert any("6 encoder + 6 decoder" in n for n in spec.notes)


def test_falcon_7b_multi_query_parallel():
    # tiiuae/falcon-7b: h 4544, 71 heads of 64, multi_query (one k and one v head),
    # parallel_attn with one LayerNorm, no biases, tied. Per layer: query_key_value
    # 4544 * (4544 + 2 * 64) = 21,229,568; dense 4544^2 = 20,647,936; MLP 2 * 4544 * 18176
    # = 165,183,488; LayerNorm 9,088 -> 207,070,080; x32 = 6,626,242,560; word embeddings
    # 65024 * 4544 = 295,469,056; ln_f 9,088. Total 6,921,720,704.
    spec = spec_from_hf_config(
        {
            "model_type": "falcon",
            "vocab_size": 65024,
            "hidden_size": 4544,
            "num_hidden_layers": 32,
            "num_attention_heads": 71,
            "multi_query": True,
            "parallel_attn": True,
            "new_decoder_architecture": False,
            "bias": False,
        }
    )
    assert spec.parameters == 6_921_720_704
    assert spec.num_key_value_heads == 1


def test_opt_125m_positions_have_an_offset_of_two():
    # facebook/opt-125m: embed 50272 * 768 = 38,608,896; learned positions (2048 + 2) * 768
    # = 1,574,400; per layer 7,087,872 (as BERT's layer); x12 = 85,054,464; final
    # LayerNorm 1,536; lm_head tied. Total 125,239,296.
    spec = spec_from_hf_config(
        {
            "model_type": "opt",
            "vocab_size": 50272,
            "hidden_size": 768,
            "num_hidden_layers": 12,
            "num_attention_heads": 12,
            "ffn_dim": 3072,
            "max_position_embeddings": 2048,
        }
    )
    assert spec.parameters == 125_239_296
    assert spec.embedding_parameters == 38_608_896 + 1_574_400


def test_pythia_1_4b():
    # EleutherAI/pythia-1.4b; the Pythia paper (Biderman et al. 2023, Table 1) lists
    # 1,414,647,808 parameters. By hand: embed_in + untied embed_out 2 * 50304 * 2048 =
    # 206,045,184; per layer 2 LayerNorms 8,192, query_key_value 2048 * 6144 + 6144 =
    # 12,589,056, dense 4,196,352, MLP 16,785,408 + 16,779,264 -> 50,358,272; x24 =
    # 1,208,598,528; final LayerNorm 4,096.
    spec = spec_from_hf_config(
        {
            "model_type": "gpt_neox",
            "vocab_size": 50304,
            "hidden_size": 2048,
            "intermediate_size": 8192,
            "num_hidden_layers": 24,
            "num_attention_heads": 16,
        }
    )
    assert spec.parameters == 1_414_647_808


DEEPSEEK_V3 = {
    "model_type": "deepseek_v3",
    "architectures": ["DeepseekV3ForCausalLM"],
    "vocab_size": 129280,
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "n_shared_experts": 1,
    "n_routed_experts": 256,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "moe_layer_freq": 1,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "num_nextn_predict_layers": 1,
}


def test_deepseek_v3():
    # deepseek-ai/DeepSeek-V3 config.json, as transformers builds it (no MTP layer).
    # MLA per layer: q_a 7168 * 1536 = 11,010,048; q_a_layernorm 1,536; q_b 1536 * 128 *
    # 192 = 37,748,736; kv_a 7168 * 576 = 4,128,768; kv_a_layernorm 512; kv_b 512 * 128 *
    # 256 = 16,777,216; o 16384 * 7168 = 117,440,512 -> 187,107,328; + 2 norms 14,336.
    # x61 = 11,414,421,504. Dense MLP 3 * 7168 * 18432 = 396,361,728 on 3 layers =
    # 1,189,085,184. MoE on 58 layers: router 256 * 7168 = 1,835,008, experts 3 * 256 *
    # 2048 * 7168 = 11,274,289,152, shared expert 3 * 7168 * 2048 = 44,040,192 ->
    # 11,320,164,352; x58 = 656,569,532,416. Embedding + lm_head 2 * 129280 * 7168 =
    # 1,853,358,080; final norm 7,168. Total 671,026,404,352 ("671B" in the report).
    spec = spec_from_hf_config(DEEPSEEK_V3)
    assert spec.parameters == 671_026_404_352
    assert spec.largest_layer_parameters == 3 * 256 * 2048 * 7168
    assert spec.head_dim == 192 and spec.num_experts == 256 and spec.experts_per_token == 8
    notes = " ".join(spec.notes)
    assert f"{58 * 256:,} values not counted" in notes  # e_score_correction_bias buffers
    assert "multi-token-prediction" in notes


@pytest.mark.parametrize(
    ("layers", "experts", "billions"),
    [(24, 32, 20.91), (36, 128, 116.83)],  # gpt-oss model card (OpenAI, 2025): total params
)
def test_gpt_oss_matches_model_card(layers, experts, billions):
    spec = spec_from_hf_config(
        {
            "model_type": "gpt_oss",
            "vocab_size": 201088,
            "hidden_size": 2880,
            "intermediate_size": 2880,
            "num_hidden_layers": layers,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "head_dim": 64,
            "num_local_experts": experts,
        }
    )
    assert round(spec.parameters / 1e9, 2) == billions


def test_qwen3_moe_30b_a3b_matches_report():
    # Qwen3 technical report (2025), Table 2: Qwen3-30B-A3B has 30.5B total parameters.
    spec = spec_from_hf_config(
        {
            "model_type": "qwen3_moe",
            "vocab_size": 151936,
            "hidden_size": 2048,
            "intermediate_size": 6144,
            "num_hidden_layers": 48,
            "num_attention_heads": 32,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "moe_intermediate_size": 768,
        }
    )
    assert round(spec.parameters / 1e9, 1) == 30.5
    assert spec.largest_layer_parameters == 128 * 3 * 768 * 2048


# --------------------------------------------------------------------------- rules


@pytest.mark.slow  # a property test
@settings(max_examples=40, deadline=None)
@given(
    V=st.integers(1, 5000),
    heads=st.integers(1, 16),
    group=st.integers(1, 4),
    hd=st.integers(1, 64),
    inter=st.integers(1, 512),
    layers=st.integers(1, 8),
    tie=st.booleans(),
    attn_bias=st.booleans(),
    mlp_bias=st.booleans(),
)
def test_llama_closed_form(V, heads, group, hd, inter, layers, tie, attn_bias, mlp_bias):
    # llama/modeling_llama.py by hand: q (h -> n*d), k/v (h -> kv*d), o (n*d -> h), each
    # + bias if attention_bias; gate/up/down (+ biases if mlp_bias); 2 RMSNorms; final norm.
    kv = max(1, heads // group)
    # LlamaConfig requires hidden_size % heads == 0, but head_dim is free: h/heads != hd.
    h = heads * (hd + 3)
    attn = 2 * h * heads * hd + 2 * h * kv * hd + attn_bias * (heads * hd + 2 * kv * hd + h)
    mlp = 3 * h * inter + mlp_bias * (2 * inter + h)
    expected = V * h * (1 if tie else 2) + layers * (attn + mlp + 2 * h) + h
    spec = spec_from_hf_config(
        llama(
            vocab_size=V,
            hidden_size=h,
            intermediate_size=inter,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv,
            head_dim=hd,
            tie_word_embeddings=tie,
            attention_bias=attn_bias,
            mlp_bias=mlp_bias,
        )
    )
    assert spec.parameters == expected
    assert spec.embedding_parameters == V * h


def test_tie_defaults_differ_per_family_and_are_noted():
    small = {"vocab_size": 100, "hidden_size": 16, "intermediate_size": 32,
             "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1}
    # Gemma ties by default (GemmaConfig.tie_word_embeddings = True), Llama does not.
    gemma = spec_from_hf_config({"model_type": "gemma", "head_dim": 8, **small})
    llama_ = spec_from_hf_config({"model_type": "llama", **small})
    assert gemma.tied_embeddings is True and llama_.tied_embeddings is False
    assert any("gemma default (true)" in n for n in gemma.notes)
    # A base model has no output embedding: tied_embeddings is None, not False.
    base = spec_from_hf_config({"model_type": "llama", "architectures": ["LlamaModel"], **small})
    assert base.tied_embeddings is None
    assert llama_.parameters - base.parameters == 100 * 16  # just the untied lm_head


def test_qwen3_head_dim_default_is_128_not_hidden_over_heads():
    # qwen3/configuration_qwen3.py: head_dim: int = 128. With h=64 and 8 heads, q_proj is
    # 64 -> 8*128, not 64 -> 64.
    spec = spec_from_hf_config(
        {"model_type": "qwen3", "vocab_size": 10, "hidden_size": 64, "intermediate_size": 8,
         "num_hidden_layers": 1, "num_attention_heads": 8, "num_key_value_heads": 8}
    )
    assert spec.head_dim == 128


def test_missing_architectures_counts_causal_lm_and_says_so():
    spec = spec_from_hf_config({k: v for k, v in llama().items() if k != "architectures"})
    assert spec.parameters == 6_738_415_616
    assert any("names no architectures" in n and "LlamaForCausalLM" in n for n in spec.notes)


def test_every_required_family_is_supported():
    required = {
        "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma",
        "gemma2", "gemma3_text", "phi", "phi3", "gpt2", "gpt_neox", "gptj", "falcon", "bloom",
        "opt", "mpt", "starcoder2", "t5", "bert", "roberta", "deepseek_v2", "deepseek_v3",
        "gpt_oss", "bart", "mbart", "blenderbot", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe",
    }
    assert set(SUPPORTED_MODEL_TYPES) == required


def test_blenderbot_400m_distill_counts_exactly_and_its_zero_dropouts_drop_the_masks():
    """facebook/blenderbot-400M-distill's config.json: 364,802,560 parameters as transformers 5.24 builds
    BlenderbotForConditionalGeneration (the accelerate-deepspeed post's "400M" is rounded); attention and
    activation dropout 0 keep no masks, the 0.1 dropout on the outputs does."""
    config = {"model_type": "blenderbot", "architectures": ["BlenderbotForConditionalGeneration"],
              "d_model": 1280, "encoder_layers": 2, "decoder_layers": 12, "encoder_attention_heads": 32,
              "decoder_attention_heads": 32, "encoder_ffn_dim": 5120, "decoder_ffn_dim": 5120, "vocab_size": 8008,
              "max_position_embeddings": 128, "dropout": 0.1, "attention_dropout": 0.0, "activation_dropout": 0.0}
    spec = spec_from_hf_config(config)
    assert spec.parameters == 364_802_560
    assert (spec.encoder_layers, spec.decoder_layers, spec.num_layers) == (2, 12, 14)
    assert spec.layer_facts is not None
    assert (spec.layer_facts.attention_dropout, spec.layer_facts.hidden_dropout, spec.layer_facts.mlp_dropout) == \
        (0.0, 0.1, 0.0)
    assert not spec.layer_facts.loss_in_fp32  # CrossEntropyLoss on the model-dtype logits
    assert spec.tied_embeddings is True  # lm_head and both stacks' embed_tokens are `shared`


# --------------------------------------------------------------------------- errors


def error_of(config) -> ModelError:
    with pytest.raises(ModelError) as info:
        spec_from_hf_config(config)
    message = str(info.value)
    assert "\n" not in message and message.strip() == message
    return info.value


def test_unknown_model_type():
    err = error_of({"model_type": "mamba", "hidden_size": 768})
    assert "model_type 'mamba' is not supported" in str(err)
    assert "give `parameters:` in a model description instead" in str(err)
    assert err.key == "model_type"


def test_unsupported_architecture_head():
    err = error_of(llama(architectures=["LlamaForTokenClassification"]))
    assert "LlamaForTokenClassification" in str(err) and "LlamaForCausalLM" in str(err)
    assert "give `parameters:`" in str(err) and err.key == "architectures"


def test_missing_model_type():
    assert error_of({"hidden_size": 4}).key == "model_type"


@pytest.mark.parametrize(
    ("drop", "named"),
    [("hidden_size", "hidden_size"), ("num_hidden_layers", "num_hidden_layers"), ("vocab_size", "vocab_size")],
)
def test_missing_required_key_is_named(drop, named):
    config = {k: v for k, v in llama().items() if k != drop}
    assert f"missing required key {named} " in str(error_of(config))


def test_missing_key_lists_its_other_spelling():
    err = error_of({"model_type": "gpt2", "vocab_size": 10, "n_layer": 1, "n_head": 1, "n_positions": 8})
    assert "missing required key n_embd (or hidden_size)" in str(err)


def test_missing_dense_width_of_moe_model_with_dense_layers():
    config = dict(DEEPSEEK_V3)
    del config["intermediate_size"]
    assert "missing key intermediate_size" in str(error_of(config))


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("hidden_size", "4096", 'hidden_size must be an integer > 0, got "4096"'),
        ("hidden_size", 0, "hidden_size must be an integer > 0, got 0"),
        ("num_hidden_layers", True, "num_hidden_layers must be an integer > 0, got true"),
        ("intermediate_size", 11008.0, "intermediate_size must be an integer > 0, got 11008.0"),
        ("tie_word_embeddings", "false", 'tie_word_embeddings must be true or false, got "false"'),
        ("architectures", "LlamaForCausalLM", "architectures must be a list of class names"),
    ],
)
def test_bad_values(key, value, words):
    err = error_of(llama(**{key: value}))
    assert words in str(err)
    assert err.key == key


def test_null_where_transformers_would_crash():
    # Qwen2MoeConfig has no __post_init__ fallback for num_key_value_heads=None.
    config = {"model_type": "qwen2_moe", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 8,
              "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": None,
              "num_experts": 2, "moe_intermediate_size": 4, "shared_expert_intermediate_size": 4}
    assert "num_key_value_heads must be an integer > 0, got null" in str(error_of(config))


def test_conflicting_spellings():
    err = error_of({"model_type": "gpt2", "vocab_size": 10, "n_embd": 8, "hidden_size": 16,
                    "n_layer": 1, "n_head": 1, "n_positions": 8})
    assert "n_embd (8) and hidden_size (16)" in str(err)


def test_llama_hidden_must_divide_by_heads_even_with_head_dim():
    # LlamaConfig.validate_architecture rejects it whatever head_dim says.
    err = error_of(llama(hidden_size=4100, head_dim=128))
    assert "hidden_size 4100 is not a multiple of num_attention_heads 32" in str(err)
    assert err.key == "num_attention_heads"


def test_hidden_not_divisible_by_heads():
    err = error_of({"model_type": "gpt2", "vocab_size": 10, "n_embd": 10, "n_layer": 1,
                    "n_head": 3, "n_positions": 8})
    assert "not a multiple of num_attention_heads" in str(err)


def test_not_a_mapping():
    assert "JSON object" in str(error_of(["llama"]))  # type: ignore[arg-type]


def test_core_package_never_imports_torch_transformers_deepspeed_or_jsonschema():
    code = (
        "import sys\n"
        "import zeroadvisor.model.description, zeroadvisor.model.hf\n"
        "from zeroadvisor.model.hf import spec_from_hf_config\n"
        "spec_from_hf_config({'model_type': 'gpt2', 'vocab_size': 8, 'n_embd': 4, 'n_layer': 1,"
        " 'n_head': 1, 'n_positions': 4})\n"
        "bad = [m for m in ('torch', 'transformers', 'deepspeed', 'jsonschema') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    result = cli_process(code=code)  # a fresh interpreter
    assert result.returncode == 0, result.stderr
