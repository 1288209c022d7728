"""The effective DeepSpeed settings the memory model needs, built from what DeepSpeed reads of a ds_config
(deepspeed/settings.py DeepSpeedSettings: the config is read once there; nothing here reads the dict).

Every DeepSpeed default comes from the committed schema (``zeroadvisor.deepspeed.schema.default``);
nothing here repeats one. What the config leaves to someone else (``"auto"`` values filled by
the Hugging Face integration, a missing micro batch) is resolved here: from the value a flag or
the model description gave (``TrainingShape``) where there is one, else by an assumption recorded
as an ``AssumedInput``. A given value fills only what the config leaves open; where the config
decides, the config wins (DeepSpeed reads it) and ``given_conflicts`` reports the contradiction.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from zeroadvisor.config.limits import MAX_DIMENSION
from zeroadvisor.deepspeed import coerce, schema
from zeroadvisor.deepspeed.settings import AUTO, GAS, MBS, TBS, BatchCounts, Config, DeepSpeedSettings, as_settings
from zeroadvisor.memory import bytes as B
from zeroadvisor.memory.assumed import AssumedInput
from zeroadvisor.memory.errors import EstimateError, config_pointer
from zeroadvisor.model.spec import ModelSpec, TrainingShape

ZERO = "zero_optimization"


def ds_default(*path: str) -> Any:
    """DeepSpeed's code default for ``path``, from the committed schema (the one source)."""
    return schema.default(*path)


@dataclass(slots=True)
class Settings:
    """Effective settings; ``stage``/offload are the configured ones (options vary them)."""

    configured: bool
    stage: int
    precision: str  # "fp16" | "bf16" | "fp32": the model (low-precision) dtype
    grad_accum_dtype: str
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
    reduce_bucket_size: int
    allgather_bucket_size: int
    overlap_comm: bool | None  # None: DeepSpeed decides by stage (True iff stage 3)
    sub_group_size: int
    prefetch_bucket_size: int
    param_persistence_threshold: int
    model_persistence_threshold: int  # cap on the persistent parameters' total numel (default sys.maxsize)
    max_live_parameters: int
    max_reuse_distance: int  # stage3_max_reuse_distance: a released parameter used again within it stays
    offload_optimizer: str  # "none" | "cpu" | "nvme"
    offload_optimizer_pin_memory: bool
    offload_optimizer_buffer_count: int
    offload_optimizer_ratio: float
    offload_param: str
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
    assumptions: list[str] = field(default_factory=list)
    assumed: list[AssumedInput] = field(default_factory=list)  # inputs nobody gave (memory/assumed.py)

    def overlap_comm_at(self, stage: int) -> bool:
        """overlap_comm as DeepSpeed resolves it: None -> True iff stage 3 (runtime/zero/config.py)."""
        if self.overlap_comm is None:
            return stage == 3
        return self.overlap_comm

    @property
    def mixed_precision(self) -> bool:
        return self.precision != "fp32"


