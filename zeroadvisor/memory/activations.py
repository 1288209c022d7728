"""Activation memory per GPU (no tensor/sequence parallelism): what autograd keeps for backward.

Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (§4.1) count per
layer, with 2-byte activations and 1-byte dropout masks, sbh·(34 + 5·as/h): attention 11·sbh + 5·as²b,
MLP 19·sbh, two LayerNorms 4·sbh. Here the same count is made term by term from what transformers
5.24 / torch keep, so that it holds for other norms, activations, dropout settings, attention kernels
and encoder-decoder stacks. Checked against real transformers on CPU with
``torch.autograd.graph.saved_tensors_hooks`` (benchmarks/calibrate_activations.py; tables in
benchmarks/activations.md). Notation: e = bytes per activation element (2 in fp16/bf16, 4 in fp32),
h hidden, q = heads·head_dim, kv = kv_heads·head_dim, f MLP width, a heads, k experts per token; per
token unless said. Every term is exact for the code it cites unless it says bound.

Per layer (a stack of self-attention + MLP; an encoder-decoder's decoder layer adds cross-attention):

* norms (per norm; its output is counted as the input of the next op):
  LayerNorm   e·h + 8     torch native_layer_norm saves its input and fp32 mean/rstd (CUDA)
  RMSNorm     4h + e·h + 4  LlamaRMSNorm: hidden.to(float32) (saved by pow and mul), rsqrt, and the
                          normalized tensor cast back (saved by weight *) - in fp32 the copy is the input
  T5LayerNorm 2e·h + 4 (+ 4h when e != 4)  the input is multiplied un-upcast (saved), plus the fp32 copy
                          pow saves, rsqrt, and the normalized tensor (saved by weight *)
* attention: its input e·h, Q e·q, K and V e·kv each (eager GQA: repeat_kv expands them to e·q), the
  out-projection input e·q; a dropout mask (1 byte, CUDA native_dropout) on its output when
  hidden dropout > 0.
  - eager: the scores a·s_q·s_k·b·(sm + e' + m): softmax output in sm bytes (4 where the family's
    eager_attention_forward takes softmax in fp32, else e), the probabilities the value matmul keeps
    (e' = e when a cast or a dropout makes a new tensor, else 0: the softmax output itself) and the
    dropout mask (m = 1 when attention dropout > 0).
  - fused (SDPA / FlashAttention): no scores; the kernel keeps its output, laid out (b, s, a, d), which
    is also the out-projection input after the transpose, and the fp32 log-sum-exp 4·a. T5's relative
    position bias with a padding mask is a (b, a, q, k) tensor per attention the kernel keeps (a bound:
    without padding it is one shared tensor).
* MLP (k experts per token on the f-wide terms): input e·h; plain: the activation input and the down
  projection input, 2·e·f (ReLU keeps its output, which is the down-projection input: e·f); gated
  (SwiGLU/GeGLU): gate output, activation output, up output, product = 4·e·f (ReLU-gated 3·e·f);
  T5's dropout between activation and down projection adds its mask f and its output (then 2·e·f for
  ReLU); a dropout mask h on the MLP output when hidden dropout > 0.

Beyond Korthikanti's terms, what a family's code adds (model/activation_facts.py says which): a q/k norm over
head_dim keeps its norm's tensors per head (Qwen3, Gemma 3); Gemma 2/3 have four norms per layer; Gemma 2's tanh
soft-caps keep their outputs (the eager scores, and the logits: kept with the head's input); an MoE layer keeps
the router's fp32 probabilities over the E experts, the top-k and dispatch indices (int64) and, per routed copy,
its gathered input, its down-projection output and its routing weight, plus a shared expert's MLP (Qwen2-MoE:
with its sigmoid gate). Each is measured on CPU in benchmarks/activations.md.

Outside the layers, per stack: the embedding dropout mask (hidden dropout > 0) and one norm (the
embedding LayerNorm of post-LN models or the final norm of pre-norm ones); an encoder-decoder keeps
the encoder output e·h per source token for every cross-attention's K/V projections (one tensor); the
LM head input e·h per output token; and the loss peak over tokens × V: log_softmax saves its output,
and in backward NllLossBackward's dense gradient and LogSoftmaxBackward's input gradient exist next to
it: 3 tensors, fp32 where the loss upcasts the logits (transformers loss_utils ForCausalLMLoss /
ForMaskedLMLoss: logits.float()), else in the model dtype (nn.CrossEntropyLoss on the logits:
T5ForConditionalGeneration, BertForMaskedLM): 12·V or 3e·V bytes per token. A classifier head has no
vocabulary-wide logits. With the Liger kernel on (TrainingShape.liger_kernel, memory/liger.py) its fused
linear cross-entropy replaces the logits and loss: the largest chunk's logits, grad_input, loss_1d and the
labels (+ the head's gradient for a trainable head), a bound over Liger's versions; its RMSNorm (e·h + 4)
and SwiGLU/GEGLU (3·e·f) replace transformers' in the families memory/liger.py LAYER_FAMILIES names.

Checkpointing: selective recomputation drops the scores; full recomputation keeps each layer's input
(e·h per token and layer) plus one layer's activations while it is recomputed in backward. Under full
recomputation the loss peak and a layer's recompute are never live together (exact for the order torch runs):
autograd runs the loss, LM-head and final-norm backward first, freeing their saved tensors as each node runs
(torch/csrc/autograd/engine.cpp: a node's SavedVariables are released after it executes unless retain_graph),
and torch.utils.checkpoint (CheckpointFunction.backward / the non-reentrant unpack hook) recomputes the last
layer only when the backward reaches it. So the peak is the layer inputs + the rest outside the layers +
max(one layer's recompute, the LM head's input and the loss peak). With Ulysses at 64k-512k tokens the
vocabulary-wide loss is the larger, and the sum over-counted by a whole layer's working set.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroadvisor.memory import bytes as B
from zeroadvisor.memory import cut_cross_entropy as cce
from zeroadvisor.memory import liger, trl_sft_loss
from zeroadvisor.memory.activation_offload import offloader, offloads_uncounted
from zeroadvisor.memory.terms import ceil_div
from zeroadvisor.memory.trl_sft_loss import (
    CHUNK_TOKENS,
    FUSED_SOURCE,
    TOKEN_TILE,
    VOCAB_TILE,
    SftLoss,
    chunked_loss_bytes,
    fused_head_bytes,
    head_loss,
)
from zeroadvisor.model.spec import Checkpointing, LayerFacts, ModelSpec, TrainingShape
from zeroadvisor.vocab import Method

MASK = B.DTYPE_BYTES["uint8"]  # torch native_dropout's bool mask (at::dropout on CUDA: is_fused_kernel_acceptable)
FP32 = B.DTYPE_BYTES["fp32"]
IDS = 8  # int64 token ids and labels
LN_STATS = 2 * FP32  # native_layer_norm: mean and rstd per token, fp32 for 16-bit inputs on CUDA
RMS_STATS = FP32  # rsqrt(variance) per token, fp32
UPCAST_LOSS_COPIES = 3 * FP32  # log-probs + their gradient + the logits' gradient, fp32
LOSS_COPIES = 3  # the same three in the logits' dtype (× e)
# LLaMA-Factory's PPO step (llamafactory/train/ppo/trainer.py batched_forward_pass @ v0.9.3, with TRL 0.9.6's
# PPOTrainer.loss, the only TRL its PPO runs with): the value-head model's fp32 logits (a torch.cat copy kept for the
# loss), their log_softmax (saved), then entropy_from_logits' softmax (saved: the entropy keeps its graph) and its
# product with the logits. Measured with TRL 0.9.6's own value head and loss on CPU: 4.00 fp32 copies of the micro
# batch's logits at 1, 2 and 4 rows (benchmarks/ppo_loss.md), where a plain loss holds 3.
ENTROPY_LOSS_COPIES = 4 * FP32
# OpenRLHF from 0.7.0 (openrlhf/models/actor.py forward, models/utils.py log_probs_from_logits @ v0.8.5, v0.11.0):
# the logits upcast to fp32 and held by the caller's output through backward, scored by flash-attn's Triton
# cross_entropy_loss, which saves them (no copy) and writes their gradient into one empty_like tensor (flash_attn/ops/
# triton/cross_entropy.py @ v2.8.0); that gradient's cast to the model dtype is the third tensor at the peak. In fp32
# training there is no cast. Measured with OpenRLHF 0.8.5's own SFT and DPO code and a CPU replica of the kernel's
# allocations: 2.51 fp32 copies in bf16 (benchmarks/openrlhf_loss.md), where the plain loss's count is 3.
FUSED_CE_LOSS_BYTES = 2 * FP32
# With an entropy term in its loss (OpenRLHF's PPO/GRPO actor, --entropy_loss_coef not 0: Actor.forward's
# compute_entropy over the same fp32 logits, under torch.compile, models/utils.py @ v0.8.5, v0.11.0) the backward
# brings the entropy's gradient of the logits beside the kernel's and sums the two into a third: four fp32 copies at
# the peak, the cast to the model dtype after it. Measured with OpenRLHF 0.8.5's own Actor.forward (compute_entropy
# compiled by inductor on CPU) and PolicyLoss: 4.01 copies at coefficient 0.01, 2.51 at 0 and without it (the
# entropy's graph then never runs backward; benchmarks/openrlhf_loss.md).
FUSED_CE_ENTROPY_BYTES = 4 * FP32
# TRL's selective_log_softmax on bf16 logits (trl/trainer/utils.py @ v0.15 to v1.16): a log_softmax per row, saved
# row by row; its backward makes each row's gradient in turn and stacks them into the logits' gradient: the saved
# rows and the stacked gradient (2 copies) and one row's transient. Measured with TRL 1.9.0's DPO on CPU: 2.01
# copies at 8 rows, 2.51 at 2 (benchmarks/dpo_loss.md, the backward column).
ROW_LOSS_COPIES = 2
# TRL's ORPO and CPO (0.15+) add their NLL over the chosen rows (concatenated_forward's cross_entropy_loss on
# ``all_logits[:len_chosen]``): its saved log-softmax, half a copy. Measured with TRL 1.9.0's ORPOTrainer on CPU: 3.01
# copies at 2 rows, 2.54 at 4 and 8 (benchmarks/dpo_loss.md): counted 2.5 and a row's, a bound by a quarter copy at
# most (beyond 2 rows the row's transient stays under the NLL's backward).
CHOSEN_NLL_SHARE = 2  # the chosen rows are half of the batch's
# TRL's PPO step (trl/trainer/ppo_trainer.py PPOTrainer.train @ v0.12.0, v0.21.0; ppov2_trainer.py @ v0.9.6 to
# v0.11.4; trl/experimental/ppo @ v1.9.0): the model's logits over query + response in the model dtype, kept by
# ``output`` to the micro batch's end; the response's slice divided by the temperature in place (``logits /=
# args.temperature + 1e-7``), so the backward makes the slice's zero-filled whole-sequence gradient and CopySlices
# clones it: three copies of the whole logits. Beside them the response's: from 0.15 selective_log_softmax's two
# (ROW_LOSS_COPIES), before it a whole log_softmax kept in ``new_all_logprobs``, its gather's zero-filled gradient and
# the log_softmax's: three (PPO_WHOLE_LOG_SOFTMAX_COPIES). Measured with TRL 1.9.0's own forward,
# PolicyAndValueWrapper and selective_log_softmax on CPU (benchmarks/trl_ppo_loss.md): 3.28 to 4.78 copies at responses
# of 1/8 to 7/8 of the sequence, 3 + 2 x share giving 3.25 to 4.75; the pre-0.15 scoring 3.40 to 5.65 (3 + 3 x share:
# 3.38 to 5.63).
PPO_SLICE_COPIES = 3
PPO_WHOLE_LOG_SOFTMAX_COPIES = 3
DEFAULT_FACTS = LayerFacts()  # Korthikanti's assumptions; every dropout mask counted


@dataclass(frozen=True, slots=True)
class Activations:
    nbytes: int
    per_layer: int  # the largest layer (a decoder layer of an encoder-decoder)
    logits: int
    notes: tuple[str, ...]
    parts: tuple[tuple[str, int], ...] = ()  # the breakdown, for reports and the calibration
    # what ``nbytes`` holds for the LM head and loss beyond the layers (a pipeline stage without the head drops
    # it): the logits peak, or under full recomputation only what the head's peak exceeds a layer's recompute by
    head_share: int = 0
    # what is still live once the head's backward has run (the layers' kept tensors, under full recomputation their
    # inputs, and what is kept outside the layers but the head's input): the reduce hooks of the LM head's weight
    # run then (memory/step_temporaries.py boundary_norm_terms)
    backward_kept: int = 0
    # the LM head weight's gradient that ``nbytes`` holds at the loss's peak, where the loss makes it itself (TRL's
    # fused head casts it, its chunked loss sums it over the chunks, Liger writes it in the forward): the very tensor
    # ZeRO-3's hook then receives as the head's full gradient (memory/buffers.py gathered_terms); 0 where the loss
    # does not make it, or its peak is not the one counted
    head_gradient: int = 0
    # the layer inputs an offloader holds in host memory per rank (memory/activation_offload.py): (bytes of one
    # input, how many), one pair per layer stack; each is a pinned block of its own
    offloaded: tuple[tuple[int, int], ...] = ()
    # under full recomputation where a layer's recompute is the peak counted: how far the loss side (the head's
    # input and the logits' peak) stays under it, room a larger moment of the loss side fills first
    # (memory/method.py dpo_reference_pass_terms)
    loss_headroom: int = 0


def _dropout(p: float | None) -> int:
    """Bytes of a dropout mask per element: none when the probability is 0 (torch dropout is the
    identity: at::dropout returns the input), 1 otherwise or when unknown."""
    return 0 if p is not None and p <= 0 else MASK


def norm_bytes(kind: str, e: int, h: int, rows: int = 1) -> int:
    """Per token, one norm over ``rows`` vectors of width h/rows each (a q/k norm: one per head; its statistics
    are per row), its output excluded: the next op keeps it as its input."""
    if kind == liger.NORM:  # Liger's RMSNorm (memory/liger.py)
        return liger.norm_bytes(e, h, rows)
    if kind == "rmsnorm":  # llama/modeling_llama.py LlamaRMSNorm.forward
        return FP32 * h + e * h + RMS_STATS * rows
    if kind == "gemma":  # gemma/modeling_gemma.py GemmaRMSNorm: normalised and scaled in fp32, then cast
        return 2 * FP32 * h + RMS_STATS * rows
    if kind == "t5":  # t5/modeling_t5.py T5LayerNorm.forward
        return (FP32 * h if e != FP32 else 0) + 2 * e * h + RMS_STATS * rows
    return e * h + LN_STATS * rows  # torch.nn.LayerNorm (native_layer_norm saves input, mean, rstd)


@dataclass(frozen=True, slots=True)
class _Dims:
    e: int
    h: int
    q: int
    kv: int
    heads: int | None
    f: int
    k: int
    gated: bool
    experts: int = 0  # routed experts of an MoE layer (0: a dense MLP)
    shared: int = 0  # the shared expert's MLP width (0: none)
    latent: tuple[int, ...] = ()  # latent attention's normed low ranks (DeepSeek)
    head: int = 0  # the query/key head width
    v_head: int = 0  # the value head width where it differs (MLA; 0: the same)


def attention_bytes(d: _Dims, facts: LayerFacts, sq: int, sk: int, b: int, fused: bool) -> tuple[int, int]:
    """(bytes linear in the tokens, score bytes) of one attention block over sq queries and sk keys.

    Cross-attention's key/value input is the encoder output, counted once for all layers by the caller.
    """
    e, tq, tk = d.e, sq * b, sk * b
    # eager (and SDPA before transformers 4.54) repeat_kv expands K/V to every query head; SDPA since: enable_gqa
    kv = d.kv if fused and not facts.sdpa_repeat_kv else d.q
    v = kv * d.v_head // d.head if d.v_head else kv  # MLA: values (and the attention output) v_head_dim wide
    out = d.q * d.v_head // d.head if d.v_head else d.q
    linear = tq * e * d.h + tq * e * d.q + tk * e * (kv + v) + tq * e * out  # input, Q, K, V, out-proj input
    linear += tq * d.h * _dropout(facts.hidden_dropout)  # dropout on the attention output
    for rank in d.latent:
        # DeepSeek's latent attention (deepseek_v3/modeling_deepseek_v3.py DeepseekV3Attention): q_a_layernorm and
        # kv_a_layernorm run over the low ranks; each keeps an RMSNorm's tensors and its output is the b-projection's
        # input
        linear += tq * (norm_bytes("rmsnorm", e, rank) + e * rank)
    if facts.qk_norm and d.heads:
        # q_norm / k_norm over head_dim (qwen3/modeling_qwen3.py, gemma3/modeling_gemma3.py Attention.forward):
        # each keeps what its norm keeps, per head; K is normed before repeat_kv, at the kv heads
        kv_heads = max(1, d.heads * d.kv // d.q)
        linear += tq * norm_bytes(facts.qk_norm, e, d.q, d.heads) + tk * norm_bytes(facts.qk_norm, e, d.kv, kv_heads)
    scores = 0
    if fused:
        if d.heads:
            # the kernel keeps its output, whose (b, s, a, d) storage the transposed view reshapes into the
            # out-projection input (one tensor, counted above), and the fp32 log-sum-exp per head and token
            linear += tq * FP32 * d.heads
            if facts.relative_position_buckets:
                # T5 under SDPA: sdpa_attention.py create_position_bias_mask folds the padding mask into the
                # position bias, a new (b, a, q, k) tensor per attention that the memory-efficient kernel keeps
                # for its backward (the bias gets a gradient). A bound: without padding the bias is one shared
                # (1, a, q, k) tensor.
                scores = d.heads * sq * sk * b * e
    elif d.heads:
        sm = FP32 if facts.softmax_fp32 else e
        mask = _dropout(facts.attention_dropout)
        probs = e if (sm != e or mask) else 0  # a new tensor the value matmul keeps
        capped = e if facts.attention_softcap else 0  # Gemma 2's tanh soft-cap keeps its output
        scores = d.heads * sq * sk * b * (sm + probs + mask + capped)
    return linear, scores


# f-wide tensors an activation keeps of its input side (transformers activations.py ACT2FN): a torch op keeps
# its input (GELU, SiLU, GELUTanh); NewGELUActivation ("gelu_new") is written out in Python and keeps its
# input, 0.5·input, the tanh output and 1 + tanh; QuickGELU keeps its input and the sigmoid. ReLU keeps
# its output instead, which is the tensor the next op keeps anyway.
ACTIVATION_TENSORS = {"gelu_new": 4, "quick_gelu": 2, "relu": 0,
                      # gpt_oss/modeling_gpt_oss.py GptOssExperts._apply_gate: the clamped gate and up, the sigmoid,
                      # the GLU and (up + 1) keep 5 f-wide tensors with the fused gate_up output's 2f (measured)
                      "gpt_oss_glu": 4}


def mlp_bytes(d: _Dims, facts: LayerFacts, tokens: int) -> int:
    """One MLP over ``tokens``: input, the f-wide tensors, the output dropout mask."""
    act = ACTIVATION_TENSORS.get(facts.activation, 1)
    relu = act == 0
    inner = facts.mlp_dropout > 0  # T5DenseActDense/T5DenseGatedActDense: dropout before wo
    if d.gated and facts.activation == liger.GLU:  # Liger's SwiGLU/GEGLU (memory/liger.py)
        wide = liger.mlp_wide(d.e, d.f)
    elif d.gated:  # act(gate) * up -> down: activation tensors + its output + up + the down input
        wide = (3 if relu else act + 3) * d.e * d.f
    elif relu:  # ReLU's output is the down input; with inner dropout the dropped tensor is a new one
        wide = (2 if inner else 1) * d.e * d.f
    else:  # activation tensors + the down input (the activation output, or the dropped tensor)
        wide = (act + 1) * d.e * d.f
    if inner:
        wide += MASK * d.f
    routed = 0
    if d.experts:
        # the sparse MoE block (qwen3_moe/modeling_qwen3_moe.py Qwen3MoeTopKRouter and Experts; mixtral, qwen2_moe
        # the same): the router's fp32 softmax over the experts, the top-k indices and the token order of the
        # dispatch (int64), and per routed copy its gathered input, its down-projection output and its routing
        # weight (measured: benchmarks/activations.md)
        router = d.e * d.k if facts.router_topk_softmax else FP32 * d.experts  # the softmax output it keeps
        router += FP32 * d.h if facts.router_fp32_input else 0
        if facts.expert_loop:
            # transformers 4.x (qwen3_moe/modeling_qwen3_moe.py @ v4.57 Qwen3MoeSparseMoeBlock.forward): the top-k
            # indices, and per routed copy its token index, gathered input, expert output, weighted output and
            # routing weight (measured with transformers 4.51: benchmarks/activations.md)
            routed = router + IDS * d.k + d.k * (IDS + 3 * d.e * d.h + d.e)
        else:
            routed = router + 4 * IDS * d.k + d.k * (2 * d.e * d.h + d.e)
        if d.shared:
            # the shared expert, a gated MLP of its own width on the same input, and (Qwen2-MoE) the sigmoid
            # gate's output and the shared output its product keeps: a bound for DeepSeek, which adds it ungated
            routed += (ACTIVATION_TENSORS.get(facts.activation, 1) + 3) * d.e * d.shared + d.e * d.h + d.e
    return tokens * (d.e * d.h + d.k * wide + d.h * _dropout(facts.hidden_dropout) + routed)


@dataclass(frozen=True, slots=True)
class _Stack:
    """Layers of one kind: ``sq`` query tokens per sample; ``sk`` the source length their cross-attention's
    keys span (None: no cross-attention)."""

    name: str
    layers: int
    sq: int
    sk: int | None


# What each activation_checkpointing value keeps, for the summary note
_RECOMPUTATION = {
    "none": "no recomputation",
    "selective": "selective recomputation (scores recomputed)",
    "full": "full recomputation: layer inputs + one layer's activations during its recompute",
}


def activation_bytes(spec: ModelSpec, shape: TrainingShape, micro_batch: int, precision: str) -> Activations:
    notes: list[str] = []
    s = shape.sequence_length
    h, L = spec.hidden_size, spec.num_layers
    if not L or not h or not s:
        # what is really missing, each with how to give it; never an input that was given (--seq-len with --params)
        missing = [name for name, value in (("num_layers", L), ("hidden_size", h)) if not value]
        how = "--model with an hf_config, or num_layers and hidden_size in a model description"
        lacks = ([f"no {' or '.join(missing)} ({how})"] if missing else []) + \
            (["no sequence length (--seq-len)"] if not s else [])
        notes.append("activations not estimated: " + "; ".join(lacks))
        return Activations(0, 0, 0, tuple(notes))
    b = micro_batch
    e = B.nbytes(precision)  # 2 for fp16/bf16, 4 in fp32 (DeepSpeed casts the module to the training dtype)
    facts = spec.layer_facts or DEFAULT_FACTS
    if spec.layer_facts is None:
        notes.append("activations: layer details unknown (give an hf_config): LayerNorm, GeLU and dropout masks "
                     "on attention probabilities and outputs assumed (Korthikanti et al.)")
    with_liger = shape.liger_kernel and _liger_applies(spec, notes)
    if with_liger and spec.model_type in liger.LAYER_FAMILIES:
        facts = liger.layer_facts(facts)
    d = _dimensions(spec, e, h, notes)
    fused = shape.flash_attention
    if fused and facts.sdpa_repeat_kv and d.kv < d.q:
        notes.append(f"activations: transformers {spec.transformers_version}'s SDPA repeats K/V to every query head "
                     "(before 4.54): counted; FlashAttention 2 keeps the K/V heads, so a bound there")
    if not d.heads and not fused and shape.activation_checkpointing != Checkpointing.SELECTIVE:
        notes.append("attention heads unknown: the a·s²·b score terms are not counted")
    stacks, t = _stacks(spec, shape, L, s, notes)
    out_tokens = t * b

    body, per_layer, parts, largest, inputs = _layers(stacks, d, facts, shape, b, _lora(spec, d, facts, L, notes))
    outside = _outside_layers(spec, stacks, d, facts, b, s, out_tokens)
    parts.append(("outside the layers", outside))
    logits, head_gradient = _loss_peak(spec, shape, facts, e, (b, t, h), with_liger, notes)
    parts.append(("logits and loss", logits))
    nbytes, head_share, loss_headroom = body + outside + logits, logits, 0
    head_input = _head_input(spec, d, facts, out_tokens)
    layers_kept = body - largest if shape.activation_checkpointing == Checkpointing.FULL and largest else body
    backward_kept = max(0, layers_kept + outside - head_input)
    # besides what is outside the layers, the GPU keeps the layers left unchecked by checkpoint_every
    offloaded = _offloaded(shape, largest, inputs, head_input, logits,
                           outside + _unchecked(shape, body, largest, inputs), notes)
    if offloaded is not None:
        nbytes, head_share, backward_kept = offloaded.nbytes, offloaded.head_share, offloaded.backward_kept
        head_gradient = head_gradient if offloaded.head_share else 0
    elif shape.activation_checkpointing == Checkpointing.FULL and largest:
        # the head's saved input and the loss peak are freed before the last layer is recomputed (module
        # docstring): exact for torch's backward order; the rest outside the layers (token ids, embedding
        # dropout, norms, an encoder's output) is kept through the recompute, a bound for the final norm
        head = head_input
        peak = max(largest, head + logits)
        nbytes, head_share = body - largest + outside - head + peak, peak - largest
        loss_headroom = max(0, largest - head - logits)
        if head + logits < largest:  # a layer's recompute is the peak counted, not the loss's
            head_gradient = 0
        if head + logits > largest:
            notes.append(f"activations: full recomputation: the loss peak ({(head + logits) / 2**30:.2f} GiB with the "
                         f"head's input) is over a layer's recompute ({largest / 2**30:.2f} GiB) and not live with "
                         "it (autograd frees the loss before torch.utils.checkpoint recomputes the last layer): "
                         "the larger is counted")

    _tiled_note(shape, d, stacks, notes)
    attn = "fused attention (SDPA/FlashAttention: no s×s scores)" if fused else "eager attention (s×s scores kept)"
    lengths = f"sequence {s}" if t == s else f"source {s}, target {t}"
    notes.append(f"activations: what transformers keeps for backward per layer (Korthikanti et al. 2022, term by "
                 f"term), {attn}, {_RECOMPUTATION[shape.activation_checkpointing]}, micro batch {b}, {lengths}, "
                 f"{e}-byte activations")
    return Activations(nbytes, per_layer, logits, tuple(notes), tuple(parts), head_share, backward_kept,
                       head_gradient, inputs if offloaded is not None else (), loss_headroom)


@dataclass(frozen=True, slots=True)
class _Offloaded:
    nbytes: int
    head_share: int  # what the loss's peak exceeds a layer's recompute by (0: the recompute is the peak)
    backward_kept: int


def _offloaded(shape: TrainingShape, largest: int, inputs: tuple[tuple[int, int], ...], head: int,
               logits: int, outside: int, notes: list[str]) -> _Offloaded | None:
    """Full recomputation with the layer inputs in host memory (memory/activation_offload.py): on the GPU only the
    inputs in flight, at a layer's recompute and at the loss's peak, the larger of the two moments counted (as
    for the inputs kept on the GPU, module docstring). None where no offloader moves them (TRL's without
    checkpointing moves what is not followed here: said in ``notes``)."""
    if offloads_uncounted(shape.activation_offload, shape.activation_checkpointing):
        notes.append(f"activations: {shape.activation_offload.value} offloads every saved tensor without "
                     "checkpointing; what its transfer stream leaves on the GPU is not counted: costed as if they "
                     "stayed, a bound")
    off = offloader(shape.activation_offload, shape.activation_checkpointing)
    if off is None or not largest:
        return None
    one = max(size for size, _ in inputs)
    moved = sum(count for _, count in inputs)  # the checkpointed layers: no more of them in flight than there are
    at_recompute, at_loss = min(off.at_recompute, moved - 1) * one, min(off.at_loss, moved) * one
    peak = max(largest + at_recompute, head + logits + at_loss)
    held = sum(size * count for size, count in inputs)
    notes.append(f"activations: layer inputs offloaded to host memory ({shape.activation_offload.value}: "
                 f"{held / 2**30:.2f} GiB per rank); on the GPU {off.at_recompute} beside the layer recomputed "
                 f"and {off.at_loss} at the loss's peak ({off.source})")
    return _Offloaded(outside - head + peak, max(0, head + logits + at_loss - largest - at_recompute),
                      max(0, at_loss + outside - head))


def _dimensions(spec: ModelSpec, e: int, h: int, notes: list[str]) -> _Dims:
    """The widths the terms multiply, with what is assumed where the spec does not say."""
    heads = spec.num_attention_heads
    head_dim = spec.head_dim or (h // heads if heads else None)
    q = heads * head_dim if heads and head_dim else h
    kv_heads = spec.num_key_value_heads or heads
    kv = kv_heads * head_dim if kv_heads and head_dim else q
    f = spec.intermediate_size
    if not f:
        f = 4 * h
        notes.append("MLP width unknown: assumed 4·hidden_size")
    if spec.gated_mlp is None and spec.intermediate_size:
        notes.append("MLP gating unknown: costed as a two-matrix (GeLU) MLP")
    k = (spec.experts_per_token or 1) if spec.num_experts else 1  # each token runs k experts' MLPs
    return _Dims(e, h, q, kv, heads, f, k, bool(spec.gated_mlp), spec.num_experts or 0, spec.shared_expert_size or 0,
                 spec.latent_ranks, head_dim or 0, (spec.value_head_dim or 0) if spec.value_head_dim != head_dim else 0)


def _stacks(spec: ModelSpec, shape: TrainingShape, L: int, s: int, notes: list[str]) -> tuple[list[_Stack], int]:
    """The layer stacks, and the target length (the tokens the head sees per sample)."""
    enc, dec = spec.encoder_layers, spec.decoder_layers
    if enc is None and dec is None:
        return [_Stack("layer", L, s, None)], s
    t = shape.target_length or s
    if shape.target_length is None and dec:
        notes.append(f"encoder-decoder: target (decoder) length not given: assumed the source length {s}")
    return [_Stack("encoder layer", enc or 0, s, None), _Stack("decoder layer", dec or 0, t, s)], t


# axolotl's TiledMLP (monkeypatch/tiled_mlp/patch.py @ v0.18.0): without tiled_mlp_num_shards, shards of about
# this many tokens of each sample's sequence (``math.ceil(seqlen / 32768)``; earlier releases split into
# ``ceil(seqlen / hidden)`` shards, more of them: this rule is the larger working set)
TILED_MLP_SHARD_TOKENS = 32_768
TILED_MLP_SOURCE = "axolotl monkeypatch/tiled_mlp/base.py TiledMLP, patch.py tiled_mlp_forward @ v0.18.0"


def tiled_mlp_shards(shape: TrainingShape, length: int) -> int:
    """The shards TiledMLP splits a sequence of ``length`` tokens into (its own, else axolotl's default rule)."""
    return shape.tiled_mlp_shards or max(1, -(-length // TILED_MLP_SHARD_TOKENS))


def tiled_mlp_bytes(d: _Dims, facts: LayerFacts, length: int, b: int, shards: int) -> int:
    """One TiledMLP over ``b`` sequences of ``length`` tokens: its forward runs the shards under no_grad and saves
    only its input (``ctx.save_for_backward(x)``); its backward makes ``x_grad = torch.zeros_like(x)`` and recomputes
    one shard at a time with gradients (``torch.chunk(x, chunks=shards, dim=1)``): the input, its gradient and one
    shard's MLP."""
    tokens = length * b
    return 2 * d.e * d.h * tokens + mlp_bytes(d, facts, -(-length // shards) * b)


def _layer(stack: _Stack, d: _Dims, facts: LayerFacts, b: int, fused: bool,
           mlp_shards: int | None = None) -> tuple[int, int]:
    """(bytes linear in the tokens, score bytes) one layer of ``stack`` keeps; ``mlp_shards``: its MLP is a
    TiledMLP of that many shards (None: not tiled)."""
    sq, sk = stack.sq, stack.sk
    norms = facts.norms_per_layer + (1 if sk is not None else 0)
    linear, scores = attention_bytes(d, facts, sq, sq, b, fused)
    if sk is not None:
        # cross-attention: queries over the target, K/V over the source; their input (the encoder
        # output) is counted once outside the layers
        cross_linear, cross_scores = attention_bytes(d, facts, sq, sk, b, fused)
        linear += cross_linear
        scores += cross_scores
    mlp = tiled_mlp_bytes(d, facts, sq, b, mlp_shards) if mlp_shards else mlp_bytes(d, facts, sq * b)
    linear += mlp + norms * sq * b * norm_bytes(facts.norm, d.e, d.h)
    return linear, scores


def block_bytes(e: int, width: int, heads: int, mlp_width: int, gated: bool, facts: LayerFacts, tokens: int) -> int:
    """What one self-attention block of ``width`` (``heads`` heads, all of them K/V heads) with an MLP of
    ``mlp_width`` keeps over ``tokens`` tokens of one packed sequence, under fused attention: _layer's terms for a
    block outside the decoder's stacks (a vision tower's, memory/vision.py)."""
    dims = _Dims(e, width, width, width, heads, mlp_width, 1, gated, head=width // heads)
    linear, _ = _layer(_Stack("block", 1, tokens, None), dims, facts, 1, True)
    return linear


def frozen_norm_bytes(kind: str, e: int, width: int) -> int:
    """Per token, what one norm of ``width`` keeps less when its weight is frozen (LoRA's base): the scaled output's
    factor that only the weight's gradient needs. LlamaRMSNorm's ``weight * hidden_states.to(input_dtype)`` and
    T5LayerNorm's keep the cast (e bytes) for it; GemmaRMSNorm's ``output * (1.0 + weight.float())`` its fp32
    output; torch's native layer norm and Liger's fused RMSNorm keep their input and statistics either way."""
    if kind in ("rmsnorm", "t5"):
        return e * width
    if kind == "gemma":
        return FP32 * width
    return 0


def _lora(spec: ModelSpec, d: _Dims, facts: LayerFacts, layers: int, notes: list[str]) -> int:
    """Bytes per token one layer keeps under LoRA beyond (or short of) a full fine-tune's layer (peft 0.21
    tuners/lora/layer.py Linear.forward: result = base_layer(x) + lora_B(lora_A(dropout(x))) * scaling):

    * the frozen base keeps no input of its own, so the layer inputs no adapter reads (and with lora_dropout none)
      are kept by none (ModelSpec.lora_unkept_inputs);
    * with lora_dropout every adapted input is copied (nn.Dropout: a new tensor, e bytes per feature, which lora_A
      keeps for its weight gradient) with its bool mask (1 byte, CUDA native_dropout); q, k and v each drop out
      their shared input apart;
    * lora_B keeps its r-wide input (e bytes per rank and adapted module);
    * the frozen norms keep less (frozen_norm_bytes), the layer's and the q/k norms.

    The adapted modules spread evenly over the layers. In the first layer behind a frozen embedding the attention's
    inputs need no gradient and autograd keeps no mask for their dropout: a bound there by those masks."""
    if spec.trainable_parameters is None or spec.frozen is not None or not spec.peft:
        return 0
    e, h = d.e, d.h
    per_layer = ((e + MASK) * spec.lora_dropout_inputs - e * spec.lora_unkept_inputs
                 + e * spec.lora_rank_features) // layers
    per_layer -= facts.norms_per_layer * frozen_norm_bytes(facts.norm, e, h)
    if facts.qk_norm and d.heads:
        per_layer -= frozen_norm_bytes(facts.qk_norm, e, d.q) + frozen_norm_bytes(facts.qk_norm, e, d.kv)
    dropout = ", a dropped-out copy of each adapted input and its mask" if spec.lora_dropout_inputs else ""
    notes.append(f"activations: LoRA on a frozen base: no input kept for a module without an adapter{dropout}, "
                 f"lora_B's r-wide input, the frozen norms' scaled output not kept: {per_layer:+,} B per token per "
                 "layer against a full fine-tune (peft tuners/lora/layer.py Linear.forward)")
    return per_layer


def _unchecked(shape: TrainingShape, body: int, largest: int, inputs: tuple[tuple[int, int], ...]) -> int:
    """What the layers left unchecked by checkpoint_every keep under full recomputation (0 otherwise): the body
    less the checkpointed inputs and the recompute."""
    if shape.activation_checkpointing != Checkpointing.FULL:
        return 0
    return body - largest - sum(size * count for size, count in inputs)


def _tiled_note(shape: TrainingShape, d: _Dims, stacks: list[_Stack], notes: list[str]) -> None:
    if not shape.tiled_mlp:
        return
    notes.append(f"activations: TiledMLP: each MLP keeps its input, and its backward one shard of "
                 f"{tiled_mlp_shards(shape, max(st.sq for st in stacks))} at a time ({TILED_MLP_SOURCE})"
                 if _tiled(shape, d) else "activations: TiledMLP not costed (it is counted under full "
                 "recomputation of a dense MLP only): the MLP counted whole, a bound")


def _tiled(shape: TrainingShape, d: _Dims) -> bool:
    """Whether the MLP is costed as a TiledMLP: asked for, under full recomputation (axolotl's ALST recipes; without
    it the layers' MLPs would each keep their input and one would hold a shard: not followed), a dense MLP (the MoE
    variant accumulates fp32 parameter gradients of its own: not followed)."""
    return shape.tiled_mlp and shape.activation_checkpointing == Checkpointing.FULL and not d.experts


def _checkpointed(start: int, layers: int, every: int) -> int:
    """How many of the layers at indices start .. start + layers - 1 transformers checkpoints with every_n_layers
    ``every`` (modeling_utils.py _set_gradient_checkpointing @ 5.24: ``layer_index % every_n_layers == 0``, the
    index running over every GradientCheckpointingLayer in order)."""
    return (start + layers + every - 1) // every - (start + every - 1) // every


def _layers(stacks: list[_Stack], d: _Dims, facts: LayerFacts, shape: TrainingShape,
            b: int, lora: int = 0) -> tuple[int, int, list[tuple[str, int]], int, tuple[tuple[int, int], ...]]:
    """(bytes all layers keep under the checkpointing, the largest layer's, (stack, one layer's bytes), the
    largest layer's activations during its recompute: what full recomputation adds to the layer inputs, and per
    stack (one layer input's bytes, checkpointed layers): what full recomputation keeps of each layer it
    checkpoints). Under full recomputation with ``checkpoint_every`` n > 1 only every n-th layer is checkpointed;
    the others keep what they keep without checkpointing.
    ``lora``: LoRA's bytes per token per layer beyond a full fine-tune's (_lora)."""
    parts: list[tuple[str, int]] = []
    body = per_layer = 0
    largest = 0  # linear + score bytes of the largest layer: what a full recompute holds at once
    inputs = 0  # full recomputation: each checkpointed layer's input, e·h per token
    whole = 0  # full recomputation: what the layers left unchecked keep
    index = 0  # the running GradientCheckpointingLayer index (_checkpointed)
    per_stack: list[tuple[int, int]] = []
    for stack in stacks:
        if not stack.layers:
            continue
        shards = tiled_mlp_shards(shape, stack.sq) if _tiled(shape, d) else None
        linear, scores = _layer(stack, d, facts, b, shape.flash_attention, shards)
        linear += lora * stack.sq * b
        kept = scores if shape.activation_checkpointing == Checkpointing.NONE else 0  # selective/full recompute them
        layer = linear + kept
        parts.append((stack.name, layer))
        body += stack.layers * layer
        checkpointed = _checkpointed(index, stack.layers, shape.checkpoint_every)
        index += stack.layers
        inputs += checkpointed * d.e * stack.sq * b * d.h
        whole += (stack.layers - checkpointed) * (linear + scores)
        per_stack.append((d.e * stack.sq * b * d.h, checkpointed))
        largest = max(largest, linear + scores)
        per_layer = max(per_layer, layer)
    if shape.activation_checkpointing == Checkpointing.FULL:
        body = inputs + whole + largest  # layer inputs + the unchecked layers + one layer during its recompute
    return body, per_layer, parts, largest, tuple(per_stack)


def _outside_layers(spec: ModelSpec, stacks: list[_Stack], d: _Dims, facts: LayerFacts, b: int, s: int,
                    out_tokens: int) -> int:
    """Per stack the token ids, embedding dropout and one norm; the encoder output; the head's input."""
    e, h = d.e, d.h
    outside = 0
    for stack in stacks:
        if not stack.layers:
            continue
        sq = stack.sq
        # int64 token ids (the embedding backward keeps its indices), the embedding dropout mask and the
        # embedding LayerNorm (post-LN) or the final norm (pre-norm)
        outside += sq * b * (IDS + h * _dropout(facts.hidden_dropout) + norm_bytes(facts.norm, e, h))
        if facts.final_dropout:  # T5Stack: dropout after final_layer_norm
            outside += sq * b * h * _dropout(facts.hidden_dropout)
        if facts.relative_position_buckets:  # T5Attention.compute_bias: int64 (q, k) buckets, once per stack
            outside += IDS * sq * sq
    if spec.encoder_layers:
        outside += e * s * b * h  # encoder output: the K/V input of every cross-attention
    return outside + _head_input(spec, d, facts, out_tokens)


def _head_input(spec: ModelSpec, d: _Dims, facts: LayerFacts, out_tokens: int) -> int:
    """What the head keeps of its input: the LM head's (or classifier's) input, BERT's head transform."""
    e, h = d.e, d.h
    head = e * out_tokens * h  # LM head (or classifier) input
    if facts.final_softcap and spec.lm_head is not False and spec.vocab_size:
        head += e * out_tokens * spec.vocab_size  # Gemma 2's logits soft-cap: the tanh output, kept for its backward
    if facts.head_transform and spec.lm_head is not False:
        # BertLMPredictionHead.transform: dense input, GeLU input, LayerNorm (the decoder input is above)
        head += out_tokens * (2 * e * h + norm_bytes("layernorm", e, h))
    return head


def _loss_peak(spec: ModelSpec, shape: TrainingShape, facts: LayerFacts, e: int, dims: tuple[int, int, int],
               with_liger: bool, notes: list[str]) -> tuple[int, int]:
    """The head and loss's peak beyond the layers: TRL's fused head or chunked cross-entropy (memory/trl_sft_loss.py),
    Liger's fused loss, or the full logits; ``dims``: micro batch, output tokens per sample, hidden. With it the head
    weight's gradient that peak holds where the loss makes it itself (Activations.head_gradient): e bytes per head
    element (the fused head's cast, or its fp32 accumulator in an fp32 model; the chunked loss's sum; Liger's
    grad_weight), none for a frozen head or the full logits (the head's matmul makes it after the loss)."""
    b, t, h = dims
    out_tokens = b * t
    trl_loss = head_loss(shape.method, shape.liger_kernel)
    head_gradient = e * spec.vocab_size * h if spec.vocab_size and spec.head_gets_gradient else 0
    if trl_loss == SftLoss.FUSED and spec.lm_head is not False and spec.vocab_size:
        logits = fused_head_bytes(e, out_tokens, h, spec.vocab_size, spec.head_gets_gradient) + IDS * out_tokens
        release = shape.method.trainer_version or "not pinned: the current release's"
        scored = "" if shape.method.method == Method.SFT else (
            "; every position counted as scored, the prompt's included (its labels are -100): a bound")
        how = ("its chunked log-probabilities under use_liger_kernel (trl/trainer/utils.py _ChunkedLogProbFunction), "
               "the fused head's tiles" if liger.chunked_logprob_runs(shape.method, shape.liger_kernel)
               else f"{shape.method.method.upper()} from TRL 1.15")
        notes.append(f"TRL's fused LM head ({how}; TRL {release}{scored}): no "
                     f"{out_tokens:,} x "
                     f"{spec.vocab_size:,} logits; fp32 gradients of the hidden states and the head weight and a "
                     f"{TOKEN_TILE} x {VOCAB_TILE} tile buffer, {logits:,} B, counted from the code "
                     f"({FUSED_SOURCE}; its Triton kernel does not run on CPU)")
        return logits, head_gradient
    if shape.cut_cross_entropy and shape.method.method == Method.SFT and spec.lm_head is not False \
            and spec.vocab_size:
        trainable = spec.head_gets_gradient
        peak = cce.loss_peak(e, out_tokens, spec.vocab_size, h, trainable)
        notes.append(f"Cut Cross-Entropy: no {out_tokens:,} x {spec.vocab_size:,} logits; the hidden states' "
                     f"gradient{' and the head gradient' if trainable else ''} and per-token fp32 terms, "
                     f"{peak:,} B ({cce.SOURCE})")
        return peak, cce.head_gradient(e, spec.vocab_size, h, trainable)
    if shape.method.method in liger.CHUNK_ROWS and liger.trl_loss_runs(shape.method, shape.liger_kernel) \
            and spec.lm_head is not False and spec.vocab_size:
        return _liger_preference_loss(spec, shape, e, (b, t, h), spec.vocab_size, notes), head_gradient
    liger_off = liger.fused_loss_off(shape.method) if with_liger else None
    if liger_off is not None:
        notes.append(liger_off)
    if with_liger and liger_off is None and spec.lm_head is not False and spec.vocab_size:
        if shape.method.method == Method.GKD:  # LigerFusedLinearJSDLoss: chunked as the cross-entropy, not measured
            notes.append("GKD under use_liger_kernel (TRL 0.22+): Liger's fused linear JSD loss over the student's and "
                         "the teacher's hidden states, counted as its fused linear cross-entropy's chunks (not "
                         "measured: Liger's Triton kernels do not run on CPU)")
        return _liger_loss(spec, e, b, t, h, spec.vocab_size, notes), head_gradient
    if trl_loss == SftLoss.CHUNKED and spec.lm_head is not False and spec.vocab_size:
        logits = chunked_loss_bytes(e, out_tokens, h, spec.vocab_size, spec.head_gets_gradient) + IDS * out_tokens
        notes.append(f"TRL's chunked cross-entropy (SFTConfig loss_type chunked_nll, the default from TRL 1.7): no "
                     f"{out_tokens:,} x {spec.vocab_size:,} logits; {CHUNK_TOKENS} tokens at a time under "
                     f"checkpoint, {logits:,} B ({trl_sft_loss.SOURCE})")
        return logits, head_gradient
    return _logits(spec, facts, e, out_tokens, notes, b), 0


def _logits(spec: ModelSpec, facts: LayerFacts, e: int, out_tokens: int, notes: list[str], rows: int) -> int:
    """The loss peak over the vocabulary-wide logits (0 for a head without them); ``rows`` the sequences they are
    computed for (a per-row log-softmax holds one row's transient)."""
    if spec.lm_head is False:
        notes.append(spec.logits_note or "no vocabulary-wide logits: the model's head is not a language-model head")
        return 0
    if not spec.vocab_size:
        notes.append("vocabulary size unknown: the logits and loss (12·tokens·V bytes) are not counted")
        return 0
    if spec.lm_head is None:
        notes.append("head unknown: a language-model head over the vocabulary assumed (its loss peak counted)")
    if facts.row_log_softmax and not facts.loss_in_fp32:
        row = ceil_div(out_tokens, max(rows, 1))
        chosen = out_tokens // CHOSEN_NLL_SHARE if facts.chosen_nll else 0
        return e * spec.vocab_size * (ROW_LOSS_COPIES * out_tokens + row + chosen) + IDS * out_tokens
    if facts.jsd_copies and not facts.loss_in_fp32:  # TRL's GKD (memory/method.py gkd_copies)
        return e * spec.vocab_size * facts.jsd_copies * out_tokens + IDS * out_tokens
    if facts.response_tokens and not facts.loss_in_fp32:
        response = max(rows, 1) * min(facts.response_tokens, ceil_div(out_tokens, max(rows, 1)))
        return e * spec.vocab_size * (PPO_SLICE_COPIES * out_tokens + facts.response_copies * response) \
            + IDS * out_tokens
    if facts.fused_ce_fp32:
        per = FUSED_CE_ENTROPY_BYTES if facts.entropy_from_logits else FUSED_CE_LOSS_BYTES + (e if e < FP32 else 0)
    else:
        per = ENTROPY_LOSS_COPIES if facts.entropy_from_logits else UPCAST_LOSS_COPIES if facts.loss_in_fp32 \
            else LOSS_COPIES * e
    return per * out_tokens * spec.vocab_size + IDS * out_tokens  # + the int64 labels nll_loss keeps


def _liger_applies(spec: ModelSpec, notes: list[str]) -> bool:
    """Whether Liger patches the model (memory/liger.py MODEL_TYPES), with the note on what is counted."""
    if not liger.applies(spec.model_type):
        notes.append(f"Liger kernel: no Liger kernels for model type {spec.model_type} (liger_kernel.transformers "
                     "_apply_liger_kernel_to_instance patches nothing): transformers' modules and loss counted")
        return False
    if spec.model_type is None:
        notes.append("Liger kernel: model type unknown, taken as one Liger patches")
    if spec.model_type not in liger.LAYER_FAMILIES:
        notes.append("Liger kernel: its fused linear cross-entropy counted; the layers as transformers keeps them "
                     "(Liger's RMSNorm/SwiGLU keep less: a bound)")
    return True


def _liger_preference_loss(spec: ModelSpec, shape: TrainingShape, e: int, dims: tuple[int, int, int], v: int,
                           notes: list[str]) -> int:
    """Liger's fused DPO/KTO loss in place of the logits (memory/liger.py preference_peak): the last chunk's logits
    under torch.compile, the hidden states and gradients the loss holds. Eager chunks hold twice the chunk's copies:
    said in the note, the chunk counted compiled as TRL runs it."""
    b, t, h = dims
    method = shape.method.method
    peak = liger.preference_peak(method, e, b, t, v, h, spec.head_gets_gradient)
    trainer = f"{shape.method.trainer or 'TRL'} {shape.method.trainer_version or '(release unknown)'}"
    notes.append(f"Liger's fused {method.upper()} loss ({trainer}): no "
                 f"{b * t:,} x {v:,} logits; one chunk of {liger.CHUNK_ROWS[method]} row(s) at a time, "
                 f"{liger.CHUNK_COPIES_COMPILED} copies of its logits under torch.compile ({peak.chunk:,} B; "
                 f"{liger.CHUNK_COPIES_EAGER} eager, {peak.chunk_bound:,} B), the policy's and the reference's hidden "
                 f"states, the input gradient{' and the head gradient' if peak.grad_weight else ''} "
                 f"{peak.nbytes - peak.chunk:,} B ({liger.PREFERENCE_SOURCE})")
    return peak.nbytes


def _liger_loss(spec: ModelSpec, e: int, b: int, t: int, h: int, v: int, notes: list[str]) -> int:
    """The fused linear cross-entropy's peak in place of the vocabulary-wide logits and loss (memory/liger.py)."""
    trainable = spec.head_gets_gradient
    peak = liger.loss_peak(e, b, t, v, h, trainable)
    head = (f", the head's gradient {peak.grad_weight:,} B made in the forward (+ {peak.extra:,} B: Liger "
            f"0.6.2-0.8.3's fp32 temporary or <= 0.5.5's shifted hidden-state copy, the larger)" if trainable else
            f" (frozen head: no weight gradient; + {peak.extra:,} B: Liger <= 0.5.5's shifted hidden-state copy)")
    notes.append(f"Liger fused linear cross-entropy: no {b * t:,} x {v:,} logits; chunks of "
                 f"{peak.chunk:,} tokens (two coexist: {peak.logits:,} B), grad_input {peak.grad_input:,} B, loss and "
                 f"labels {peak.loss + peak.labels:,} B{head}: a bound over Liger 0.5-0.8")
    return peak.nbytes
