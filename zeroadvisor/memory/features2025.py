"""DeepSpeed's 2025 features beyond torch_autocast and AutoEP: what each changes in memory, counted where
DeepSpeed's code says how much, and named as uncounted (the verdict then unknown) where it does not.

Paths are relative to ``deepspeed/`` (DeepSpeed 0.19.8).

* SuperOffload (``zero_optimization.offload_optimizer.super_offload``, stage 3 only: engine.py
  _configure_zero_optimizer picks runtime/superoffload/superoffload_stage3.py SuperOffloadOptimizer_Stage3 in the
  stage-3 branch). A subclass of DeepSpeedZeroOptimizer_Stage3 that allocates nothing more on the GPU: the
  sub-groups' placement is stage3.py's (``ratio``: memory/states.py _stage3_sub_groups), the gradient partitions
  its flat buffer (partition_grads uses the same ``__param_id_to_grad_partition``). What it adds is on the host:
  superoffload_utils.py SuperOffloadCPUOptimizer spawns one worker process per rank (``mp.get_context('spawn')``)
  that imports torch and DeepSpeed, builds DeepSpeedCPUAdam and pre-allocates a gradient scratch buffer of
  ``max_grad_numel`` fp32 elements, pinned unless offload_optimizer.pin_memory is false
  (_allocate_worker_grad_buffer). ``max_grad_numel`` is the largest sub-group
  (SuperOffloadOptimizer_Stage3._create_fp16_sub_groups: parameters are added until the sub-group reaches
  sub_group_size, so it can pass it by less than one parameter partition). ``async_step`` hands each CPU
  sub-group's fp32 partition and gradient to the worker through a torch.multiprocessing queue, which moves them
  into shared memory (a copy; the pinned gradient's old block stays in torch's pinned cache: held twice;
  ``superoffload_shared_grads``). The Adam moments of the CPU sub-groups live in the worker instead of the main
  process (its _optimizer_step skips CPU sub-groups): the
  same bytes, already counted. ``cpuadam_cores_perc`` splits the cores, not memory.
* ZenFlow (``zero_optimization.zenflow``): runtime/zenflow/zenflow_stage_1_and_2.py keeps the top
  ``topk_ratio`` of each matrix's gradient columns on the GPU (``_num_selected_columns``) with their own Adam
  moments, an int32 index buffer and a gradient buffer per bucket (``index_buffer``, ``grad_buffer``,
  ``sum_buffer``), and CPU copies of the selected moments when ``offload`` (``exp_avg_cpu_data``). The column
  count of every parameter matrix is not in what the tool knows of a model: not counted.
* DeepCompile (``compile.deepcompile``): compile/passes/selective_gather.py keeps parameters gathered while the
  profiled free memory allows, and the offload passes (``offload_activation``, ``offload_opt_states``,
  ``offload_parameters``) and ``free_activation`` move or free tensors by a budget measured at run time
  (compile/profilers/): the memory is what the run's own profile decides, not counted.
* ``stage3_module_granularity_threshold`` (stage 3): runtime/zero/parameter_offload.py marks modules whose
  parameter count over (1 + descendants) is below the threshold as leaf modules (z3_leaf_module) and fetches each
  whole, so the gathered working set is the largest such module, which depends on the module tree: not counted.
* ``activation_checkpointing.partition_activations`` / ``cpu_checkpointing``: read only by
  runtime/activation_checkpointing/checkpointing.py ``configure``, which the model's own code calls
  (Megatron-DeepSpeed); the engine never does, and transformers checkpoints with torch.utils.checkpoint, which
  ignores both. With DeepSpeed's checkpoint, each checkpointed input is split over the model-parallel ranks
  (partition_activations: ``partition_size = numel / mp_size``) and kept on the CPU (cpu_checkpointing:
  ``partition.cpu()``). Which checkpoint the model uses is not known here: uncounted where it changes memory
  (checkpointing on, and the CPU copy or a model-parallel degree above 1).
* ALST's TiledMLP and tiled loss (runtime/sequence_parallel/ulysses_sp.py TiledMLP, TiledFusedLogitsLoss,
  sequence_tiled_compute) have no config key: the model's code applies them, so the config cannot say they
  are on. Where a trainer's file does, they are read: its tiled loss (memory/liger.py, memory/cut_cross_entropy.py:
  axolotl's plugins) and axolotl's ``tiled_mlp`` (memory/activations.py tiled_mlp_bytes).

Features that can only lower the counted memory (the DeepSpeed checkpoint's partitions, DeepCompile's offload
passes) make a "does not fit" unknown too (``lowers``): a run counted without them may fit with them.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroadvisor.deepspeed.settings import DeepSpeedSettings
from zeroadvisor.memory import host as host_memory
from zeroadvisor.memory.options import Option
from zeroadvisor.memory.settings import Settings
from zeroadvisor.memory.states import largest_trainable, optimized, partition_stage3
from zeroadvisor.memory.terms import Term, ceil_div
from zeroadvisor.model.spec import ModelSpec
from zeroadvisor.vocab import Checkpointing, Device, Resource, TermKind

SUPEROFFLOAD_SOURCE = "runtime/superoffload/superoffload_utils.py SuperOffloadCPUOptimizer"
FP32 = 4


@dataclass(frozen=True, slots=True)
class Features2025:
    """The 2025 features a config turns on, as DeepSpeed 0.19.8 reads them (deepspeed/config_model.py)."""

    super_offload: bool = False
    zenflow: bool = False
    deepcompile: bool = False
    compile_passes: tuple[str, ...] = ()  # DeepCompile's memory passes written on
    module_granularity_threshold: int = 0
    partition_activations: bool = False
    cpu_checkpointing: bool = False


def read_features(ds: DeepSpeedSettings) -> Features2025:
    threshold = ds.zero_config.module_granularity_threshold
    ac = ds.activation_checkpointing
    return Features2025(super_offload=ds.zero_config.offload_optimizer.super_offload is True,
                        zenflow=ds.zenflow.enabled, deepcompile=ds.compile.deepcompile,
                        compile_passes=ds.compile.offload_passes,
                        module_granularity_threshold=threshold if isinstance(threshold, int) else 0,
                        partition_activations=ac.partition_activations, cpu_checkpointing=ac.cpu_checkpointing)


def uncounted_features(f: Features2025, option: Option, checkpointing: Checkpointing,
                       tensor: int) -> tuple[tuple[str, ...], bool]:
    """The features ``option`` runs whose memory is not counted (vocab.UNCOUNTED_WORDS keys), and whether one of
    them can only lower it (then a "does not fit" is unknown as well)."""
    out: list[str] = []
    lowers = False
    if f.zenflow and option.stage >= 1:  # ZenFlowZeroOptimizer (stage 1/2) and the stage-3 ZenFlow engine
        out.append("zenflow")
    if f.deepcompile:
        out.append("deepcompile")
        lowers = bool(f.compile_passes)
    if f.module_granularity_threshold > 0 and option.stage == 3:
        out.append("module_granularity")
    # DeepSpeed's checkpoint splits or moves only what is checkpointed; partitions over one rank are whole
    if checkpointing != Checkpointing.NONE and (f.cpu_checkpointing or (f.partition_activations and tensor > 1)):
        out.append("deepspeed_checkpointing")
        lowers = True
    return tuple(out), lowers


def superoffload_terms(f: Features2025, s: Settings, option: Option, P: int, N: int, spec: ModelSpec,
                       largest: int) -> list[Term]:
    """SuperOffload's worker process on the host, per rank (stage 3 only): its runtime and its gradient scratch
    buffer of the largest sub-group in fp32. ``P``: the parameters on this GPU; ``largest``: the largest
    parameter (its partition is how far a sub-group can pass sub_group_size)."""
    if not f.super_offload or option.stage != 3:
        return []
    part = partition_stage3(optimized(spec, P), N)
    sub = min(s.sub_group_size, part) if s.sub_group_size > 0 else part
    # _create_fp16_sub_groups closes a sub-group at the parameter that reaches sub_group_size
    sub_bound = min(sub + ceil_div(largest_trainable(spec, largest), N) - 1, part) if sub < part else part
    pinned = s.offload_optimizer_pin_memory
    expected = host_memory.pinned_block_bytes(FP32 * sub) if pinned else FP32 * sub
    bound = host_memory.pinned_block_bytes(FP32 * sub_bound) if pinned else FP32 * sub_bound
    how = "pinned, a power of two (CachingHostAllocator)" if pinned else "pageable"
    terms = [Term("buffers", Resource.CPU, expected, "superoffload_grad_buffer",
                  f"SuperOffload worker's fp32 gradient scratch of the largest sub-group ({sub:,} elements; {how})",
                  "4 B × min(sub_group_size, partition), up to one parameter partition more",
                  f"{SUPEROFFLOAD_SOURCE} _allocate_worker_grad_buffer(max_grad_numel)",
                  kind=TermKind.BOUND if bound > expected else TermKind.EXACT,
                  bound=bound if bound > expected else None),
             Term("overhead", Resource.CPU, host_memory.RUNTIME_IMPORT_BYTES, "superoffload_worker_runtime",
                  "SuperOffload worker process: Python + torch + DeepSpeed imported (spawned per rank)",
                  "measured RSS after import", f"{SUPEROFFLOAD_SOURCE}.__init__ (mp spawn); "
                  "benchmarks/load_calibration.md (runtime case)", kind=TermKind.ALLOWANCE)]
    cpu_elements = _cpu_sub_group_elements(s, option, part, sub)
    if pinned and cpu_elements:
        # async_step hands fp32_param.data and its .grad to the worker through a torch.multiprocessing queue: the
        # pickler moves each CPU storage into shared memory (storage._share_fd_cpu_: a new shm block, the data
        # copied, the storage swapped; measured on CPU: the tensor is_shared() after put, its data_ptr moved, RSS
        # unchanged for a pageable tensor, whose old block is freed). The fp32 master is pageable
        # (stage3.py _create_fp32_partitions: .to('cpu').clone()); the fp32 gradient is pinned
        # (initialize_optimizer_states: pin_memory(subgroup_gradient_buffer)), and a freed pinned block goes back
        # to torch's CachingHostAllocator cache, which keeps it: the gradient is held twice.
        terms.append(Term("buffers", Resource.CPU, FP32 * cpu_elements, "superoffload_shared_grads",
                          f"fp32 gradients of the CPU sub-groups moved to shared memory for the worker "
                          f"({cpu_elements:,} elements; the pinned originals stay in torch's pinned cache)",
                          "4 B × partition elements in CPU sub-groups",
                          f"{SUPEROFFLOAD_SOURCE}.async_step; torch multiprocessing/reductions.py reduce_storage",
                          kind=TermKind.BOUND))
    if pinned:  # pinning the scratch buffer initialises the CUDA runtime in the worker too
        terms.append(Term("overhead", Resource.CPU, host_memory.CUDA_HOST_BYTES, "superoffload_worker_cuda",
                          "SuperOffload worker process: CUDA runtime in host memory (pin_empty)",
                          "RSS growth at the first CUDA use", "pytorch/pytorch#113326, #106511",
                          kind=TermKind.ALLOWANCE))
    return terms


def _cpu_sub_group_elements(s: Settings, option: Option, part: int, sub: int) -> int:
    """The partition's elements in the sub-groups the CPU steps (stage3.py _create_fp32_partitions: sub-group i
    stays on the GPU iff i < int((1 - ratio)·nsub); memory/states.py _stage3_sub_groups)."""
    if option.offload_optimizer != Device.CPU or not part:
        return 0
    nsub = ceil_div(part, sub) if sub else 1
    on_gpu = int((1 - s.offload_optimizer_ratio) * nsub)
    return part * (nsub - on_gpu) // nsub


__all__ = ["Features2025", "read_features", "superoffload_terms", "uncounted_features"]
