"""The effective DeepSpeed settings the memory model needs, built from the typed reading of a ds_config
(deepspeed/settings.py DeepSpeedSettings, its sections deepspeed/config_model.py: aliases, defaults per release,
"auto" and refused values are decided there; nothing here reads the dict or a raw section).

What the config leaves to someone else (``"auto"`` values filled by
the Hugging Face integration, a missing micro batch) is resolved here: from the value a flag or
the model description gave (``TrainingShape``) where there is one, else by an assumption recorded
as an ``AssumedInput``. A given value fills only what the config leaves open; where the config
decides, the config wins (DeepSpeed reads it) and ``given_conflicts`` reports the contradiction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from zeroadvisor.config.limits import MAX_DIMENSION
from zeroadvisor.deepspeed import schema
from zeroadvisor.deepspeed.config_model import Auto, Rejected, overlap_comm_at
from zeroadvisor.deepspeed.settings import GAS, MBS, TBS, BatchCounts, Config, DeepSpeedSettings, as_settings
from zeroadvisor.memory import bytes as B
from zeroadvisor.memory.assumed import AssumedInput
from zeroadvisor.memory.errors import EstimateError, config_pointer
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.version import DEEPSPEED_TARGET
from zeroadvisor.vocab import Device, Precision, Stage

ZERO = "zero_optimization"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Settings:
    """Effective settings, built once (``read_settings``); ``stage``/offload are the configured ones (options vary
    them)."""

    configured: bool
    stage: Stage
    precision: Precision  # the model (low-precision) dtype
    grad_accum_dtype: str  # a dtype name (bytes.DTYPE_BYTES): fp8 and int8 too
    communication_dtype: str
    immediate_grad_update: bool
    bf16_master_weights_and_grads: bool
    bf16_optimizer_states: bool
    fp16_master_weights_and_grads: bool
    optimizer: str  # key of bytes.OPTIMIZERS
    optimizer_label: str
    optimizer_elements: int
    cpu_adam_fp32_states: bool  # DeepSpeedCPUAdam fp32_optimizer_states (engine.get_optimizer_configuration)
    contiguous_gradients: bool
    reduce_scatter: bool
    multi_rank_bucket_allreduce: bool  # use_multi_rank_bucket_allreduce (stage 1/2 average_tensor)
    reduce_bucket_size: int
    allgather_bucket_size: int
    overlap_comm: bool | None  # None: DeepSpeed decides by stage (True iff stage 3)
    sub_group_size: int
    prefetch_bucket_size: int
    param_persistence_threshold: int
    model_persistence_threshold: int  # cap on the persistent parameters' total numel (default sys.maxsize)
    max_live_parameters: int
    max_reuse_distance: int  # stage3_max_reuse_distance: a released parameter used again within it stays
    offload_optimizer: Device
    offload_optimizer_pin_memory: bool
    offload_optimizer_buffer_count: int
    offload_optimizer_ratio: float
    offload_param: Device
    offload_param_pin_memory: bool
    offload_param_buffer_count: int
    offload_param_buffer_size: int
    offload_param_max_in_cpu: int
    micro_batch: int
    # train_batch_size as DeepSpeed resolves it on the batch world (BatchCounts.global_batch); None: left open
    global_batch: int | None = None
    # what DeepSpeed reads of the config these settings are built from (one reading, shared with the step time)
    deepspeed: DeepSpeedSettings = field(default_factory=DeepSpeedSettings, repr=False, compare=False)
    # ZeRO++ (runtime/zero/config.py; the ZeRO++ paper, arXiv 2306.10209): qwZ, qgZ, and frozen weights in int8
    quantized_weights: bool = False
    quantized_gradients: bool = False
    quantized_nontrainable_weights: bool = False
    # gradient_clipping (runtime/config.py, default 0.0); "auto" is the HF Trainer's max_grad_norm, 1.0 by default
    gradient_clipping: float = 0.0
    # the DeepSpeed release the config was read as (schema.active_release): the allocations that changed between
    # releases follow it (memory/ds_changes.py)
    release: str = DEEPSPEED_TARGET
    assumptions: tuple[str, ...] = ()
    assumed: tuple[AssumedInput, ...] = ()  # inputs nobody gave (memory/assumed.py)

    def overlap_comm_at(self, stage: int) -> bool:
        """overlap_comm as DeepSpeed's validator resolves it at ``stage`` (deepspeed/config_model.py)."""
        return overlap_comm_at(self.overlap_comm, stage)

    @property
    def mixed_precision(self) -> bool:
        return self.precision.mixed


