"""The hardware a step runs on: the GPU's facts (hardware/gpus.py GpuSpec) and the machine facts the user
gives by flag, each with a stated default.

Defaults (used when the flag is not given; each one used is reported as an assumption):

- ``efficiency`` (``--efficiency``) 0.4: the share of the GPU's dense peak that training kernels reach on the FLOPs
  they execute (recomputation included). Public large-scale runs reach 0.46-0.58 (PaLM 540B: 46.2%
  MFU / 57.8% HFU, Chowdhery et al. 2022 Table 3; Megatron-LM 1T on A100: 52% of peak, Narayanan et
  al. 2021 §5.1; BLOOM 176B: 150 of 312 TFLOPS, HF blog "The Technology Behind BLOOM Training");
  ZeRO data-parallel runs without model-parallel kernels report less (ZeRO-Offload: 40 of 125 TFLOPS
  on V100, arXiv:2101.06840 §6). 0.4 sits between.
- ``--inter-node-bandwidth`` 25 GB/s per node, one direction: one 200 Gb/s NIC (HDR InfiniBand or
  200 GbE), the common cloud/HPC node; a DGX with one NIC per GPU has 8x that.
- ``--cpu-cores`` 48 per node: the ZeRO-Offload paper's DGX-2 (2x Xeon Platinum 8168, 24 cores each)
  and an AWS p4d.24xlarge (96 vCPUs = 48 cores).
- ``--nvme-bandwidth`` 3 GB/s per node: one PCIe gen3 x4 NVMe drive's sequential read (ZeRO-Infinity,
  arXiv:2104.07857 §8, aggregates several drives per node; give their sum).
- CPU Adam throughput 0.8e9 parameters/s per core: DeepSpeedCPUAdam measured by benchmarks/cpu_adam.py
  (0.79-0.84e9 on an AVX2 AMD EPYC core; AVX512 cores are faster, so a floor for servers).
- ``--launcher`` torchrun: how many OpenMP threads DeepSpeedCPUAdam gets per GPU process (its step
  is one ``#pragma omp parallel for``, csrc/adam/cpu_adam_impl.cpp). torch/distributed/run.py
  (torch 2.13, main) sets OMP_NUM_THREADS=1 for every process when it is unset and nproc_per_node > 1;
  ``accelerate launch`` exports OMP_NUM_THREADS = --num_cpu_threads_per_process, whose default is
  OMP_NUM_THREADS or 1 (accelerate/commands/launch.py _validate_launch_command, utils/launch.py);
  the ``deepspeed`` launcher sets it only with --bind_cores_to_rank, to cores / ranks
  (deepspeed/launcher/launch.py main), and otherwise leaves every rank's OpenMP on all cores at
  once: oversubscribed, so at best each rank gets its share (cores / ranks). torchrun is the default
  because it and accelerate launch, the launchers of the Hugging Face examples, both give one thread.
- Host memory bandwidth 200 GB/s per node: a two-socket server's STREAM triad (6-8 DDR4 channels per
  socket); the CPU Adam step reads and writes 28 bytes per parameter (fp32 parameter, gradient,
  exp_avg, exp_avg_sq read; parameter and both moments written: csrc/adam/cpu_adam_impl.cpp), so it
  is capped by this when all cores run.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Interface 1 (hardware/gpus.py): name, dense_tflops, intra_node_gb_s, host_link_gb_s
    from zeroadvisor.hardware.gpus import GpuSpec

DEFAULT_EFFICIENCY = 0.4
DEFAULT_INTER_NODE_GB_S = 25.0
DEFAULT_CPU_CORES = 48
DEFAULT_NVME_GB_S = 3.0
CPU_ADAM_PARAMS_PER_CORE_S = 0.8e9
HOST_MEMORY_GB_S = 200.0
CPU_ADAM_BYTES_PER_PARAM = 28  # 4 fp32 arrays read, 3 written


class Launcher(StrEnum):
    """What starts the GPU processes (``--launcher``): it decides the CPU optimizer's threads per process."""

    TORCHRUN = "torchrun"
    ACCELERATE = "accelerate"
    DEEPSPEED = "deepspeed"


