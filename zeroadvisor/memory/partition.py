"""DeepSpeed 0.19.8's ZeRO stage 1/2 partitioning of one flat parameter group, rank by rank.

Stage 1/2 flatten the trainable parameters of a param group (in ``model.parameters()`` order)
into one 16-bit buffer, pad it to a multiple of 2·N elements and cut it into N equal partitions.
What a rank holds for gradients depends on where the partition boundaries fall:

* the 16-bit gradient partition (``grads_in_partition``, ``copy_grads_in_partition``) is sized by
  the parameters that *touch* the rank's partition, each counted whole, and
* in ``step()`` the partition's gradients are flattened; when that list is one tensor (the
  partition lies inside one parameter and is filled by it) the flatten is a view, and in fp32
  (master dtype = gradient dtype) ``.to()`` is a no-op too: no second copy.

One param group is assumed (what ``deepspeed.initialize`` builds from ``model.parameters()``
with a client optimizer over all of them); ``round_robin_gradients`` and
``parameter_alignment`` default to DeepSpeed's defaults (False).

All paths below are ``deepspeed/runtime/zero/stage_1_and_2.py`` (DeepSpeedZeroOptimizer) unless said.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

NCCL_START_ALIGNMENT_FACTOR = 2  # __init__: self.nccl_start_alignment_factor = 2


@dataclass(frozen=True, slots=True)
class RankPartition:
    """One rank's share of the flat group (elements, not bytes)."""

    rank: int
    partition: int  # elements of the partition (equal on every rank)
    touched: int  # elements of the parameters touching the partition, counted whole (grads_in_partition)
    params: int  # number of parameters touching the partition (params_in_partition)
    first_offset: int  # offset into the first parameter where the partition starts
    single_tensor: bool  # the step's flatten list is one tensor: _flatten_dense_tensors returns a view

    def step_flatten_is_view(self, grad_bytes: int, master_bytes: int) -> bool:
        """step(): ``flatten(averaged_gradients)`` is a view and ``.to(master dtype)`` copies nothing."""
        return self.single_tensor and grad_bytes == master_bytes


@dataclass(frozen=True, slots=True)
class Layout:
    flat: int  # elements of bit16_groups_flat including alignment padding
    partition: int
    ranks: tuple[RankPartition, ...]


def _round_robin_reorder(numels: Sequence[int], N: int) -> list[int]:
    # _round_robin_reorder: tensor i goes to bucket i % N; buckets concatenated in order 0..N-1
    return [n for j in range(N) for i, n in enumerate(numels) if i % N == j]


def layout_stage12(numels: Sequence[int], N: int, *, element_size: int = 2, parameter_alignment: bool = False,
                   round_robin_gradients: bool = False) -> Layout:
    """Reproduce stage 1/2's flat group and per-rank partition info for parameters of ``numels`` elements."""
    if N < 1:
        raise ValueError("N must be >= 1")
    numels = [int(n) for n in numels]
    if any(n < 0 for n in numels):
        raise ValueError("parameter sizes must be >= 0")
    if round_robin_gradients:
        numels = _round_robin_reorder(numels, N)
    # __init__: param_alignment = 16 // gcd(16, element_size) if parameter_alignment else 1
    param_alignment = 16 // math.gcd(16, element_size) if parameter_alignment else 1
    padding = _parameter_padding(numels, param_alignment)
    offset = sum(numels) + sum(padding)
    # flatten_dense_tensors_aligned -> runtime/utils.py align_dense_tensors: pad the total to a multiple of 2·N
    alignment = NCCL_START_ALIGNMENT_FACTOR * N
    flat = -(-offset // alignment) * alignment if offset else 0
    # __init__: partition_size = len(bit16_groups_flat) // world_size (get_data_parallel_partitions: equal here)
    part = flat // N
    return Layout(flat, part, tuple(_rank_partition(rank, part, numels, padding) for rank in range(N)))


def _parameter_padding(numels: list[int], param_alignment: int) -> list[int]:
    """__init__: param_padding = 0 for the last parameter, else (-current_offset) % param_alignment."""
    padding = []
    offset = 0
    for idx, n in enumerate(numels):
        offset += n
        pad = 0 if idx == len(numels) - 1 else (-offset) % param_alignment
        padding.append(pad)
        offset += pad
    return padding


def _rank_partition(rank: int, part: int, numels: list[int], padding: list[int]) -> RankPartition:
    """Which parameters touch the rank's partition of ``part`` elements, and whether its step flattens one tensor."""
    start, end = part * rank, part * (rank + 1)
    first_offset = 0
    current = 0
    members: list[tuple[int, int]] = []  # (numel, offset into it) of params_in_partition
    # get_partition_info: a param is in the partition if it starts inside it, or starts before and
    # runs into it (then first_offset = start - its start; only the first one can)
    for n, pad in zip(numels, padding, strict=True):
        if start <= current < end:
            members.append((n, 0))
        elif current < start < current + n:
            first_offset = start - current
            members.append((n, first_offset))
        current += n + pad
    touched = sum(n for n, _ in members)
    return RankPartition(rank, part, touched, len(members), first_offset, _single_tensor(members, part))


def _single_tensor(members: list[tuple[int, int]], part: int) -> bool:
    """get_flat_partition/_get_flat_partition_unpadded: each member contributes min(rest, room) elements;
    a zero tensor fills any shortfall. No member: one zero buffer of the partition size."""
    if not members:
        return True
    filled = 0
    for n, off in members:
        filled += min(n - off, part - filled)
    return len(members) == 1 and filled >= part


def step_gradient_elements(rank: RankPartition, grad_bytes: int, master_bytes: int) -> tuple[int, int]:
    """(16-bit gradient elements, master-dtype gradient elements) a rank holds in ``step()``.

    copy_grads_in_partition: grads_in_partition = sum of the touching parameters' numel.
    step(): single_grad_partition = flatten(averaged_gradients).to(master dtype) -- no new elements
    when it is a view; a rank touching no parameter flattens one zero buffer of the partition size
    (get_flat_partition's ``len(tensor_list) == 0`` branch).
    """
    lp = rank.touched if rank.params else rank.partition
    master = 0 if rank.step_flatten_is_view(grad_bytes, master_bytes) else rank.partition
    return lp, master