def read_settings(config: Config, model: ModelSpec, gpus: int,
                  given: TrainingShape | None = None) -> Settings:
    """The effective settings for ``config`` (None: no config, assume mixed-precision fp16 Adam): a parsed
    config, or what DeepSpeed reads of one (deepspeed/settings.py ``read``, so that a caller that has it
    reads the config once). ``gpus``: the world DeepSpeed's batch arithmetic divides by.

    The one builder of ``Settings``: every field comes from the typed sections (deepspeed/config_model.py);
    what they leave "auto" is resolved here, in the order the notes are listed. ``given``: the micro batch,
    precision and stage a flag or the model description gave; each fills only what the config leaves open
    ("auto", or no config). A value DeepSpeed refuses is an EstimateError (the first, in field order).
    """
    ds = as_settings(config)
    notes: list[str] = []
    assumed: list[AssumedInput] = []
    given = given or TrainingShape()
    zero = ds.zero_config
    oo, op = zero.offload_optimizer, zero.offload_param
    h = model.hidden_size

    stage = _stage(zero.stage, given.zero_stage, notes, assumed)
    precision = _precision(ds, given.precision, assumed)
    grad_accum_dtype = _dtype(ds.data_types.grad_accum_dtype, precision, notes)
    communication_dtype = _dtype(ds.data_types.communication_data_type, precision, None)

    bf16_master = ds.bf16.master_weights_and_grads and precision == Precision.BF16
    bf16_states = ds.bf16.optimizer_states and bf16_master
    fp16_master = ds.fp16.master_weights_and_grads and precision == Precision.FP16

    optimizer, label, elements = _optimizer(ds, assumed, given.optim, notes)
    # DeepSpeedCPUAdam's fp32_optimizer_states, from the optimizer's params (on without an optimizer type); with
    # bf16 optimizer states engine.get_optimizer_configuration forces it off
    fp32_states = ds.optimizer.written is None or ds.optimizer.params.fp32_optimizer_states
    cpu_adam_fp32_states = fp32_states and not bf16_states

    reduce_bucket_size = _auto_sized(zero.reduce_bucket_size, "reduce_bucket_size", h, notes)
    prefetch = _auto_sized(zero.prefetch_bucket_size, "stage3_prefetch_bucket_size", h, notes)
    persistence = _auto_sized(zero.param_persistence_threshold, "stage3_param_persistence_threshold", h, notes)
    oo_device = _device(oo.device, notes)
    op_device = _device(op.device, notes)

    return Settings(
        configured=ds.configured,
        stage=stage,
        precision=precision,
        grad_accum_dtype=grad_accum_dtype,
        communication_dtype=communication_dtype,
        immediate_grad_update=ds.bf16.immediate_grad_update,
        bf16_master_weights_and_grads=bf16_master,
        bf16_optimizer_states=bf16_states,
        fp16_master_weights_and_grads=fp16_master,
        optimizer=optimizer,
        optimizer_label=label,
        optimizer_elements=elements,
        cpu_adam_fp32_states=cpu_adam_fp32_states,
        quantized_weights=_zero(notes, zero.zero_quantized_weights),
        quantized_gradients=_zero(notes, zero.zero_quantized_gradients),
        quantized_nontrainable_weights=_zero(notes, zero.zero_quantized_nontrainable_weights),
        contiguous_gradients=_zero(notes, zero.contiguous_gradients),
        reduce_scatter=_zero(notes, zero.reduce_scatter),
        multi_rank_bucket_allreduce=_zero(notes, zero.use_multi_rank_bucket_allreduce),
        reduce_bucket_size=reduce_bucket_size,
        allgather_bucket_size=_zero(notes, zero.allgather_bucket_size),
        overlap_comm=_zero(notes, zero.overlap_comm),
        sub_group_size=_zero(notes, zero.sub_group_size),
        prefetch_bucket_size=prefetch,
        param_persistence_threshold=persistence,
        model_persistence_threshold=_zero(notes, zero.model_persistence_threshold),
        max_live_parameters=_zero(notes, zero.max_live_parameters),
        max_reuse_distance=_zero(notes, zero.max_reuse_distance),
        offload_optimizer=oo_device,
        offload_optimizer_pin_memory=_offload(oo.pin_memory),
        offload_optimizer_buffer_count=_offload(oo.buffer_count),
        offload_optimizer_ratio=_offload(oo.ratio),
        offload_param=op_device,
        offload_param_pin_memory=_offload(op.pin_memory),
        offload_param_buffer_count=_offload(op.buffer_count),
        offload_param_buffer_size=_offload(op.buffer_size),
        offload_param_max_in_cpu=_offload(op.max_in_cpu),
        micro_batch=_micro_batch(ds.batch, gpus, given.micro_batch_size, notes, assumed),
        global_batch=ds.batch.global_batch(gpus),
        deepspeed=ds,
        gradient_clipping=_clipping(ds.gradient_clipping),
        release=schema.active_release(),
        assumptions=tuple(notes),
        assumed=tuple(assumed),
    )


