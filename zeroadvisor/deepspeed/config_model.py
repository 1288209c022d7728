"""DeepSpeed's configuration sections as typed, frozen models: the one place a key's spellings, its "auto", its
default and the values DeepSpeed refuses are read.

Shaped like DeepSpeed 0.19's own pydantic models (runtime/zero/config.py ``DeepSpeedZeroConfig``,
runtime/zero/offload_config.py ``DeepSpeedZeroOffloadOptimizerConfig`` / ``...ParamConfig``, runtime/precision_config.py
fp16 / bf16, the optimizer section engine.py reads with ``dict.get``) but plain dataclasses: the core stays light
(no pydantic at start-up, cli/__init__.py). Each field holds one of

- its typed value (int, bool, float, a vocab enum), the config's or DeepSpeed's default (deepspeed/schema.py, read
  as the active release: ``schema.reading_as``);
- ``Auto``: the key is written "auto" for an integration to fill; it keeps the spelling written and the default
  DeepSpeed runs when nobody fills it (DeepSpeedConfigModel drops "auto", runtime/config_utils.py);
- ``Rejected``: a value DeepSpeed's validator refuses, with the key and the reason (the memory model raises it as
  an EstimateError, the value rules report it).

Aliases and deprecated spellings (``stage3_*`` beside the plain names, the ``cpu_offload`` booleans, ``bfloat16``,
``stage3_gather_fp16_weights_on_model_save``) are resolved here and nowhere else. Values are read as pydantic's lax
mode reads them (deepspeed/coerce.py): "5" and 5.0 are 5, "yes" is True.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Generic, TypeVar

from zeroadvisor.deepspeed import coerce, schema
from zeroadvisor.deepspeed import effective as E
from zeroadvisor.deepspeed.effective import AUTO
from zeroadvisor.jsontypes import JSONObject, JSONValue
from zeroadvisor.vocab import Device, Stage

ZERO = "zero_optimization"
T = TypeVar("T")
OffloadT = TypeVar("OffloadT", bound="OffloadConfig")

# DeepSpeed hands these counts to torch, whose sizes and numels are int64: a larger value fails there.
MAX_INT64 = 2**63 - 1


@dataclass(frozen=True)
class Auto(Generic[T]):
    """A key written "auto": an integration (the HF Trainer, Accelerate) fills it; ``default`` is what DeepSpeed
    runs when nobody does. ``key``: the spelling written (an alias, where that was the one)."""

    key: str
    default: T


@dataclass(frozen=True)
class Rejected:
    """A value DeepSpeed refuses: ``where`` the dotted key, ``written`` the value, ``reason`` why, as a phrase
    ("is not an integer DeepSpeed accepts")."""

    where: str
    written: object
    reason: str

    @property
    def message(self) -> str:
        return f"{self.where} = {shown(self.written)} {self.reason}"


def shown(value: object) -> str:
    """A value as a message shows it: its repr, cut at 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# --------------------------------------------------------------------------- the raw sections, as DeepSpeed finds them


def section(data: object, key: str) -> JSONObject:
    """A top-level section as a dict ({} when absent or not an object)."""
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, dict) else {}


def zero_section(data: object) -> JSONObject:
    return section(data, "zero_optimization")


def zero_stage(data: object) -> int | None:
    """The ZeRO stage DeepSpeed runs; None when the value is invalid or "auto".

    DeepSpeed: a legacy ``zero_optimization: true`` means stage 1 (runtime/zero/config.py
    read_zero_config_deprecated); a missing section means stage 0; ``"stage": "auto"`` is
    dropped by DeepSpeedConfigModel and silently means stage 0 (callers that care about
    "auto" check for it first); ZeroStageEnum accepts 2, 2.0 and "2".
    """
    if not isinstance(data, dict) or "zero_optimization" not in data:
        return 0
    zero = data["zero_optimization"]
    if isinstance(zero, bool):
        return 1 if zero else 0
    if not isinstance(zero, dict):
        return None
    if "stage" not in zero:
        return int(_default(ZERO, "stage"))
    return stage_value(zero["stage"])


def stage_value(value: object) -> int | None:
    if value == AUTO:
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        value = value.strip()
        if not value.isdigit():
            return None
        value = int(value)
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    return value if isinstance(value, int) and 0 <= value <= 3 else None