def read_settings(config: Config, model: ModelSpec, gpus: int,
                  given: TrainingShape | None = None) -> Settings:
    """The effective settings for ``config`` (None: no config, assume mixed-precision fp16 Adam): a parsed
    config, or what DeepSpeed reads of one (deepspeed/settings.py ``read``, so that a caller that has it
    reads the config once). ``gpus``: the world DeepSpeed's batch arithmetic divides by.

    ``given``: the micro batch, precision and stage a flag or the model description gave; each fills
    only what the config leaves open ("auto", or no config).
    """
    ds = as_settings(config)
    notes: list[str] = []
    assumed: list[AssumedInput] = []
    given = given or TrainingShape()
    zero = ds.zero  # the legacy bool form reads as an empty section (DeepSpeedSettings.stage says 1)
    h = model.hidden_size

    stage = _stage(ds, given.zero_stage, notes, assumed)
    precision = _precision(ds, given.precision, assumed)
    model_dtype = precision

    grad_accum = ds.grad_accum_dtype
    if grad_accum in (None, AUTO):
        grad_accum_dtype = model_dtype  # engine.get_data_types: None -> model dtype
    else:
        try:
            grad_accum_dtype = B.dtype_name(grad_accum)
        except KeyError:
            notes.append(f"data_types.grad_accum_dtype={grad_accum!r} not understood; assumed the model dtype")
            grad_accum_dtype = model_dtype

    comm = ds.communication_data_type
    if comm in (None, AUTO):
        communication_dtype = model_dtype  # engine.communication_data_type: fp16 / bf16 / fp32 by precision
    else:
        try:
            communication_dtype = B.dtype_name(comm)
        except KeyError:
            communication_dtype = model_dtype

    bf16 = ds.bf16  # `bfloat16` is read only when `bf16` is absent
    immediate = _flag(bf16, "bf16", "immediate_grad_update")
    bf16_master = _flag(bf16, "bf16", "bf16_master_weights_and_grads") and precision == "bf16"
    bf16_states = _flag(bf16, "bf16", "bf16_optimizer_states") and bf16_master
    fp16_master = _flag(ds.fp16, "fp16", "fp16_master_weights_and_grads") and precision == "fp16"

    optimizer, label, elements, opt_params = _optimizer(ds, assumed)
    fp32_states_param = opt_params.get("fp32_optimizer_states")
    # with bf16 optimizer states engine.get_optimizer_configuration forces it off
    cpu_adam_fp32_states = False if bf16_states else fp32_states_param is not False

    def zget(key: str, *aliases: str) -> Any:
        return _zero_value(zero, key, aliases, notes)

    def zint(key: str, *aliases: str) -> int:
        return _int(zget(key, *aliases), f"{ZERO}.{key}")

    def zbool(key: str) -> bool:
        return _bool(zget(key), f"{ZERO}.{key}")

    reduce_bucket_size = _auto_sized(zero, "reduce_bucket_size", (), h, notes)
    prefetch = _auto_sized(zero, "stage3_prefetch_bucket_size", ("prefetch_bucket_size",), h, notes,
                           default_key="prefetch_bucket_size")
    persistence = _auto_sized(zero, "stage3_param_persistence_threshold", ("param_persistence_threshold",), h,
                              notes, default_key="param_persistence_threshold")

    oo = ds.offload_optimizer.block
    op = ds.offload_param.block
    oo_device = _device(oo, "offload_optimizer", notes)
    op_device = _device(op, "offload_param", notes)

    return Settings(
        configured=ds.configured,
        stage=stage,
        precision=precision,
        grad_accum_dtype=grad_accum_dtype,
        communication_dtype=communication_dtype,
        immediate_grad_update=immediate,
        bf16_master_weights_and_grads=bf16_master,
        bf16_optimizer_states=bf16_states,
        fp16_master_weights_and_grads=fp16_master,
        optimizer=optimizer,
        optimizer_label=label,
        optimizer_elements=elements,
        cpu_adam_fp32_states=cpu_adam_fp32_states,
        quantized_weights=zbool("zero_quantized_weights"),
        quantized_gradients=zbool("zero_quantized_gradients"),
        quantized_nontrainable_weights=zbool("zero_quantized_nontrainable_weights"),
        contiguous_gradients=zbool("contiguous_gradients"),
        reduce_scatter=zbool("reduce_scatter"),
        reduce_bucket_size=reduce_bucket_size,
        allgather_bucket_size=zint("allgather_bucket_size"),
        overlap_comm=_optional_bool(zget("overlap_comm"), f"{ZERO}.overlap_comm"),
        sub_group_size=zint("sub_group_size"),
        prefetch_bucket_size=prefetch,
        param_persistence_threshold=persistence,
        model_persistence_threshold=zint("stage3_model_persistence_threshold", "model_persistence_threshold"),
        max_live_parameters=zint("stage3_max_live_parameters", "max_live_parameters"),
        max_reuse_distance=zint("stage3_max_reuse_distance", "max_reuse_distance"),
        offload_optimizer=oo_device,
        offload_optimizer_pin_memory=_offload_bool(oo, "offload_optimizer", "pin_memory"),
        offload_optimizer_buffer_count=_offload_int(oo, "offload_optimizer", "buffer_count"),
        offload_optimizer_ratio=_float(_offload_value(oo, "offload_optimizer", "ratio"),
                                       f"{ZERO}.offload_optimizer.ratio"),
        offload_param=op_device,
        offload_param_pin_memory=_offload_bool(op, "offload_param", "pin_memory"),
        offload_param_buffer_count=_offload_int(op, "offload_param", "buffer_count"),
        offload_param_buffer_size=_offload_int(op, "offload_param", "buffer_size"),
        offload_param_max_in_cpu=_offload_int(op, "offload_param", "max_in_cpu"),
        micro_batch=_micro_batch(ds.batch, gpus, given.micro_batch_size, notes, assumed),
        global_batch=ds.batch.global_batch(gpus),
        deepspeed=ds,
        gradient_clipping=_clipping(ds.gradient_clipping),
        assumptions=notes,
        assumed=assumed,
    )


