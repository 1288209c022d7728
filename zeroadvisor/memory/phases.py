"""The load and save phases: memory around the training step, on the GPU, in host RAM per node, on NVMe.

A phase is a sequence of moments; at each moment some allocations coexist. A moment's terms are
per process: ``every_rank`` terms exist in every local rank's process, ``rank0`` terms only in
global rank 0's (which is therefore the most loaded GPU and its node the most loaded node). A
phase's peak on a device is the largest moment on that device:

    GPU            max over moments of  every_rank + rank0           (gpu terms, rank 0)
    host per node  max over moments of  g · every_rank + rank0       (cpu terms, g = GPUs per node)
    NVMe per node  the same with nvme terms

Every term says whether it is ``exact`` (the bytes DeepSpeed/transformers allocate, from the code),
a ``bound`` (an upper bound on a transient) or an ``allowance``. Sources are relative to
``deepspeed/`` (DeepSpeed 0.19.8) or ``transformers/`` (5.24) unless they say otherwise.

Inputs that decide the load phase and that no DeepSpeed config holds are ``LoadInputs`` (model/spec.py: the one
definition, with the CLI's and the model description's inputs); their defaults are the Hugging Face Trainer's
behaviour, and each default taken is returned as a note. The checkpoint's dtype is a model fact
(``ModelSpec.checkpoint_dtype``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from zeroadvisor.deepspeed.settings import DeepSpeedSettings, read
from zeroadvisor.jsontypes import JSONObject
from zeroadvisor.memory import bytes as B
from zeroadvisor.memory import ds_changes
from zeroadvisor.memory.ds_changes import Change
from zeroadvisor.memory.options import Option
from zeroadvisor.memory.settings import Settings
from zeroadvisor.memory.states import (
    added_trainable,
    frozen_terms,
    largest_trainable,
    master_bytes,
    partition_stage3,
    partition_stage12,
    trainable,
)
from zeroadvisor.memory.terms import Term, ceil_div
from zeroadvisor.model.spec import LoadInputs, ModelSpec
from zeroadvisor.vocab import Device, Phase, Resource, TermKind

if TYPE_CHECKING:
    from zeroadvisor.memory.cluster import Cluster

LOAD, SAVE = Phase.LOAD, Phase.SAVE
EXACT, BOUND, ALLOWANCE = TermKind.EXACT, TermKind.BOUND, TermKind.ALLOWANCE


@dataclass(frozen=True, slots=True)
class SaveInputs:
    """How checkpoints are saved.

    ``gather_16bit_weights``: ``zero_optimization.stage3_gather_16bit_weights_on_model_save`` (the
    consolidated 16-bit model on rank 0 when the model is saved: HF Trainer save_model ->
    engine._zero3_consolidated_16bit_state_dict). ``checkpoint``: ``engine.save_checkpoint`` runs
    (model states + each rank's optimizer partition; the HF Trainer does at every save_steps).
    """

    gather_16bit_weights: bool = False
    checkpoint: bool = True

    @classmethod
    def of(cls, ds: DeepSpeedSettings, checkpoint: bool = True) -> SaveInputs:
        """From what DeepSpeed reads of the config (deepspeed/settings.py)."""
        return cls(gather_16bit_weights=ds.gather_16bit_weights_on_model_save, checkpoint=checkpoint)

    @classmethod
    def from_config(cls, config: JSONObject | None, checkpoint: bool = True) -> SaveInputs:
        return cls.of(read(config), checkpoint)


@dataclass(frozen=True, slots=True)
class PhaseSplit:
    """What one rank holds around training under a parallel layout (memory/parallel.py).

    ``parameters``: the rank's parameters after the tensor, pipeline and expert splits; ``built``: what it
    builds before deepspeed.initialize: PipelineModule and MoE build only the local layers / experts
    (runtime/pipe/module.py _build, moe/layer.py num_local_experts) but AutoTP shards a model that was loaded
    whole (engine.py: _configure_tensor_parallel runs before _configure_distributed_model moves it);
    ``data``: the ZeRO partition degree; ``writers_on_node``: the processes on rank 0's node that write
    model states (data-parallel rank 0 of each tensor rank: groups._init_tp_mesh_device puts the tensor
    ranks innermost, so on one node; pipeline stages are the outer axis of PipeDataParallelTopology).
    """

    parameters: int
    built: int
    data: int
    writers_on_node: int = 1

    @classmethod
    def whole(cls, spec: ModelSpec, cluster: Cluster) -> PhaseSplit:
        return cls(spec.parameters, spec.parameters, cluster.gpus)


@dataclass(frozen=True, slots=True)
class FrozenAtLoad:
    """The frozen models a preference/RL trainer builds before the policy's engine (memory/method.py
    frozen_at_load): ``engines``, their prepared engines' terms (from the train phase), present at every moment of
    the policy's load; ``built_parameters``, their parameters, read into host RAM on every rank in the policy's
    load dtype before prepare_deepspeed moves them (partitioned by zero.Init instead where it is in effect);
    ``unused_parameters``, axolotl's copy that no trainer gets (among ``built_parameters``), which no engine holds:
    under zero.Init its partition is on the GPU while the models are built."""

    engines: tuple[Term, ...] = ()
    built_parameters: int = 0
    unused_parameters: int = 0


@dataclass(frozen=True, slots=True)
class Moment:
    """Allocations that coexist at one point of a phase, per process."""

    name: str
    every_rank: tuple[Term, ...] = ()
    rank0: tuple[Term, ...] = ()

    def rank_bytes(self, rank0: bool = True, devices: tuple[Resource, ...] = (Resource.GPU,),
                   bound: bool = False) -> int:
        """Bytes one process holds on ``devices`` (rank 0's when ``rank0``): expected, or their bound."""
        terms = self.every_rank + (self.rank0 if rank0 else ())
        return sum(t.upper if bound else t.nbytes for t in terms if t.device in devices)

    def node_bytes(self, device: Resource, ranks_on_node: int) -> int:
        """Bytes on ``device`` summed over the processes of rank 0's node."""
        every = sum(t.nbytes for t in self.every_rank if t.device == device)
        return ranks_on_node * every + sum(t.nbytes for t in self.rank0 if t.device == device)


@dataclass(frozen=True, slots=True)
class PhaseMemory:
    """A phase's moments and its peaks (bytes): GPU (rank 0), host RAM and NVMe per node (rank 0's node)."""

    phase: Phase
    moments: tuple[Moment, ...]
    ranks_on_node: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def peak_gpu(self) -> int:
        return max((m.rank_bytes() for m in self.moments), default=0)

    @property
    def peak_gpu_bound(self) -> int:
        """The GPU peak's bound: the largest moment with each term at its bound."""
        return max((m.rank_bytes(bound=True) for m in self.moments), default=0)

    @property
    def peak_host_per_node(self) -> int:
        return max((m.node_bytes(Resource.CPU, self.ranks_on_node) for m in self.moments), default=0)

    @property
    def peak_nvme_per_node(self) -> int:
        return max((m.node_bytes(Resource.NVME, self.ranks_on_node) for m in self.moments), default=0)

    def binding_moment(self, device: Resource) -> Moment | None:
        """The moment that sets the peak on ``device`` (Resource.GPU, Resource.CPU or Resource.NVME)."""
        if not self.moments:
            return None
        if device == Resource.GPU:
            return max(self.moments, key=lambda m: m.rank_bytes())
        return max(self.moments, key=lambda m: m.node_bytes(device, self.ranks_on_node))

    def terms(self) -> list[Term]:
        """The terms behind each device's peak: rank 0's GPU terms and rank 0's node's host/NVMe terms."""
        out: list[Term] = []
        for device in (Resource.GPU, Resource.CPU, Resource.NVME):
            moment = self.binding_moment(device)
            if moment is None:
                continue
            for t in moment.every_rank:
                if t.device == device:
                    if device != Resource.GPU and self.ranks_on_node > 1:
                        out.append(Term(t.row, t.device, t.nbytes * self.ranks_on_node, t.key,
                                        f"{t.what} (× {self.ranks_on_node} local ranks)",
                                        f"{t.formula} × {self.ranks_on_node} ranks", t.source, t.phase, t.kind))
                    else:
                        out.append(t)
            out += [t for t in moment.rank0 if t.device == device]
        return out


def _term(row: str, device: Resource, nbytes: int, key: str, what: str, formula: str, source: str, kind: TermKind,
          phase: Phase = LOAD) -> Term:
    return Term(row, device, int(nbytes), key, what, formula, source, phase=phase, kind=kind)


def largest_param(spec: ModelSpec) -> int | None:
    """The largest single parameter's element count (exact from the parameter list, else a bound)."""
    if spec.parameter_numels:
        return max(spec.parameter_numels)
    return spec.largest_layer_parameters  # a module's own parameters: at least its largest parameter


def resolve_load(load: LoadInputs, s: Settings, option: Option,
                 checkpoint_dtype: str | None = None, quantized: bool = False) -> tuple[str, bool, list[str]]:
    """(load dtype, zero.Init in effect, notes on the defaults taken); ``checkpoint_dtype``: ModelSpec's;
    ``quantized``: the model is loaded quantized by bitsandbytes (QLoRA)."""
    notes: list[str] = []
    if load.load_dtype is not None:
        load_dtype = B.dtype_name(load.load_dtype)
    elif checkpoint_dtype is not None:
        load_dtype = B.dtype_name(checkpoint_dtype)
        notes.append(f"load dtype not given: assumed the checkpoint's {load_dtype} (transformers 5 from_pretrained "
                     "dtype=\"auto\"); set it with the load dtype input")
    else:
        load_dtype = "fp32"
        notes.append("load dtype not given and the checkpoint's dtype unknown: assumed fp32 (torch's default "
                     "dtype); from_pretrained(dtype=\"auto\") loads the checkpoint's dtype, often bf16 (half the host "
                     "RAM)")
    if quantized and option.stage == 3:
        # transformers never enters zero.Init for a quantized model (modeling_utils.py get_init_context: "if not
        # is_quantized and not _is_ds_init_called"; PreTrainedModel.__init__ likewise): the packed weights are
        # loaded whole onto each GPU and deepspeed.initialize partitions them (stage3.py
        # _convert_to_zero_parameters), whatever zero3_init_flag or --zero-init says
        zero_init = False
        notes.append("zero.Init: not used for a bitsandbytes-quantized model (transformers modeling_utils.py "
                     "get_init_context skips it when is_quantized); the quantized model is loaded whole on "
                     "every GPU, then partitioned by deepspeed.initialize"
                     + (" (the zero.Init input is ignored)" if load.zero_init else ""))
    elif load.zero_init is None:
        zero_init = option.stage == 3
        notes.append("zero.Init: assumed the Hugging Face Trainer's behaviour, "
                     + ("on at stage 3 (the DeepSpeed config is known before from_pretrained)" if zero_init
                        else f"off at stage {option.stage} (zero.Init exists only at stage 3)"))
    else:
        zero_init = load.zero_init and option.stage == 3
        if load.zero_init and option.stage != 3:
            notes.append(f"zero.Init ignored at stage {option.stage}: only stage 3 partitions parameters "
                         "(engine.py _configure_distributed_model: zero_optimization_partition_weights())")
    return load_dtype, zero_init, notes


def load_moments(spec: ModelSpec, s: Settings, option: Option, cluster: Cluster, load: LoadInputs,
                 notes: list[str] | None = None, split: PhaseSplit | None = None,
                 beside: FrozenAtLoad | None = None) -> list[Moment]:
    """The load phase's moments for ``option``, in order. ``cluster``: estimate.Cluster (gpus, gpu_memory);
    ``split``: the rank's share under a parallel layout (whole model over all GPUs when None); ``beside``: a
    preference/RL trainer's frozen models, built before the policy's engine."""
    notes = notes if notes is not None else []
    load_dtype, zero_init, resolved = resolve_load(load, s, option, spec.checkpoint_dtype,
                                                  quantized=spec.quantized_parameters > 0)
    notes += resolved
    split = split or PhaseSplit.whole(spec, cluster)
    P, N = split.parameters, split.data
    T = trainable(spec) if spec.trainable_parameters is not None else P  # what the optimizer gets (PEFT: adapters)
    wl = B.nbytes(load_dtype)
    # engine.py _mixed_precision_dtypes: param dtype fp16/bf16 when enabled; otherwise no cast (the
    # params keep the dtype they were loaded in; __check_params is a no-op in 0.19.8)
    w = B.nbytes(s.precision) if s.mixed_precision else wl
    L = largest_param(spec)
    eng = "runtime/engine.py DeepSpeedEngine._configure_distributed_model"
    moments: list[Moment] = []

    if zero_init:
        moments += _zero_init_moments(spec, s, option, P, N, w, load_dtype, notes)
    else:
        # bitsandbytes (QLoRA): from_pretrained with a BitsAndBytesConfig and no device_map loads onto the
        # current GPU (quantizers/quantizer_bnb_4bit.py update_device_map: {"": current_device}) and the quantized
        # Linear weights are stored packed as they are loaded
        quantized = spec.quantized_parameters
        on_gpu = load.meta_device or load.script_moves_to_gpu or bool(quantized)
        built_dev = Resource.GPU if on_gpu else Resource.CPU
        how = ("quantized by bitsandbytes on the GPU (device_map {\"\": current device})" if quantized else
               "materialised on the GPU (meta-device build)" if load.meta_device else
               "moved to the GPU by the script" if load.script_moves_to_gpu else "materialised in host RAM")
        what = "whole model" if split.built == spec.parameters else "the layers this rank builds"
        built_bytes = wl * (split.built - quantized) + spec.quantized_bytes
        built = _term("parameters", built_dev, built_bytes, "loaded_model", f"{what} in {load_dtype}, {how}",
                      f"{wl} B/param" + (" (quantized Linear weights: their packed bytes)" if quantized else ""),
                      "transformers core_model_loading.py _materialize_copy (each tensor read into memory in the "
                      "load dtype; device_map=None -> cpu), on every local rank", EXACT)
        moments.append(Moment("built", (built,)))
        if w != wl and L:
            # _cast_module_mixed_precision: p.data = p.data.to(param_dtype), one parameter at a time, on
            # whatever device the model is on, before module.to(device)
            moments.append(Moment("cast", (built, _term(
                "parameters", built_dev, w * L, "cast_copy", "16-bit copy of the parameter being cast",
                f"{w} B × largest parameter", "runtime/engine.py _cast_module_mixed_precision", BOUND))))
        # PEFT: the adapters join the base; bitsandbytes weights keep their quantized bytes (not cast); modules
        # frozen without PEFT are among the P parameters already (states.py added_trainable: 0)
        moved_bytes = w * P
        if spec.trainable_parameters is not None:
            moved_bytes = w * (P - spec.quantized_parameters) + spec.quantized_bytes + w * added_trainable(spec)
        whose = "whole model" if P == spec.parameters else "the rank's share of the model"
        moved = _term("parameters", Resource.GPU, moved_bytes, "module_on_device",
                      f"{whose} on every GPU in {'fp32' if w == 4 else str(w * 8) + '-bit'}",
                      f"{w} B/param", eng + " (cast params, then self.module.to(self.device))", EXACT)
        moments.append(Moment("moved", (moved,)))
        if option.stage in (1, 2):
            moments += _stage12_flatten(option, cluster, T, N, w, moved, notes, s.release)
        elif option.stage == 3:
            moments += _stage3_defragment(option, T, N, w, notes)
    # PEFT: DeepSpeed flattens and partitions the optimizer's (trainable) parameters only; the frozen
    # base stays beside them (states.py frozen_terms)
    frozen = tuple(dataclasses.replace(t, phase=LOAD) for t in frozen_terms(s, option, N, spec, notes)
                   if t.row == "parameters")
    if option.stage == 3:
        fp32 = _stage3_fp32_partitions(s, option, T, N, w)
        moments.append(dataclasses.replace(fp32, every_rank=fp32.every_rank + frozen))
    # the stage-1/2 staging buffers hold one trainable parameter's gradient (largest_param_numel over bit16_groups)
    L_grad = largest_trainable(spec, L) if L else L
    moments.append(Moment("initialized", tuple(_initialized_terms(s, option, T, N, w, L_grad)) + frozen))
    return _beside_frozen_models(moments, beside, zero_init, load_dtype, w, N) if beside else moments


def _beside_frozen_models(moments: list[Moment], beside: FrozenAtLoad, zero_init: bool,
                          load_dtype: str, w: int, N: int) -> list[Moment]:
    """The policy's load moments with a preference/RL trainer's frozen models beside them (FrozenAtLoad).

    Order (trl/trainer/dpo_trainer.py DPOTrainer.__init__ @ v1.9.0): the policy is built, then the reference is
    built (host RAM, or zero.Init partitions) and its engine prepared, then the policy's engine is initialized in
    train(). So the frozen engines sit beside every moment after the policy's build, and one moment has both
    models in host RAM, the reference not yet moved."""
    if not beside.engines and not beside.built_parameters:
        return moments
    out: list[Moment] = []
    for m in moments:
        if m.name == "loading":  # inside the policy's from_pretrained: the frozen models do not exist yet
            out.append(m)
            continue
        if m.name == "built" and beside.built_parameters and not zero_init:
            wl = B.nbytes(load_dtype)
            host = _term("parameters", Resource.CPU, wl * beside.built_parameters, "frozen_models_built",
                         f"the frozen models (reference/reward, or axolotl's copy no trainer gets) read in "
                         f"{load_dtype} before their engines move them to the GPU (the copy: before it is dropped)",
                         f"{wl} B/param of theirs, on every local rank",
                         "trl/trainer/utils.py create_model_from_path (model_init_kwargs, device_map None) in "
                         "DPOTrainer.__init__ @ v1.9.0, before prepare_deepspeed; axolotl/train.py "
                         "setup_reference_model", EXACT)
            out.append(Moment("frozen_models_built", (*m.every_rank, host), m.rank0))
        if m.name == "built" and beside.unused_parameters and zero_init:
            # axolotl's copy built under zero.Init as the policy is (HF's from_pretrained under
            # is_deepspeed_zero3_enabled), each rank's partition in the config's dtype, freed when setup returns
            part = _term("parameters", Resource.GPU, w * ceil_div(beside.unused_parameters, N),
                         "unused_copy_partition",
                         "axolotl's copy no trainer gets, partitioned by zero.Init while the models are built",
                         f"{w} B × its parameters / {N}", "axolotl/train.py setup_reference_model (the model "
                         "loader under zero.Init); dropped when setup_model_and_trainer returns", EXACT)
            out.append(Moment("frozen_models_built", (*m.every_rank, *beside.engines, part), m.rank0))
        out.append(Moment(m.name, m.every_rank + beside.engines, m.rank0))
    return out


def _stage3_fp32_partitions(s: Settings, option: Option, P: int, N: int, w: int) -> Moment:
    """stage3.py _create_fp32_partitions: converted = partition.to(dtype=master); append(converted.clone()).

    ``.to`` makes a copy unless the partition already is in the master dtype, and the clone is always a
    copy (see states.py: the no-copy branch is never taken), so a 16-bit model briefly holds the partition,
    its fp32 conversion and the fp32 clone of one sub-group (the whole partition with one sub-group).
    """
    part = partition_stage3(P, N)
    M = master_bytes(s)
    sub = min(s.sub_group_size, part) if s.sub_group_size > 0 else part
    dev = Resource.GPU if option.offload_optimizer == Device.NONE else Resource.CPU
    src = "runtime/zero/stage3.py DeepSpeedZeroOptimizer_Stage3._create_fp32_partitions"
    param_dev = Resource.GPU if option.offload_param == Device.NONE else Resource.CPU
    terms = [_term("parameters", param_dev, w * part, "lp_params", "parameter partition (flat)", f"{w} B/param / N",
                   src, EXACT),
             _term("optimizer_states", dev, M * part, "master", "fp32 master partition (clone)", f"{M} B/param / N",
                   src + " (converted.clone())", EXACT)]
    if M != w:
        terms.append(_term("optimizer_states", dev, M * sub, "master_conversion", "fp32 conversion of one sub-group "
                           "before it is cloned", f"{M} B × min(sub_group_size, P/N)", src + " (.to(dtype))", EXACT))
    return Moment("fp32_partitions", tuple(terms))


def _zero_init_moments(spec: ModelSpec, s: Settings, option: Option, P: int, N: int, w: int, load_dtype: str,
                       notes: list[str]) -> list[Moment]:
    part = partition_stage3(P, N)
    # partition_parameters.py Init._set_dtype: fp16/bf16 from the config, else fp32; _partition_param puts
    # each partition on remote_device (offload_param.device; nvme partitions pass through cpu)
    dev = Resource.GPU if option.offload_param == Device.NONE else Resource.CPU
    pinned = " (pinned)" if dev == Resource.CPU and s.offload_param_pin_memory else ""
    partitions = _term("parameters", dev, w * part, "lp_params", f"parameter partition{pinned}", f"{w} B/param / N",
                       "runtime/zero/partition_parameters.py Init._post_init_method -> _partition_param", EXACT)
    gathered: tuple[Term, ...] = ()
    L = spec.largest_layer_parameters
    if L:
        gathered = (_term("gathered_parameters", Resource.GPU, w * L, "load_gathered", "one module gathered while its "
                          "weights are copied in", f"{w} B × largest layer",
                          "transformers integrations/deepspeed.py _load_state_dict_into_zero3_model "
                          "(GatheredParameters(modifier_rank=0), one module at a time)", BOUND),)
    wc = B.nbytes(load_dtype)
    checkpoint = _term("parameters", Resource.CPU, wc * P, "checkpoint_rank0",
                       f"checkpoint state dict in {load_dtype} on "
                       "rank 0 (other ranks load it to meta)", f"{wc} B/param, rank 0",
                       "transformers modeling_utils.py _load_pretrained_model (zero3: map_location cpu on rank 0, "
                       "meta elsewhere; safetensors are memory-mapped, so these pages are file-backed)", BOUND)
    notes.append("zero.Init: only rank 0 reads the checkpoint's values (transformers 5 modeling_utils.py); "
                 "DeepSpeed's own estimator budgets largest_layer × 4 B × GPUs per node for this "
                 "(runtime/zero/stage3.py estimate_zero3_model_states_mem_needs, zero_init=True)")
    # loading: inside from_pretrained (checkpoint read on rank 0, one module gathered at a time); built: after
    # it returns (the state dict is released); moved: _configure_distributed_model leaves zero.Init params
    # where they are ("zero.Init() handles device placement of model")
    return [Moment("loading", (partitions, *gathered), (checkpoint,)), Moment("built", (partitions,)),
            Moment("moved", (partitions,))]


FLAT_COPY_KEY = "flat_copy"  # stage 1/2: the flat bit16 buffer built beside the parameters at load


def _stage12_flatten(option: Option, cluster: Cluster, P: int, N: int, w: int, moved: Term,
                     notes: list[str], release: str) -> list[Moment]:
    flat = partition_stage12(P, N) * N  # aligned to 2·N elements (nccl_start_alignment_factor = 2)
    src = "runtime/zero/stage_1_and_2.py DeepSpeedZeroOptimizer.__init__"
    copy_gpu = _term("parameters", Resource.GPU, w * flat, FLAT_COPY_KEY,
                     "flat bit16 copy of the parameters next to them",
                     f"{w} B/param", src + " (flatten_dense_tensors_aligned on the accelerator)", EXACT)
    gpu_memory = getattr(cluster, "gpu_memory", None)
    on_accelerator = ds_changes.runs(Change.FLATTEN_ON_ACCELERATOR, release)
    if on_accelerator and (gpu_memory is None or (w * P + w * flat) <= gpu_memory):
        # flatten_on_accelerator when available_memory >= flat buffer bytes: params + flat copy on the GPU
        return [Moment("flatten", (moved, copy_gpu))]
    # not enough room, or a release before 0.19.0 (always): every parameter is moved to the host
    # (param.cpu_data), flattened there, moved back
    notes.append(f"stage {option.stage}: DeepSpeed flattens the parameters on the host "
                 + ("(stage_1_and_2.py: 'Flattening param group on CPU'): the GPU has no room for a second copy "
                    "of the model" if on_accelerator else
                    f"(DeepSpeed {release}'s stage_1_and_2.py: 'create flat buffer in CPU'; from "
                    f"{ds_changes.CHANGES[Change.FLATTEN_ON_ACCELERATOR].since} it is built on the GPU where it "
                    "has room)"))
    host = (_term("parameters", Resource.CPU, w * P, "cpu_data", "parameters moved to the host to be flattened",
                  f"{w} B/param", src + " (param.cpu_data = param.data.cpu())", EXACT),
            _term("parameters", Resource.CPU, w * flat, FLAT_COPY_KEY, "flat bit16 copy built on the host",
                  f"{w} B/param", src + " (flatten_dense_tensors_aligned, use_cpu_data=True)", EXACT))
    return [Moment("flatten", host), Moment("flat_to_device", (
        host[1], _term("parameters", Resource.GPU, w * flat, "lp_params", "flat bit16 buffer moved to the GPU",
                       f"{w} B/param", src + " (flattened_buffer.to(device))", EXACT)))]


def _stage3_defragment(option: Option, P: int, N: int, w: int, notes: list[str]) -> list[Moment]:
    # Without zero.Init the engine moved the whole model (moment "moved"); DeepSpeedZeRoOffload then
    # partitions it parameter by parameter (partition_parameters.py _partition_param frees each full
    # param after copying its slice), so "moved" stays the GPU peak up to one parameter's partition.
    if option.offload_param != Device.NONE:
        return []
    part = partition_stage3(P, N)
    src = "runtime/zero/utils.py defragment (from stage3.py _create_fp16_partitions_with_defragmentation)"
    # defragment: copy every partition into one host buffer, free them, copy the buffer back
    return [Moment("defragment", (
        _term("parameters", Resource.CPU, w * part, "defragment_host", "parameter partitions staged in host RAM",
              f"{w} B/param / N", src, EXACT),
        _term("parameters", Resource.GPU, w * part, "lp_params", "parameter partition (flat)", f"{w} B/param / N",
              src, EXACT)))]


def _initialized_terms(s: Settings, option: Option, P: int, N: int, w: int, L: int | None) -> list[Term]:
    """What deepspeed.initialize leaves allocated. Optimizer states (Adam's moments) are not among them:
    torch and DeepSpeed optimizers create them lazily in the first step (stage_1_and_2.py and stage3.py
    initialize_optimizer_states build them eagerly only for Adagrad)."""
    M = master_bytes(s)
    terms: list[Term] = []
    if option.stage == 0:
        terms.append(_term("parameters", Resource.GPU, w * P, "lp_params", "model parameters", f"{w} B/param",
                           "runtime/engine.py (no ZeRO)", EXACT))
        if s.mixed_precision:
            terms.append(_term("optimizer_states", Resource.GPU, 4 * P, "master", "fp32 master weights", "4 B/param",
                               "runtime/fp16 or bf16 optimizer wrapper (fp32 flat copy)", EXACT))
        return terms
    if option.stage in (1, 2):
        part = partition_stage12(P, N)
        src = "runtime/zero/stage_1_and_2.py DeepSpeedZeroOptimizer"
        terms.append(_term("parameters", Resource.GPU, w * part * N, "lp_params",
                           "flat bit16 parameters (the params are "
                           "views into it)", f"{w} B/param", src + ".__init__ (bit16_groups_flat)", EXACT))
        dev = Resource.CPU if option.offload_optimizer != Device.NONE else Resource.GPU
        terms.append(_term("optimizer_states", dev, M * part, "master", "fp32 master partition", f"{M} B/param / N",
                           src + ".__init__ (single_partition_of_fp32_groups)", EXACT))
        if dev == Resource.CPU:
            terms += [
                _term("gradients", Resource.CPU, M * part, "fp32_grads", "host gradient partition", f"{M} B/param / N",
                      src + ".initialize_optimizer_states (single_grad_partition, kept with cpu_offload)", EXACT),
                _term("parameters", Resource.CPU, w * part, "lp_param_staging", "bit16 upload copy of the partition",
                      f"{w} B/param / N", src + ".__init__ (param_buffer_of_bit16_for_cpu_offload_groups)", EXACT),
            ]
            if L:
                terms += [
                    _term("buffers", Resource.CPU, w * L, "grad_staging", "host gradient staging buffer",
                          f"{w} B × largest parameter", src + ".__init__ (temp_grad_buffer_for_cpu_offload)", EXACT),
                    _term("buffers", Resource.GPU, w * L, "grad_staging", "GPU gradient staging buffer",
                          f"{w} B × largest parameter", src + ".__init__ (temp_grad_buffer_for_gpu_offload)", EXACT),
                ]
        return terms
    part = partition_stage3(P, N)
    a = B.nbytes(s.grad_accum_dtype)
    src = "runtime/zero/stage3.py DeepSpeedZeroOptimizer_Stage3"
    param_dev = Resource.GPU if option.offload_param == Device.NONE else Resource.CPU
    terms.append(_term("parameters", param_dev, w * part, "lp_params", "parameter partition (flat)",
                       f"{w} B/param / N", src + "._create_fp16_partitions_with_defragmentation", EXACT))
    # the term's resource: the GPU where nothing is offloaded, else the offload device's (Resource.CPU, Resource.NVME)
    opt_dev = Resource.GPU if option.offload_optimizer == Device.NONE else Resource.of(option.offload_optimizer)
    terms.append(_term("optimizer_states", opt_dev, M * part, "master", "fp32 master partition", f"{M} B/param / N",
                       src + "._create_fp32_partitions (always a copy)", EXACT))
    grad_dev = Resource.GPU if option.offload_optimizer == Device.NONE else Resource.CPU
    terms.append(_term("gradients", grad_dev, a * part, "lp_grads", "gradient partition buffer", f"{a} B/param / N",
                       src + "._setup_for_real_optimizer (grad_partitions_flat_buffer)", EXACT))
    if option.offload_optimizer == Device.CPU:
        terms.append(_term("gradients", Resource.CPU, M * part, "master_grads", "fp32 gradient buffers of the host "
                           "sub-groups", f"{M} B/param / N", src + ".initialize_optimizer_states "
                           "(subgroup_gradient_buffer)", EXACT))
    if s.contiguous_gradients:
        c = B.nbytes(s.communication_dtype)
        terms.append(_term("buffers", Resource.GPU, c * s.reduce_bucket_size, "ipg_buffer", "reduce bucket",
                           f"{c} B × reduce_bucket_size", src + "._setup_for_real_optimizer (IPG bucket.buffer)",
                           EXACT))
    return terms


def load_phase(spec: ModelSpec, s: Settings, option: Option, cluster: Cluster, load: LoadInputs | None = None,
               split: PhaseSplit | None = None, beside: FrozenAtLoad | None = None) -> PhaseMemory:
    """The load phase: the model created and handed to ``deepspeed.initialize`` (with ``beside``, a preference/RL
    trainer's frozen models)."""
    notes: list[str] = []
    moments = load_moments(spec, s, option, cluster, load or LoadInputs(), notes, split, beside)
    return PhaseMemory(LOAD, tuple(moments), cluster.gpus_on_a_node, tuple(dict.fromkeys(notes)))


def _largest_optimizer_storage(s: Settings, option: Option, P: int, N: int) -> int:
    """The largest single GPU storage in a rank's optimizer state dict (0 when it lives on the host)."""
    if option.stage == 0 or option.offload_optimizer != Device.NONE:
        return 0
    if option.stage in (1, 2):
        return 4 * partition_stage12(P, N)  # the fp32 flat partition and each Adam moment on it
    part = partition_stage3(P, N)
    sub = min(s.sub_group_size, part) if s.sub_group_size > 0 else part
    return 4 * sub  # one fp32 sub-group (master or a moment)


def save_phase(spec: ModelSpec, s: Settings, option: Option, cluster: Cluster, save: SaveInputs | None = None,
               split: PhaseSplit | None = None) -> PhaseMemory:
    """The save phase: ``save_checkpoint`` and/or the consolidated 16-bit model, as configured."""
    notes: list[str] = []
    moments = save_moments(spec, s, option, cluster, save or SaveInputs(), notes, split)
    return PhaseMemory(SAVE, tuple(moments), cluster.gpus_on_a_node, tuple(dict.fromkeys(notes)))


def save_moments(spec: ModelSpec, s: Settings, option: Option, cluster: Cluster, save: SaveInputs,
                 notes: list[str] | None = None, split: PhaseSplit | None = None) -> list[Moment]:
    """The save phase's moments (on top of the training state, which stays allocated meanwhile)."""
    split = split or PhaseSplit.whole(spec, cluster)
    P, N = split.parameters, split.data
    writers = split.writers_on_node
    w = B.nbytes(s.precision)
    eng = "runtime/engine.py DeepSpeedEngine"
    moments: list[Moment] = []
    if save.gather_16bit_weights and option.stage == 3:
        L = spec.largest_layer_parameters
        every: tuple[Term, ...] = ()
        if L:
            every = (_term("gathered_parameters", Resource.GPU, w * L, "save_gathered", "one module gathered",
                           f"{w} B × largest layer", eng + "._zero3_consolidated_16bit_state_dict "
                           "(GatheredParameters per module)", BOUND, SAVE),)
        # the consolidated model is whole: engine.py gathers across the data and the tensor dimensions
        moments.append(Moment("consolidate_16bit", every, (
            _term("parameters", Resource.CPU, w * spec.parameters, "consolidated_16bit", "whole 16-bit model on rank 0",
                  f"{w} B/param, rank 0", eng + "._zero3_consolidated_16bit_state_dict "
                  "(state_dict[key] = param.detach().cpu() on rank 0)", EXACT, SAVE),)))
    if save.checkpoint:
        if option.stage < 3:
            moments.append(Moment("model_states", (), (
                _term("parameters", Resource.CPU, w * P * writers, "model_states_copy",
                      "model state dict copied to the host" + (f" by each of the {writers} tensor ranks on the node"
                                                               if writers > 1 else ""),
                      f"{w} B/param, data-parallel rank 0" + (f" × {writers}" if writers > 1 else ""),
                      eng + "._save_checkpoint (checkpoint/utils.py "
                      "clone_tensors_for_torch_save to cpu, data-parallel rank 0 only)", EXACT, SAVE),)))
        largest = _largest_optimizer_storage(s, option, P, N)
        if largest:
            # _save_zero_checkpoint: torch.save(optimizer.state_dict()) on every rank; torch's _save copies
            # each non-CPU storage to the host as it writes it, one at a time
            moments.append(Moment("optimizer_partition", (
                _term("optimizer_states", Resource.CPU, largest, "save_staging", "largest optimizer-state storage "
                      "copied to the host while it is written", "4 B × partition (or sub-group)",
                      "torch/serialization.py _save (storage.cpu() per storage); " + eng
                      + "._save_zero_checkpoint (every rank)", BOUND, SAVE),)))
    return moments
