"""Data-parallel communication of one training step: volume per stage, and the time it takes on a link.

Volumes are in units of Ψ (the parameters a GPU holds before ZeRO partitions them), per collective
(ZeRO paper, Rajbhandari et al. 2020, §7): an all-reduce is a reduce-scatter plus an all-gather, Ψ
each; ZeRO-1/2 reduce-scatter the gradients (Ψ) and all-gather the updated parameters (Ψ); ZeRO-3
all-gathers the parameters in the forward and again in the backward pass and reduce-scatters the
gradients: 3Ψ. When each of them runs follows DeepSpeed 0.19.8:

- ZeRO-0: engine.allreduce_gradients all-reduces once per step, at the accumulation boundary,
  after the backward pass (not overlapped).
- ZeRO-1: stage_1_and_2.py reduce_ready_partitions_and_remove_grads reduces only at the boundary
  (``partition_gradients or is_gradient_accumulation_boundary()``), in the last backward pass.
- ZeRO-2: the same hook reduces in every micro step's backward (partition_gradients).
- ZeRO-1/2 all-gather the updated parameters after the optimizer step (all_gather_dp_groups in
  step()), not overlapped.
- ZeRO-3: every micro step all-gathers each module's parameters before its forward and again before
  its backward, and reduce-scatters gradients in backward.
- ``overlap_comm`` (stage 1/2: reduction on a side stream during backward; stage 3: the prefetch
  all-gathers on parameter_offload.py's __allgather_stream, a side stream only when overlap_comm is
  on) hides a collective behind the compute of its pass; off, it adds to it.

ZeRO++ (Wang et al. 2023, arXiv:2306.10209 §3): qwZ all-gathers int8 weights (half the 16-bit
volume), qgZ reduce-scatters int4 gradients (a quarter), hpZ keeps a secondary copy of the
parameters within each node so the backward all-gather stays on the intra-node link.

Time on a ring of n ranks: each rank sends and receives (n-1)/n of the collective's bytes per
all-gather or reduce-scatter (NCCL's bus bandwidth, nccl-tests doc/PERFORMANCE.md), over the
slowest link the ring crosses: the GPU's intra-node link on one node; across nodes, the node's
network (the ring passes each node boundary once per ring, NCCL runs one ring per NIC, so the
bytes that cross a node boundary are those of one rank at the node's total network bandwidth).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zeroadvisor.memory import bytes as B

# ZeRO++ volumes relative to the 16-bit collective (arXiv:2306.10209 §3.1-3.3).
QWZ_FACTOR = 0.5  # int8 weights instead of fp16/bf16
QGZ_FACTOR = 0.25  # int4 gradients instead of fp16/bf16


@dataclass(frozen=True, slots=True)
class ZeroPlusPlus:
    """zero_optimization.zero_quantized_weights / zero_quantized_gradients / zero_hpz_partition_size."""

    quantized_weights: bool = False
    quantized_gradients: bool = False
    hpz: int = 1

    @classmethod
    def of(cls, settings: Any, hpz: int) -> ZeroPlusPlus:
        """The switches as the memory model read them (memory/settings.py Settings, with pydantic's lax bools;
        memory/parallel.py Parallel.hpz): one reading of the config for both models."""
        return cls(settings.quantized_weights, settings.quantized_gradients, hpz)


@dataclass(frozen=True, slots=True)
class Collective:
    """One collective per micro step or per step: its elements per rank (Ψ units x Ψ) and when it runs."""

    name: str
    elements: float  # elements of the whole collective (what each rank ends with, or starts from)
    element_bytes: float
    when: str  # "forward" | "backward" | "boundary_backward" | "after_backward" | "after_step"
    overlapped: bool
    intra_node: bool = False  # hpZ: stays within the node

    @property
    def nbytes(self) -> float:
        return self.elements * self.element_bytes


def collectives(stage: int, psi: int, trained: int, comm_dtype: str, precision: str, overlap: bool,
                zpp: ZeroPlusPlus) -> list[Collective]:
    """The data-parallel collectives of one step at ``stage`` (module docstring for when each runs).

    ``psi``: the parameters a GPU holds (ZeRO-3 gathers them all); ``trained``: those the optimizer
    updates (gradients reduced, updated partitions gathered; fewer under LoRA)."""
    grad_bytes = B.DTYPE_BYTES[comm_dtype]
    param_bytes = B.DTYPE_BYTES[precision]
    if stage == 0:
        return [Collective("gradient all-reduce (reduce-scatter + all-gather)", 2 * trained, grad_bytes,
                           "after_backward", False)]
    if stage in (1, 2):
        when = "backward" if stage == 2 else "boundary_backward"
        return [Collective("gradient reduce-scatter", trained, grad_bytes, when, overlap),
                Collective("updated-parameter all-gather", trained, param_bytes, "after_step", False)]
    weight = param_bytes * (QWZ_FACTOR if zpp.quantized_weights else 1)
    grad = grad_bytes * (QGZ_FACTOR if zpp.quantized_gradients else 1)
    return [Collective("forward parameter all-gather", psi, weight, "forward", overlap),
            Collective("backward parameter all-gather", psi, weight, "backward", overlap, intra_node=zpp.hpz > 1),
            Collective("gradient reduce-scatter", trained, grad, "backward", overlap)]


def ring_seconds(nbytes: float, ranks: int, ranks_per_node: int, intra_gb_s: float, inter_gb_s: float) -> float:
    """Seconds for an all-gather or reduce-scatter of ``nbytes`` over a ring of ``ranks`` (module docstring)."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    per_rank = nbytes * (ranks - 1) / ranks
    if ranks <= ranks_per_node:
        return per_rank / (intra_gb_s * 1e9)
    return per_rank / (min(intra_gb_s, inter_gb_s) * 1e9)