def is_enabled(block: object) -> bool | None:
    """``{"enabled": ...}`` of a pydantic section (fp16, bf16): True/False as pydantic's lax bool reads
    it, or None when it is "auto" (an integration decides)."""
    if not isinstance(block, dict):
        return False
    value = block.get("enabled", False)
    if value == AUTO:
        return None
    return coerce.lax_bool(value) is True


def bf16_block(data: object) -> JSONObject:
    """``bf16``, or the legacy ``bfloat16`` that DeepSpeed reads only when bf16 is absent."""
    if isinstance(data, dict):
        block = data.get("bf16")
        if isinstance(block, dict):
            return block
    return section(data, "bfloat16")


def offload_block(zero: JSONObject, which: str) -> JSONObject:
    """``offload_optimizer``/``offload_param`` of the ``zero_optimization`` section as DeepSpeed reads it, the
    legacy booleans included."""
    block = zero.get(which)
    if isinstance(block, dict):
        return block
    return {"device": "cpu"} if zero.get(E.LEGACY_OFFLOAD[which]) is True else {}


def offload_device(block: JSONObject) -> str:
    """Device of an offload block: "none", "cpu", "nvme" (or "auto", or a value DeepSpeed rejects)."""
    device = block.get("device", "none")
    return device if isinstance(device, str) else "none"


def optimizer_type(data: object) -> str | None:
    """``optimizer.type`` as DeepSpeed resolves it: its own names lower-cased, else as written."""
    opt = section(data, "optimizer")
    name = opt.get("type")
    if not isinstance(name, str):
        return None
    return name.lower() if name.lower() in schema.names("x-deepspeed-optimizers") else name


# --------------------------------------------------------------------------- lax-mode readers of one value


def lax_int(value: object, where: str) -> int | Rejected:
    """An int field as pydantic's lax mode reads it (a fraction is truncated, as the memory model always has; the
    value rules report it)."""
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
        return Rejected(where, value, "is not an integer DeepSpeed accepts")
    if abs(result) > MAX_INT64:
        return Rejected(where, value, "does not fit torch's int64 sizes")
    return result


def lax_float(value: object, where: str) -> float | Rejected:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > sys.float_info.max:
        # an integer past the largest float (1 followed by 400 zeros): pydantic's float field refuses it too
        return Rejected(where, value, "is too large for the float DeepSpeed reads it as")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not (
            isinstance(value, float) and math.isnan(value)):
        return float(value)
    if isinstance(value, str) and coerce.lax_coercible(value, "number"):
        return float(value.strip())
    return Rejected(where, value, "is not a number DeepSpeed accepts")


def lax_bool(value: object, where: str) -> bool | Rejected:
    result = coerce.lax_bool(value)
    return Rejected(where, value, "is not a boolean DeepSpeed accepts") if result is None else result


def lax_optional_bool(value: object, where: str) -> bool | Rejected | None:
    return None if value is None else lax_bool(value, where)


# --------------------------------------------------------------------------- the ZeRO section


def overlap_comm_at(overlap_comm: bool | None, stage: int) -> bool:
    """DeepSpeedZeroConfig's overlap_comm validator: None (the default) means True at stage 3 only."""
    return stage == Stage.WEIGHTS if overlap_comm is None else overlap_comm


@dataclass(frozen=True)
class OffloadConfig:
    """What ``offload_optimizer`` and ``offload_param`` share (runtime/zero/offload_config.py).

    ``device``: matched case-insensitively, as the memory model always has (DeepSpeed's enum takes the lower-case
    spelling; the value rules report another). ``written``: the device as written, for the rules that compare
    the text ("none" when absent or not text); ``legacy``: migrated from the ``cpu_offload`` booleans;
    ``pin_memory_written``: the block sets ``pin_memory`` (its default moved in 0.19.5)."""

    device: Device | Auto[Device] | Rejected = Device.NONE
    written: str = "none"
    legacy: bool = False
    pin_memory: bool | Auto[bool] | Rejected = False
    pin_memory_written: bool = False
    buffer_count: int | Auto[int] | Rejected = 0

    @property
    def on(self) -> bool:
        """Offloaded to the CPU or NVMe, as written."""
        return self.written in (Device.CPU, Device.NVME)


