"""Host RAM the numbers alone miss: pinned allocations as torch sizes them, and the runtime per process.

Two mechanisms:

* **Pinned memory.** ``pin_memory: true`` makes DeepSpeed 0.19.8 page-lock its offload buffers
  through ``accelerator.pin_memory`` -> ``tensor.pin_memory()`` (accelerator/abstract_accelerator.py
  ``pin_memory`` / ``_torch_pin_memory``; only ``DS_PIN_MEMORY_BACKEND=native`` uses DeepSpeed's own
  mlock allocator instead, utils/pin_memory.py ``get_active_native_pinned_memory``). torch serves
  those from its CachingHostAllocator, which rounds every request up to the next power of two
  (ATen/core/CachingHostAllocator.h ``allocate``: "Round up the allocation to the nearest power of
  two to improve reuse", ``c10::llvm::PowerOf2Ceil(size)`` while size <= ``pinned_max_round_threshold``
  and <= ``pinned_max_cached_size``, both unlimited by default: c10/core/AllocatorConfig.h), and
  keeps freed blocks in its free lists instead of returning them (``free`` -> free list; only
  ``empty_cache`` releases them, which DeepSpeed never calls for the host). So a 1.1 GiB pinned
  buffer holds 2 GiB of host RAM.
* **Runtime baseline.** Every GPU process holds the Python interpreter, torch, DeepSpeed, transformers and
  the CUDA runtime before it holds a single tensor, and the training loop forks its data-loader workers: an
  allowance per process, times the ranks on a node, measured on CPU for what runs here
  (benchmarks/load_calibration.md, benchmarks/host_baseline.py) and taken from public measurements for the
  CUDA part.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from zeroadvisor.memory import bytes as B
from zeroadvisor.memory.activation_offload import OFFLOADERS
from zeroadvisor.memory.options import Option
from zeroadvisor.memory.settings import Settings
from zeroadvisor.memory.states import largest_trainable, master_bytes, optimized, partition_stage3, partition_stage12
from zeroadvisor.memory.terms import Term, ceil_div
from zeroadvisor.model.spec import ModelSpec
from zeroadvisor.vocab import ActivationOffload, Device, Phase, Resource, TermKind

GIB = 1 << 30
MIB = 1 << 20

# torch defaults (c10/core/AllocatorConfig.h: pinned_max_round_threshold_ / pinned_max_cached_size_ =
# numeric_limits<size_t>::max()); PYTORCH_CUDA_ALLOC_CONF's pinned_* options can lower them
NO_LIMIT = None


def power_of_two_ceil(n: int) -> int:
    """c10::llvm::PowerOf2Ceil: the smallest power of two >= n (0 for 0)."""
    if n <= 0:
        return 0
    return 1 << (n - 1).bit_length()


def pinned_block_bytes(size: int, round_threshold: int | None = NO_LIMIT) -> int:
    """Bytes the CachingHostAllocator really allocates for one pinned request of ``size`` bytes."""
    # CachingHostAllocator.h allocate(): roundSize = PowerOf2Ceil(size) if size <= threshold else size
    if round_threshold is not None and size > round_threshold:
        return size
    return power_of_two_ceil(size)


def pinned_bytes(sizes: Iterable[int], round_threshold: int | None = NO_LIMIT) -> int:
    """Host bytes held for pinned requests of ``sizes`` bytes (each its own block, none reused)."""
    return sum(pinned_block_bytes(int(n), round_threshold) for n in sizes if n > 0)


@dataclass(frozen=True, slots=True)
class PinnedBuffer:
    """One page-locked allocation DeepSpeed makes per GPU process."""

    key: str
    nbytes: int  # requested
    count: int  # how many allocations of this size
    source: str

    @property
    def held(self) -> int:
        return self.count * pinned_block_bytes(self.nbytes)


def deepspeed_pinned_buffers(s: Settings, opt: Option, P: int, N: int, largest_param: int | None) -> list[PinnedBuffer]:
    """The pinned host allocations DeepSpeed 0.19.8 makes per process for ``opt`` (empty when nothing pins).

    Sizes follow the same partition arithmetic as states.py; ``largest_param`` is the largest single
    parameter's element count (stage 1/2 offload staging buffers), None when unknown.
    """
    w = B.nbytes(s.precision)
    M = master_bytes(s)
    buffers: list[PinnedBuffer] = []
    if opt.stage in (1, 2) and opt.offload_optimizer != Device.NONE and s.offload_optimizer_pin_memory:
        part = partition_stage12(P, N)
        src = "zero/stage_1_and_2.py DeepSpeedZeroOptimizer"
        buffers += [
            # __init__: weights_partition = pin_memory(fp32 partition); temp_pinned = pin_memory(bit16 copy)
            PinnedBuffer("master", M * part, 1, src + ".__init__ (single_partition_of_fp32_groups)"),
            PinnedBuffer("lp_param_staging", w * part, 1,
                         src + ".__init__ (param_buffer_of_bit16_for_cpu_offload_groups)"),
            # initialize_optimizer_states: single_grad_partition pinned and kept as the partition's .grad
            PinnedBuffer("fp32_grads", M * part, 1, src + ".initialize_optimizer_states (single_grad_partition)"),
        ]
        if largest_param:
            buffers.append(PinnedBuffer("grad_staging", w * largest_param, 1,
                                        src + ".__init__ (temp_grad_buffer_for_cpu_offload)"))
    if opt.stage == 3:
        part = partition_stage3(P, N)
        src = "zero/stage3.py DeepSpeedZeroOptimizer_Stage3"
        sub = min(s.sub_group_size, part) if s.sub_group_size > 0 else part
        nsub = ceil_div(part, sub) if sub else 1
        last = part - (nsub - 1) * sub
        if opt.offload_optimizer == Device.CPU and s.offload_optimizer_pin_memory:
            on_host = nsub - int((1 - s.offload_optimizer_ratio) * nsub)  # _create_fp32_partitions
            a = B.nbytes(s.grad_accum_dtype)
            buffers.append(PinnedBuffer("lp_grads", a * part, 1,
                                        src + "._setup_for_real_optimizer (grad_partitions_flat_buffer)"))
            if on_host:
                # initialize_optimizer_states: one pinned fp32 gradient buffer per host-resident sub-group (the
                # host sub-groups are the last ones, so the short last sub-group is among them); the fp32 master
                # sub-groups themselves are plain .to(cpu).clone() copies (_create_fp32_partitions), not pinned
                buffers += [
                    PinnedBuffer("master_grads", M * sub, on_host - 1,
                                 src + ".initialize_optimizer_states (subgroup_gradient_buffer)"),
                    PinnedBuffer("master_grads", M * last, 1,
                                 src + ".initialize_optimizer_states (subgroup_gradient_buffer)"),
                ]
        if opt.offload_param == Device.CPU and s.offload_param_pin_memory:
            # _create_param_groups_fp16_flat_cpu_memory: one pinned flat buffer per parameter group (one
            # group assumed); the per-parameter pinned partitions zero.Init made first
            # (partition_parameters.py _partition_param: pin_memory(partitioned_tensor)) are freed into the
            # allocator's free lists when the flat buffer replaces them; a later pinned request of the same
            # power-of-two size may reuse them, so they are not counted (pinned_param_partitions is their bound)
            buffers.append(PinnedBuffer("lp_params", w * part, 1,
                                        src + "._create_param_groups_fp16_flat_cpu_memory (pinned flat buffer)"))
    return [b for b in buffers if b.nbytes > 0 and b.count > 0]


def run_pinned_buffers(s: Settings, opt: Option, P: int, N: int, spec: ModelSpec,
                       largest_param: int | None) -> list[PinnedBuffer]:
    """The pinned allocations of a run whose model is ``spec`` (``P``: its parameters on this GPU).

    DeepSpeed pins the buffers of the optimizer's groups, which hold the trainable parameters only
    (stage_1_and_2.py __init__ bit16_groups; stage3.py trainable_param_groups ->
    _create_param_groups_fp16_flat_cpu_memory, fp16_groups -> grad_partitions_flat_buffer): with PEFT they are
    sized by the adapters, not by the frozen base. The frozen base keeps the per-parameter pinned partitions
    zero.Init made (partition_parameters.py _partition_param: pin_memory(partitioned_tensor) when offload_param
    is cpu with pin_memory): no flat buffer replaces them, so each stays its own power-of-two block.
    """
    T = optimized(spec, P)
    largest = largest_trainable(spec, largest_param) if largest_param else largest_param
    buffers = deepspeed_pinned_buffers(s, opt, T, N, largest)
    frozen_pinned = (spec.trainable_parameters is not None and opt.stage == 3 and opt.offload_param == Device.CPU
                     and s.offload_param_pin_memory and not spec.quantized_parameters
                     and not s.quantized_nontrainable_weights)
    if frozen_pinned and spec.parameter_sizes:
        w = B.nbytes(s.precision)
        src = "zero/partition_parameters.py Init._partition_param (frozen parameter's pinned partition, kept)"
        buffers += [PinnedBuffer("frozen_params", w * ceil_div(numel, N), count, src)
                    for numel, count in spec.parameter_sizes if numel > 0 and count > 0]
    return buffers


def pinned_rounding_terms(buffers: list[PinnedBuffer], phase: Phase = Phase.TRAIN) -> list[Term]:
    """Host bytes the allocator holds beyond the requested sizes (one term per buffer that rounds up)."""
    terms = []
    for b in buffers:
        extra = b.held - b.count * b.nbytes
        if extra > 0:
            terms.append(Term("overhead", Resource.CPU, extra, f"pinned_rounding:{b.key}",
                              f"pinned {b.key} rounded up to a power of two ({b.count} × {b.nbytes:,} B requested)",
                              "PowerOf2Ceil(bytes) − bytes",
                              "ATen/core/CachingHostAllocator.h allocate (PowerOf2Ceil); " + b.source,
                              phase=phase, kind=TermKind.EXACT))
    return terms


def pinned_param_partitions(numels: Iterable[int], N: int, element_size: int) -> int:
    """Bytes the host allocator keeps cached for zero.Init's per-parameter pinned partitions.

    With offload_param cpu and pin_memory, each parameter's partition (ceil(numel / N) elements) is
    pinned on its own (partition_parameters.py _partition_param) and later replaced by a view of the
    flat pinned buffer; the freed blocks stay in the CachingHostAllocator's free lists (bound: a
    later pinned request of the same power-of-two size can reuse one).
    """
    return pinned_bytes(ceil_div(n, N) * element_size for n in numels)


# --------------------------------------------------------------------------- runtime baseline

# Measured here (benchmarks/load_calibration.json "runtime"): RSS of a CPU-only process after
# `import torch, deepspeed` (torch 2.13 CPU, DeepSpeed 0.19.8, Python 3.11), and what
# deepspeed.initialize of a tiny model adds (gloo process group, comm op, engine objects).
RUNTIME_IMPORT_BYTES = 243 * MIB  # measured 242.2 MiB
RUNTIME_INIT_BYTES = 130 * MIB  # measured 129.6 MiB
# What `import transformers; from transformers import Trainer` adds to that process (benchmarks/host_baseline.json
# "imports": RSS 240.8 MiB after torch + deepspeed, 365.3 MiB with transformers 5.24 and its Trainer): every
# run of a Hugging Face model imports it to build the model, Trainer or not.
RUNTIME_TRANSFORMERS_BYTES = 125 * MIB  # measured 124.5 MiB
# The CUDA runtime's host memory once the first CUDA tensor exists: pytorch/pytorch#113326
# (322,040 kB -> 2,056,600 kB RSS with CUDA 11.8: +1.65 GiB) and #106511 (+1.18 GiB at the first
# CUDA use). The larger is taken: an allowance, not a measurement of the user's stack.
CUDA_HOST_BYTES = (2_056_600 - 322_040) * 1024
# A forked data-loader worker's private memory (USS) while it serves batches: benchmarks/host_baseline.json
# "worker" (4 workers forked from a process that imported torch, DeepSpeed and transformers: 9.6-12.5 MiB
# each; their RSS, 378 MiB each, counts the parent's pages they share copy-on-write again). What a worker
# copies later by touching the dataset's Python objects (pytorch/pytorch#13246, copy-on-read) grows with the
# dataset held in the process and is not counted.
DATALOADER_WORKER_BYTES = 13 * MIB  # measured 12.5 MiB (the largest of 4)


def runtime_baseline_terms(phase: Phase, cuda: bool = True, dataloader_workers: int = 0) -> list[Term]:
    """Host RAM per GPU process before any tensor: interpreter, torch, DeepSpeed, transformers, the CUDA runtime,
    and (``dataloader_workers``, the Trainer's dataloader_num_workers) the data-loader worker processes it forks:
    those exist only while the training loop iterates its data loader, so the caller passes them for the train
    and save phases, never for loading."""
    terms = [
        Term("overhead", Resource.CPU, RUNTIME_IMPORT_BYTES, "runtime_import",
             "Python + torch + DeepSpeed imported (RSS per process)", "measured RSS after import",
             "benchmarks/load_calibration.md (runtime case, CPU build)", phase=phase, kind=TermKind.ALLOWANCE),
        Term("overhead", Resource.CPU, RUNTIME_TRANSFORMERS_BYTES, "runtime_transformers",
             "transformers and its Trainer imported (RSS per process)", "measured RSS growth of the import",
             "benchmarks/host_baseline.json (imports, CPU build)", phase=phase, kind=TermKind.ALLOWANCE),
        Term("overhead", Resource.CPU, RUNTIME_INIT_BYTES, "runtime_deepspeed",
             "deepspeed.initialize runtime (process group, comm ops, engine) per process",
             "measured RSS growth of a tiny-model initialize",
             "benchmarks/load_calibration.md (runtime case)", phase=phase, kind=TermKind.ALLOWANCE),
    ]
    if cuda:
        terms.append(Term("overhead", Resource.CPU, CUDA_HOST_BYTES, "runtime_cuda",
                          "CUDA runtime and kernels in host memory per process",
                          "RSS growth at the first CUDA tensor",
                          "pytorch/pytorch#113326 (+1.65 GiB), #106511 (+1.18 GiB)", phase=phase,
                          kind=TermKind.ALLOWANCE))
    if dataloader_workers > 0:
        terms.append(Term("overhead", Resource.CPU, dataloader_workers * DATALOADER_WORKER_BYTES,
                          "dataloader_workers",
                          f"{dataloader_workers} data-loader worker processes forked by this process (private "
                          "memory; what they copy of the dataset later is not counted)",
                          f"{dataloader_workers} × {DATALOADER_WORKER_BYTES // MIB} MiB (measured USS per worker)",
                          "torch.utils.data DataLoader num_workers (Trainer dataloader_num_workers); "
                          "benchmarks/host_baseline.json (worker)", phase=phase, kind=TermKind.ALLOWANCE))
    return terms


def offloaded_input_terms(mode: ActivationOffload, offloaded: tuple[tuple[int, int], ...]) -> list[Term]:
    """The offloaded layer inputs in host memory per rank: each a pinned block, a power of two (pinned_block_bytes);
    all held at the end of the forward."""
    requested = sum(size * count for size, count in offloaded)
    if not requested:
        return []
    held = sum(pinned_block_bytes(size) * count for size, count in offloaded)
    layers = sum(count for _, count in offloaded)
    return [Term("activations", Resource.CPU, held, "offloaded_layer_inputs",
                 f"checkpointed layer inputs offloaded to host memory ({layers} layers, {requested / 2**30:.2f} GiB "
                 f"requested; pinned blocks rounded to a power of two)",
                 "layers × e·s·b·h, each block rounded up to a power of two",
                 f"{OFFLOADERS[mode].source}; ATen/core/CachingHostAllocator.h allocate")]
