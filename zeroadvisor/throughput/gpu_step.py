"""The optimizer step on the GPU: memory-bound passes over the partition, bytes over the GPU's memory bandwidth.

Without ``offload_optimizer`` each GPU process updates its partition after the last backward (DeepSpeed
0.19.8): ZeRO-0 the whole model-parallel-local parameters, ZeRO-1/2/3 their 1/N. Every pass is elementwise,
so it moves bytes at the memory's rate rather than computing (Adam does ~15 FLOPs per 28 bytes: far below any
GPU's FLOPs/byte). Bytes per parameter of the partition, read + written, counted from the code:

- gradient to the fp32 master dtype (16-bit training): read the 16-bit gradient, write fp32
  (stage_1_and_2.py ``step``: ``flat_grad_partition.to(fp32)``; stage3.py ``_prepare_fp32_grad_for_sub_group``;
  bf16_optimizer.py ``update_hp_grads``). A floor: the flatten of unflattened buckets is not counted.
- the optimizer: read master, gradient and each state, write master and each state
  (ops/csrc/adam/multi_tensor_adam.cu: p, g, m, v loaded, p, m, v stored; torch's fused AdamW the same):
  master x (2 + 2 states) + ... = (2 x master) + gradient + 2 x states x state bytes.
- the 16-bit copy: read the fp32 master, write the 16-bit parameter (stage_1_and_2.py ``step``:
  ``bit16_partitions[partition_id].data.copy_(fp32_partition.data)``; stage3.py
  ``_reassign_or_swap_out_partitioned_parameters``; bf16_optimizer.py ``update_lp_params``).
- fp16's overflow check reads the gradients (stage_1_and_2.py ``check_overflow``), and unscaling by the loss
  scale reads and writes the fp32 gradient (``unscale_and_clip_grads``: ``mul_``).
- ``gradient_clipping`` > 0: the norm reads the 16-bit gradients once (``get_grad_norm_direct``), and the
  clip reads and writes the fp32 gradient (``unscale_and_clip_grads``), once for fp16 and clipping together.

The time is a floor: the datasheet bandwidth, which elementwise kernels approach but do not reach.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroadvisor.memory import bytes as B
from zeroadvisor.vocab import Precision

FP32 = B.DTYPE_BYTES["fp32"]


@dataclass(frozen=True, slots=True)
class GpuStepBytes:
    """Bytes per parameter of the partition the GPU optimizer step moves, by pass (module docstring)."""

    to_master: int
    optimizer: int
    to_model: int
    overflow_and_clip: int

    @property
    def total(self) -> int:
        return self.to_master + self.optimizer + self.to_model + self.overflow_and_clip


def gpu_step_bytes(precision: Precision, optimizer_states: int, clipping: float, *, master_bytes: int = FP32,
                   state_bytes: int = FP32) -> GpuStepBytes:
    """Bytes per parameter for ``precision`` (fp16|bf16|fp32), ``optimizer_states`` state tensors, clipping."""
    grad = B.DTYPE_BYTES[precision]
    mixed = precision != Precision.FP32 and master_bytes != grad
    to_master = grad + master_bytes if mixed else 0
    master_grad = master_bytes if mixed else grad  # what the optimizer reads as the gradient
    optimizer = 2 * master_bytes + master_grad + 2 * optimizer_states * state_bytes
    to_model = master_bytes + grad if mixed else 0
    checks = 0
    if precision == Precision.FP16:
        checks += grad  # the overflow check reads the gradients
    if clipping > 0:
        checks += grad  # the norm reads the gradients
    if precision == Precision.FP16 or clipping > 0:
        checks += 2 * master_grad  # unscale / clip: mul_ reads and writes the master-dtype gradient
    return GpuStepBytes(to_master, optimizer, to_model, checks)


def gpu_step_seconds(parameters: float, per_param: GpuStepBytes, memory_gb_s: float) -> float:
    """Seconds of the step's passes over ``parameters`` at the GPU memory's bandwidth."""
    return parameters * per_param.total / (memory_gb_s * 1e9)
