"""Model states (parameters, gradients, optimizer states) per GPU process, term by term.

Two accountings:

* ``deepspeed_terms``: what DeepSpeed 0.19.8 allocates, each term citing the file and
  function that allocates it (paths relative to ``deepspeed/runtime/``).
* ``paper_terms``: the ZeRO paper's 2 + 2 + K bytes per parameter (Rajbhandari et al., §3.1, §5),
  K = fp32 master (mixed precision only) + the optimizer's states.

Notation in formulas: P parameters, N data-parallel GPUs, part = this rank's partition
(stage 1/2: ceil(P / 2N)·2 after DeepSpeed's alignment to 2·N elements; stage 3: ceil(P / N)).
"""

from __future__ import annotations

from fractions import Fraction

from zeroadvisor.memory import bytes as B
from zeroadvisor.memory import persistence
from zeroadvisor.memory.options import Option
from zeroadvisor.memory.partition import Layout, layout_stage12, step_gradient_elements
from zeroadvisor.memory.persistence import full_copy_elements, persistent
from zeroadvisor.memory.settings import Settings
from zeroadvisor.memory.terms import Term, ceil_div, exact
from zeroadvisor.model.spec import ModelSpec
from zeroadvisor.vocab import Device, Precision, Resource, TermKind

FP32 = B.DTYPE_BYTES["fp32"]
# Stage 1 and 2 without offload_optimizer (and without the compact fp32 accumulation buffer): the gradient partition
# in the master dtype that stage_1_and_2.py step() builds after backward (single_grad_partition =
# flatten(averaged_gradients).to(master dtype)) and frees after the group's optimizer step
# (single_partition_of_fp32_groups[i].grad = None; del single_grad_partition). Stage 1 (partition_gradients False)
# runs the same step code. It never coexists with the activations, which backward has freed: memory/estimate.py hands
# its bytes to the step (memory/step_temporaries.py), which counts it beyond them, as at stage 3, instead of beside
# them in the model states (measured on CPU for both stages: benchmarks/zero2_step.md).
STEP12_GRAD_KEY = "step12_fp32_grads"
# Stage 1: the full-size gradients of the parameters outside this rank's partition. Backward builds every
# parameter's gradient; independent_gradient_partition_epilogue keeps only averaged_gradients' views of the
# parameters touching the partition (get_flat_partition) and drops param.grad (_clear_param_grad_only), so these are
# freed before step() begins (measured: benchmarks/zero2_step.md, stage 1 over 2 ranks holds the partition's 2 B at
# the step). They are a model state after backward, and the step reuses them as it reuses the activations.
STEP1_FREED_KEY = "lp_grads_outside_partition"


def partition_stage12(P: int, N: int) -> int:
    # stage_1_and_2.py DeepSpeedZeroOptimizer.__init__: aligned_numel = ceil(numel / (2·N))·(2·N),
    # partition_size = aligned_numel // N (nccl_start_alignment_factor = 2)
    return ceil_div(P, 2 * N) * 2


def partition_stage3(P: int, N: int) -> int:
    # partition_parameters.py _partition_param: each param keeps ceil(numel / N) elements
    return ceil_div(P, N)


def master_bytes(s: Settings) -> int:
    """Bytes of the ZeRO master weights and fp32 gradient partition (base_optimizer.py _configure_master_weights)."""
    if s.fp16_master_weights_and_grads:
        return B.DTYPE_BYTES["fp16"]
    if s.bf16_master_weights_and_grads:
        return B.DTYPE_BYTES["bf16"]
    return FP32


def state_elements(s: Settings, spec: ModelSpec, notes: list[str]) -> Fraction:
    """Average parameter-sized optimizer-state tensors per parameter."""
    if s.optimizer != "muon":
        return Fraction(s.optimizer_elements)
    adam = B.optimizer_state_elements("adam")
    muon = B.OPTIMIZERS["muon"].elements
    aux = spec.embedding_parameters
    if aux is not None and spec.tied_embeddings is False and spec.vocab_size and spec.hidden_size:
        aux += spec.vocab_size * spec.hidden_size  # untied LM head also uses the auxiliary Adam
    if aux is None or spec.parameters <= 0:
        notes.append("Muon: embedding size unknown, so every parameter is costed with Muon's single momentum "
                     "buffer (embeddings and the head really use Adam's two states)")
        return Fraction(muon)
    aux = min(aux, spec.parameters)
    return Fraction(adam * aux + muon * (spec.parameters - aux), spec.parameters)


def state_bytes_gpu(s: Settings) -> int:
    # GPU optimizers create states as zeros_like(master partition): master dtype
    return master_bytes(s)


