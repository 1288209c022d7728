"""The optimizer step's temporaries on the GPU: what an Adam step allocates beside the states it updates.

ZeRO hands the optimizer one flat fp32 tensor per parameter group (stage 1/2: the rank's partition,
``single_partition_of_fp32_groups``; stage 3: one sub-group at a time, ``_optimizer_step``; FP16_Optimizer /
BF16_Optimizer: their flat fp32 groups), so an implementation that builds a tensor the size of its input
builds one the size of the whole partition. Which implementation runs:

* the DeepSpeed config's ``optimizer`` block: FusedAdam (in place), or torch's Adam/AdamW with
  ``torch_adam: true`` (runtime/engine.py get_optimizer_configuration), or DeepSpeedCPUAdam under offload;
* no block: the client's, for the Hugging Face Trainer its ``optim`` argument (:data:`CLIENT_OPTIMIZERS`).

The step runs after backward has freed the activations (autograd releases saved tensors as it goes; the
loss and logits are dropped before ``engine.step``), so the temporaries add only what exceeds them:
``max(0, temporaries - activations)``.

At stage 3 without offload_optimizer the stepped sub-group's fp32 gradient is itself built inside the step
(stage3.py ``_prepare_fp32_grad_for_sub_group``) and freed after it (``_release_sub_group``), one sub-group at a
time: it is a step term beside the temporaries, not a model state alive through backward (measured:
benchmarks/zero3_step.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroadvisor.memory import bytes as B
from zeroadvisor.memory.assumed import AssumedInput
from zeroadvisor.memory.ds_changes import OFFLOAD_STEP_COPY, OVERFLOW_CHECK, era, releases_of
from zeroadvisor.memory.options import Option
from zeroadvisor.memory.settings import Settings
from zeroadvisor.memory.states import master_bytes, partition_stage3, partition_stage12, uses_bf16_optimizer
from zeroadvisor.memory.terms import Term
from zeroadvisor.model.spec import CLIENT_OPTIMIZER_NAMES, DEFAULT_CLIENT_OPTIMIZER
from zeroadvisor.vocab import Device, Precision, Resource, TermKind


@dataclass(frozen=True, slots=True)
class StepImplementation:
    """One optimizer implementation: how many stepped-tensor-sized temporaries coexist in its step, and the code
    that allocates them."""

    words: str
    temporaries: int
    source: str


_FOREACH = StepImplementation(
    "torch.optim.AdamW, foreach", 1,
    "torch/optim/adam.py _multi_tensor_adam (exp_avg_sq_sqrt = torch._foreach_sqrt(device_exp_avg_sqs); the rest "
    "in place)")
_FUSED = StepImplementation("a fused Adam kernel", 0, "torch/optim/adam.py _fused_adam (torch._fused_adamw_ updates "
                            "param, exp_avg, exp_avg_sq in place)")

# The Hugging Face Trainer's ``optim`` names (transformers training_args.py OptimizerNames; ``adamw_hf`` from 4.x).
# On CUDA, torch's Adam/AdamW default to the foreach path (torch/optim/optimizer.py _default_to_fused_or_foreach).
CLIENT_OPTIMIZERS: dict[str, StepImplementation] = {
    "adamw_torch": _FOREACH,
    "adamw_torch_fused": _FUSED,
    "adamw_apex_fused": StepImplementation("apex FusedAdam", 0, "apex/optimizers/fused_adam.py (multi_tensor_adam, "
                                           "in place)"),
    "adamw_hf": StepImplementation(
        "transformers AdamW", 1, "transformers 4.x optimization.py AdamW.step (denom = exp_avg_sq.sqrt().add_(eps))"),
}
# The other names (model/spec.py CLIENT_OPTIMIZER_NAMES) are accepted; their step is not modelled (a note says so).
OTHER_CLIENT_OPTIMIZERS = tuple(n for n in CLIENT_OPTIMIZER_NAMES if n not in CLIENT_OPTIMIZERS)

DEFAULT_WHY = ("the Hugging Face Trainer's default optim up to transformers 4.53 (and later with torch < 2.8): "
               "torch AdamW's foreach step builds an fp32 temporary the size of the partition; transformers 4.54+ "
               "with torch >= 2.8 default to adamw_torch_fused, which builds none")
KEY = "step_temporary"
GRAD_KEY = "step_fp32_grad"  # stage 3: the stepped sub-group's fp32 gradient; stage 1/2: the partition's (step())
# stage 1/2 with the optimizer offloaded: the gradient norm's fp64 copy at the accumulation boundary, in backward
BOUNDARY_NORM_KEY = "boundary_norm_copy"
# stage 1/2 with the optimizer offloaded, DeepSpeed 0.14.1-0.16.9: the stepped fp32 partition moved to the GPU
OFFLOAD_STEP_COPY_KEY = "offload_step_fp32_copy"
# what the step allocates and frees: transient between steps
KEYS = frozenset({KEY, GRAD_KEY, BOUNDARY_NORM_KEY, OFFLOAD_STEP_COPY_KEY})
NORM_BYTES = 8  # torch.float64, zero/utils.py get_norm_dtype


def optim_assumption() -> AssumedInput:
    """The client optimizer's implementation, where the config names no optimizer and nobody gave ``optim``."""
    return AssumedInput.of("optim", DEFAULT_CLIENT_OPTIMIZER, DEFAULT_WHY)