# --------------------------------------------------------------------------- helpers


def _stage(ds: DeepSpeedSettings, wanted: int | None, notes: list[str], assumed: list[AssumedInput]) -> int:
    if ds.stage is not None:
        return ds.stage
    default = ds_default(ZERO, "stage")
    raw = ds.stage_written
    if raw == AUTO:
        if wanted is not None:
            return wanted
        # DeepSpeed 0.19.8 reads "auto" as its default, stage 0 (DeepSpeedZeroConfig(stage="auto").stage == 0;
        # deepspeed-config.md §zero), and the HF Trainer passes it through; Accelerate fills it from its
        # own zero_stage.
        assumed.append(AssumedInput.of("zero_stage", int(default), f"DeepSpeed and the HF Trainer run \"auto\" as "
                                       f"stage {default}; Accelerate fills it from its zero_stage",
                                       f"/{ZERO}/stage"))
    else:
        notes.append(f"zero_optimization.stage={raw!r} is not a stage 0-3 (DeepSpeed rejects it); costed as "
                     f"stage {default}")
    return int(default)


def _flag(section: Mapping[str, Any], name: str, key: str) -> bool:
    if key in section and section[key] != AUTO:
        return section[key] is True
    return bool(ds_default(name, key))


def _precision(ds: DeepSpeedSettings, wanted: str | None, assumed: list[AssumedInput]) -> str:
    """The model dtype. ``"enabled"`` is read as pydantic's lax bool reads it ("true" is True,
    coerce.lax_bool); "auto" is left to the HF integration, which fills it from --fp16/--bf16, and
    so is filled here by ``wanted`` (--precision) when that is one of the values it can reach: fp32 (both
    filled false), a format left "auto", or one whose section the config leaves out, which Accelerate (the
    Trainer's) adds (DeepSpeedPlugin.set_mixed_precision; deepspeed/hf_fill.py accelerate_precision). A format
    the config writes as not enabled stays the config's (given_conflicts refuses the other)."""
    if not ds.configured:
        if wanted is not None:
            return wanted
        assumed.append(AssumedInput.of("precision", "fp16", "no DeepSpeed config: mixed-precision fp16 training, "
                                       "the ZeRO paper's setting"))
        return "fp16"
    if ds.precision is not None:  # DeepSpeed asserts against both; fp16 is checked first (engine)
        return ds.precision
    open_ = list(ds.open_precisions)
    if wanted is not None and (wanted == "fp32" or wanted in open_ or _section_added(ds, wanted)):
        return wanted
    chosen = "bf16" if open_ == ["bf16"] else "fp16"
    key = ds.bf16_key if chosen == "bf16" else chosen
    assumed.append(AssumedInput.of("precision", chosen, "the HF integration fills \"auto\" from --fp16/--bf16; "
                                   f"costed as {chosen} mixed precision (fp16 and bf16 cost the same bytes, fp32 "
                                   "more)", f"/{key}/enabled"))
    return chosen


