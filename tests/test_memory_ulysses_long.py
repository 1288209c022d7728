"""Long sequences under Ulysses with full recomputation: the loss peak and one layer's recompute are not live together.

torch's autograd runs the loss, LM-head and final-norm backward first and frees each node's saved tensors as
it runs; torch.utils.checkpoint recomputes the last layer only when the backward reaches it. The expected
bytes below are written out from the per-token terms of zeroadvisor/memory/activations.py's docstring for
Qwen2.5-7B (hidden 3584, 28 heads of 128, 4 KV heads, SwiGLU width 18944, RMSNorm, vocabulary 152064, no
dropout, fp32 loss), not taken from the tool's output.
"""

from __future__ import annotations

import dataclasses

import pytest

from zeroadvisor.memory.activations import activation_bytes
from zeroadvisor.memory.parallel import Parallel, parallel_activations
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import Checkpointing, TrainingShape

QWEN7B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
          "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
          "vocab_size": 152064, "max_position_embeddings": 32768, "tie_word_embeddings": False,
          "torch_dtype": "bfloat16"}

E, H, Q, KV, F, HEADS, L, V = 2, 3584, 3584, 512, 18944, 28, 28, 152064
# one layer's activations per token while it is recomputed (flash attention, SwiGLU, two RMSNorms)
ATTENTION = E * H + E * Q + 2 * E * KV + E * Q + 4 * HEADS  # input, Q, K, V, out-proj input, fp32 log-sum-exp
MLP = E * H + 4 * E * F  # input, gate output, SiLU output, up output, product
NORMS = 2 * (4 * H + E * H + 4)  # fp32 copy, normalised copy cast back, rsqrt
LAYER = ATTENTION + MLP + NORMS  # 225,400 B per token
INPUTS = L * E * H  # every layer's checkpointed input
KEPT_OUTSIDE = 8 + (4 * H + E * H + 4)  # int64 ids, the final norm
HEAD = E * H  # the LM head's saved input
LOSS = 12 * V + 8  # fp32 log-probs, their gradient, the logits' gradient; int64 labels


def _spec(**changes: object):
    return spec_from_hf_config({**QWEN7B, **changes})


def _full(tokens: int) -> TrainingShape:
    return TrainingShape(sequence_length=tokens, flash_attention=True, activation_checkpointing=Checkpointing.FULL)


def test_loss_peak_replaces_the_layer_recompute_at_64k_over_sp4() -> None:
    # swift-qwen2.5-7b-4xa100-z3-full-64k-sp4: 65536 tokens over 4 ranks = 16384 per GPU. Today's sum counted
    # inputs + a layer + everything outside + the loss: 16384 x 2,279,564 B = 34.78 GiB; the loss (12·V) is
    # the larger of the two that are never live together.
    act = parallel_activations(_spec(), _full(65536), 1, "bf16", Parallel(data=4, sequence=4))
    tokens = 16384
    assert HEAD + LOSS > LAYER
    assert act.nbytes == tokens * (INPUTS + KEPT_OUTSIDE + HEAD + LOSS)
    assert act.nbytes == 33_655_422_976  # 31.34 GiB, a layer's 3.44 GiB below the sum
    assert act.head_share == tokens * (HEAD + LOSS - LAYER)


def test_layer_recompute_counts_when_the_loss_is_smaller() -> None:
    # a 4096-word vocabulary: the loss peak (12·V) is below one layer's recompute, which is what is counted
    act = activation_bytes(_spec(vocab_size=4096), _full(16384), 1, "bf16")
    assert HEAD + 12 * 4096 + 8 < LAYER
    assert act.nbytes == 16384 * (INPUTS + KEPT_OUTSIDE + LAYER)
    assert act.head_share == 0


@pytest.mark.parametrize("checkpointing", [Checkpointing.NONE, Checkpointing.SELECTIVE])
def test_without_full_recomputation_every_layer_and_the_loss_add(checkpointing: Checkpointing) -> None:
    # every layer's saved tensors are still held while the loss runs backward: they add
    shape = dataclasses.replace(_full(4096), activation_checkpointing=checkpointing)
    act = activation_bytes(_spec(), shape, 1, "bf16")
    assert act.nbytes == 4096 * (L * LAYER + KEPT_OUTSIDE + HEAD + LOSS)
    assert act.head_share == act.logits == 4096 * LOSS


def test_pipeline_stages_under_full_recomputation() -> None:
    # two stages: the last holds its 14 layers' inputs and the loss peak (over its layer's recompute); the first
    # would hold all 28 layers' inputs (two micro batches in flight) and a layer's recompute, no head
    act = parallel_activations(_spec(), _full(8192), 1, "bf16", Parallel(data=1, pipeline=2))
    assert act.nbytes == 8192 * (L // 2 * E * H + KEPT_OUTSIDE + HEAD + LOSS)
    small = parallel_activations(_spec(vocab_size=4096), _full(8192), 1, "bf16", Parallel(data=1, pipeline=2))
    assert small.nbytes == 8192 * (INPUTS + KEPT_OUTSIDE + LAYER)