@dataclass(frozen=True)
class OffloadOptimizerConfig(OffloadConfig):
    ratio: float | Auto[float] | Rejected = 1.0  # the share of the optimizer step on the CPU (partial offload)
    # SuperOffload (0.18+, stage 3 only: engine.py picks SuperOffloadOptimizer_Stage3): the CPU optimizer runs in a
    # spawned worker process that uses ``cpuadam_cores_perc`` of the cores (runtime/superoffload/)
    super_offload: bool | Auto[bool] | Rejected = False
    cpuadam_cores_perc: float | Auto[float] | Rejected = 0.8


@dataclass(frozen=True)
class OffloadParamConfig(OffloadConfig):
    buffer_size: int | Auto[int] | Rejected = 0
    max_in_cpu: int | Auto[int] | Rejected = 0


@dataclass(frozen=True)
class ZeroConfig:
    """``zero_optimization`` as DeepSpeedZeroConfig reads it (the legacy ``zero_optimization: true`` reads as an
    empty section; its stage is DeepSpeedSettings.stage). ``default()`` is DeepSpeed's, per release."""

    stage: Stage | Auto[Stage] | Rejected = Stage.DISABLED
    contiguous_gradients: bool | Auto[bool] | Rejected = True
    reduce_scatter: bool | Auto[bool] | Rejected = True
    # stage 1/2 average_tensor: one all-reduce of the whole bucket (allreduce_and_scatter) or a reduce per rank
    use_multi_rank_bucket_allreduce: bool | Auto[bool] | Rejected = True
    reduce_bucket_size: int | Auto[int] | Rejected = 0
    allgather_bucket_size: int | Auto[int] | Rejected = 0
    overlap_comm: bool | Auto[bool | None] | Rejected | None = None  # None: True iff stage 3 (overlap_comm_at)
    sub_group_size: int | Auto[int] | Rejected = 0
    prefetch_bucket_size: int | Auto[int] | Rejected = 0  # or stage3_prefetch_bucket_size
    param_persistence_threshold: int | Auto[int] | Rejected = 0  # or stage3_param_persistence_threshold
    model_persistence_threshold: int | Auto[int] | Rejected = 0  # or stage3_model_persistence_threshold
    max_live_parameters: int | Auto[int] | Rejected = 0  # or stage3_max_live_parameters
    max_reuse_distance: int | Auto[int] | Rejected = 0  # or stage3_max_reuse_distance
    zero_quantized_weights: bool | Auto[bool] | Rejected = False  # ZeRO++ qwZ (arXiv 2306.10209)
    zero_quantized_gradients: bool | Auto[bool] | Rejected = False  # ZeRO++ qgZ
    zero_quantized_nontrainable_weights: bool | Auto[bool] | Rejected = False
    gather_16bit_weights_on_model_save: bool = False  # or stage3_gather_16bit/fp16_weights_on_model_save
    module_granularity_threshold: int | Auto[int] | Rejected = 0  # or stage3_module_granularity_threshold
    offload_optimizer: OffloadOptimizerConfig = field(default_factory=OffloadOptimizerConfig)
    offload_param: OffloadParamConfig = field(default_factory=OffloadParamConfig)


def _default(*path: str) -> Any:
    """DeepSpeed's default as the active release has it (deepspeed/schema.py ``default``)."""
    return _release_default(schema.active_release(), path)


@cache
def _release_default(release: str, path: tuple[str, ...]) -> Any:
    """``release``'s default for ``path``, looked up once (a config is read field by field: some thirty lookups).
    A key an older release does not know yet (the lint reads a config as each release of a range) reads as the
    latest release's default: that release never looks at it, and no estimate runs on it (the estimate reads
    the newest release of a range)."""
    with schema.reading_as(release):
        try:
            return schema.default(*path)
        except KeyError:
            pass
    with schema.reading_as(None):
        return schema.default(*path)


def _typed_default(convert: Callable[[object, str], T | Rejected], path: tuple[str, ...]) -> T:
    """DeepSpeed's default for ``path``, converted as a written value is (the schema's defaults are valid)."""
    value: T = _converted_default(schema.active_release(), convert, path)
    return value


@cache
def _converted_default(release: str, convert: Callable[[object, str], Any], path: tuple[str, ...]) -> Any:
    value = convert(_release_default(release, path), ".".join(path))
    if isinstance(value, Rejected):  # a schema whose default its own field refuses: a broken schema file
        raise ValueError(value.message)
    return value