def _state_bytes_cpu(s: Settings) -> int:
    # DeepSpeedCPUAdam keeps fp32 moments unless fp32_optimizer_states is False, which the engine forces
    # when bf16_optimizer_states is set (engine.py get_optimizer_configuration); other CPU optimizers use
    # the master dtype
    if s.optimizer in ("adam", "adamw") and s.cpu_adam_fp32_states:
        return FP32
    return master_bytes(s)


def trainable(spec: ModelSpec) -> int:
    """The parameters the optimizer gets: all of them, or the PEFT adapters (model/peft.py)."""
    return spec.parameters if spec.trainable_parameters is None else spec.trainable_parameters


def added_trainable(spec: ModelSpec) -> int:
    """Trainable parameters outside ``spec.parameters``: PEFT's adapters (model/peft.py: all = parameters +
    trainable); none for modules frozen without PEFT (model/frozen.py: the trainable ones are among them)."""
    return 0 if spec.trainable_parameters is None or spec.frozen else spec.trainable_parameters


def frozen_base(spec: ModelSpec) -> int:
    """Parameters that get no gradient: the whole base under PEFT, the named modules' parameters when frozen
    without it (model/frozen.py), none when everything trains."""
    if spec.trainable_parameters is None:
        return 0
    return spec.parameters - spec.trainable_parameters if spec.frozen else spec.parameters


def frozen_words(spec: ModelSpec) -> str:
    """What froze the base, for a term's description: the PEFT method, or the modules frozen without it."""
    return spec.peft or f"frozen {spec.frozen}"


def optimized(spec: ModelSpec, P: int) -> int:
    """Elements on this GPU that get a gradient: ``P`` (the parameters here) without PEFT, the adapters with it.
    DeepSpeed builds every gradient buffer from the optimizer's groups, which hold the trainable parameters only
    (runtime/utils.py is_optimized_parameter; stage_1_and_2.py __init__ bit16_groups, stage3.py
    _get_trainable_parameter_groups): frozen parameters get no gradient, bucket share, or pinned partition."""
    return P if spec.trainable_parameters is None else spec.trainable_parameters


def compact_grad_buffer(s: Settings) -> bool:
    """Stage 1/2 _use_compact_grad_partition_buffer: fp32 accumulation with a 16-bit model keeps a compact fp32
    partition buffer on the accelerator that receives the reduced gradients (stage_1_and_2.py 0.19.8)."""
    return s.grad_accum_dtype == Precision.FP32 and s.precision != Precision.FP32


def largest_trainable(spec: ModelSpec, largest: int) -> int:
    """The largest parameter that produces a gradient, given ``largest`` (the largest layer or parameter of the
    whole model): with PEFT the largest adapter tensor (model/peft.py), bounded by the adapters' total."""
    if spec.trainable_parameters is None:
        return largest
    if spec.largest_trainable_parameter is not None:
        return min(spec.largest_trainable_parameter, spec.trainable_parameters)
    return min(largest, spec.trainable_parameters)  # a bound: the adapters' sizes unknown


def deepspeed_terms(s: Settings, opt: Option, P: int, N: int, spec: ModelSpec, notes: list[str]) -> list[Term]:
    """Model-state terms DeepSpeed 0.19.8 allocates per GPU process for ``opt`` (``P``: the trainable
    parameters; a PEFT model's frozen base is added by :func:`frozen_terms`)."""
    if opt.stage == 0:
        terms = _stage0(s, P, spec, notes)
    elif opt.stage in (1, 2):
        terms = _stage12(s, opt, P, N, spec, notes)
    else:
        terms = _stage3(s, opt, P, N, spec, notes)
    return terms + frozen_terms(s, opt, N, spec, notes)


