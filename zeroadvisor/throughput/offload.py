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
"""

from __future__ import annotations

from zeroadvisor.throughput.hardware import CPU_ADAM_BYTES_PER_PARAM, Hardware, cpu_threads_per_rank

OPTIMIZER_STATE_BYTES = 12  # fp32 master parameter + exp_avg + exp_avg_sq (Adam)


def cpu_adam_seconds(partition: float, processes_per_node: int, hw: Hardware) -> float:
    """The CPU optimizer step of one process's partition on its threads, the node's memory bandwidth shared."""
    threads = cpu_threads_per_rank(hw.launcher, hw.cpu_cores, processes_per_node)
    by_cores = partition / (hw.cpu_adam_params_per_core_s * threads)
    by_memory = partition * processes_per_node * CPU_ADAM_BYTES_PER_PARAM / (hw.host_memory_gb_s * 1e9)
    return max(by_cores, by_memory)


def pcie_seconds(nbytes: float, hw: Hardware) -> float:
    """One direction of the GPU's host link (PCIe is full duplex: each direction has this bandwidth)."""
    return nbytes / (hw.gpu.host_link_gb_s * 1e9)


def nvme_seconds(nbytes_per_process: float, processes_per_node: int, hw: Hardware) -> float:
    """Every process of the node moving ``nbytes_per_process`` through the node's NVMe."""
    return nbytes_per_process * processes_per_node / (hw.nvme_gb_s * 1e9)