def _zero_field(zero: Mapping[str, JSONValue], convert: Callable[[object, str], T | Rejected], key: str,
                *aliases: str, where_written: bool = False) -> T | Auto[T] | Rejected:
    """One ``zero_optimization`` key: the first spelling written of ``key`` and its ``aliases`` (DeepSpeed's
    field is the first alias: its default), "auto" kept as Auto, else DeepSpeed's default. ``where_written``: a
    refused value is named by the spelling written (else by ``key``)."""
    path = (ZERO, aliases[0] if aliases else key)
    for name in (key, *aliases):
        if name in zero:
            value = zero[name]
            if value == AUTO:
                return Auto(name, _typed_default(convert, path))
            return convert(value, f"{ZERO}.{name if where_written else key}")
    return _typed_default(convert, path)


def _offload_field(block: Mapping[str, JSONValue], which: str, key: str,
                   convert: Callable[[object, str], T | Rejected]) -> T | Auto[T] | Rejected:
    """One key of an offload block; absent and null read as DeepSpeed's default, "auto" as Auto."""
    path = (ZERO, which, key)
    value = block.get(key)
    if value is None:
        return _typed_default(convert, path)
    if value == AUTO:
        return Auto(key, _typed_default(convert, path))
    return convert(value, ".".join(path))


def _device(block: Mapping[str, JSONValue], which: str) -> Device | Auto[Device] | Rejected:
    default = Device(str(_default(ZERO, which, "device")))
    value = block.get("device")
    if value is None:
        return default
    if value == AUTO:
        return Auto("device", default)
    text = str(value).lower()
    if text in tuple(Device):
        return Device(text)
    return Rejected(f"{ZERO}.{which}.device", text, "is not none/cpu/nvme")


def _offload(zero: JSONObject, which: str, kind: type[OffloadT],
             **extra: Callable[[object, str], Any]) -> OffloadT:
    """``offload_optimizer`` / ``offload_param`` (``which``) as ``kind``: the fields both have, and the ``extra``
    ones of ``kind`` each read with its converter."""
    block = offload_block(zero, which)
    return kind(device=_device(block, which), written=offload_device(block),
                legacy=not isinstance(zero.get(which), dict) and bool(block),
                pin_memory=_offload_field(block, which, "pin_memory", lax_bool),
                pin_memory_written="pin_memory" in block,
                buffer_count=_offload_field(block, which, "buffer_count", lax_int),
                **{key: _offload_field(block, which, key, convert) for key, convert in extra.items()})


def read_offload_optimizer(zero: JSONObject) -> OffloadOptimizerConfig:
    return _offload(zero, "offload_optimizer", OffloadOptimizerConfig, ratio=lax_float, super_offload=lax_bool,
                    cpuadam_cores_perc=lax_float)


def read_offload_param(zero: JSONObject) -> OffloadParamConfig:
    return _offload(zero, "offload_param", OffloadParamConfig, buffer_size=lax_int, max_in_cpu=lax_int)


def _stage(data: object, zero: JSONObject) -> Stage | Auto[Stage] | Rejected:
    default = Stage(int(_default(ZERO, "stage")))
    stage = zero_stage(data)
    if stage is not None:
        return Stage(stage)
    written = zero.get("stage")
    if written == AUTO:
        # DeepSpeed 0.19.8 reads "auto" as its default, stage 0 (DeepSpeedZeroConfig(stage="auto").stage == 0)
        return Auto("stage", default)
    return Rejected(f"{ZERO}.stage", written, "is not a stage 0-3")


def _gather_16bit(zero: Mapping[str, JSONValue]) -> bool:
    """stage3_gather_16bit_weights_on_model_save (or its fp16 alias); "auto" and null read as DeepSpeed's default."""
    key = "stage3_gather_16bit_weights_on_model_save"
    value = zero.get(key, zero.get("stage3_gather_fp16_weights_on_model_save", AUTO))
    if value == AUTO or value is None:
        value = _default(ZERO, key)
    return bool(value)