def frozen_terms(s: Settings, opt: Option, N: int, spec: ModelSpec, notes: list[str]) -> list[Term]:
    """The frozen base of a LoRA/QLoRA model, or the modules frozen without PEFT (none when everything trains).

    DeepSpeed builds its optimizer groups, gradient partitions and master weights from the parameters
    that require grad only (stage_1_and_2.py __init__: is_optimized_parameter; stage3.py
    _create_fp16_sub_groups over the optimizer's param groups), so frozen weights get no gradient,
    master copy or optimizer state. The engine casts every floating-point parameter, frozen ones
    included, to the training dtype (engine.py _cast_module_mixed_precision: CASTABLE_DTYPES are the
    float types, so bitsandbytes' uint8/int8 weights stay as they are). Stages 0-2 keep the frozen
    weights whole on every GPU; at stage 3 zero.Init partitions every parameter created under it,
    frozen ones too (runtime/zero/partition_parameters.py Init._post_init_method -> _partition), so
    each rank keeps 1/N of them (and offload_param moves that share to the host or NVMe).
    """
    if spec.trainable_parameters is None:
        return []
    w = B.nbytes(s.precision)
    floating = frozen_base(spec) - spec.quantized_parameters
    stage3 = opt.stage == 3
    share = (lambda n: ceil_div(n, N)) if stage3 else (lambda n: n)
    # offload_param moves every partitioned parameter (frozen ones too) to its device
    device = Resource.of(opt.offload_param) if stage3 else Resource.GPU
    per = " / N" if stage3 else ""
    src = ("runtime/zero/partition_parameters.py Init (frozen parameters partitioned too)" if stage3
           else "engine.py _cast_module_mixed_precision (frozen parameters stay whole on every GPU)")
    if stage3 and s.quantized_nontrainable_weights:
        # ZeRO++ zero_quantized_nontrainable_weights: each frozen partition is stored int8 with fp32 scales
        # (partition_parameters.py _partition_param: quantizer_module.quantize(partitioned_tensor) when
        # not param.requires_grad)
        part = share(floating)
        terms = [Term("parameters", device, part, "frozen_params", f"frozen base in int8 ({frozen_words(spec)}, ZeRO++ "
                      "zero_quantized_nontrainable_weights)", f"1 B/frozen param{per}", src),
                 Term("parameters", device, FP32 * ceil_div(part, B.ZEROPP_QUANT_GROUP), "frozen_scales",
                      "fp32 quantization scales of the frozen base", f"{FP32} B per {B.ZEROPP_QUANT_GROUP:,} elements",
                      "zero/partition_parameters.py CUDAQuantizer.quantize", kind=TermKind.ALLOWANCE)]
    else:
        terms = [Term("parameters", device, w * share(floating), "frozen_params",
                      f"frozen base in {s.precision} ({frozen_words(spec)})", f"{w} B/frozen param{per}", src)]
    if spec.quantized_parameters:
        terms.append(Term("parameters", device, share(spec.quantized_bytes), "quantized_params",
                          "bitsandbytes-quantized base Linear weights with their quantization constants",
                          f"quantized bytes{per}", "bitsandbytes functional.py quantize_4bit / int8_vectorwise_quant "
                          "(model/peft.py quantized_bytes)"))
        # bnb matmul_4bit / MatMul8bitLt dequantize one weight to the compute dtype for each matmul
        terms.append(Term("buffers", Resource.GPU, w * spec.largest_quantized_parameters, "dequantized_weight",
                          "the largest quantized weight dequantized for its matmul", f"{w} B × largest Linear",
                          "bitsandbytes autograd/_functions.py matmul_4bit (dequantize_4bit)", kind=TermKind.ALLOWANCE))
        if stage3:
            notes.append("QLoRA with ZeRO-3 needs bnb_4bit_quant_storage set to the training dtype so that "
                         "zero.Init can partition the packed weights (transformers' DeepSpeed/QLoRA guide); "
                         "counted as partitioned like the other frozen weights")
    return terms


def uses_bf16_optimizer(s: Settings, opt: Option) -> bool:
    # engine.py _do_optimizer_sanity_check: bf16 model + fp32 grad accumulation + ZeRO stage 1 + no offload
    return (opt.stage == 1 and s.precision == Precision.BF16 and s.grad_accum_dtype == Precision.FP32
            and opt.offload_optimizer == Device.NONE)


def _stage0(s: Settings, P: int, spec: ModelSpec, notes: list[str]) -> list[Term]:
    el = state_elements(s, spec, notes)
    if not s.mixed_precision:
        return [
            Term("parameters", Resource.GPU, FP32 * P, "lp_params", "fp32 parameters", "4 B/param",
                 "engine.py: no ZeRO, fp32 -> the basic optimizer (_do_optimizer_sanity_check returns None)"),
            Term("gradients", Resource.GPU, FP32 * P, "lp_grads", "fp32 gradients", "4 B/param",
                 "torch autograd (param.grad)"),
            Term("optimizer_states", Resource.GPU, exact(el * FP32 * P), "optimizer_state",
                 f"{s.optimizer_label} states ({el} × fp32)", f"{el}×4 B/param", "torch/DeepSpeed optimizer state"),
        ]
    w = B.nbytes(s.precision)
    # Gradient row = the larger of what is alive after backward (w-byte param.grad) and at the optimizer
    # step, where FP16_Optimizer.step has replaced them by one fp32 flat copy (p.grad = None): max(w, 4) = 4.
    return [
        Term("parameters", Resource.GPU, w * P, "lp_params", f"{s.precision} parameters (flat)", f"{w} B/param",
             "fp16/fused_optimizer.py FP16_Optimizer.__init__ (fp16_groups_flat)"),
        Term("gradients", Resource.GPU, max(w, FP32) * P, "fp32_grads",
             f"fp32 flat gradients at the step (they replace the {w}-byte grads)", "4 B/param",
             "fp16/fused_optimizer.py FP16_Optimizer.step (_flatten_dense_tensors of p.grad.to(fp32))"),
        Term("optimizer_states", Resource.GPU, FP32 * P, "master", "fp32 master weights", "4 B/param",
             "fp16/fused_optimizer.py FP16_Optimizer.__init__ (fp32_groups_flat)"),
        Term("optimizer_states", Resource.GPU, exact(el * FP32 * P), "optimizer_state",
             f"{s.optimizer_label} states ({el} × fp32)", f"{el}×4 B/param", "optimizer state on fp32_groups_flat"),
    ]