def client_optimizer_used(s: Settings) -> bool:
    """Whether the optimizer is the client's (no optimizer type in the DeepSpeed config)."""
    return not s.deepspeed.optimizer_type


def implementation(s: Settings, option: Option, optim: str | None) -> StepImplementation | None:
    """The implementation that steps ``option``'s GPU-resident optimizer; None when the step is not on the GPU or
    the optimizer is not an Adam variant zeroadvisor models."""
    if option.offload_optimizer != Device.NONE:
        return None  # DeepSpeedCPUAdam (or a client optimizer) steps the host partition
    if client_optimizer_used(s):
        return CLIENT_OPTIMIZERS.get(optim or DEFAULT_CLIENT_OPTIMIZER)  # None: a name whose step is not modelled
    if s.optimizer not in ("adam", "adamw"):
        return None
    params = s.deepspeed.optimizer.params
    if not params.torch_adam:
        return StepImplementation("DeepSpeed FusedAdam", 0, "ops/adam/fused_adam.py (multi_tensor_adam, in place)")
    # engine.py get_optimizer_configuration: torch.optim.AdamW / Adam with the config's foreach
    foreach = params.foreach
    decay = params.weight_decay
    # "auto" is the Trainer's weight_decay, 0.0 by default (TrainingArguments)
    adam_l2 = s.optimizer == "adam" and not params.adam_w_mode and decay is not None and decay != 0
    # _multi_tensor_adam deletes the L2 sum (torch._foreach_add(grads, params, alpha=wd)) before its sqrt, so the
    # two never coexist; _single_tensor_adam keeps grad + wd·param beside sqrt and its division (measured:
    # benchmarks/step_temporaries.md)
    temporaries = (1 if foreach else 2) + (1 if adam_l2 and not foreach else 0)
    how = "foreach" if foreach else "single-tensor: sqrt and the division coexist"
    return StepImplementation(f"torch.optim.{'Adam' if adam_l2 else 'AdamW'} ({how})", temporaries,
                              "torch/optim/adam.py " + ("_multi_tensor_adam" if foreach else "_single_tensor_adam")
                              + (" (grad + weight_decay·param kept beside them)" if adam_l2 and not foreach else ""))


def stepped_elements(s: Settings, option: Option, P: int, N: int) -> int:
    """Elements of the largest tensor the optimizer steps at once on this GPU (a bound: the whole partition stands
    in for its largest parameter group)."""
    if option.stage == 3:
        part = partition_stage3(P, N)
        return min(s.sub_group_size, part) if s.sub_group_size > 0 else part
    if option.stage in (1, 2) or uses_bf16_optimizer(s, option):
        return partition_stage12(P, N)
    return P  # stage 0: FP16_Optimizer's flat fp32 groups, or the fp32 parameters themselves