def read_zero(data: object) -> ZeroConfig:
    """``zero_optimization`` of a parsed config (anything but an object reads as an empty section)."""
    zero = zero_section(data)
    return ZeroConfig(
        stage=_stage(data, zero),
        contiguous_gradients=_zero_field(zero, lax_bool, "contiguous_gradients"),
        reduce_scatter=_zero_field(zero, lax_bool, "reduce_scatter"),
        use_multi_rank_bucket_allreduce=_zero_field(zero, lax_bool, "use_multi_rank_bucket_allreduce"),
        reduce_bucket_size=_zero_field(zero, lax_int, "reduce_bucket_size", where_written=True),
        allgather_bucket_size=_zero_field(zero, lax_int, "allgather_bucket_size"),
        overlap_comm=_zero_field(zero, lax_optional_bool, "overlap_comm"),
        sub_group_size=_zero_field(zero, lax_int, "sub_group_size"),
        prefetch_bucket_size=_zero_field(zero, lax_int, "stage3_prefetch_bucket_size", "prefetch_bucket_size",
                                         where_written=True),
        param_persistence_threshold=_zero_field(zero, lax_int, "stage3_param_persistence_threshold",
                                                "param_persistence_threshold", where_written=True),
        model_persistence_threshold=_zero_field(zero, lax_int, "stage3_model_persistence_threshold",
                                                "model_persistence_threshold"),
        max_live_parameters=_zero_field(zero, lax_int, "stage3_max_live_parameters", "max_live_parameters"),
        max_reuse_distance=_zero_field(zero, lax_int, "stage3_max_reuse_distance", "max_reuse_distance"),
        zero_quantized_weights=_zero_field(zero, lax_bool, "zero_quantized_weights"),
        zero_quantized_gradients=_zero_field(zero, lax_bool, "zero_quantized_gradients"),
        zero_quantized_nontrainable_weights=_zero_field(zero, lax_bool, "zero_quantized_nontrainable_weights"),
        gather_16bit_weights_on_model_save=_gather_16bit(zero),
        module_granularity_threshold=_zero_field(zero, lax_int, "stage3_module_granularity_threshold",
                                                 "module_granularity_threshold", where_written=True),
        offload_optimizer=read_offload_optimizer(zero),
        offload_param=read_offload_param(zero),
    )


# --------------------------------------------------------------------------- fp16 / bf16


@dataclass(frozen=True)
class Fp16Config:
    """``fp16`` (runtime/precision_config.py). ``enabled`` as pydantic's lax bool reads it, Auto when "auto"."""

    enabled: bool | Auto[bool] = False
    master_weights_and_grads: bool = False  # fp16_master_weights_and_grads


@dataclass(frozen=True)
class Bf16Config:
    """``bf16``, else the legacy ``bfloat16`` that DeepSpeed reads only when bf16 is absent (``key``)."""

    enabled: bool | Auto[bool] = False
    immediate_grad_update: bool = False
    master_weights_and_grads: bool = False  # bf16_master_weights_and_grads
    optimizer_states: bool = False  # bf16_optimizer_states
    key: str = "bf16"


def _enabled(block: JSONObject, name: str) -> bool | Auto[bool]:
    enabled = is_enabled(block)
    return Auto("enabled", bool(_default(name, "enabled"))) if enabled is None else enabled


def _flag(block: Mapping[str, JSONValue], name: str, key: str) -> bool:
    """A switch of a precision section: only ``true`` turns it on (the engine tests it with ``is True`` after
    pydantic); absent and "auto" read as DeepSpeed's default."""
    if key in block and block[key] != AUTO:
        return block[key] is True
    return bool(_default(name, key))


def read_fp16(data: object) -> Fp16Config:
    block = section(data, "fp16")
    return Fp16Config(_enabled(block, "fp16"), _flag(block, "fp16", "fp16_master_weights_and_grads"))


def read_bf16(data: object) -> Bf16Config:
    block = bf16_block(data)
    key = "bfloat16" if isinstance(data, dict) and "bf16" not in data and "bfloat16" in data else "bf16"
    return Bf16Config(_enabled(block, "bf16"), _flag(block, "bf16", "immediate_grad_update"),
                      _flag(block, "bf16", "bf16_master_weights_and_grads"),
                      _flag(block, "bf16", "bf16_optimizer_states"), key)


# --------------------------------------------------------------------------- data types