def _stage12(s: Settings, opt: Option, P: int, N: int, spec: ModelSpec, notes: list[str]) -> list[Term]:
    w = B.nbytes(s.precision)
    a = B.nbytes(s.grad_accum_dtype)
    M = master_bytes(s)
    part = partition_stage12(P, N)
    flat = part * N  # bit16 flat buffer including alignment padding
    el = state_elements(s, spec, notes)
    src = "zero/stage_1_and_2.py DeepSpeedZeroOptimizer"
    terms: list[Term] = []

    if uses_bf16_optimizer(s, opt):
        bsrc = "bf16_optimizer.py BF16_Optimizer._setup_for_real_optimizer"
        terms += [
            Term("parameters", Resource.GPU, w * flat, "lp_params", "bf16 parameters (flat)", f"{w} B/param", bsrc),
            Term("gradients", Resource.GPU, a * flat, "fp32_grads",
                 "full-size fp32 gradient buffer (not partitioned)", f"{a} B/param", bsrc + " (fp32_flat_buffer)"),
        ]
        if not s.immediate_grad_update:
            terms.append(Term("gradients", Resource.GPU, w * P, "lp_grads", "bf16 gradients (kept; zeroed, not freed)",
                              f"{w} B/param", "bf16_optimizer.py BF16_Optimizer.update_hp_grads / clear_lp_grads"))
        terms += [
            Term("optimizer_states", Resource.GPU, M * part, "master", "fp32 master partition", f"{M} B/param / N",
                 bsrc + " (fp32_groups_flat_partition)"),
            Term("optimizer_states", Resource.GPU, exact(el * M * part), "optimizer_state",
                 f"{s.optimizer_label} states ({el} × fp32) on the partition", f"{el}×{M} B/param / N",
                 "optimizer state on fp32_groups_flat_partition"),
        ]
        return terms

    offload = opt.offload_optimizer != Device.NONE
    terms.append(Term("parameters", Resource.GPU, w * flat, "lp_params", f"{s.precision} parameters (flat)",
                      f"{w} B/param", src + ".__init__ (bit16_groups_flat)"))
    compact = compact_grad_buffer(s)
    terms += _stage12_gpu_grads(s, opt, P, part, compact, src, _layout12(s, opt, P, N, spec, compact, notes))
    if not offload:
        terms += [
            Term("optimizer_states", Resource.GPU, M * part, "master",
                 f"{'fp32' if M == FP32 else '16-bit'} master partition",
                 f"{M} B/param / N", src + ".__init__ (single_partition_of_fp32_groups)"),
            Term("optimizer_states", Resource.GPU, exact(el * state_bytes_gpu(s) * part), "optimizer_state",
                 f"{s.optimizer_label} states ({el} × {state_bytes_gpu(s)} B) on the partition",
                 f"{el}×{state_bytes_gpu(s)} B/param / N", "optimizer state on single_partition_of_fp32_groups"),
        ]
        return terms

    # offload_optimizer (cpu; nvme runs as cpu at stage 1/2): host-side partition
    if opt.offload_optimizer == Device.NVME:
        notes.append(f"stage {opt.stage}: offload_optimizer nvme runs as cpu (stage_1_and_2.py __init__: "
                     "cpu_offload = device != none; only stage 3 swaps to NVMe)")
    pinned = " (pinned)" if s.offload_optimizer_pin_memory else ""
    Sc = _state_bytes_cpu(s)
    terms += [
        Term("gradients", Resource.CPU, M * part, "fp32_grads", f"fp32 gradient partition on the host{pinned}",
             f"{M} B/param / N", src + ".initialize_optimizer_states (single_grad_partition)"),
        Term("optimizer_states", Resource.CPU, M * part, "master", f"fp32 master partition on the host{pinned}",
             f"{M} B/param / N", src + ".__init__ (single_partition_of_fp32_groups)"),
        Term("optimizer_states", Resource.CPU, exact(el * Sc * part), "optimizer_state",
             f"{s.optimizer_label} states ({el} × {Sc} B) on the host", f"{el}×{Sc} B/param / N",
             "ops/adam/cpu_adam.py DeepSpeedCPUAdam state"),
        Term("parameters", Resource.CPU, w * part, "lp_param_staging",
             f"{s.precision} copy of the partition for upload{pinned}",
             f"{w} B/param / N", src + ".__init__ (param_buffer_of_bit16_for_cpu_offload_groups)"),
    ]
    return terms