def _section_added(ds: DeepSpeedSettings, wanted: str) -> bool:
    """Whether Accelerate adds the ``wanted`` 16-bit section with enabled true: the config has none (a config
    with a precision left "auto" is read by an HF integration, which runs set_mixed_precision)."""
    return wanted in ("fp16", "bf16") and wanted not in ds.keys


def _optimizer(ds: DeepSpeedSettings, assumed: list[AssumedInput]) -> tuple[str, str, int, dict[str, Any]]:
    section = ds.optimizer
    default = B.DEFAULT_OPTIMIZER
    if section is None or not section.get("type"):
        pointer = "/optimizer" if section is not None else ""
        why = "no DeepSpeed config" if not ds.configured else "no optimizer type in the config"
        assumed.append(AssumedInput.of("optimizer", B.OPTIMIZERS[default].name,
                                       f"{why}: costed as the client's (e.g. the HF Trainer's) default "
                                       f"{B.OPTIMIZERS[default].name}", pointer))
        return default, B.OPTIMIZERS[default].name, B.optimizer_state_elements(default), {}
    raw = str(section["type"])
    given_params = section.get("params")
    params: dict[str, Any] = given_params if isinstance(given_params, dict) else {}
    key = raw.lower()
    if key not in B.OPTIMIZERS:
        assumed.append(AssumedInput.of("optimizer", B.OPTIMIZERS["adam"].name,
                                       f"optimizer type {raw!r} is not in the optimizer-state table: costed as "
                                       f"Adam ({B.OPTIMIZERS['adam'].elements} fp32 states per parameter)",
                                       "/optimizer/type"))
        key = "adam"
        return key, raw, B.optimizer_state_elements(key), params
    return key, B.OPTIMIZERS[key].name, B.optimizer_state_elements(key, params), params


def _zero_value(zero: Mapping[str, Any], key: str, aliases: tuple[str, ...], notes: list[str]) -> Any:
    default_key = aliases[0] if aliases else key
    for name in (key, *aliases):
        if name in zero:
            value = zero[name]
            if value == AUTO:
                notes.append(f"zero_optimization.{name} is \"auto\" and nobody fills it: DeepSpeed drops it and uses "
                             f"its default {ds_default(ZERO, default_key)}")
                return ds_default(ZERO, default_key)
            return value
    return ds_default(ZERO, default_key)


def _auto_sized(zero: Mapping[str, Any], key: str, aliases: tuple[str, ...], h: int | None, notes: list[str],
                default_key: str | None = None) -> int:
    default_key = default_key or key
    for name in (key, *aliases):
        if name not in zero:
            continue
        value = zero[name]
        if value != AUTO:
            return _int(value, f"{ZERO}.{name}")
        fill = schema.auto_fill(ZERO, key)
        if name != key or fill is None:
            # HF/Accelerate auto-fill only the stage3_* spelling (deepspeed-config.md §5)
            notes.append(f"zero_optimization.{name}=\"auto\": the HF integration fills only the {key} spelling, so "
                         f"DeepSpeed uses its default {ds_default(ZERO, default_key)}")
            return int(ds_default(ZERO, default_key))
        if h:
            value = fill.value(h)
            notes.append(f"zero_optimization.{name}=\"auto\": filled as the HF integration does, {fill.formula} = "
                         f"{value} (hidden_size {h})")
            return value
        notes.append(f"zero_optimization.{name}=\"auto\" but the hidden size is unknown: assumed DeepSpeed's default "
                     f"{ds_default(ZERO, default_key)} (HF would write {fill.formula})")
        return int(ds_default(ZERO, default_key))
    return int(ds_default(ZERO, default_key))