# --------------------------------------------------------------------------- helpers


def _valid(value: T | Rejected) -> T:
    """A field's value; EstimateError where DeepSpeed refuses it."""
    if isinstance(value, Rejected):
        raise EstimateError(value.message, config_pointer(value.where))
    return value


def _zero(notes: list[str], value: T | Auto[T] | Rejected) -> T:
    """A zero_optimization key; one left "auto" that no integration fills is dropped by DeepSpeed, which runs its
    default (noted)."""
    if isinstance(value, Auto):
        notes.append(f"{ZERO}.{value.key} is \"auto\" and nobody fills it: DeepSpeed drops it and uses its "
                     f"default {value.default}")
        default: T = value.default
        return default
    return _valid(value)


def _offload(value: T | Auto[T] | Rejected) -> T:
    """An offload option; "auto" reads as DeepSpeed's default without a note (no integration fills it)."""
    if isinstance(value, Auto):
        default: T = value.default
        return default
    return _valid(value)


def _stage(stage: Stage | Auto[Stage] | Rejected, wanted: int | None, notes: list[str],
           assumed: list[AssumedInput]) -> Stage:
    if isinstance(stage, Stage):
        return stage
    if isinstance(stage, Auto):
        if wanted is not None:
            return Stage(wanted)
        # DeepSpeed 0.19.8 reads "auto" as its default, stage 0 (DeepSpeedZeroConfig(stage="auto").stage == 0;
        # deepspeed-config.md §zero), and the HF Trainer passes it through; Accelerate fills it from its
        # own zero_stage.
        default = stage.default
        assumed.append(AssumedInput.of("zero_stage", int(default), f"DeepSpeed and the HF Trainer run \"auto\" as "
                                       f"stage {default}; Accelerate fills it from its zero_stage",
                                       f"/{ZERO}/stage"))
        return default
    written_default = schema.default(ZERO, "stage")
    default = Stage(written_default if isinstance(written_default, int) else 0)  # the schema's is an int
    notes.append(f"{ZERO}.stage={stage.written!r} is not a stage 0-3 (DeepSpeed rejects it); costed as "
                 f"stage {default}")
    return default


def _dtype(dtype: str | Rejected | Auto[None] | None, precision: Precision, notes: list[str] | None) -> str:
    """A data type of ``data_types`` / ``communication_data_type``: None and "auto" are the model dtype
    (engine.get_data_types, engine.communication_data_type); a spelling DeepSpeed does not know is costed as the
    model dtype too, with a note where ``notes`` are given."""
    if isinstance(dtype, str):
        return dtype
    if isinstance(dtype, Rejected) and notes is not None:
        notes.append(f"{dtype.where}={dtype.written!r} not understood; assumed the model dtype")
    return precision.value


def _precision(ds: DeepSpeedSettings, wanted: str | None, assumed: list[AssumedInput]) -> Precision:
    """The model dtype. ``"enabled"`` is read as pydantic's lax bool reads it ("true" is True,
    coerce.lax_bool); "auto" is left to the HF integration, which fills it from --fp16/--bf16, and
    so is filled here by ``wanted`` (--precision) when that is one of the values it can reach: fp32 (both
    filled false), a format left "auto", or one whose section the config leaves out, which Accelerate (the
    Trainer's) adds (DeepSpeedPlugin.set_mixed_precision; deepspeed/hf_fill.py accelerate_precision). A format
    the config writes as not enabled stays the config's (given_conflicts refuses the other)."""
    if not ds.configured:
        if wanted is not None:
            return Precision(wanted)
        assumed.append(AssumedInput.of("precision", Precision.FP16, "no DeepSpeed config: mixed-precision fp16 "
                                       "training, the ZeRO paper's setting"))
        return Precision.FP16
    if ds.precision is not None:  # DeepSpeed asserts against both; fp16 is checked first (engine)
        return ds.precision
    open_ = list(ds.open_precisions)
    if wanted is not None and (wanted == Precision.FP32 or wanted in open_ or _section_added(ds, wanted)):
        return Precision(wanted)
    chosen = Precision.BF16 if open_ == [Precision.BF16] else Precision.FP16
    key = ds.bf16_key if chosen == Precision.BF16 else chosen
    assumed.append(AssumedInput.of("precision", chosen, "the HF integration fills \"auto\" from --fp16/--bf16; "
                                   f"costed as {chosen} mixed precision (fp16 and bf16 cost the same bytes, fp32 "
                                   "more)", f"/{key}/enabled"))
    return chosen


