"""Cut Cross-Entropy (apple/ml-cross-entropy, the ``cut-cross-entropy`` package): the LM head and its loss without
the tokens x vocabulary logits, where a run applies it (axolotl's ``CutCrossEntropyPlugin``, whose
``cut_cross_entropy`` defaults to true once the plugin is listed: integrations/cut_cross_entropy/args.py @ v0.18.0;
the plugin exists from v0.6.0).

From cut_cross_entropy 25.1.1 (cce.py LinearCrossEntropyFunction, cce_lse_forward.py, cce_backward.py), over BT
scored tokens, hidden H, vocabulary V, e bytes per element of the model dtype:

* forward: ``lse`` (fp32 BT: ``e.new_full((B,), -inf, dtype=float32)``), the negated dot of each token with its
  target's row (fp32 BT, turned in place into the per-token loss), ``logit_avg`` (fp32 V, only with
  ``filter_eps``: counted, a bound of 4·V bytes); saved for backward: the head's input (counted as the head's input
  by memory/activations.py), the weight, ``lse``, the targets and the valid indices (int64 BT each);
* backward (cce_backward_kernel): ``de = torch.zeros_like(e)`` (e·BT·H) and, for a trainable head,
  ``dc = torch.zeros_like(c, dtype=e.dtype)`` (e·V·H), filled block by block in fp32 registers: no logits.

It patches the model's forward only where labels are passed (a supervised loss); a preference trainer that reads
the logits gets them whole, so only supervised fine-tuning is counted this way.
"""

from __future__ import annotations

from zeroadvisor.memory import bytes as B

FP32 = B.DTYPE_BYTES["fp32"]
IDS = 8  # int64 targets and valid indices
SOURCE = "cut_cross_entropy 25.1.1 cce.py LinearCrossEntropyFunction, cce_backward.py cce_backward_kernel"


def loss_peak(e: int, tokens: int, vocab: int, hidden: int, head_trainable: bool) -> int:
    """Bytes the loss holds at its peak (its backward), beyond the head's input, over ``tokens`` scored tokens."""
    saved = 2 * FP32 * tokens + 2 * IDS * tokens + FP32 * vocab  # lse and the loss, targets and valids, logit_avg
    grads = e * tokens * hidden + (e * vocab * hidden if head_trainable else 0)  # de, dc
    return saved + grads


def head_gradient(e: int, vocab: int, hidden: int, head_trainable: bool) -> int:
    """The head weight's gradient the loss makes itself (``dc``), which ZeRO-3's hook then receives."""
    return e * vocab * hidden if head_trainable else 0


__all__ = ["SOURCE", "head_gradient", "loss_peak"]
