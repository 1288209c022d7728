"""Offload traffic of one step: PCIe between GPU and host, the CPU optimizer step, NVMe.

Per GPU process, for its ZeRO partition of Ψ/n parameters (ZeRO-Offload, Ren et al. 2021,
arXiv:2101.06840 §4.1; ZeRO-Infinity, Rajbhandari et al. 2021, arXiv:2104.07857 §5), following
DeepSpeed 0.19.8:

- optimizer offload: the partition's 16-bit gradients go to the host in each micro step that
  reduces (stage_1_and_2.py copy_grads_in_partition; stage 3 partition_grads), overlapped with the
  backward pass (ZeRO-Offload §4.1); with accumulation, async_accumulate_grad_in_cpu_via_gpu brings
  the accumulated partition back to the GPU to add the next one. The CPU Adam step updates the fp32
  master partition, then the 16-bit partition goes back to the GPU (not overlapped: the next forward
  needs it). With parameters also offloaded (stage 3), they stay on the host.
- parameter offload (stage 3): each micro step fetches the partition's 16-bit parameters to the GPU
  before the forward and again before the backward pass (prefetched, overlapped with compute), then
  ZeRO-3 all-gathers them (ZeRO-Infinity §5: bandwidth-centric partitioning, every GPU's PCIe link
  in parallel).
- NVMe: optimizer states (fp32 parameter, exp_avg, exp_avg_sq: 12 bytes per parameter) are read
  and written once per step (partitioned_optimizer_swapper.py, swap in before and out after each
  sub group's step; pipeline_read/pipeline_write default off, so in series with the CPU step);
  parameters on NVMe are read before each forward and backward and written once per step.
  The node's NVMe bandwidth is shared by its GPU processes.
- the CPU Adam step: parameters / (rate per core x the OpenMP threads each GPU process runs it on:
  hardware.cpu_threads_per_rank, by launcher), and not faster than the node's memory bandwidth moves
  28 bytes per parameter for all its processes at once (hardware.CPU_ADAM_BYTES_PER_PARAM).
- the rest of the offloaded step on the host (host_passes_seconds): DeepSpeed's step() makes more passes
  over the fp32 host partition than the Adam kernel's (benchmarks/offload_step.py, real DeepSpeed 0.19.8
  on CPU ranks): the unscale/clip ``mul_`` (stage_1_and_2.py / stage3.py ``unscale_and_clip_grads``: at
  stage 1/2 only with gradient_clipping > 0 or fp16's loss scale, at stage 3 always) and the fp32 ->
  16-bit copy of the updated partition (stage 1/2 ``bit16_partition_buffer.data.copy_(fp32_partition)``;
  stage 3 ``_reassign_or_swap_out_partitioned_parameters``: torch converts on the CPU before a blocking
  host -> GPU copy, aten/src/ATen/native/cuda/Copy.cu). The norm is summed from per-parameter norms
  taken on the GPU (complete_grad_norm_calculation_for_cpu_offload): no host pass. Measured per
  parameter on one thread, divided by the process's threads like the Adam kernel, and capped by the
  node's memory bandwidth (8 and 6 bytes per parameter).
"""

from __future__ import annotations

from zeroadvisor.hardware.machine import CPU_ADAM_BYTES_PER_PARAM, Hardware, cpu_threads_per_rank
from zeroadvisor.vocab import Precision

OPTIMIZER_STATE_BYTES = 12  # fp32 master parameter + exp_avg + exp_avg_sq (Adam)

# benchmarks/offload_step.json "model_constants" (1 thread, 67M parameters; tests check they agree):
# seconds per parameter per thread of each host pass of the offloaded step, and the bytes it moves.
HOST_PASS_S_PER_PARAM_THREAD = {"unscale": 0.295e-9, "to_16bit": 0.430e-9}
HOST_PASS_BYTES = {"unscale": 8, "to_16bit": 6}  # fp32 read + written; fp32 read + 16-bit written


def host_passes(stage: int, precision: Precision, clipping: float) -> tuple[str, ...]:
    """The host passes of the offloaded step beside the Adam kernel (module docstring)."""
    unscale = stage == 3 or clipping > 0 or precision == Precision.FP16
    return ("unscale", "to_16bit") if unscale else ("to_16bit",)


def host_passes_seconds(partition: float, passes: tuple[str, ...], processes_per_node: int, hw: Hardware) -> float:
    """The ``passes`` over one process's partition on its threads, the node's memory bandwidth shared."""
    threads = cpu_threads_per_rank(hw.launcher, hw.cpu_cores, processes_per_node)
    by_cores = partition * sum(HOST_PASS_S_PER_PARAM_THREAD[p] for p in passes) / threads
    by_memory = partition * processes_per_node * sum(HOST_PASS_BYTES[p] for p in passes) / (hw.host_memory_gb_s * 1e9)
    return max(by_cores, by_memory)


def cpu_adam_seconds(partition: float, processes_per_node: int, hw: Hardware) -> float:
    """The CPU optimizer step of one process's partition on its threads, the node's memory bandwidth shared."""
    threads = cpu_threads_per_rank(hw.launcher, hw.cpu_cores, processes_per_node)
    by_cores = partition / (hw.cpu_adam_params_per_core_s * threads)
    by_memory = partition * processes_per_node * CPU_ADAM_BYTES_PER_PARAM / (hw.host_memory_gb_s * 1e9)
    return max(by_cores, by_memory)


def pcie_seconds(nbytes: float, hw: Hardware) -> float:
    """One direction of the GPU's host link (PCIe is full duplex: each direction has this bandwidth)."""
    if hw.gpu is None:
        raise ValueError("a host-link time needs the GPU (Hardware.gpu is None)")
    return nbytes / (hw.gpu.host_link_gb_s * 1e9)


def nvme_seconds(nbytes_per_process: float, processes_per_node: int, hw: Hardware) -> float:
    """Every process of the node moving ``nbytes_per_process`` through the node's NVMe."""
    return nbytes_per_process * processes_per_node / (hw.nvme_gb_s * 1e9)
