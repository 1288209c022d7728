"""Communication buffers, stage-3 gathered parameters, offload staging buffers, and the overhead allowance."""

from __future__ import annotations

from zeroadvisor.memory import bytes as B
from zeroadvisor.memory.autocast import Autocast
from zeroadvisor.memory.options import Option
from zeroadvisor.memory.persistence import persistent
from zeroadvisor.memory.settings import Settings
from zeroadvisor.memory.states import (
    largest_trainable,
    master_bytes,
    optimized,
    partition_stage3,
    partition_stage12,
    uses_bf16_optimizer,
)
from zeroadvisor.memory.terms import Term, ceil_div
from zeroadvisor.model.spec import ModelSpec
from zeroadvisor.vocab import Device, Resource, TermKind

# a flat copy of gradients built for one all-reduce (engine.py and stage_1_and_2.py allreduce_bucket: flatten)
ALLREDUCE_COPY_KEY = "allreduce_bucket"
# engine.py MEMORY_OPT_ALLREDUCE_SIZE: a code constant (not a config key) - the element count of
# the flat bucket buffered_allreduce_fallback builds when the engine itself reduces gradients.
ENGINE_ALLREDUCE_ELEMENTS = 500_000_000

# Overhead allowance (an assumption, not a DeepSpeed allocation): the card's memory outside the caching allocator
# (the CUDA context and module images, NCCL's buffers, other cudaMalloc), 1 GiB. Fitted on 80 public CUDA OOM
# messages from 69 sources, none a field-suite source (total - free - reserved; benchmarks/fit_allocator.py,
# allocator_fit.md): the median of per-source medians is 1.000 GiB (per-source p25-p75 0.56-1.46), and 1 GiB
# predicts the held-out sources as well (median absolute error 0.50 GiB, the fit's 0.51); multi-GPU runs read
# higher (1.51 GiB), but a multi-GPU constant predicts their held-out sources worse (0.94 GiB against 0.66), so
# there is one. Besides it, the allocator's fragmentation of what is re-allocated every step (memory/allocator.py).
CUDA_CONTEXT_BYTES = 2**30
CONTEXT_KEY = "cuda_context"
FP32_BYTES = B.DTYPE_BYTES["fp32"]
OVERHEAD_ASSUMPTION = ("overhead = 1 GiB (CUDA context, NCCL/cuBLAS workspaces) + allocator fragmentation: 10% of "
                       "what is freed and re-allocated every step (activations, gathered parameters, temporaries; "
                       "up to 10% of every GPU row), a 2 MiB page each with expandable_segments: an allowance, not "
                       "a DeepSpeed allocation")


def largest_layer(spec: ModelSpec, notes: list[str]) -> int:
    """Largest number of parameters owned by one module (ZeRO-3 gathers a module at a time)."""
    if spec.largest_layer_parameters:
        return spec.largest_layer_parameters
    h, f, v = spec.hidden_size, spec.intermediate_size, spec.vocab_size
    candidates = []
    if h and v:
        candidates.append(v * h)  # embedding / LM head
    if h and f:
        candidates.append(h * f)  # one MLP projection
    if h:
        candidates.append(h * h)
    if candidates:
        value = max(candidates)
        notes.append(f"largest layer not given: taken as max(V·h, h·ffn, h²) = {value:,} parameters")
        return value
    notes.append("largest layer unknown (give largest_layer_parameters or an hf_config): stage-3 gathered "
                 "parameters count only the prefetch bucket, and stage-1/2 offload staging buffers are omitted")
    return 0


