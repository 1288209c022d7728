"""What a family's modelling code keeps for backward (ModelSpec.layer_facts), from its config.json.

One row per model_type, read from transformers 5.24 ``models/<type>/configuration_<type>.py`` (the
dropout and activation keys and their defaults) and ``modeling_<type>.py`` (the norm class, whether the
eager attention takes its softmax in fp32, how the loss treats the logits). memory/activations.py
turns the facts into bytes; benchmarks/calibrate_activations.py checks them on real models.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from zeroadvisor.jsontypes import JSONValue
from zeroadvisor.model.families import CAUSAL_LM, MLM, PRETRAINING, SEQ2SEQ_LM
from zeroadvisor.model.spec import LayerFacts
from zeroadvisor.model.transformers_release import fused_experts, sdpa_repeats_kv

LM_HEADS = frozenset({CAUSAL_LM, MLM, PRETRAINING, SEQ2SEQ_LM})  # heads with vocabulary-wide logits
# Heads whose loss upcasts the logits: self.loss_function -> loss/loss_utils.py ForCausalLMLoss
# (logits.float()). BertForMaskedLM/BertForPreTraining/RobertaForMaskedLM and T5ForConditionalGeneration call
# nn.CrossEntropyLoss on the model-dtype logits.
UPCAST_LOSS_HEADS = frozenset({CAUSAL_LM})


Softcap = tuple[tuple[str, ...], float | None]  # config keys (first present wins), the class default (None: off)


@dataclass(frozen=True, slots=True)
class Row:
    norm: str  # "layernorm" | "rmsnorm" | "gemma" | "t5"
    attention_dropout: tuple[tuple[str, ...], float] | None  # config keys (first present wins), class default
    hidden_dropout: tuple[tuple[str, ...], float] | None
    activation: tuple[tuple[str, ...], str]
    softmax_fp32: bool = False  # eager_attention_forward: softmax(..., dtype=torch.float32)
    mlp_dropout: tuple[tuple[str, ...], float] | None = None
    final_dropout: bool = False
    relative_position_buckets: bool = False
    lm_head_transform: bool = False  # BertLMPredictionHead / RobertaLMHead: dense + act + LayerNorm
    norms_per_layer: int = 2
    qk_norm: str | None = None  # q_norm / k_norm over head_dim, of this norm kind
    router_topk_softmax: bool = False  # the MoE router's softmax over its top-k logits, not over every expert
    router_fp32_input: bool = False  # the MoE router casts its input to fp32 (kept for the linear's backward)
    # config keys that enable tanh soft-capping, with the class default (None: off)
    attention_softcap: Softcap | None = None
    final_softcap: Softcap | None = None


def _llama(act: str = "silu", norm: str = "rmsnorm", *, norms_per_layer: int = 2, qk_norm: str | None = None,
           attention_softcap: Softcap | None = None, final_softcap: Softcap | None = None,
           router_fp32_input: bool = False) -> Row:
    # LlamaConfig & co.: attention_dropout 0.0, no residual/embedding dropout; eager softmax in fp32
    return Row(norm, (("attention_dropout",), 0.0), ((), 0.0), (("hidden_act",), act), softmax_fp32=True,
               norms_per_layer=norms_per_layer, qk_norm=qk_norm, attention_softcap=attention_softcap,
               final_softcap=final_softcap, router_fp32_input=router_fp32_input)


ROWS: dict[str, Row] = {
    # Qwen2-VL / Qwen2.5-VL: the decoder is Qwen2's (its vision tower: memory/vision.py)
    **{t: _llama() for t in ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl")},
    # DeepseekV2/V3 TopkRouter: F.linear(hidden_states.type(torch.float32), ...): the fp32 input is kept
    **{t: _llama(router_fp32_input=True) for t in ("deepseek_v2", "deepseek_v3")},
    # Qwen3Attention: q_norm / k_norm (Qwen3RMSNorm, LlamaRMSNorm's code) over head_dim on Q and K
    **{t: _llama(qk_norm="rmsnorm") for t in ("qwen3", "qwen3_moe", "qwen3_vl", "qwen3_vl_moe")},
    # GptOssRMSNorm scales the fp32 input by the weight before the cast (two fp32 tensors, as Gemma's); the experts'
    # clamped GLU (GptOssExperts._apply_gate) keeps five f-wide tensors of a routed copy's fused gate_up output;
    # the router takes the top-k of its logits and a softmax over those k (GptOssTopKRouter)
    "gpt_oss": Row("gemma", (("attention_dropout",), 0.0), ((), 0.0), ((), "gpt_oss_glu"), router_topk_softmax=True),
    # GemmaRMSNorm: x.float() normalised and scaled in fp32, then cast (gemma/modeling_gemma.py)
    "gemma": _llama("gelu_pytorch_tanh", "gemma"),
    # Gemma2DecoderLayer / Gemma3DecoderLayer: input, post-attention, pre- and post-feedforward norms; Gemma 2 caps
    # the eager scores (attn_logit_softcapping 50.0) and the logits (final_logit_softcapping 30.0) with tanh;
    # Gemma 3 adds q_norm / k_norm (GemmaRMSNorm) and caps only where its config says
    "gemma2": _llama("gelu_pytorch_tanh", "gemma", norms_per_layer=4,
                     attention_softcap=(("attn_logit_softcapping",), 50.0),
                     final_softcap=(("final_logit_softcapping",), 30.0)),
    "gemma3_text": _llama("gelu_pytorch_tanh", "gemma", norms_per_layer=4, qk_norm="gemma",
                          attention_softcap=(("attn_logit_softcapping",), None),
                          final_softcap=(("final_logit_softcapping",), None)),
    # PhiDecoderLayer: attention and MLP in parallel on one input_layernorm's output (one norm per layer)
    "phi": Row("layernorm", (("attention_dropout",), 0.0), (("resid_pdrop",), 0.0), (("hidden_act",), "gelu_new"),
               softmax_fp32=True, norms_per_layer=1),
    "phi3": Row("rmsnorm", (("attention_dropout",), 0.0), (("resid_pdrop",), 0.0), (("hidden_act",), "silu"),
                softmax_fp32=True),
    "gpt2": Row("layernorm", (("attn_pdrop",), 0.1), (("resid_pdrop",), 0.1), (("activation_function",), "gelu_new")),
    "gpt_neox": Row("layernorm", (("attention_dropout",), 0.0), (("hidden_dropout",), 0.0), (("hidden_act",), "gelu"),
                    softmax_fp32=True),
    # GPTJBlock: attention and MLP in parallel on ln_1's output (one norm per layer)
    "gptj": Row("layernorm", (("attn_pdrop",), 0.0), (("resid_pdrop",), 0.0), (("activation_function",), "gelu_new"),
                norms_per_layer=1),
    "falcon": Row("layernorm", (("attention_dropout",), 0.0), (("hidden_dropout",), 0.0), (("activation",), "gelu")),
    "bloom": Row("layernorm", (("attention_dropout",), 0.0), (("hidden_dropout",), 0.0), ((), "gelu"),
                 softmax_fp32=True),
    "opt": Row("layernorm", (("attention_dropout",), 0.0), (("dropout",), 0.1), (("activation_function",), "relu"),
               softmax_fp32=True),
    # MptAttention (eager, its only implementation): softmax(attn_weights.float()) kept in fp32, cast for the value
    # matmul
    "mpt": Row("layernorm", ((), 0.0), (("resid_pdrop",), 0.0), ((), "gelu"), softmax_fp32=True),
    "starcoder2": Row("layernorm", (("attention_dropout",), 0.0), (("residual_dropout",), 0.0),
                      (("hidden_act",), "gelu_pytorch_tanh"), softmax_fp32=True),
    # BertConfig/RobertaConfig: attention_probs_dropout_prob 0.1, hidden_dropout_prob 0.1; eager softmax in the
    # model dtype (measured: benchmarks/activations.md)
    "bert": Row("layernorm", (("attention_probs_dropout_prob",), 0.1), (("hidden_dropout_prob",), 0.1),
                (("hidden_act",), "gelu"), lm_head_transform=True),
    "roberta": Row("layernorm", (("attention_probs_dropout_prob",), 0.1), (("hidden_dropout_prob",), 0.1),
                   (("hidden_act",), "gelu"), lm_head_transform=True),
    # BartConfig / MBartConfig / BlenderbotConfig: dropout (embeddings, attention and MLP outputs), attention_dropout
    # on the probabilities, activation_dropout between the activation and fc2; eager softmax in the model dtype;
    # the LM loss is CrossEntropyLoss on the model-dtype logits (+ final_logits_bias)
    **{t: Row("layernorm", (("attention_dropout",), 0.0), (("dropout",), 0.1), (("activation_function",), "gelu"),
              mlp_dropout=(("activation_dropout",), 0.0)) for t in ("bart", "mbart", "blenderbot")},
    # T5Config: one dropout_rate for attention probabilities, outputs and T5DenseActDense's inner dropout;
    # feed_forward_proj "relu" | "gated-gelu" (T5Config: dense_act_fn "gelu_new"); T5Stack drops out after its
    # final norm; block 0's relative_attention_bias looks up int64 (q, k) buckets
    "t5": Row("t5", (("dropout_rate",), 0.1), (("dropout_rate",), 0.1), (("feed_forward_proj",), "relu"),
              mlp_dropout=(("dropout_rate",), 0.1), final_dropout=True, relative_position_buckets=True),
}


def _value(config: Mapping[str, JSONValue], spec: tuple[tuple[str, ...], JSONValue] | None) -> JSONValue:
    if spec is None:
        return None
    keys, default = spec
    for key in keys:
        value = config.get(key)
        if value is not None:
            return value
    return default


def _probability(value: JSONValue) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None  # not a number: unknown, a mask is counted
    return float(value)


def layer_facts(model_type: str, config: Mapping[str, JSONValue], head: str, transformers: str | None = None,
                moe_v4: bool = False) -> LayerFacts | None:
    """The facts for a supported family (None for a model_type without a row), as transformers ``transformers``
    (None: the modelled release) runs it: ``moe_v4`` where the family's MoE layout depends on the release."""
    row = ROWS.get(model_type)
    if row is None:
        return None
    act = str(_value(config, row.activation))
    if model_type == "t5":  # T5Config.__init__: "gated-gelu" runs dense_act_fn "gelu_new", else the named act
        act = "gelu_new" if act == "gated-gelu" else act.rsplit("-", maxsplit=1)[-1]
    return LayerFacts(
        norm=row.norm,
        activation=act,
        attention_dropout=_probability(_value(config, row.attention_dropout)),
        hidden_dropout=_probability(_value(config, row.hidden_dropout)),
        mlp_dropout=_probability(_value(config, row.mlp_dropout)) or 0.0,
        softmax_fp32=row.softmax_fp32,
        loss_in_fp32=head in UPCAST_LOSS_HEADS,
        final_dropout=row.final_dropout,
        relative_position_buckets=row.relative_position_buckets,
        head_transform=row.lm_head_transform and head in LM_HEADS,
        norms_per_layer=row.norms_per_layer,
        router_topk_softmax=row.router_topk_softmax,
        router_fp32_input=row.router_fp32_input,
        expert_loop=moe_v4 and not fused_experts(transformers),
        sdpa_repeat_kv=sdpa_repeats_kv(transformers),
        qk_norm=row.qk_norm,
        attention_softcap=_capped(config, row.attention_softcap),
        final_softcap=_capped(config, row.final_softcap) and head in LM_HEADS,
    )


def _capped(config: Mapping[str, JSONValue], spec: Softcap | None) -> bool:
    """Whether a soft-capping key is on: a number (the cap) where the config or the class default gives one;
    null (or absent where the default is None) turns it off (``if self.config.final_logit_softcapping is not
    None``)."""
    if spec is None:
        return False
    keys, default = spec
    for key in keys:
        if key in config:
            value = config[key]
            return isinstance(value, (int, float)) and not isinstance(value, bool)
    return default is not None