def _section_added(ds: DeepSpeedSettings, wanted: str) -> bool:
    """Whether Accelerate adds the ``wanted`` 16-bit section with enabled true: the config has none (a config
    with a precision left "auto" is read by an HF integration, which runs set_mixed_precision)."""
    return wanted in (Precision.FP16, Precision.BF16) and wanted not in ds.keys


def _optimizer(ds: DeepSpeedSettings, assumed: list[AssumedInput], optim: str | None,
               notes: list[str]) -> tuple[str, str, int]:
    """The optimizer whose states ZeRO keeps: the config's type, else the client's. ``optim``: the Hugging Face
    Trainer's optim where a file or flag gives it (bytes.CLIENT_OPTIMIZER_STATES)."""
    section = ds.optimizer
    default = B.DEFAULT_OPTIMIZER
    if section.written is None and optim is not None:
        key = B.CLIENT_OPTIMIZER_STATES.get(optim)
        label = f"{B.OPTIMIZERS[key or default].name} (the Trainer's optim {optim})"
        if key is None:
            notes.append(f"optimizer states of the Trainer's optim {optim} are not modelled: costed as AdamW's two "
                         "fp32 states per parameter, an upper bound (its 8-bit, 4-bit or projected states are smaller)")
        return key or default, label, B.optimizer_state_elements(key or default)
    if section.written is None:
        pointer = "/optimizer" if section.present else ""
        why = "no DeepSpeed config" if not ds.configured else "no optimizer type in the config"
        assumed.append(AssumedInput.of("optimizer", B.OPTIMIZERS[default].name,
                                       f"{why}: costed as the client's (e.g. the HF Trainer's) default "
                                       f"{B.OPTIMIZERS[default].name}", pointer))
        return default, B.OPTIMIZERS[default].name, B.optimizer_state_elements(default)
    raw = section.written
    key = raw.lower()
    if key not in B.OPTIMIZERS:
        assumed.append(AssumedInput.of("optimizer", B.OPTIMIZERS["adam"].name,
                                       f"optimizer type {raw!r} is not in the optimizer-state table: costed as "
                                       f"Adam ({B.OPTIMIZERS['adam'].elements} fp32 states per parameter)",
                                       "/optimizer/type"))
        key = "adam"
        return key, raw, B.optimizer_state_elements(key)
    return key, B.OPTIMIZERS[key].name, B.optimizer_state_elements(key, section.params)


def _auto_sized(value: int | Auto[int] | Rejected, key: str, h: int | None, notes: list[str]) -> int:
    """A hidden-size-based bucket (``key``: its stage3_* spelling where it has one) as the HF integration fills
    "auto" (deepspeed/hf_fill.py HIDDEN_SIZE_KEYS; the formula is the schema's x-auto-fill)."""
    if not isinstance(value, Auto):
        return _valid(value)
    default, name = value.default, value.key
    fill = schema.auto_fill(ZERO, key)
    if name != key or fill is None:
        # HF/Accelerate auto-fill only the stage3_* spelling (deepspeed-config.md §5)
        notes.append(f"{ZERO}.{name}=\"auto\": the HF integration fills only the {key} spelling, so "
                     f"DeepSpeed uses its default {default}")
        return default
    if h:
        filled = fill.value(h)
        notes.append(f"{ZERO}.{name}=\"auto\": filled as the HF integration does, {fill.formula} = "
                     f"{filled} (hidden_size {h})")
        return filled
    notes.append(f"{ZERO}.{name}=\"auto\" but the hidden size is unknown: assumed DeepSpeed's default "
                 f"{default} (HF would write {fill.formula})")
    return default


def _device(device: Device | Auto[Device] | Rejected, notes: list[str]) -> Device:
    if isinstance(device, Auto):
        return device.default
    if isinstance(device, Rejected):
        name = device.where.removeprefix(f"{ZERO}.").removesuffix(".device")
        notes.append(f"{ZERO}.{name}.device={device.written!r} is not none/cpu/nvme (DeepSpeed rejects it): "
                     "costed as none")
        return Device.NONE
    return device