LAYOUT_NOT_MODELLED = (
    "stage 1/2: the parameter layout is unknown, so the gradient partition is costed as P/N; DeepSpeed sizes a "
    "rank's 16-bit gradient partition (grads_in_partition) by the parameters touching it, counted whole, and in "
    "fp32 a partition inside one parameter needs no flattened copy: the partition boundary effect is not modelled "
    "(the estimate can be short by at most 2 × the largest parameter's 16-bit gradient per GPU)")


def _layout12(s: Settings, opt: Option, P: int, N: int, spec: ModelSpec, compact: bool,
              notes: list[str]) -> Layout | None:
    """Stage 1/2 per-rank partition layout when the parameter sizes are known and the layout matters.

    Only the path through copy_grads_in_partition depends on it (no CPU offload, no compact fp32
    accumulation buffer); None otherwise or without ``spec.parameter_numels``.
    """
    if compact or opt.offload_optimizer != Device.NONE:
        return None
    numels = spec.parameter_numels
    if numels is None:
        if N > 1:  # one rank: the partition is the whole group (up to the 2-element alignment)
            notes.append(LAYOUT_NOT_MODELLED)
        return None
    if sum(numels) != P:
        notes.append(f"stage 1/2: parameter_numels sum to {sum(numels):,}, not the {P:,} parameters costed; "
                     "layout ignored. " + LAYOUT_NOT_MODELLED)
        return None
    return layout_stage12(numels, N, element_size=B.nbytes(s.precision))


def _step_grad_key(opt: Option) -> str:
    """The key of the step's gradient partition: handed to the step at stage 1 and 2 (STEP12_GRAD_KEY), which run
    the same stage_1_and_2.py step()."""
    return STEP12_GRAD_KEY if opt.stage in (1, 2) else "fp32_grads"