# DeepSpeed's DtypeEnum spellings (runtime/config_utils.py: each member takes the torch dtype and its names),
# and torch's names, to the canonical name; matched without case or surrounding spaces, as the memory model
# always has.
DTYPE_ALIASES: dict[str, str] = {
    "fp32": "fp32",
    "float32": "fp32",
    "float": "fp32",
    "torch.float32": "fp32",
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "torch.float16": "fp16",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "torch.bfloat16": "bf16",
    "fp8": "fp8",
    "int8": "int8",
}


def dtype_name(value: object) -> str | None:
    """The canonical dtype name ("fp32", "fp16", "bf16", "fp8", "int8") of a spelling; None for another value."""
    return DTYPE_ALIASES.get(str(value).strip().lower())


# A data type left to the engine: None (the default) and "auto" are the model's dtype (engine.get_data_types,
# engine.communication_data_type).
ModelDtype = Auto[None] | None


@dataclass(frozen=True)
class DataTypesConfig:
    """``data_types.grad_accum_dtype`` and the top-level ``communication_data_type``: a canonical dtype name,
    None for the model's dtype (DeepSpeed's default), an Auto, or a Rejected spelling."""

    grad_accum_dtype: str | Rejected | ModelDtype = None
    communication_data_type: str | Rejected | ModelDtype = None


def _data_type(value: object, where: str) -> str | Rejected | ModelDtype:
    if value is None:
        return None
    if value == AUTO:
        return Auto(where.rsplit(".", 1)[-1], None)
    name = dtype_name(value)
    return Rejected(where, value, "is not a dtype DeepSpeed knows") if name is None else name


def read_data_types(data: object) -> DataTypesConfig:
    grad_accum = section(data, "data_types").get("grad_accum_dtype", _default("data_types", "grad_accum_dtype"))
    communication = (data.get("communication_data_type") if isinstance(data, dict) else None)
    if communication is None:
        communication = _default("communication_data_type")
    return DataTypesConfig(_data_type(grad_accum, "data_types.grad_accum_dtype"),
                           _data_type(communication, "communication_data_type"))


# --------------------------------------------------------------------------- gradient clipping


def read_gradient_clipping(data: object) -> float | Auto[float] | Rejected | None:
    """``gradient_clipping`` (runtime/config.py get_gradient_clipping, read with ``dict.get``): None where the
    config leaves it out or writes null (DeepSpeed runs its default, the schema's: 0.0 before 0.19.3, 1.0 from
    it); "auto" an Auto (the HF Trainer fills its max_grad_norm); a value that is not a number a Rejected (the
    value rules report it)."""
    value = data.get("gradient_clipping") if isinstance(data, dict) else None
    if value is None:
        return None
    if value == AUTO:
        return Auto("gradient_clipping", float(_default("gradient_clipping")))
    return lax_float(value, "gradient_clipping")


# --------------------------------------------------------------------------- parallel degrees


def parallel_degree(value: object, where: str) -> int | Auto[None] | Rejected | None:
    """A parallel degree the config sets (``tensor_parallel.autotp_size``, ``sequence_parallel_size``) as the
    estimate takes it: None where it is not written (or null), an Auto where "auto" (the launcher's), a Rejected
    where DeepSpeed cannot take it (a bool, text, a fraction, below 0); 0 reads as 1 (AutoTP off:
    runtime/tensor_parallel/config.py autotp_size default 0; __init__.py initialize enables it above 0)."""
    if value is None:
        return None
    if value == AUTO:
        return Auto(where.rsplit(".", 1)[-1], None)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 0:
        return Rejected(where, value, "is not a parallel degree DeepSpeed accepts")
    return max(int(value), 1)


# --------------------------------------------------------------------------- the optimizer section