def _clipping(clipping: float | Auto[float] | Rejected | None) -> float:
    """gradient_clipping as the step time uses it: 0.0 when not written (the step time has always costed no
    clipping pass then, though the schema's default is 1.0 from DeepSpeed 0.19.3); "auto" is the HF Trainer's
    max_grad_norm, 1.0 by default; a value DeepSpeed cannot use costs no clipping pass (the lint reports it)."""
    if clipping is None or isinstance(clipping, Rejected):
        return 0.0
    return 1.0 if isinstance(clipping, Auto) else clipping


def _micro_batch(batch: BatchCounts, gpus: int, wanted: int | None, notes: list[str],
                 assumed: list[AssumedInput]) -> int:
    tbs, _, gas = batch.values
    if batch.micro_batch is not None:
        return _bounded_micro_batch(batch.micro_batch, f"/{MBS}")
    derived = batch.resolve(max(gpus, 1)) if batch.train_batch_size is not None else None
    # the micro batch DeepSpeed's arithmetic gives, None where it gives none of at least 1
    derived_micro = derived[1] if derived is not None and derived[1] >= 1 else None
    auto = next((key for key in (MBS, TBS, GAS) if key in batch.auto), None)
    if derived_micro is not None and auto is None:  # the config decides it: DeepSpeed's arithmetic on given counts
        notes.append(f"micro batch derived from train_batch_size as DeepSpeed does ({tbs} over "
                     f"{gas if batch.accumulation is not None else 1} accumulation step(s) and {gpus} GPUs) = "
                     f"{derived_micro}")
        return _bounded_micro_batch(int(derived_micro), f"/{TBS}")
    if wanted is not None:
        return _bounded_micro_batch(wanted)
    value = int(derived_micro) if derived_micro is not None else 1
    how = (f"derived from train_batch_size {tbs} as DeepSpeed would with the \"auto\" values unfilled"
           if derived_micro is not None
           else "no micro batch in the config" if auto is None
           else "the HF integration fills \"auto\" from --per_device_train_batch_size")
    assumed.append(AssumedInput.of("micro_batch_size", value, f"{how}; activations and the batch-sized buffers "
                                   "scale with it", f"/{auto}" if auto else ""))
    return _bounded_micro_batch(value)


def _bounded_micro_batch(micro_batch: int, pointer: str = "") -> int:
    """``pointer``: the config key the micro batch comes from ("": a flag or the Trainer's arguments)."""
    if micro_batch > MAX_DIMENSION:
        raise EstimateError(f"a micro batch of {micro_batch:,} samples per GPU is beyond what the memory model "
                            f"estimates (at most {MAX_DIMENSION:,})", pointer)
    return micro_batch


def given_conflicts(config: Config, model: ModelSpec, gpus: int, given: TrainingShape) -> list[str]:
    """One line per value a flag or the model description gave that the config contradicts.

    A given micro batch, precision or stage fills only what the config leaves open; where the
    config decides (an explicit value, or DeepSpeed's default for a key left out), DeepSpeed runs
    the config's value, so a different given value is a mistake in one of them.
    """
    ds = as_settings(config)
    if not ds.is_object:
        return []
    from zeroadvisor.memory.assumed import INPUTS
    from zeroadvisor.memory.parallel import parallel_conflicts, read_parallel

    try:  # the batch arithmetic runs on DeepSpeed's world size for the layout (memory/parallel.py)
        s = read_settings(ds, model, read_parallel(ds, gpus, given).batch_world(), given)
    except EstimateError:
        return []  # the estimate reports the unusable value

    out = parallel_conflicts(ds, given)
    for name, wanted, runs in (("micro_batch_size", given.micro_batch_size, s.micro_batch),
                               ("precision", given.precision, s.precision),
                               ("zero_stage", given.zero_stage, s.stage)):
        if wanted is None or wanted == runs:
            continue
        source = INPUTS[name]
        by = " / ".join(part for part in (source.flag, source.field) if part)
        if name == "precision" and ds.precision is None:  # "auto" left open, the asked-for format written off
            key = ds.bf16_key if Precision(str(wanted)) is Precision.BF16 else wanted
            out.append(f"{by} gives {source.words} {wanted}, but the DeepSpeed config sets {key}.enabled to false: "
                       f"its \"auto\" fills only {' or '.join((*ds.open_precisions, 'fp32'))}; change the config or "
                       "drop the value")
            continue
        out.append(f"{by} gives {source.words} {wanted}, but the DeepSpeed config runs {runs}: a given value only "
                   "fills what the config leaves \"auto\" or out; change the config or drop the value")
    return out