def _stage12_gpu_grads(s: Settings, opt: Option, P: int, part: int, compact: bool, src: str,
                       layout: Layout | None = None) -> list[Term]:
    """GPU gradient row at stage 1/2: the larger of what is alive after backward and at the optimizer step.

    With ``layout`` (known parameter sizes) the step's terms are those of the worst rank: the largest
    grads_in_partition + flattened copy over the ranks (parameters and optimizer states are equal on
    every rank at stage 1/2, so this rank also has the most model-state bytes).
    """
    w = B.nbytes(s.precision)
    a = B.nbytes(s.grad_accum_dtype)
    M = master_bytes(s)
    offload = opt.offload_optimizer != Device.NONE
    at_step: list[Term] = []
    if compact:
        at_step.append(Term("gradients", Resource.GPU, a * part, "fp32_grads",
                            "fp32 gradient partition (compact accumulation buffer)", f"{a} B/param / N",
                            src + "._build_compact_grad_partition_buffer"))
        if M != a and not offload:
            at_step.append(Term("gradients", Resource.GPU, M * part, "master_grads",
                                "gradient partition in the master dtype",
                                f"{M} B/param / N", src + ".step (single_grad_partition)"))
    elif not offload and layout is not None:
        # partition.py: grads_in_partition = touching parameters whole; step()'s flatten a view or a copy
        per_rank = [step_gradient_elements(r, w, M) for r in layout.ranks]
        worst = max(range(len(per_rank)), key=lambda i: w * per_rank[i][0] + M * per_rank[i][1])
        lp, master = per_rank[worst]
        r = layout.ranks[worst]
        at_step.append(Term("gradients", Resource.GPU, w * lp, "lp_grads",
                            f"{s.precision} gradients of the {r.params} parameter(s) touching the partition of rank "
                            f"{worst} (worst rank; whole parameters)", f"{w} B × touched elements",
                            src + ".copy_grads_in_partition (grads_in_partition)"))
        at_step.append(Term("gradients", Resource.GPU, M * master, _step_grad_key(opt),
                            (f"{'fp32' if M == FP32 else 'low-precision'} gradient partition for the step"
                             if master else "gradient partition for the step: a view (partition inside one "
                             "parameter, no copy)"), f"{M} B/param / N" if master else "0",
                            src + ".step (single_grad_partition = flatten(averaged_gradients).to(...))"))
    elif not offload:
        # at the step: grads_in_partition (kept by the optimizer) + its flattened copy in the master dtype
        at_step += [
            Term("gradients", Resource.GPU, w * part, "lp_grads", f"{s.precision} gradient partition",
                 f"{w} B/param / N",
                 src + ".copy_grads_in_partition (grads_in_partition)"),
            Term("gradients", Resource.GPU, M * part, _step_grad_key(opt),
                 f"{'fp32' if M == FP32 else 'low-precision'} gradient partition for the step", f"{M} B/param / N",
                 src + ".step (single_grad_partition)"),
        ]
    if opt.stage == 1:
        # After backward stage 1 holds full-size grads (param.grad, or grad_accum in the accumulation dtype). With
        # the optimizer on the GPU and no separate accumulation dtype the epilogue keeps only the partition's and
        # step() builds its partition beyond the rest (measured: benchmarks/zero2_step.md); otherwise (offload, the
        # compact buffer, grad_accum) the row stays the larger of the full-size grads and what the step holds.
        g = a if s.grad_accum_dtype != s.precision else w
        step_grad = [term for term in at_step if term.key == STEP12_GRAD_KEY]
        if step_grad and g == w:
            # the partition's gradients (the touching parameters' whole tensors) stay to the step; the rest are
            # freed before it (STEP1_FREED_KEY); the step's gradient partition is the step's (STEP12_GRAD_KEY)
            kept = sum(term.nbytes for term in at_step if term.key != STEP12_GRAD_KEY)
            outside = max(0, g * P - kept)
            epilogue = src + ".independent_gradient_partition_epilogue"
            terms = [Term("gradients", Resource.GPU, kept, "lp_grads",
                          f"{s.precision} gradients of the parameters touching the partition (whole tensors), kept "
                          "to the step", f"{w} B × touched elements",
                          epilogue + " (averaged_gradients = get_flat_partition(...): views of param.grad)"),
                     *step_grad]
            if outside:
                terms.append(Term("gradients", Resource.GPU, outside, STEP1_FREED_KEY,
                                  f"full-size {s.precision} gradients of the parameters outside the partition, after "
                                  "backward (freed before the step, which reuses them)",
                                  f"{g} B/param - the partition's", epilogue + " (_clear_param_grad_only)"))
            return terms
        if g * P > sum(term.nbytes for term in at_step):
            return [Term("gradients", Resource.GPU, g * P, "lp_grads",
                         f"full-size {s.grad_accum_dtype if g == a else s.precision} gradients after backward "
                         "(stage 1 does not partition them; larger than what the step holds)", f"{g} B/param",
                         src + ".reduce_gradients (param.grad / grad_accum kept until step)")]
    return at_step


_STAGE3 = "zero/stage3.py DeepSpeedZeroOptimizer_Stage3"


def _stage3(s: Settings, opt: Option, P: int, N: int, spec: ModelSpec, notes: list[str]) -> list[Term]:
    part = partition_stage3(P, N)
    el = state_elements(s, spec, notes)
    terms = _stage3_parameters(s, opt, part)
    terms += _stage3_persistent(s, opt, N, spec, notes)
    sub, gpu_share = _stage3_sub_groups(s, opt, part, notes)
    terms += _stage3_gradients(s, opt, part, sub, gpu_share)
    terms += _stage3_master_and_states(s, opt, part, el, gpu_share)
    return terms


def _stage3_parameters(s: Settings, opt: Option, part: int) -> list[Term]:
    """The 16-bit parameter partition: on the GPU, or on the host (and NVMe past offload_param.max_in_cpu)."""
    w = B.nbytes(s.precision)
    if opt.offload_param == Device.NONE:
        return [Term("parameters", Resource.GPU, w * part, "lp_params", f"{s.precision} parameter partition",
                     f"{w} B/param / N", _STAGE3 + "._create_fp16_partitions_with_defragmentation (lp_param_buffer)")]
    in_cpu = part if opt.offload_param == Device.CPU else min(part, s.offload_param_max_in_cpu)
    pinned = " (pinned)" if s.offload_param_pin_memory else ""
    terms = [Term("parameters", Resource.CPU, w * in_cpu, "lp_params",
                  f"{s.precision} parameter partition on the host{pinned}", f"{w} B/param / N",
                  _STAGE3 + "._create_param_groups_fp16_flat_cpu_memory")]
    if opt.offload_param == Device.NVME and part > in_cpu:
        terms.append(Term("parameters", Resource.NVME, w * (part - in_cpu), "lp_params",
                          f"{s.precision} parameters beyond offload_param.max_in_cpu on NVMe",
                          f"{w} B/param / N", "swap_tensor/partitioned_param_swapper.py"))
    return terms


