"""Activation memory per GPU (no tensor/sequence parallelism), after Korthikanti et al. 2022.

Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (§4.1),
count per transformer layer, with 2-byte activations and 1-byte dropout masks:

    attention  11·sbh + 5·as²b   (QKV input 2, Q 2, K 2, V 2, out-proj input 2, dropout mask 1;
                                  softmax 2·as²b, its dropout mask as²b, dropout output 2·as²b)
    MLP        19·sbh            (fc1 input 2, GeLU input 8, fc2 input 8, dropout mask 1; ffn = 4h)
    2 norms     4·sbh
    total      sbh·(34 + 5·as/h)

Generalised here (derivation) with e = bytes per activation element (2 for fp16/bf16, 4 in fp32),
q = heads·head_dim (query/out-proj width), kv = kv_heads·head_dim (GQA: K and V are narrower),
f = MLP width, k = experts per token (1 for dense):

    attention  sb·[e·(h + q + kv + kv + q) + h]          QKV input h, Q q, K kv, V kv, out-proj input q,
                                                         dropout mask h (1 byte)
    scores     as²b·(2e + 1)                             softmax, its mask, dropout output
    MLP        sb·[e·h + k·c·e·f + h]                    c = 2 (GeLU: act input f + fc2 input f) or
                                                         c = 4 (gated SwiGLU/GeGLU: gate out, up out,
                                                         act out, product = down-proj input)
    norms      sb·2·e·h
    layer      sb·[e·(4h + 2q + 2kv + k·c·f) + 2h] + as²b·(2e + 1)

Check: e = 2, q = kv = h, f = 4h, c = 2, k = 1 gives sbh·(8 + 4 + 4 + 16 + 2) = 34·sbh and 5·as²b.

* FlashAttention (and selective recomputation) never keep the s×s scores: the as²b term goes.
  FlashAttention keeps fp32 log-sum-exp statistics per head and token instead: 4·asb bytes.
* Full recomputation keeps each layer's input (e·sbh per layer) and, during backward, one
  layer's activations while it is recomputed.
* Outside the layers: final-norm and LM-head inputs 2·e·sbh, fp32 logits 4·sbV (Korthikanti's
  4sbv term) and the fp32 softmax/gradient of the cross-entropy loss, another 4·sbV.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroadvisor.memory import bytes as B
from zeroadvisor.model.spec import ModelSpec, TrainingShape

MASK = B.DTYPE_BYTES["uint8"]
FP32 = B.DTYPE_BYTES["fp32"]


@dataclass(frozen=True, slots=True)
class Activations:
    nbytes: int
    per_layer: int
    logits: int
    notes: tuple[str, ...]


def activation_bytes(spec: ModelSpec, shape: TrainingShape, micro_batch: int, precision: str) -> Activations:
    notes: list[str] = []
    s = shape.sequence_length
    h, L = spec.hidden_size, spec.num_layers
    missing = [name for name, value in (("num_layers", L), ("hidden_size", h)) if not value]
    if missing:
        notes.append("activations not estimated: give num_layers/hidden_size/num_attention_heads/intermediate_size/"
                     "vocab_size or an hf_config (missing: " + ", ".join(missing) + ")")
        return Activations(0, 0, 0, tuple(notes))
    if not s:
        notes.append("activations not estimated: no sequence length given")
        return Activations(0, 0, 0, tuple(notes))
    b = micro_batch
    e = B.nbytes(precision)  # 2 for fp16/bf16, 4 in fp32
    heads = spec.num_attention_heads
    head_dim = spec.head_dim or (h // heads if heads else None)
    q = heads * head_dim if heads and head_dim else h
    kv_heads = spec.num_key_value_heads or heads
    kv = kv_heads * head_dim if kv_heads and head_dim else q
    f = spec.intermediate_size
    if not f:
        f = 4 * h
        notes.append("MLP width unknown: assumed 4·hidden_size")
    gated = bool(spec.gated_mlp)
    if spec.gated_mlp is None and spec.intermediate_size:
        notes.append("MLP gating unknown: costed as a two-matrix (GeLU) MLP")
    c = 4 if gated else 2
    k = (spec.experts_per_token or 1) if spec.num_experts else 1  # each token runs k experts' MLPs

    linear = s * b * (e * (4 * h + 2 * q + 2 * kv + k * c * f) + 2 * h)
    scores = 0
    if shape.flash_attention:
        if heads:
            linear += FP32 * heads * s * b  # FlashAttention softmax log-sum-exp, fp32 per head and token
    elif heads:
        scores = heads * s * s * b * (2 * e + MASK)
    elif shape.activation_checkpointing != "selective":
        notes.append("attention heads unknown: the 5·as²b score term is not counted")
    kept_scores = scores if shape.activation_checkpointing == "none" else 0  # selective recomputes them
    per_layer = linear + kept_scores

    if shape.activation_checkpointing == "full":
        # checkpointed layer inputs + one layer's full activations while it is recomputed in backward
        body = L * e * s * b * h + linear + scores
        ckpt = "full recomputation: layer inputs + one layer's activations during its recompute"
    else:
        body = L * per_layer
        ckpt = {"none": "no recomputation", "selective": "selective recomputation (scores recomputed)"}[
            shape.activation_checkpointing]
    attn = "FlashAttention (no s×s scores)" if shape.flash_attention else "explicit attention scores"
    notes.append(f"activations: Korthikanti et al. 2022 per layer, adjusted for GQA/MLP width, {attn}, {ckpt}, "
                 f"micro batch {b}, sequence {s}, {e}-byte activations")

    tail = 2 * e * s * b * h  # final norm input + LM head input
    logits = 0
    if spec.vocab_size:
        logits = 2 * FP32 * s * b * spec.vocab_size  # fp32 logits + fp32 softmax/grad of the loss
    else:
        notes.append("vocabulary size unknown: the fp32 logits and loss (8·s·b·V bytes) are not counted")
    return Activations(body + tail + logits, per_layer, logits, tuple(notes))