LAUNCHERS = tuple(Launcher)
DEFAULT_LAUNCHER = Launcher.TORCHRUN

# Hardware field -> (default, why): the one table of the machine facts' defaults and reasons. The flags and
# project-configuration keys that set them are named by the input table (memory/assumed.py INPUTS).
DEFAULTS: dict[str, tuple[float | Launcher, str]] = {
    "efficiency": (DEFAULT_EFFICIENCY,
                   ("share of the GPU's dense peak reached on executed FLOPs (large public runs reach 0.46-0.58; "
                    "ZeRO data-parallel runs less)")),
    "inter_node_gb_s": (DEFAULT_INTER_NODE_GB_S, "GB/s per node, one 200 Gb/s NIC (HDR InfiniBand / 200 GbE)"),
    "cpu_cores": (DEFAULT_CPU_CORES, "CPU cores per node (DGX-2, AWS p4d.24xlarge)"),
    "nvme_gb_s": (DEFAULT_NVME_GB_S, "GB/s per node, one PCIe gen3 x4 NVMe drive"),
    "launcher": (DEFAULT_LAUNCHER,
                 ("torchrun and accelerate launch start each GPU process with OMP_NUM_THREADS=1, so the CPU "
                  "optimizer step runs on one core per process; the deepspeed launcher shares the node's cores")),
}


def cpu_threads_per_rank(launcher: str, cores: int, ranks_per_node: int) -> float:
    """OpenMP threads DeepSpeedCPUAdam runs on in each of a node's GPU processes (module docstring)."""
    share = cores / max(1, ranks_per_node)
    if launcher == Launcher.ACCELERATE:
        return min(1.0, share)  # num_cpu_threads_per_process defaults to 1 whatever the process count
    if launcher == Launcher.TORCHRUN and ranks_per_node > 1:
        return min(1.0, share)  # OMP_NUM_THREADS=1 when unset and nproc_per_node > 1
    return share  # deepspeed (bound to cores / ranks, or oversubscribed: at best that), or one process


@dataclass(frozen=True, slots=True)
class Hardware:
    """What a step runs on. ``gpu`` None: only a memory size is known, so no step time."""

    gpu: GpuSpec | None
    inter_node_gb_s: float = DEFAULT_INTER_NODE_GB_S
    cpu_cores: int = DEFAULT_CPU_CORES
    nvme_gb_s: float = DEFAULT_NVME_GB_S
    efficiency: float = DEFAULT_EFFICIENCY
    cpu_adam_params_per_core_s: float = CPU_ADAM_PARAMS_PER_CORE_S
    host_memory_gb_s: float = HOST_MEMORY_GB_S
    launcher: Launcher = DEFAULT_LAUNCHER
    defaulted: tuple[str, ...] = ()  # the fields (keys of DEFAULTS) not given: their defaults are assumptions

    def __post_init__(self) -> None:
        if not 0 < self.efficiency <= 1:
            raise ValueError(f"efficiency must be above 0 and at most 1, got {self.efficiency!r}")
        for name in ("inter_node_gb_s", "nvme_gb_s", "cpu_adam_params_per_core_s", "host_memory_gb_s"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"{name} must be positive, got {value!r}")
        if self.launcher not in LAUNCHERS:
            raise ValueError(f"launcher must be one of {', '.join(LAUNCHERS)}, got {self.launcher!r}")
        object.__setattr__(self, "launcher", Launcher(self.launcher))
        if isinstance(self.cpu_cores, bool) or not isinstance(self.cpu_cores, int) or self.cpu_cores < 1:
            raise ValueError(f"cpu_cores must be a positive integer, got {self.cpu_cores!r}")