def gathered_terms(s: Settings, opt: Option, P: int, N: int, spec: ModelSpec, notes: list[str],
                   autocast: Autocast | None = None, head_gradient: int = 0) -> list[Term]:
    """Stage 3: full parameters gathered for compute, on the GPU, beyond the partition. Under torch_autocast the
    flat all-gather buffer is in the Linear weights' comm dtype (memory/autocast.py), the gathered copies fp32.
    ``head_gradient``: the LM head's gradient the activations' loss peak already holds (memory/activations.py
    Activations.head_gradient)."""
    if opt.stage != 3:
        return []
    w = B.nbytes(s.precision)
    Lp = min(largest_layer(spec, notes), P)
    # partitioned_param_coordinator.py PartitionedParameterCoordinator: fetch_sub_module gathers the current module
    # whole; then, while __n_available_params < max_live_parameters, whole parameters are prefetched from the trace
    # until min(max_live - n_available, prefetch_bucket_size) elements (the last one overshoots). Every module
    # entered prefetches, also those owning no parameters or only persistent ones, while only the others
    # consume, so the lead grows to max_live. __params_to_release keeps every parameter used again within
    # max_reuse_distance elements of the trace (at the forward/backward turn and in a checkpointed layer's
    # recompute). Persistent parameters are never released (counted with the parameters). Measured on CPU with
    # real DeepSpeed (benchmarks/working_set.md): never above min(P_np, max(max_live, reuse) + L_p), at most 1.10x.
    pers = persistent(spec, s.param_persistence_threshold, s.model_persistence_threshold, N, [])
    P_np = max(P - pers.elements, 0)
    # autograd makes param.grad only for parameters that require it, and only they get the hook that moves it
    # into the IPG bucket (stage3.py create_reduce_and_remove_grad_hooks: ``if param.requires_grad``): a frozen
    # embedding or base never holds one, so the largest full gradient is the largest trainable parameter's
    # (PEFT: the largest adapter tensor). Exact for a known adapter layout.
    Lg = largest_trainable(spec, Lp)
    kept = max(s.max_live_parameters, s.max_reuse_distance) if s.prefetch_bucket_size > 0 else s.max_reuse_distance
    live = max(min(Lp, P_np), min(P_np, kept + Lp))
    if s.prefetch_bucket_size > 0:
        how = (f"{s.precision} gathered parameters: up to max(stage3_max_live_parameters, stage3_max_reuse_distance) "
               f"{kept:,} kept gathered + one more module (largest {Lp:,}), at most the non-persistent {P_np:,}")
        formula = f"{w} B × min(P_np, max(max_live, max_reuse) + L_p)"
    else:
        how = (f"{s.precision} gathered parameters: the current module (largest {Lp:,}) and those reused within "
               f"stage3_max_reuse_distance {kept:,}; prefetch off (bucket 0)")
        formula = f"{w} B × min(P_np, max_reuse + L_p)"
    terms = [
        Term("gathered_parameters", Resource.GPU, w * live, "gathered", how, formula,
             "zero/partitioned_param_coordinator.py fetch_sub_module (prefetch loop, __n_available_params)",
             kind=TermKind.BOUND),
    ]
    if head_gradient and head_gradient >= w * Lg:
        # The loss made the head's gradient itself and its peak holds it (TRL's fused or chunked head, Liger): that
        # tensor is what reduce_partition_and_remove_grads receives for the head, and no layer's gradient is larger,
        # nor live with the loss's peak (the others come later in backward, the loss's temporaries freed): counted
        # once, in the activations
        notes.append(f"ZeRO-3's full gradient before its reduce: the LM head's ({head_gradient:,} B), which the loss "
                     "makes itself and its peak holds (activations): not counted a second time")
    else:
        terms.append(
            Term("gathered_parameters", Resource.GPU, w * Lg, "gathered_grad",
                 f"{s.precision} full gradient of the largest layer before it is reduced" if Lg == Lp else
                 f"{s.precision} full gradient of the largest trainable parameter ({Lg:,}; frozen ones make none) "
                 "before it is reduced", f"{w} B × L_p" if Lg == Lp else f"{w} B × largest trainable param",
                 "zero/stage3.py reduce_partition_and_remove_grads (param.grad before the IPG copy)"))
    if s.prefetch_bucket_size > 0:
        # a prefetch of several parameters is one coalesced all-gather into a flat buffer, which its handle holds
        # beside the parameters' copies until the last of them is used (partition_parameters.py
        # _all_gather_coalesced / AllGatherCoalescedHandle); measured: benchmarks/working_set.md
        flat = min(P_np, min(s.prefetch_bucket_size, s.max_live_parameters) + Lp)
        # torch_autocast: the Linear weights' comm dtype (partition_parameters.py get_allgather_dtype)
        fw, fdt = (autocast.comm_bytes, autocast.comm_dtype or "fp32") if autocast else (w, s.precision)
        terms.append(Term("gathered_parameters", Resource.GPU, fw * flat, "gathered_flat",
                          f"{fdt} flat all-gather buffer of one prefetch (bucket + the parameter that "
                          "overshoots it)", f"{fw} B × min(P_np, min(bucket, max_live) + L_p)",
                          "zero/partition_parameters.py _all_gather_coalesced (flat buffer held by the handle)",
                          kind=TermKind.BOUND))
    frozen_int8 = s.quantized_nontrainable_weights and spec.trainable_parameters is not None
    if s.quantized_weights or frozen_int8:
        # ZeRO++ qwZ: the partitions are quantized to int8 and all-gathered into a flat int8 buffer of the
        # gathered numel (partition_parameters.py _all_gather_coalesced: torch.empty(partition_sz * world_size,
        # dtype=torch.int8)), dequantized into the 16-bit parameters above; one fp32 scale per quantization
        # group (CUDAQuantizer.target_group_size 8000 elements; the adaptive grouping may pick smaller groups).
        which = "every" if s.quantized_weights else "every frozen"
        terms += [
            Term("buffers", Resource.GPU, live, "qwz_allgather", f"ZeRO++ int8 all-gather buffer ({which} parameter "
                 "gathered quantized)", "1 B × gathered elements",
                 "zero/partition_parameters.py _all_gather_coalesced (quantized flat_tensor)", kind=TermKind.BOUND),
            Term("buffers", Resource.GPU, B.DTYPE_BYTES["fp32"] * ceil_div(live, B.ZEROPP_QUANT_GROUP), "qwz_scales",
                 "ZeRO++ fp32 quantization scales of the gathered parameters",
                 f"{B.DTYPE_BYTES['fp32']} B per {B.ZEROPP_QUANT_GROUP:,} elements",
                 "zero/partition_parameters.py CUDAQuantizer.quantize (quant_scale_buffer)", kind=TermKind.ALLOWANCE),
        ]
    return terms