def _offload_value(section: Mapping[str, Any], name: str, key: str) -> Any:
    value = section.get(key, AUTO)
    if value == AUTO or value is None:
        return ds_default(ZERO, name, key)
    return value


def _device(section: Mapping[str, Any], name: str, notes: list[str]) -> str:
    value = section.get("device", ds_default(ZERO, name, "device"))
    if value == AUTO or value is None:
        value = ds_default(ZERO, name, "device")
    value = str(value).lower()
    if value not in ("none", "cpu", "nvme"):
        notes.append(f"zero_optimization.{name}.device={value!r} is not none/cpu/nvme (DeepSpeed rejects it): "
                     "costed as none")
        return "none"
    return value


def _offload_int(section: Mapping[str, Any], name: str, key: str) -> int:
    return _int(_offload_value(section, name, key), f"{ZERO}.{name}.{key}")


def _offload_bool(section: Mapping[str, Any], name: str, key: str) -> bool:
    return _bool(_offload_value(section, name, key), f"{ZERO}.{name}.{key}")


# DeepSpeed hands these counts to torch, whose sizes and numels are int64: a larger value fails there.
MAX_INT64 = 2**63 - 1


def _int(value: Any, where: str) -> int:
    """An int field of a pydantic section as lax mode reads it (a fraction is truncated, as the
    memory model always has; the value rules report it). EstimateError where DeepSpeed rejects it."""
    result: int | None = None
    if isinstance(value, bool):
        result = int(value)
    elif isinstance(value, int):
        result = value
    elif isinstance(value, float) and math.isfinite(value):
        result = int(value)
    elif isinstance(value, str) and coerce.lax_coercible(value, "integer"):
        result = int(float(value.strip()))
    if result is None:
        raise EstimateError(f"{where} = {_shown(value)} is not an integer DeepSpeed accepts", config_pointer(where))
    if abs(result) > MAX_INT64:
        raise EstimateError(f"{where} = {_shown(value)} does not fit torch's int64 sizes", config_pointer(where))
    return result


def _clipping(value: Any) -> float:
    """gradient_clipping as the step time uses it: 0.0 when absent, 1.0 for "auto" (HF max_grad_norm)."""
    if value is None:
        return 0.0
    if value == AUTO:
        return 1.0
    try:
        return _float(value, "gradient_clipping")
    except EstimateError:  # the lint reports it; the step time costs no clipping pass
        return 0.0


def _float(value: Any, where: str) -> float:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > sys.float_info.max:
        # an integer past the largest float (1 followed by 400 zeros): pydantic's float field refuses it too
        raise EstimateError(f"{where} = {_shown(value)} is too large for the float DeepSpeed reads it as",
                            config_pointer(where))
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not (
            isinstance(value, float) and math.isnan(value)):
        return float(value)
    if isinstance(value, str) and coerce.lax_coercible(value, "number"):
        return float(value.strip())
    raise EstimateError(f"{where} = {_shown(value)} is not a number DeepSpeed accepts", config_pointer(where))


def _bool(value: Any, where: str) -> bool:
    result = coerce.lax_bool(value)
    if result is None:
        raise EstimateError(f"{where} = {_shown(value)} is not a boolean DeepSpeed accepts", config_pointer(where))
    return result


def _optional_bool(value: Any, where: str) -> bool | None:
    return None if value is None else _bool(value, where)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


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
            key = ds.bf16_key if wanted == "bf16" else wanted
            out.append(f"{by} gives {source.words} {wanted}, but the DeepSpeed config sets {key}.enabled to false: "
                       f"its \"auto\" fills only {' or '.join((*ds.open_precisions, 'fp32'))}; change the config or "
                       "drop the value")
            continue
        out.append(f"{by} gives {source.words} {wanted}, but the DeepSpeed config runs {runs}: a given value only "
                   "fills what the config leaves \"auto\" or out; change the config or drop the value")
    return out