def _stage3_persistent(s: Settings, opt: Option, N: int, spec: ModelSpec, notes: list[str]) -> list[Term]:
    """Persistent parameters: whole on every rank next to their partition (memory/persistence.py)."""
    w = B.nbytes(s.precision)
    keep = persistent(spec, s.param_persistence_threshold, s.model_persistence_threshold, N, notes)
    full = full_copy_elements(keep, N, opt.offload_param != Device.NONE)
    if not full:
        return []
    return [Term("parameters", Resource.GPU, w * full, "persistent",
                 f"{s.precision} full copies of {keep.count:,} persistent parameters "
                 f"(numel ≤ stage3_param_persistence_threshold {s.param_persistence_threshold:,}; "
                 f"{keep.elements:,} elements, {keep.how}; {keep.kind})",
                 f"{w} B × Σ ceil(numel/N)·N" if N > 1 else f"{w} B × numel", persistence.SOURCE)]


def _stage3_sub_groups(s: Settings, opt: Option, part: int, notes: list[str]) -> tuple[int, Fraction]:
    """(elements of the largest sub-group, the share of the partition's sub-groups the optimizer keeps on the
    GPU): the optimizer steps one sub-group of the partition at a time."""
    sub = min(s.sub_group_size, part) if s.sub_group_size > 0 else part
    if opt.offload_optimizer == Device.NONE:
        return sub, Fraction(1)
    if opt.offload_optimizer != Device.CPU:
        return sub, Fraction(0)
    nsub = ceil_div(part, sub) if sub else 1
    # stage3.py _create_fp32_partitions: sub-group i stays on the GPU iff i < int((1 - ratio)·nsub)
    on_gpu = int((1 - s.offload_optimizer_ratio) * nsub)
    if s.offload_optimizer_ratio < 1 and on_gpu == 0:
        notes.append(f"offload_optimizer.ratio={s.offload_optimizer_ratio} keeps nothing on the GPU: the partition "
                     f"has {nsub} sub-group(s) of sub_group_size={s.sub_group_size} and DeepSpeed keeps "
                     f"int((1-ratio)·{nsub}) = 0 of them on the GPU")
    return sub, Fraction(on_gpu, nsub)


def _stage3_gradients(s: Settings, opt: Option, part: int, sub: int, gpu_share: Fraction) -> list[Term]:
    """The gradient partition (flat buffer) and, with offload_optimizer, the fp32 gradient buffers it keeps."""
    w = B.nbytes(s.precision)
    a = B.nbytes(s.grad_accum_dtype)
    M = master_bytes(s)
    src = _STAGE3
    grad_dev = Resource.GPU if opt.offload_optimizer == Device.NONE else Resource.CPU
    terms = [Term("gradients", grad_dev, a * part, "lp_grads" if a == w else "fp32_grads",
                  f"{s.grad_accum_dtype} gradient partition (flat buffer)", f"{a} B/param / N",
                  src + "._setup_for_real_optimizer (grad_partitions_flat_buffer)")]
    # Without offload_optimizer the stepped sub-group's fp32 gradient exists only inside step()
    # (_prepare_fp32_grad_for_sub_group .. _release_sub_group), after backward freed the activations: it is a
    # step term (memory/step_temporaries.py sub_group_gradient), not a state alive beside them.
    if opt.offload_optimizer == Device.CPU:
        gpu_grad = exact(gpu_share * M * part)
        if gpu_grad:
            terms.append(Term("gradients", Resource.GPU, gpu_grad, "fp32_grads",
                              "fp32 gradients of GPU-resident sub-groups",
                              f"{M} B/param / N × {gpu_share}", src + ".initialize_optimizer_states"))
        pinned = " (pinned)" if s.offload_optimizer_pin_memory else ""
        terms.append(Term("gradients", Resource.CPU, M * part - gpu_grad, "master_grads",
                          f"fp32 gradient buffer per sub-group on the host{pinned}", f"{M} B/param / N",
                          src + ".initialize_optimizer_states (subgroup_gradient_buffer)"))
    elif opt.offload_optimizer == Device.NVME:
        terms.append(Term("gradients", Resource.CPU, M * sub, "master_grads",
                          "fp32 gradient buffer (largest sub-group)",
                          f"{M} B × min(sub_group_size, P/N)", src + ".initialize_optimizer_states (gradient_buffer)"))
        terms.append(Term("gradients", Resource.NVME, M * part, "master_grads", "fp32 gradients swapped to NVMe",
                          f"{M} B/param / N", src + "._optimizer_states_and_gradient_swap_out"))
    return terms