def buffer_terms(s: Settings, opt: Option, P: int, N: int, spec: ModelSpec, notes: list[str],
                 gpus_per_node: int = 1, autocast: Autocast | None = None, loss_freed: int = 0) -> list[Term]:
    """Reduce buckets, staging and swap buffers (GPU and host). ``gpus_per_node``: the local world of
    ZeRO++ qgZ's two-level all-to-all (1 gives its bound). Under torch_autocast ZeRO keeps one IPG bucket per
    comm dtype: the Linear weights' and fp32 (memory/autocast.py). ``loss_freed``: what the activations' peak holds
    for the LM head and loss beyond the layers (memory/activations.py head_share), freed before backward reduces
    its first bucket."""
    w = B.nbytes(s.precision)
    a = B.nbytes(s.grad_accum_dtype)
    c = B.nbytes(s.communication_dtype)
    rbs = s.reduce_bucket_size
    T = optimized(spec, P)  # the elements that produce gradients (PEFT: the adapters)
    terms: list[Term] = []

    if opt.stage == 0 or uses_bf16_optimizer(s, opt):
        g = a if uses_bf16_optimizer(s, opt) else w
        # buffered_allreduce_fallback buckets the gradients that exist (param.grad), the trainable parameters'
        n = min(T, ENGINE_ALLREDUCE_ELEMENTS)
        terms.append(Term("buffers", Resource.GPU, g * n, ALLREDUCE_COPY_KEY,
                          f"flat all-reduce bucket of min({'P' if T == P else 'trainable'}, "
                          f"{ENGINE_ALLREDUCE_ELEMENTS:,}) gradient elements",
                          f"{g} B × min({'P' if T == P else 'P_trainable'}, MEMORY_OPT_ALLREDUCE_SIZE)",
                          "engine.py buffered_allreduce_fallback -> allreduce_bucket (flatten)"))
        return terms

    if opt.stage in (1, 2):
        return terms + _stage12_buffers(s, opt, P, N, spec, notes, T, autocast, loss_freed)

    # stage 3. The IPG buffer is torch.empty(reduce_bucket_size) at init whatever trains (exact, also with PEFT:
    # _setup_for_real_optimizer does not size it by the trainable elements)
    if s.contiguous_gradients:
        terms.append(_stage3_ipg(s, c, autocast))
    if s.reduce_scatter:
        terms.append(reduce_scatter_term(c, rbs, T))
    if s.quantized_gradients:
        largest = largest_trainable(spec, min(largest_layer(spec, notes), P))
        terms.append(qgz_term(largest or min(rbs, T), gpus_per_node))
    if opt.offload_param == Device.NVME:
        n = s.offload_param_buffer_count * s.offload_param_buffer_size
        terms.append(Term("buffers", Resource.CPU, w * n, "param_swap_buffers",
                          f"pinned parameter swap buffers: buffer_count {s.offload_param_buffer_count} × buffer_size "
                          f"{s.offload_param_buffer_size:,} × {w} B", f"{w} B × buffer_count × buffer_size",
                          "swap_tensor/partitioned_param_swapper.py AsyncPartitionedParameterSwapper (buffers)"))
    if opt.offload_optimizer == Device.NVME:
        part = partition_stage3(T, N)  # the optimizer's sub-groups: trainable parameters only
        sub = min(s.sub_group_size, part) if s.sub_group_size > 0 else part
        M = master_bytes(s)
        n = s.offload_optimizer_buffer_count * sub
        terms.append(Term("buffers", Resource.CPU, M * n, "optimizer_swap_buffers",
                          f"pinned optimizer swap buffers: buffer_count {s.offload_optimizer_buffer_count} × largest "
                          f"sub-group {sub:,} × {M} B", f"{M} B × buffer_count × min(sub_group_size, P/N)",
                          "swap_tensor/optimizer_utils.py OptimizerSwapper (SwapBufferManager)"))
    return terms


