"""The hardware a run is costed on, one type: GPUs, GPUs per node, the card and its memory, host RAM and NVMe
per node, and the one headroom (memory/verdict.py).

Small and import-light: the inputs (zeroadvisor/inputs/) build it for every command, ``lint`` included,
without importing the memory model. The bounds below are the rules; the inputs apply them to what a
user gave (naming the flag, keyword or project key), and the type keeps them for direct callers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from zeroadvisor.config.limits import MAX_GPUS  # the one bound (memory/estimate.py re-exports it)
from zeroadvisor.hardware.table import GpuSpec
from zeroadvisor.jsontypes import JSONObject
from zeroadvisor.memory.errors import EstimateError
from zeroadvisor.memory.terms import ceil_div
from zeroadvisor.memory.verdict import DEFAULT_HEADROOM
from zeroadvisor.vocab import Capacity

# Bounds on the cluster, far beyond any real one, so that a typo ("1e308GB", "--gpus 10**30") is a
# one-line error and not float overflow in a report. The largest GPU has 288 GB and the largest
# training clusters ~10**5 GPUs; an exabyte per GPU, host or NVMe and 2**24 GPUs (config/limits.py MAX_GPUS)
# are not plans.
MAX_MEMORY_BYTES = 10**18
# The least memory per GPU the model costs a run on, as given and as left usable by the headroom: no GPU has less
# than 1 MiB, and a budget of zero bytes ("--gpu-memory 1B", "--headroom 99.9999999999%") has no answer (the
# advice divides by it).
MIN_GPU_MEMORY = 2**20
# More data-loader workers per rank than any machine has cores for is a typo, not a run.
MAX_DATALOADER_WORKERS = 1024


@dataclass(frozen=True, slots=True)
class Cluster:
    """The hardware: GPU count and, when known, memory per GPU, host RAM and NVMe per node (bytes)."""

    gpus: int = 1
    gpus_per_node: int | None = None  # default min(gpus, 8)
    gpu_memory: int | None = None  # the card's memory as the driver reports it (not less the headroom)
    cpu_memory: int | None = None
    nvme: int | None = None
    headroom: float = DEFAULT_HEADROOM  # share of each capacity a "fits" leaves free (memory/verdict.py)
    gpu: GpuSpec | None = None  # the named card (--gpu); its memory is gpu_memory when that is not given
    # the run's PYTORCH_CUDA_ALLOC_CONF (its environment or launch command; None: nobody said): expandable
    # segments change the allocator's fragmentation (memory/allocator.py)
    alloc_conf: str | None = None
    # the data-loader worker processes each rank forks (the Trainer's dataloader_num_workers; 0: its default, the
    # batches are loaded in the training process): host RAM per rank (memory/host.py runtime_baseline_terms)
    dataloader_workers: int = 0
    # False where gpus_per_node is the default (min(gpus, 8)): an Accelerate config's machines may decide it
    per_node_given: bool = field(default=True, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.gpu is not None:
            if self.gpu_memory is None:
                object.__setattr__(self, "gpu_memory", self.gpu.memory_bytes)
            elif self.gpu_memory != self.gpu.memory_bytes:
                raise EstimateError(f"gpu_memory {self.gpu_memory:,} bytes is not the {self.gpu.name}'s "
                                    f"{self.gpu.memory_bytes:,}: give the card or the memory, not both")
        if isinstance(self.headroom, bool) or not isinstance(self.headroom, (int, float)) \
                or not headroom_allowed(self.headroom):
            raise EstimateError(f"headroom must be at least 0 and below 1, got {self.headroom!r}")
        check_gpus("gpus", self.gpus)
        if self.gpus_per_node is None:
            object.__setattr__(self, "gpus_per_node", min(self.gpus, 8))
            object.__setattr__(self, "per_node_given", False)
        check_gpus("gpus_per_node", self.gpus_per_node)
        for name in ("gpu_memory", "cpu_memory", "nvme"):
            check_memory(name, getattr(self, name))
        check_gpu_memory("gpu_memory", self.gpu_memory)
        check_usable("headroom", self.gpu_memory, self.headroom)
        if isinstance(self.dataloader_workers, bool) or not isinstance(self.dataloader_workers, int) \
                or not 0 <= self.dataloader_workers <= MAX_DATALOADER_WORKERS:
            raise EstimateError(f"dataloader_workers must be a whole number from 0 to {MAX_DATALOADER_WORKERS}, "
                                f"got {self.dataloader_workers!r}")

    @property
    def nodes(self) -> int:
        return ceil_div(self.gpus, self._per_node)

    @property
    def gpus_on_a_node(self) -> int:
        return min(self.gpus, self._per_node)

    @property
    def _per_node(self) -> int:
        """gpus_per_node, which __post_init__ always sets (to min(gpus, 8) when it is not given)."""
        if self.gpus_per_node is None:  # pragma: no cover - __post_init__ sets it
            raise TypeError("Cluster.gpus_per_node is unset")
        return self.gpus_per_node

    @property
    def usable_gpu_memory(self) -> int | None:
        """GPU memory less the headroom: what a "fits" may use."""
        return None if self.gpu_memory is None else usable(self.gpu_memory, self.headroom)

    def capacities(self) -> dict[Capacity, int | None]:
        return {Capacity.GPU: self.gpu_memory, Capacity.HOST: self.cpu_memory, Capacity.NVME: self.nvme}

    def to_dict(self) -> JSONObject:
        return {"gpus": self.gpus, "gpus_per_node": self.gpus_per_node, "nodes": self.nodes,
                "gpu": None if self.gpu is None else self.gpu.to_dict(), "gpu_memory": self.gpu_memory,
                "cpu_memory": self.cpu_memory, "nvme": self.nvme, "headroom": self.headroom,
                "usable_gpu_memory": self.usable_gpu_memory, "alloc_conf": self.alloc_conf}


def headroom_allowed(share: float | Fraction) -> bool:
    """The one headroom rule: a share of at least 0 and below 1."""
    return 0 <= share < 1


def check_gpus(name: str, count: int | None) -> None:
    """EstimateError unless ``count`` is None or a whole number from 1 to MAX_GPUS."""
    if count is None:
        return
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise EstimateError(f"{name} must be a positive integer, got {count!r}")
    if count > MAX_GPUS:
        raise EstimateError(f"{name} = {count:,} is more than any cluster has (at most {MAX_GPUS:,})")


def check_memory(name: str, nbytes: int | None) -> None:
    """EstimateError unless ``nbytes`` is None or a byte count from 1 to MAX_MEMORY_BYTES."""
    if nbytes is None:
        return
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
        raise EstimateError(f"{name} must be a positive number of bytes, got {nbytes!r}")
    if nbytes > MAX_MEMORY_BYTES:
        raise EstimateError(f"{name} of about 10^{len(str(nbytes)) - 1} bytes is more than any machine has "
                            "(at most 1 EB)")


def check_gpu_memory(name: str, nbytes: int | None) -> None:
    """EstimateError unless ``nbytes`` is None or a GPU's memory: MIN_GPU_MEMORY to MAX_MEMORY_BYTES."""
    check_memory(name, nbytes)
    if nbytes is not None and nbytes < MIN_GPU_MEMORY:
        raise EstimateError(f"{name} of {nbytes:,} bytes is less than any GPU has (at least 1 MiB)")


def usable(gpu_memory: int, headroom: float) -> int:
    """The GPU memory a "fits" may use: ``gpu_memory`` less the headroom (the one rounding, down)."""
    return int(gpu_memory * (1 - headroom))


def check_usable(name: str, gpu_memory: int | None, headroom: float) -> None:
    """EstimateError (naming the headroom, ``name``) where it leaves less than MIN_GPU_MEMORY of the GPU usable."""
    if gpu_memory is None:
        return
    left = usable(gpu_memory, headroom)
    if left < MIN_GPU_MEMORY:
        raise EstimateError(f"{name} {headroom:.12g} leaves {left:,} of the GPU's {gpu_memory:,} bytes usable; at "
                            "least 1 MiB must be")