def _stage3_master_and_states(s: Settings, opt: Option, part: int, el: Fraction,
                              gpu_share: Fraction) -> list[Term]:
    """The master weights and optimizer states, split between GPU and host by ``gpu_share`` (or on NVMe).

    _create_fp32_partitions has a no-copy branch for partitions already in the master dtype on
    self.device, but it compares a torch.device with the device *name* (a str), which is never
    equal: DeepSpeed 0.19.8 always clones the master partition, also in fp32 training
    (measured: benchmarks/calibration.md, stage 3 fp32)."""
    M = master_bytes(s)
    src = _STAGE3
    if opt.offload_optimizer == Device.NVME:
        Sn = _state_bytes_cpu(s)
        return [
            Term("optimizer_states", Resource.NVME, M * part, "master", "fp32 master partition on NVMe",
                 f"{M} B/param / N", src + "._create_fp32_partitions (swappable)"),
            Term("optimizer_states", Resource.NVME, exact(el * Sn * part), "optimizer_state",
                 f"{s.optimizer_label} states ({el} × {Sn} B) on NVMe", f"{el}×{Sn} B/param / N",
                 "swap_tensor/partitioned_optimizer_swapper.py"),
        ]
    terms: list[Term] = []
    gpu_master = exact(gpu_share * M * part)
    cpu_master = M * part - gpu_master
    if gpu_master:
        terms.append(Term("optimizer_states", Resource.GPU, gpu_master, "master", "fp32 master partition",
                          f"{M} B/param / N", src + "._create_fp32_partitions"))
    if cpu_master:
        terms.append(Term("optimizer_states", Resource.CPU, cpu_master, "master", "fp32 master partition on the host",
                          f"{M} B/param / N", src + "._create_fp32_partitions"))
    Sg = state_bytes_gpu(s)
    Sc = _state_bytes_cpu(s)
    gpu_states = exact(gpu_share * el * Sg * part)
    cpu_states = exact((1 - gpu_share) * el * Sc * part)
    if gpu_states or opt.offload_optimizer == Device.NONE:
        terms.append(Term("optimizer_states", Resource.GPU, gpu_states, "optimizer_state",
                          f"{s.optimizer_label} states ({el} × {Sg} B)", f"{el}×{Sg} B/param / N",
                          "optimizer state on fp32_partitioned_groups_flat"))
    if cpu_states:
        terms.append(Term("optimizer_states", Resource.CPU, cpu_states, "optimizer_state",
                          f"{s.optimizer_label} states ({el} × {Sc} B) on the host", f"{el}×{Sc} B/param / N",
                          "ops/adam/cpu_adam.py DeepSpeedCPUAdam state"))
    return terms


# ------------------------------------------------------------------ the ZeRO paper


def paper_terms(s: Settings, opt: Option, P: int, N: int, spec: ModelSpec, notes: list[str]) -> list[Term]:
    """The paper's 2 + 2 + K bytes/param (K = 12 for mixed-precision Adam), partitioned by stage.

    §5: P_os divides K by N, P_os+g also the gradients, P_os+g+p also the parameters.
    Offload moves the optimizer states (and the partitioned gradients) to the host as
    ZeRO-Offload does; offload_param moves the partitioned parameters.
    """
    w = B.nbytes(s.precision)
    master = FP32 if s.mixed_precision else 0  # fp32 copy exists only in mixed precision (§3.1)
    el = state_elements(s, spec, notes)
    K = master + el * FP32
    n = Fraction(1, N)
    p_share = n if opt.stage >= 3 else Fraction(1)
    g_share = n if opt.stage >= 2 else Fraction(1)
    k_share = n if opt.stage >= 1 else Fraction(1)
    p_dev = Resource.CPU if opt.offload_param != Device.NONE and opt.stage == 3 else Resource.GPU
    k_dev = Resource.CPU if opt.offload_optimizer != Device.NONE and opt.stage >= 1 else Resource.GPU
    g_dev = Resource.CPU if k_dev == Resource.CPU and opt.stage >= 2 else Resource.GPU
    src = "ZeRO paper §3.1/§5"
    frozen = [t for t in frozen_terms(s, opt, N, spec, notes) if t.row != "buffers"]
    return [
        *frozen,
        Term("parameters", p_dev, exact(w * P * p_share), "lp_params", f"{w}-byte parameters",
             f"{w}Ψ{'/N' if p_share != 1 else ''}", src),
        Term("gradients", g_dev, exact(w * P * g_share), "lp_grads", f"{w}-byte gradients",
             f"{w}Ψ{'/N' if g_share != 1 else ''}", src),
        Term("optimizer_states", k_dev, exact(K * P * k_share), "optimizer_state",
             f"K = {K} (fp32 master {master} + {s.optimizer_label} {el}×4)",
             f"KΨ{'/N' if k_share != 1 else ''}", src),
    ]