def _stage3_ipg(s: Settings, c: int, autocast: Autocast | None) -> Term:
    """Stage 3's IPG flat buffer(s), allocated at init: one of ``c`` bytes per element, or under torch_autocast
    one per comm dtype, each in its dtype (stage3.py: ipg_buckets keyed by get_all_comm_dtypes, each buffer
    torch.empty(reduce_bucket_size, dtype=key)): the Linear weights' and fp32."""
    rbs = s.reduce_bucket_size
    src = "zero/stage3.py _setup_for_real_optimizer (ipg bucket.buffer)"
    if autocast:
        a = autocast.comm_bytes
        return Term("buffers", Resource.GPU, (a + FP32_BYTES) * rbs, "ipg_bucket",
                    f"IPG flat buffers, one per torch_autocast comm dtype: reduce_bucket_size {rbs:,} × "
                    f"({a} + {FP32_BYTES}) B", f"({a} + {FP32_BYTES}) B × reduce_bucket_size", src + " by comm dtype")
    return Term("buffers", Resource.GPU, c * rbs, "ipg_bucket",
                f"IPG flat buffer: reduce_bucket_size {rbs:,} × {c} B, allocated at init (not doubled by "
                "overlap_comm at stage 3)", f"{c} B × reduce_bucket_size", src)


