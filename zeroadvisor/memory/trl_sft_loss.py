"""TRL's SFTTrainer loss: from TRL 1.7 it never materialises the vocabulary-wide logits.

``SFTConfig.loss_type`` (trl/trainer/sft_config.py) and what SFTTrainer does with it, read in the wheels of 1.0.0,
1.3.0 to 1.16.0 (one per minor release, 1.9.0 and 1.9.2 both):

* before 1.5: the model's own loss (transformers' ForCausalLMLoss over the full logits).
* 1.5 and 1.6: ``loss_type: chunked_nll`` is offered, ``nll`` (the full logits) is the default.
* 1.7 to 1.14: ``chunked_nll`` is the default (``nll`` with ``use_liger_kernel``); SFTTrainer.__init__ patches the
  model's forward (sft_trainer.py _patch_chunked_ce_lm_head): the backbone runs without the LM head, the valid
  positions are sorted to the front (``hidden[order]``, ``labels[order]``) and _chunked_cross_entropy_loss runs the
  head and the cross-entropy on ``_CHUNKED_LM_HEAD_CHUNK_SIZE`` = 256 tokens at a time, each chunk under
  torch.utils.checkpoint (non-reentrant), so only one chunk's fp32 logits exist at once, in its recompute during
  backward: ``h.float() @ w.float().t()`` (fp32 logits), ``log_softmax`` (kept for backward), ``log_p.exp()`` (the
  entropy metric, kept by its product), then backward's gradients; a 16-bit head is upcast inside each chunk
  (``w.float()``), so its fp32 copy and fp32 gradient are live in the matmul's backward (chunked_loss_bytes;
  measured on CPU: benchmarks/trl_sft_loss.md).
  ``loss_type: nll`` is the full logits; ``dft`` replaces the loss function and keeps the full logits.
* 1.15 and later: every loss_type (``chunked_nll`` an alias of ``nll``; ``dft`` weights the same log-probabilities)
  scores through a fused LM head (trl/trainer/utils.py add_fused_lm_head; trl/kernels/chunked_logprob.py
  ChunkedLogProbFunction), with or without Liger (SFTTrainer turns Liger's fused cross-entropy off): the valid
  positions' hidden states (``hidden_states[mask]``, in place of the head's saved input), projected in tiles of
  TOKEN_TILE tokens x VOCAB_TILE vocabulary entries into one reused buffer (``mm_buf``), folded into per-token fp32
  statistics; backward recomputes each tile and accumulates fp32 gradients of the hidden states and of the head weight
  (``grad_hidden``, ``grad_weight``), cast to the model's dtype at the end while the fp32 ones are still held
  (fused_head_bytes). On CUDA the fold is a Triton kernel (no tile-sized temporaries); it does not run on CPU, so
  this is counted from the code, not measured. Label smoothing or a ``compute_loss_func`` (not read) would run the
  model's own forward with the full logits.

The method setup says TRL SFT only where the files do (``trl sft``, TRL's sft.py script, ``--trainer sft`` with a TRL
file): a plain Trainer script computes the model's own loss over the full logits.
"""

from __future__ import annotations

from enum import StrEnum

from packaging.version import Version

from zeroadvisor.config.method import MethodSetup
from zeroadvisor.memory import bytes as B
from zeroadvisor.memory.liger import chunked_logprob_runs
from zeroadvisor.vocab import Method, TrainerFamily

CHUNK_TOKENS = 256  # trl/trainer/sft_trainer.py _CHUNKED_LM_HEAD_CHUNK_SIZE @ v1.7.0-v1.14
TOKEN_TILE = 4096  # trl/kernels/chunked_logprob.py TOKEN_CHUNK_SIZE @ v1.15.0-v1.16.0
VOCAB_TILE = 32768  # trl/trainer/utils.py _CHUNKED_LOGPROB_CHUNK_SIZE @ v1.15.0-v1.16.0
STATISTICS = 7  # fp32 per-token vectors ChunkedLogProbFunction.forward folds the tiles into
# fp32 tensors of one chunk's tokens x V live at once in the two moments of its backward (chunked_loss_bytes)
LOG_SOFTMAX_COPIES = 4
MATMUL_COPIES = 2
FP32 = B.DTYPE_BYTES["fp32"]
INT64 = B.DTYPE_BYTES["int64"]  # token order, labels, targets
OFFERED = Version("1.5.0")  # chunked_nll first offered
DEFAULT = Version("1.7.0")  # chunked_nll the default
FUSED = Version("1.15.0")  # nll is the fused LM head (add_fused_lm_head)
SOURCE = "trl/trainer/sft_trainer.py _chunked_cross_entropy_loss @ v1.7.0-v1.14"
FUSED_SOURCE = "trl/kernels/chunked_logprob.py ChunkedLogProbFunction @ v1.15.0-v1.16.0"


class SftLoss(StrEnum):
    FULL = "full"  # the model's own loss over the full logits
    CHUNKED = "chunked"  # _chunked_cross_entropy_loss (TRL 1.5-1.14)
    FUSED = "fused"  # add_fused_lm_head (TRL 1.15+), counted from the code


def sft_loss(setup: MethodSetup, liger_kernel: bool) -> SftLoss:
    """Which loss TRL's SFTTrainer runs for ``setup`` (module docstring); FULL for anything that is not TRL's SFT."""
    if setup.method != Method.SFT or setup.trainer != TrainerFamily.TRL:
        return SftLoss.FULL
    release = setup.release
    if release is None or release >= FUSED:  # fused_head_runs, the trainer being TRL
        return SftLoss.FUSED
    loss = (setup.loss_type or "").lower() or None
    if liger_kernel or loss == "dft":  # Liger's own fused loss; dft's loss function over the full logits
        return SftLoss.FULL
    if release >= DEFAULT:
        return SftLoss.CHUNKED if loss in (None, "chunked_nll") else SftLoss.FULL
    if release >= OFFERED and loss == "chunked_nll":
        return SftLoss.CHUNKED
    return SftLoss.FULL