def _number(value: object) -> float | None:
    """A JSON number as written (an int stays one: 10**400 has no float), else None."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class OptimizerParams:
    """The ``optimizer.params`` the estimate reads, as the optimizer constructors take them (engine.py hands the
    dict over as it is: ``is True`` / ``is not False`` / truthiness as each constructor tests it)."""

    momentum: float | None = None  # SGD / RMSprop: a number, else None
    amsgrad: bool = False  # Adam's max_exp_avg_sq
    centered: bool = False  # RMSprop's grad_avg
    torch_adam: bool = False  # engine.py: torch.optim.Adam(W) instead of FusedAdam
    foreach: bool = True  # torch's multi-tensor step
    weight_decay: float | None = None  # a number, else None ("auto": the Trainer's, 0.0 by default)
    adam_w_mode: bool = True  # False: Adam with L2 (not AdamW)
    fp32_optimizer_states: bool = True  # DeepSpeedCPUAdam (engine.get_optimizer_configuration)


@dataclass(frozen=True)
class OptimizerConfig:
    """``optimizer``: ``written`` the type as written (None when the section has no type), ``type`` as DeepSpeed
    resolves it (effective.optimizer_type), ``present`` whether the section is an object."""

    present: bool = False
    written: str | None = None
    type: str | None = None
    params: OptimizerParams = field(default_factory=OptimizerParams)


def read_optimizer(data: object) -> OptimizerConfig:
    section = data.get("optimizer") if isinstance(data, dict) else None
    if not isinstance(section, dict):
        return OptimizerConfig()
    given = section.get("params")
    p: JSONObject = given if isinstance(given, dict) else {}
    params = OptimizerParams(
        momentum=_number(p.get("momentum")), amsgrad=p.get("amsgrad") is True, centered=p.get("centered") is True,
        torch_adam=bool(p.get("torch_adam")), foreach=p.get("foreach") is not False,
        weight_decay=_number(p.get("weight_decay")), adam_w_mode=p.get("adam_w_mode", True) is not False,
        fp32_optimizer_states=p.get("fp32_optimizer_states") is not False)
    return OptimizerConfig(True, str(section["type"]) if section.get("type") else None, optimizer_type(data),
                           params)


# --------------------------------------------------------------------------- 2025 features: torch_autocast, AutoEP


@dataclass(frozen=True)
class TorchAutocastConfig:
    """``torch_autocast`` as runtime/config.py reads it: ``enabled`` (get_torch_autocast_enabled:
    get_scalar_param, the engine tests its truth), ``dtype`` (get_torch_autocast_dtype: DtypeEnum(value); None
    where not written, then torch.autocast runs the device's default, float16 on CUDA, and
    torch_autocast.init_autocast_params tags the safe modules' parameters with comm_dtype None) and
    ``lower_precision_safe_modules`` (None: torch_autocast.LOWER_PRECISION_SAFE_MODULES, Linear and Conv)."""

    enabled: bool = False
    dtype: str | Rejected | None = None  # canonical name (dtype_name)
    lower_precision_safe_modules: tuple[str, ...] | None = None


def read_torch_autocast(data: object) -> TorchAutocastConfig:
    block = data.get("torch_autocast") if isinstance(data, dict) else None
    if not isinstance(block, dict):
        return TorchAutocastConfig()
    written = block.get("dtype")
    dtype: str | Rejected | None = None
    if written is not None:
        name = dtype_name(written)
        dtype = Rejected("torch_autocast.dtype", written, "is not a dtype DeepSpeed knows") if name is None else name
    modules = block.get("lower_precision_safe_modules")
    safe = tuple(str(m) for m in modules) if isinstance(modules, list) else None
    return TorchAutocastConfig(bool(block.get("enabled", False)), dtype, safe)


@dataclass(frozen=True)
class ExpertParallelConfig:
    """``expert_parallel`` (AutoEP) as module_inject/auto_ep_config.py parse_autoep_config reads it (dict.get;
    null or {} is AutoEPConfig(): disabled): ``enabled`` (engine._configure_expert_parallel returns early unless
    it is true), ``autoep_size`` (default 1; a parallel_degree) and ``expert_tensor_parallel_size`` (default 1)."""

    enabled: bool = False
    autoep_size: int | Auto[None] | Rejected | None = None  # None: not written (DeepSpeed's 1)
    expert_tensor_parallel_size: object = 1

    @property
    def degree(self) -> int | Auto[None] | Rejected | None:
        """The expert degree the config sets: autoep_size where AutoEP is enabled (1 when left out), else None."""
        if not self.enabled:
            return None
        return 1 if self.autoep_size is None else self.autoep_size


def read_expert_parallel(data: object) -> ExpertParallelConfig:
    block = data.get("expert_parallel") if isinstance(data, dict) else None
    if not isinstance(block, dict) or not block:
        return ExpertParallelConfig()
    return ExpertParallelConfig(bool(block.get("enabled", False)),
                                parallel_degree(block.get("autoep_size"), "expert_parallel.autoep_size"),
                                block.get("expert_tensor_parallel_size", 1))


# --------------------------------------------------------------------------- 2025 features: ZenFlow, DeepCompile,
# DeepSpeed's activation checkpointing


@dataclass(frozen=True)
class ZenFlowConfig:
    """``zero_optimization.zenflow`` (runtime/zenflow/zenflow_config.py ZenFlowConfig; null, the default, disables
    it: engine.py builds ZenFlowZeroOptimizer / the stage-3 ZenFlow engine only for a section). ``enabled``: the
    section is an object; the rest as written, DeepSpeed's defaults otherwise (topk_ratio 0.1, "auto" intervals,
    overlap_step and offload False)."""

    enabled: bool = False
    topk_ratio: object = 0.1
    select_strategy: object = "auto"
    update_interval: object = "auto"
    overlap_step: bool = False
    offload: bool = False


def read_zenflow(data: object) -> ZenFlowConfig:
    block = zero_section(data).get("zenflow")
    if not isinstance(block, dict):
        return ZenFlowConfig()
    return ZenFlowConfig(True, block.get("topk_ratio", 0.1), block.get("select_strategy", "auto"),
                         block.get("update_interval", "auto"), coerce.lax_bool(block.get("overlap_step")) is True,
                         coerce.lax_bool(block.get("offload")) is True)


@dataclass(frozen=True)
class CompileConfig:
    """``compile`` (compile/config.py CompileConfig): ``deepcompile`` turns DeepCompile on (engine.compile builds
    its backend: compile/backend.py); the offload passes (passes/offload_activation.py,
    offload_adam_states.py, offload_parameters.py) and ``free_activation`` run only under it."""

    deepcompile: bool = False
    offload_activation: bool = False
    offload_opt_states: bool = False
    offload_parameters: bool = False
    free_activation: bool = False

    @property
    def offload_passes(self) -> tuple[str, ...]:
        """The memory passes written on, by key (empty without DeepCompile: nothing reads them)."""
        if not self.deepcompile:
            return ()
        return tuple(key for key in ("offload_activation", "offload_opt_states", "offload_parameters",
                                     "free_activation") if getattr(self, key))


def read_compile(data: object) -> CompileConfig:
    block = section(data, "compile")
    return CompileConfig(*(coerce.lax_bool(block.get(key)) is True for key in (
        "deepcompile", "offload_activation", "offload_opt_states", "offload_parameters", "free_activation")))


@dataclass(frozen=True)
class ActivationCheckpointingConfig:
    """``activation_checkpointing`` (runtime/activation_checkpointing/config.py): read only by
    deepspeed.checkpointing.configure, which the model's own code calls (Megatron-DeepSpeed); the engine never
    does, and transformers checkpoints with torch.utils.checkpoint, which ignores it."""

    partition_activations: bool = False
    cpu_checkpointing: bool = False


def read_activation_checkpointing(data: object) -> ActivationCheckpointingConfig:
    # config.py stores both with get_scalar_param, unchecked (the schema's x-unchecked); checkpointing.py tests
    # their truth, so "false" written as text is on
    block = section(data, "activation_checkpointing")
    return ActivationCheckpointingConfig(bool(block.get("partition_activations", False)),
                                         bool(block.get("cpu_checkpointing", False)))


__all__ = [
    "DTYPE_ALIASES",
    "ActivationCheckpointingConfig",
    "Auto",
    "Bf16Config",
    "CompileConfig",
    "DataTypesConfig",
    "ExpertParallelConfig",
    "Fp16Config",
    "OffloadConfig",
    "OffloadOptimizerConfig",
    "OffloadParamConfig",
    "OptimizerConfig",
    "OptimizerParams",
    "Rejected",
    "TorchAutocastConfig",
    "ZenFlowConfig",
    "ZeroConfig",
    "dtype_name",
    "lax_bool",
    "lax_float",
    "lax_int",
    "overlap_comm_at",
    "read_activation_checkpointing",
    "read_bf16",
    "read_compile",
    "read_data_types",
    "read_expert_parallel",
    "read_fp16",
    "read_gradient_clipping",
    "read_optimizer",
    "read_torch_autocast",
    "read_zenflow",
    "read_zero",
    "shown",
]