def _stage12_buffers(s: Settings, opt: Option, P: int, N: int, spec: ModelSpec, notes: list[str], T: int,
                     autocast: Autocast | None, loss_freed: int) -> list[Term]:
    """Stage 1/2: the reduce bucket(s), the reduction's flat copy and the offload's staging buffers."""
    w, a, c = B.nbytes(s.precision), B.nbytes(s.grad_accum_dtype), B.nbytes(s.communication_dtype)
    rbs, overlap = s.reduce_bucket_size, s.overlap_comm_at(opt.stage)
    terms: list[Term] = []
    offload = opt.offload_optimizer != Device.NONE
    # _gradient_reduction_buffer_dtype: the grad-accum dtype at stage 1 with a separate accumulator
    rd = a if (opt.stage == 1 and s.grad_accum_dtype != s.precision) else w
    if s.contiguous_gradients or offload:  # offload forces contiguous_gradients (stage_1_and_2.py __init__)
        # one bucket per comm dtype (autocast: the Linear weights' and fp32), each in the reduction dtype
        copies = (2 if overlap else 1) * (2 if autocast else 1)
        terms.append(Term("buffers", Resource.GPU, copies * rd * rbs, "ipg_bucket",
                          f"reduce bucket{'s' if copies > 1 else ''}: {copies} × reduce_bucket_size {rbs:,} "
                          f"× {rd} B{' (overlap_comm double buffer)' if overlap else ''}"
                          f"{' (one per torch_autocast comm dtype)' if autocast else ''}",
                          f"{copies} × {rd} B × reduce_bucket_size",
                          "zero/stage_1_and_2.py DeepSpeedZeroOptimizer.setup_buckets"))
    reduce_copy = s.reduce_scatter and s.multi_rank_bucket_allreduce and N > 1
    # the largest trainable parameter, where a term needs it: exact with PEFT's adapter layout; otherwise the largest
    # layer bounds it (largest_layer notes the bound)
    Lp = largest_trainable(spec, min(largest_layer(spec, notes), P)) if reduce_copy or offload else 0
    if reduce_copy:
        terms.append(_stage12_reduce_copy(rd, c, rbs, T, N, Lp, loss_freed))
    if offload:
        # __init__: largest_param_numel over bit16_groups, the trainable parameters only
        pinned = " (pinned)" if s.offload_optimizer_pin_memory else ""
        terms += [
            Term("buffers", Resource.GPU, w * Lp, "offload_gpu_staging",
                 "GPU gradient staging buffer (largest parameter)",
                 f"{w} B × largest param", "zero/stage_1_and_2.py __init__ (temp_grad_buffer_for_gpu_offload)"),
            Term("buffers", Resource.CPU, w * Lp, "offload_cpu_staging", f"host gradient staging buffer{pinned}",
                 f"{w} B × largest param", "zero/stage_1_and_2.py __init__ (temp_grad_buffer_for_cpu_offload)"),
        ]
    return terms


