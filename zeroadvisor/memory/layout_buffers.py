"""Communication buffers the parallel layout adds on each GPU: Ulysses all-to-all and pipeline p2p.

Paths are relative to ``deepspeed/`` (DeepSpeed 0.19.8). Both are transient buffers of one layer or one
micro batch, so each term is a bound on what is live at once, not a sum over layers.
"""

from __future__ import annotations

from zeroadvisor.memory import bytes as B
from zeroadvisor.memory.parallel import Parallel
from zeroadvisor.memory.terms import Term, ceil_div
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.vocab import Resource, TermKind


def ulysses_terms(spec: ModelSpec, shape: TrainingShape, micro_batch: int, precision: str,
                  layout: Parallel) -> list[Term]:
    """sequence/layer.py single_all_to_all: the input is permuted into a contiguous copy (pre_all2all_fun) and
    received into ``torch.empty_like`` of it before post_all2all_fun makes the attention input (counted with the
    activations). q, k and v are exchanged one after the other, so the send copy and the receive buffer of the
    widest of them (the query: heads x head_dim >= kv heads x head_dim) are live at once; the backward exchanges
    gradients of the same shapes."""
    sp, s, h, heads = layout.sequence, shape.sequence_length, spec.hidden_size, spec.num_attention_heads
    if sp <= 1 or not (s and h and heads):
        return []
    w = B.nbytes(precision)
    width = heads * (spec.head_dim or h // heads)
    tokens = ceil_div(s, sp)
    return [Term("buffers", Resource.GPU, 2 * w * micro_batch * tokens * width, "ulysses_all_to_all",
                 f"Ulysses all-to-all send copy and receive buffer of the query ({micro_batch} × {tokens:,} tokens × "
                 f"{width:,})", f"2 × {w} B × b × s/sp × heads·head_dim",
                 "sequence/layer.py single_all_to_all (pre_all2all_fun copy, torch.empty_like output)",
                 kind=TermKind.BOUND)]


def pipeline_p2p_terms(spec: ModelSpec, shape: TrainingShape, micro_batch: int, precision: str,
                       layout: Parallel) -> list[Term]:
    """runtime/pipe/engine.py: a stage receives the previous stage's activations into ``pipe_recv_buf``
    (_exec_recv_activations) and the next stage's gradient into ``grad_layer`` (_exec_recv_grads), each one
    micro batch of the boundary tensor (b x s x h) made by _allocate_or_extend_buffers and kept for the run. The
    first stage has no activation buffer and the last no gradient buffer, so both is a bound for the ends."""
    p, s, h = layout.pipeline, shape.sequence_length, spec.hidden_size
    if p <= 1 or not (s and h):
        return []
    w = B.nbytes(precision)
    tokens = ceil_div(s, layout.sequence)
    return [Term("buffers", Resource.GPU, 2 * w * micro_batch * tokens * h, "pipeline_p2p",
                 f"pipeline receive buffers: one micro batch's boundary activations and their gradient "
                 f"({micro_batch} × {tokens:,} tokens × {h:,})", f"2 × {w} B × b × s × h",
                 "runtime/pipe/engine.py _exec_recv_activations / _exec_recv_grads (_allocate_or_extend_buffers)",
                 kind=TermKind.BOUND)]


def layout_buffer_terms(spec: ModelSpec, shape: TrainingShape, micro_batch: int, precision: str,
                        layout: Parallel) -> list[Term]:
    return (ulysses_terms(spec, shape, micro_batch, precision, layout)
            + pipeline_p2p_terms(spec, shape, micro_batch, precision, layout))