def fused_head_runs(setup: MethodSetup) -> bool:
    """Whether TRL's fused LM head scores the method's tokens: TRL (or a trainer no file names, costed as TRL runs
    it) at 1.15 or later, or at an unknown release (the newest read, 1.16). SFT, DPO, KTO and GRPO call the model
    with ``fused_lm_head=True`` there (sft_trainer.py, dpo_trainer.py, kto_trainer.py, grpo_trainer.py @ v1.16.0)."""
    return setup.trainer in (None, TrainerFamily.TRL) and (setup.release is None or setup.release >= FUSED)


# The preference trainers that score through the fused LM head from TRL 1.15, the policy's and the reference's
# forward alike (trl/trainer/dpo_trainer.py _compute_loss, kto_trainer.py _compute_loss @ v1.15.0, v1.16.0:
# ``model(..., labels=labels, fused_lm_head=True)``; none in 1.14.0). ORPO and CPO do not (no fused_lm_head in
# orpo_trainer.py, cpo_trainer.py @ v1.16.0); GRPO scores its completion alone (memory/method.py
# completion_logits_terms).
FUSED_PREFERENCE = frozenset({Method.DPO, Method.KTO})


def head_loss(setup: MethodSetup, liger_kernel: bool) -> SftLoss:
    """How the method's loss meets the LM head: TRL's fused head for DPO and KTO where fused_head_runs (TRL 1.15+,
    an unknown release, or no trainer named: costed as TRL runs it; Liger's fused cross-entropy is turned off there,
    dpo_trainer.py __init__ @ v1.16.0), else what sft_loss says (FULL for every other method)."""
    if setup.method in FUSED_PREFERENCE and (fused_head_runs(setup) or chunked_logprob_runs(setup, liger_kernel)):
        return SftLoss.FUSED  # TRL 1.14's chunked log-probs under use_liger_kernel: the same tiles
    return sft_loss(setup, liger_kernel)


def chunked_loss_bytes(e: int, tokens: int, hidden: int, vocab: int, head_trained: bool = True) -> int:
    """The chunked cross-entropy's peak beside the backbone's activations, for ``tokens`` scored tokens and a head of
    ``vocab`` x ``hidden`` in ``e``-byte weights: the larger of the two moments of a chunk's backward (module
    docstring), plus the sorted token order and labels (int64). Every chunk adds its head gradient to the one
    autograd accumulates for the weight over the chunks (an ``e``-byte buffer of V x h); a 16-bit head is upcast per
    chunk, an fp32 copy saved for the matmul's backward. The sorted hidden states take the place of the LM head's
    saved input, counted outside the layers. A frozen head (PEFT without it in modules_to_save) gets no gradient:
    only its upcast copy, which the matmul keeps for the hidden states' gradient.

    * log_softmax's backward: the log-probabilities it saved, their exp (the entropy metric, saved until the chunk's
      graph is freed), the gradient of the log-probabilities and the one it makes for the logits (4 x fp32 chunk x V);
    * the matmul's backward: the exp and the logits' gradient (2 x fp32 chunk x V), the fp32 gradient of the
      upcast weight (fp32 V x h) beside the upcast copy."""
    chunk = min(CHUNK_TOKENS, tokens)
    cv, vh = FP32 * chunk * vocab, vocab * hidden
    upcast = FP32 * vh if e < FP32 else 0  # w.float(): a copy for a 16-bit head, the weight itself in fp32
    accumulated = e * vh if head_trained else 0  # the weight's gradient summed over the chunks within backward
    weight_grad = FP32 * vh if head_trained else 0
    softmax_moment = LOG_SOFTMAX_COPIES * cv + upcast + accumulated
    matmul_moment = MATMUL_COPIES * cv + upcast + weight_grad + accumulated
    return max(softmax_moment, matmul_moment) + 2 * INT64 * tokens  # order[] and labels[order]


def fused_head_bytes(e: int, tokens: int, hidden: int, vocab: int, head_trained: bool = True) -> int:
    """The fused LM head's peak beside the backbone's activations (TRL 1.15+, module docstring), ``tokens`` scored:
    what it saves (int64 targets, fp32 log-normaliser and entropy) and the larger of its forward (the fp32 statistics
    and the tile buffer) and its backward's end (fp32 gradients of the hidden states and the head weight, their casts
    to ``e`` bytes when the model is 16-bit, the tile buffer and the fp32 incoming gradient). A frozen head gets no
    ``grad_weight`` (``ctx.needs_input_grad``)."""
    tile = e * min(tokens, TOKEN_TILE) * min(vocab, VOCAB_TILE)
    grads = tokens * hidden + (vocab * hidden if head_trained else 0)
    cast = e * grads if e < FP32 else 0  # .to(hidden.dtype) / .to(weight.dtype): no copy in fp32
    forward = STATISTICS * FP32 * tokens + tile
    backward = FP32 * grads + cast + tile + FP32 * tokens
    saved = (INT64 + FP32 + FP32) * tokens
    return saved + max(forward, backward)


__all__ = ["CHUNK_TOKENS", "FUSED_PREFERENCE", "FUSED_SOURCE", "SftLoss", "chunked_loss_bytes", "fused_head_bytes",
           "fused_head_runs", "head_loss", "sft_loss"]