def _stage12_reduce_copy(rd: int, c: int, rbs: int, T: int, N: int, largest: int, loss_freed: int) -> Term:
    """Stage 1/2 with reduce_scatter and use_multi_rank_bucket_allreduce (both default on): average_tensor hands the
    bucket's gradient slices, one per destination rank (contiguous ranges to one rank merged), to
    allreduce_and_scatter, whose allreduce_bucket joins them into one flat tensor (``self.flatten``: torch's
    flatten_dense_tensors, a view of a single slice and a ``cat`` of several), in the bucket's dtype, then into the
    communication dtype where it differs (allreduce_bucket also forces fp32 under DeepSpeed's sequence parallelism,
    sequence_parallel_size > 1: not counted, the layout does not reach here). So the copy exists where a bucket spans
    two partitions: never on one rank (measured: benchmarks/zero2_reduce.md, the flat copy's allocation appears
    over 2 ranks and not on 1), at least once per backward on N > 1 ranks (every partition boundary falls in some
    bucket); a parameter larger than the bucket is reduced alone (extra_large_param_to_reduce), and is copied where
    it is larger than a partition too (it then spans two; inside one, its one slice is a view). Without
    use_multi_rank_bucket_allreduce each rank's slices (one contiguous range) are reduced on their own: no copy.
    Built and freed in backward: the first bucket fills after the LM head's backward has freed the loss's tensors, so
    the copy is expected beyond the activations' peak only by what it exceeds them by (``loss_freed``), and bounded
    by itself."""
    n = min(T, rbs)
    if largest > rbs and largest > partition_stage12(T, N):
        n = min(T, largest)
    cast = c if c != rd else 0
    copy = (rd + cast) * n
    expected = max(0, copy - loss_freed)
    beyond = " beyond the loss's tensors freed before it" if expected < copy else ""
    return Term("buffers", Resource.GPU, expected, ALLREDUCE_COPY_KEY,
                f"flat copy of one bucket's gradients for the reduction ({n:,} elements"
                f"{f', then in {c}-byte communication dtype' if cast else ''}){beyond}",
                f"max(0, ({rd} B{f' + {c} B' if cast else ''}) × min(P_trainable, reduce_bucket_size, or a larger "
                "parameter spanning two partitions) - the loss's share of the activations)",
                "zero/stage_1_and_2.py average_tensor -> allreduce_and_scatter -> allreduce_bucket (self.flatten)",
                kind=TermKind.BOUND if expected < copy else TermKind.EXACT,
                bound=copy if expected < copy else None)


def reduce_scatter_term(c: int, rbs: int, T: int) -> Term:
    """Stage 3's reduce-scatter copy of one IPG bucket of ``c``-byte gradients, ``T`` trainable elements."""
    # the bucket holds trainable gradients only (frozen parameters have no hook), and
    # reduce_independent_p_g_buckets_and_remove_grads flushes it before a parameter would overflow it, so it
    # holds at most reduce_bucket_size elements and never more than every trainable element (a LoRA run's few
    # million). Not counted, as before: a single parameter larger than the bucket goes through alone, and its
    # copy is that parameter's size.
    n = min(T, rbs)
    if n == rbs:
        return Term("buffers", Resource.GPU, c * rbs, "reduce_scatter_copy",
                    "reduce-scatter flat copy of a full bucket", f"{c} B × reduce_bucket_size",
                    "comm/coalesced_collectives.py reduce_scatter_coalesced (torch.cat of the bucket)")
    return Term("buffers", Resource.GPU, c * n, "reduce_scatter_copy",
                f"reduce-scatter flat copy of one bucket of trainable gradients ({n:,} elements)",
                f"{c} B × min(P_trainable, reduce_bucket_size)",
                "comm/coalesced_collectives.py reduce_scatter_coalesced (torch.cat of the bucket); "
                "zero/stage3.py reduce_independent_p_g_buckets_and_remove_grads", kind=TermKind.BOUND)


def qgz_term(largest: int, gpus_per_node: int) -> Term:
    """ZeRO++ qgZ (stage3.py __avg_scatter_grads -> comm/coalesced_collectives.py all_to_all_quant_reduce), per
    gradient tensor of the bucket: int4 swizzled copy and its all-to-all receive buffer (n/2 B each), then the
    intra-node reduced int4 pair (n/(2g) B each) and its fp16 dequantization (2n/g B; dequantize<__half>). One
    tensor at a time, the largest bounding it; the reduced partition is the gradient partition counted already."""
    g = max(gpus_per_node, 1)
    nbytes = largest + ceil_div(largest, g) + 2 * ceil_div(largest, g)
    return Term("buffers", Resource.GPU, nbytes, "qgz_all_to_all",
                f"ZeRO++ int4 gradient all-to-all buffers of the largest gradient ({largest:,} elements, "
                f"{g} GPUs per node)", "n/2 + n/2 B (intra-node) + n/2g + n/2g + 2n/g B (inter-node, fp16)",
                "comm/coalesced_collectives.py all_to_all_quant_reduce", kind=TermKind.BOUND)