def sub_group_gradient(s: Settings, option: Option, stepped: int, held12: int = 0) -> tuple[int, int]:
    """(bytes the stepped sub-group's fp32 gradient holds through its optimizer step, the peak while it is built)
    at stage 3 with the optimizer on the GPU; (0, 0) elsewhere.

    stage3.py _prepare_fp32_grad_for_sub_group: ``flatten(averaged_gradients[i]).to(master dtype)``. The averaged
    gradients are views of grad_partitions_flat_buffer (independent_gradient_partition_epilogue), so flatten is a
    torch.cat copy in the gradient dtype (a view only for a one-parameter sub-group: this is the expected case,
    not a bound), and ``.to`` a second copy where that dtype is not the master's; the cat copy dies when the
    statement ends. _release_sub_group sets ``.grad = None`` before the next sub-group is prepared, so one
    sub-group's gradient exists at a time (exact; measured: benchmarks/zero3_step.md). With offload_optimizer the
    gradients already sit in the host (or GPU-resident) fp32 buffers counted in memory/states.py.

    Stage 1 and 2 (``held12``: the master-dtype gradient partition memory/states.py sizes, key STEP12_GRAD_KEY;
    stage 1 runs the same step() with partition_gradients False):
    stage_1_and_2.py step() builds ``flat_grad_partition = flatten(averaged_gradients)`` (a torch.cat copy of the
    16-bit views into grads_in_partition), then ``single_grad_partition = flat_grad_partition.to(master dtype)``,
    then ``del flat_grad_partition``; the optimizer steps and ``.grad = None`` frees it, one parameter group at a
    time. Held: ``held12``; while built: the 16-bit copy beside it where the master dtype differs (where it is the
    same, ``.to`` returns the copy itself)."""
    if option.stage in (1, 2) and option.offload_optimizer == Device.NONE and held12:
        M = master_bytes(s)
        w = B.nbytes(s.precision)
        return held12, held12 + (w * (held12 // M) if w != M else 0)
    if option.stage != 3 or option.offload_optimizer != Device.NONE:
        return 0, 0
    M = master_bytes(s)
    a = B.nbytes(s.grad_accum_dtype)
    held = M * stepped
    return held, held + (a * stepped if a != M else 0)


def held_gradient(s: Settings, option: Option, part: int) -> int:
    """The stepped sub-group's fp32 gradient while the optimizer steps it (no activations subtracted): what a
    reading of live tensors at the base optimizer's step sees in the gradients row beside the partition buffer
    (benchmarks/gpu/compare.py); ``part``: this rank's gradient partition in elements. Stage 2: the partition's
    gradient in the master dtype (step() holds all of it while the optimizer steps); stage 1 runs the same step()."""
    if option.stage in (1, 2):
        return sub_group_gradient(s, option, part, master_bytes(s) * part)[0]
    stepped = min(s.sub_group_size, part) if s.sub_group_size > 0 else part
    return sub_group_gradient(s, option, stepped)[0]


def norm_copy(option: Option, largest: int, N: int, P: int = 0, held12: int = 0) -> int:
    """The gradient norm's fp64 copy at stage 3 with the optimizer on the GPU: stage3.py get_grad_norm_direct
    takes each gradient partition's norm through ``g.to(get_norm_dtype())`` (zero/utils.py: float64 where the
    accelerator has it, as CUDA does), one parameter at a time, before the sub-group loop: 8 B × the largest
    trainable parameter's partition (exact where the parameter list is known, else the largest layer bounds it;
    measured: benchmarks/zero3_step.md pre-loop).

    Stage 1/2 (``held12``: the step builds a gradient partition, memory/states.py STEP12_GRAD_KEY): stage_1_and_2.py
    scaled_global_norm -> get_grad_norm_direct takes ``vector_norm(g.data.to(get_norm_dtype()))`` of each averaged
    gradient before the step's flatten: 8 B × the largest trainable parameter's piece of the partition (at most
    the partition, ``P`` elements over ``N`` ranks; measured: benchmarks/zero2_step.md, one large parameter)."""
    if option.stage in (1, 2) and option.offload_optimizer == Device.NONE and held12:
        return NORM_BYTES * min(largest, partition_stage12(P, N)) if largest and P else 0
    if option.stage != 3 or option.offload_optimizer != Device.NONE:
        return 0
    return NORM_BYTES * partition_stage3(largest, N)


def _step_overflow_check(s: Settings, option: Option, largest: int, N: int, P: int, held12: int) -> int:
    """Stage 1/2 in fp16 with the optimizer on the GPU: step() first runs check_overflow ->
    has_overflow_partitioned_grads_serial, _has_inf_or_nan on each averaged gradient piece of the partition, one after
    the other, before the norm: by release (memory/ds_changes.py OVERFLOW_CHECK; 0.13.3-0.19.5: 11 B per element of
    the largest piece, 0 from 0.19.6). bf16 and fp32 runs skip it (``if self.dtype == torch.float16``)."""
    if option.stage not in (1, 2) or option.offload_optimizer != Device.NONE or s.precision != Precision.FP16:
        return 0
    if not held12 or not largest or not P:
        return 0
    return era(OVERFLOW_CHECK, s.release).bytes_for(B.nbytes(s.precision)) * min(largest, partition_stage12(P, N))


def sub_group_bound(s: Settings, option: Option, P: int, N: int, largest: int) -> int:
    """The most elements one stage-3 sub-group can hold: stage3.py _create_fp16_sub_groups closes a sub-group at
    the first parameter that takes it to sub_group_size or more, so it can pass sub_group_size by up to the
    largest parameter's partition less one (a bound; the expected size is :func:`stepped_elements`)."""
    stepped = stepped_elements(s, option, P, N)
    part = partition_stage3(P, N)
    if option.stage != 3 or not largest or stepped >= part:
        return stepped
    return min(part, s.sub_group_size - 1 + partition_stage3(largest, N))


def _shares(s: Settings, option: Option, stepped: int, temporaries: int, norm: int,
            activations: int, held12: int = 0) -> tuple[int, int]:
    """(the gradient's share, the temporaries' share) of the step's working set beyond the activations, for a
    sub-group of ``stepped`` elements."""
    held, built = sub_group_gradient(s, option, stepped, held12)
    before_optimizer = max(built, norm)
    working = max(before_optimizer, held + temporaries * master_bytes(s) * stepped)
    grad_extra = max(0, before_optimizer - activations)
    return grad_extra, max(0, working - activations) - grad_extra


def step_terms(s: Settings, option: Option, P: int, N: int, activations: int, optim: str | None,
               notes: list[str], largest: int = 0, held12: int = 0, freed1: int = 0) -> list[Term]:
    """The step's allocations beyond the activations freed before it: the stage-3 sub-group's fp32 gradient and
    the optimizer's temporaries (0, 1 or 2 terms).

    ``largest``: the largest trainable parameter (its partition's fp64 norm copy precedes the sub-group loop).
    ``held12``: at stage 1/2, the master-dtype gradient partition step() builds (memory/states.py STEP12_GRAD_KEY;
    the largest parameter group's: the groups are stepped one after another).
    ``freed1``: at stage 1, the full-size gradients outside the partition (memory/states.py STEP1_FREED_KEY), freed
    before the step begins: the step reuses them as it reuses the activations.
    The step's working set is max(the norm's copy, building the gradient, the gradient + the optimizer's
    temporaries); what exceeds the activations is split into the gradient's share (key GRAD_KEY) and the
    temporaries' (KEY), so the part an optimizer choice moves stays its own term (advisor/rules.py _matters).
    Each share's bound is the same for the largest sub-group DeepSpeed can build (:func:`sub_group_bound`)."""
    impl = implementation(s, option, optim)
    if impl is None and optim in OTHER_CLIENT_OPTIMIZERS and option.offload_optimizer == Device.NONE \
            and client_optimizer_used(s):
        notes.append(f"optim {optim}: its step's temporaries are not modelled (none counted)")
    temporaries = impl.temporaries if impl is not None else 0
    activations += freed1  # what the step finds freed: the activations, and at stage 1 the gradients outside it
    stepped = stepped_elements(s, option, P, N)
    M = master_bytes(s)
    held, built = sub_group_gradient(s, option, stepped, held12)
    norm = norm_copy(option, largest, N, P, held12)
    check = _step_overflow_check(s, option, largest, N, P, held12)
    norm = max(norm, check)
    grad_extra, temp_extra = _shares(s, option, stepped, temporaries, norm, activations, held12)
    grad_bound, temp_bound = _shares(s, option, sub_group_bound(s, option, P, N, largest), temporaries, norm,
                                     activations, held12)
    terms: list[Term] = []
    if option.stage in (1, 2) and (grad_extra or grad_bound):
        w = B.nbytes(s.precision)
        per = check // min(largest, partition_stage12(P, N)) if check else 0
        check_words = f", {per} B × that piece (fp16 overflow check, by release)" if check else ""
        cast = f" + {w} B cat copy while .to({M} B) runs" if built > held else " (the cat copy is it)"
        dtype = "fp32" if M == B.DTYPE_BYTES["fp32"] else "master-dtype"
        freed = " and the gradients outside the partition" if option.stage == 1 else ""
        terms.append(Term("gradients", Resource.GPU, grad_extra, GRAD_KEY,
                          f"{dtype} gradient partition, built in the step (beyond the activations{freed} freed "
                          "before it)",
                          f"max(0, max({M} B/param / N{cast}, 8 B × largest parameter's piece (norm){check_words}) "
                          "- activations"
                          f"{' - gradients outside the partition' if freed else ''})",
                          "zero/stage_1_and_2.py DeepSpeedZeroOptimizer.step (single_grad_partition = "
                          "flatten(averaged_gradients).to(...); freed after _optimizer_step); get_grad_norm_direct "
                          "(fp64 copy)"))
    elif grad_extra or grad_bound:
        a = B.nbytes(s.grad_accum_dtype)
        cast = f" + {a} B cat copy while .to({M} B) runs" if built > held else " (the cat copy is it)"
        terms.append(Term("gradients", Resource.GPU, grad_extra, GRAD_KEY,
                          "fp32 gradient of one sub-group, built in the step (beyond the activations freed "
                          "before it)", f"max(0, max({M} B × min(sub_group_size, P/N){cast}, 8 B × largest "
                          "parameter / N (norm)) - activations)",
                          "zero/stage3.py _prepare_fp32_grad_for_sub_group (freed by _release_sub_group); "
                          "get_grad_norm_direct (fp64 copy)",
                          # exact for a sub-group of sub_group_size; one that passes it (sub_group_bound) is the bound
                          kind=TermKind.BOUND if grad_bound > grad_extra else TermKind.EXACT,
                          bound=grad_bound if grad_bound > grad_extra else None))
    if (temp_extra or temp_bound) and impl is not None:
        extra = (" beside the partition's fp32 gradient" if option.stage in (1, 2) else
                 " beside the sub-group's fp32 gradient") if held else ""
        # a buffer of the step, not a model state (model states stay what DeepSpeed's own estimator counts)
        terms.append(Term("buffers", Resource.GPU, temp_extra, KEY,
                          f"{impl.words} step temporaries{extra} beyond the activations freed before the step",
                          f"max(0, {impl.temporaries} × {M} B × stepped partition"
                          f"{' + the fp32 gradient' if held else ''} - activations) - the gradient's share",
                          impl.source, kind=TermKind.BOUND, bound=temp_bound if temp_bound > temp_extra else None))
    terms += _offload_step_copy(s, option, P, N, activations)
    return terms


def _offload_step_copy(s: Settings, option: Option, P: int, N: int, activations: int) -> list[Term]:
    """Stage 1/2 with the optimizer offloaded, DeepSpeed 0.14.1-0.16.9 (memory/ds_changes.py OFFLOAD_STEP_COPY):
    step() moves the stepped fp32 partition to the GPU (``fp32_partition.to(accelerator)``) and copies it into the
    16-bit partition, once per parameter group, after backward has freed the activations."""
    copy = era(OFFLOAD_STEP_COPY, s.release)
    if option.stage not in (1, 2) or option.offload_optimizer == Device.NONE or not copy.bytes_per_element or not P:
        return []
    extra = max(0, copy.bytes_per_element * partition_stage12(P, N) - activations)
    if not extra:
        return []
    return [Term("buffers", Resource.GPU, extra, OFFLOAD_STEP_COPY_KEY,
                 f"fp32 partition moved to the GPU in the step (DeepSpeed {releases_of(OFFLOAD_STEP_COPY, copy)}),"
                 " beyond the activations freed before it",
                 f"max(0, {copy.bytes_per_element} B/param / N - activations)",
                 f"zero/stage_1_and_2.py DeepSpeedZeroOptimizer.step: {copy.source}")]


def boundary_norm_terms(s: Settings, option: Option, P: int, N: int, largest: int, activations: int,
                        live: int, compact: bool) -> list[Term]:
    """Stage 1/2 with the optimizer offloaded: at the accumulation boundary each parameter's gradient piece in the
    rank's partition is read through ``.to(get_norm_dtype())`` (fp64) for its norm before it is copied to the host
    (stage_1_and_2.py copy_grads_in_partition -> set_norm_for_param_grad_in_gpu, 0.14-0.19.8; the compact fp32
    path takes ``source.data.to(get_norm_dtype())`` the same way). It runs in backward's reduce hooks, so it is not
    freed activations the step reuses: it lands beside what backward still holds when the largest parameter's
    gradient is reduced. The rank whose partition holds the largest trainable parameter peaks there (gpjt's
    per-rank memory_stats: ranks 0 and 7, which hold a Llama-3-8B's embedding and LM head, peak 2.4-3.0 GiB
    above the other six at both 1001 and 2001 tokens).

    ``activations``: what backward frees or has not built when the norm runs (the activations' peak, and the
    reduction's flat copy, freed before copy_grads_in_partition); ``live``: the activations still held at that
    moment (an untied LM head's gradient comes first in backward, with every layer's kept tensors live; a tied or
    first-layer weight's comes last, with none); the parameter's own 16-bit gradient is live beside the copy unless
    the compact fp32 buffer (a model state) holds it."""
    if option.stage not in (1, 2) or option.offload_optimizer == Device.NONE or not largest or not P:
        return []
    norm = NORM_BYTES * min(largest, partition_stage12(P, N))
    # then update_overflow_tracker_for_param_grad tests the parameter's whole gradient, one after the other: the
    # larger of the two is live (memory/ds_changes.py OVERFLOW_CHECK: by release)
    check = era(OVERFLOW_CHECK, s.release)
    per_element = check.bytes_for(B.nbytes(s.precision))
    overflow = per_element * largest
    grad = 0 if compact else B.nbytes(s.precision) * largest
    extra = max(0, max(norm, overflow) + grad + live - activations)
    if not extra:
        return []
    own = "" if compact else f" + {B.nbytes(s.precision)} B × largest parameter (its gradient)"
    if overflow > norm:
        what = (f"overflow check of the largest parameter's whole gradient at the accumulation boundary (DeepSpeed "
                f"{releases_of(OVERFLOW_CHECK, check)}; in backward, beyond the activations it does not coexist "
                "with)")
        size = f"{per_element} B × largest parameter (overflow check)"
        source = ("zero/stage_1_and_2.py copy_grads_in_partition -> update_overflow_tracker_for_param_grad "
                  f"({check.source})")
    else:
        what = ("fp64 norm copy of the largest parameter's gradient piece at the accumulation boundary (in "
                "backward, beyond the activations it does not coexist with)")
        size = "8 B × largest parameter's piece"
        source = ("zero/stage_1_and_2.py copy_grads_in_partition (set_norm_for_param_grad_in_gpu: "
                  "grad.to(get_norm_dtype()).norm(2)); zero/utils.py get_norm_dtype (fp64)")
    # a buffer of backward's reduction, not a model state (model states stay what DeepSpeed's own estimator counts)
    return [Term("buffers", Resource.GPU, extra, BOUNDARY_NORM_KEY, what,
                 f"max(0, {size}{own} + activations live then - activations)", source)]
