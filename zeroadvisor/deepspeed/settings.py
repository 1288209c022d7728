"""The effective DeepSpeed settings of one config, read once into one frozen object.

``read(data)`` reads a parsed ds_config the way DeepSpeed 0.19.8 does (deepspeed/effective.py has the
reading of each key) into a :class:`DeepSpeedSettings`; ``settings_of(document)`` does it once per
document (config/source.py ``Document.derived``). The lint rules read it through ``lint/context.Context``,
the memory model builds its ``Settings`` from it (memory/settings.py), and the step-time model and the
advisor read the batch counts and the global batch from there: each fact has one reading.

What DeepSpeed leaves to someone else is kept as written, not guessed: a key left "auto" for an integration,
a value DeepSpeed rejects. The layers above decide what to make of it (the rules report it, the memory model
resolves it from a flag or records an assumption).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from zeroadvisor.config.source import Document
from zeroadvisor.deepspeed import effective as E
from zeroadvisor.deepspeed import schema
from zeroadvisor.deepspeed.effective import AUTO, BATCH_KEYS, GAS, MBS, TBS

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _empty() -> Mapping[str, Any]:
    return _EMPTY


def _view(section: dict[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(section) if section else _EMPTY


def _integer(value: Any) -> int | None:
    """A batch count as DeepSpeed computes with it: an int or an integral float (2.0), of any sign (the rules
    report one below 1); None for anything else (absent, "auto", a bool, a fraction, text)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, int) else None


@dataclass(frozen=True, slots=True)
class BatchCounts:
    """train_batch_size, train_micro_batch_size_per_gpu and gradient_accumulation_steps as the config writes them.

    ``values``: as written (None when absent); ``written``: each as the integer DeepSpeed's arithmetic uses, of
    any sign; ``counts``: the positive ones (DeepSpeed asserts each is > 0), None for the others. ``present``:
    the keys the config has; ``auto``: those left "auto" for an integration to fill.
    """

    values: tuple[Any, Any, Any] = (None, None, None)
    written: tuple[int | None, int | None, int | None] = (None, None, None)
    present: frozenset[str] = frozenset()
    auto: frozenset[str] = frozenset()

    @property
    def filled_by_integration(self) -> bool:
        """The micro batch is "auto" and so is every other batch key written: the integration (the HF Trainer,
        integrations/deepspeed.py trainer_config_process) fills them all from its own arguments."""
        return MBS in self.auto and self.present == self.auto

    @property
    def counts(self) -> tuple[int | None, int | None, int | None]:
        return tuple(v if v is not None and v >= 1 else None for v in self.written)  # type: ignore[return-value]

    @property
    def train_batch_size(self) -> int | None:
        return self.counts[0]

    @property
    def micro_batch(self) -> int | None:
        return self.counts[1]

    @property
    def accumulation(self) -> int | None:
        return self.counts[2]

    def resolve(self, world: float) -> tuple[float, float, float] | None:
        """(train_batch_size, micro batch, accumulation) as DeepSpeed ends with them on ``world`` ranks
        (deepspeed/runtime/config.py DeepSpeedConfig._configure_train_batch_size; effective.derive_batch);
        None where DeepSpeed asserts that neither train_batch_size nor the micro batch is given."""
        return E.derive_batch(*self.counts, world)

    def global_batch(self, world: float) -> int | None:
        """train_batch_size as DeepSpeed resolves it on ``world`` ranks (None: the config leaves it open)."""
        resolved = self.resolve(world)
        if resolved is None or not _integral(resolved[0]):
            return None  # a world the sequence-parallel size does not divide: Ulysses refuses it (rules/parallel.py)
        return int(resolved[0])


def _integral(value: float) -> bool:
    """Whether a derived count is a whole number (a float past the float range is not one: inf)."""
    try:
        return value == int(value)
    except (OverflowError, ValueError):
        return False


def read_batch(data: Any) -> BatchCounts:
    """The batch counts of a parsed config: the one place they are read (DeepSpeedConfig.__init__ reads the
    three top-level keys with get_scalar_param, runtime/config.py; _configure_train_batch_size derives the rest)."""
    if not isinstance(data, dict):
        return BatchCounts()
    values = tuple(data.get(key) for key in BATCH_KEYS)
    return BatchCounts(values, tuple(_integer(v) for v in values),  # type: ignore[arg-type]
                       frozenset(key for key in BATCH_KEYS if key in data),
                       frozenset(key for key, v in zip(BATCH_KEYS, values, strict=True) if v == AUTO))


@dataclass(frozen=True, slots=True)
class Offload:
    """``offload_optimizer`` or ``offload_param`` as DeepSpeed reads it (the legacy cpu_offload booleans
    included): its options, and ``device`` as written ("none" when absent or not text; "auto" and a value
    DeepSpeed rejects are kept: the rules report them)."""

    block: Mapping[str, Any] = field(default_factory=_empty)
    device: str = "none"

    @property
    def on(self) -> bool:
        """Offloaded to the CPU or NVMe."""
        return self.device in ("cpu", "nvme")


@dataclass(frozen=True, slots=True)
class Layout:
    """The parallel-layout keys DeepSpeed reads from the config, as written (None when absent):
    ``tensor_parallel.autotp_size`` (AutoTP), ``sequence_parallel_size`` (Ulysses, read raw by
    DeepSpeedConfig.__init__), ``data_parallel_size`` (the device mesh, deepspeed/__init__.py initialize) and
    ``zero_optimization.zero_hpz_partition_size`` (ZeRO++ hpZ). The properties are the degrees DeepSpeed takes
    (positive integers, 2.0 too; None otherwise)."""

    autotp_size: Any = None
    sequence_parallel_size: Any = None
    data_parallel_size: Any = None
    hpz_partition_size: Any = None

    @property
    def tensor(self) -> int | None:
        """AutoTP's degree (TPTrainingConfig; 0 = AutoTP off, so None here)."""
        return E.positive_int(self.autotp_size)

    @property
    def sequence(self) -> int | None:
        return E.positive_int(self.sequence_parallel_size)

    @property
    def data(self) -> int | None:
        return E.positive_int(self.data_parallel_size)

    @property
    def hpz(self) -> int | None:
        return E.positive_int(self.hpz_partition_size)

    def batch_world(self, gpus: int) -> float:
        """The world size DeepSpeed's batch assertion divides by: the GPUs over sequence_parallel_size
        (runtime/config.py DeepSpeedConfig.__init__: get_world_size() / config["sequence_parallel_size"]);
        not integral when they do not divide."""
        return gpus / self.sequence if self.sequence else gpus


@dataclass(frozen=True, slots=True)
class DeepSpeedSettings:
    """What DeepSpeed reads from one config. Sections are read-only views of the config's own (the legacy
    ``zero_optimization: true`` reads as an empty section with ``stage`` 1)."""

    configured: bool = False  # a config was given (None: DeepSpeed's defaults)
    is_object: bool = False  # the config is a JSON object (anything else reads as an empty one)
    keys: frozenset[str] = frozenset()  # the top-level keys written
    stage: int | None = 0  # effective.zero_stage: None where the value is "auto" or invalid
    stage_written: Any = None  # zero_optimization.stage as written (None when absent)
    zero: Mapping[str, Any] = field(default_factory=_empty)
    offload_optimizer: Offload = field(default_factory=Offload)
    offload_param: Offload = field(default_factory=Offload)
    fp16: Mapping[str, Any] = field(default_factory=_empty)
    bf16: Mapping[str, Any] = field(default_factory=_empty)  # ``bf16``, else the legacy ``bfloat16``
    bf16_key: str = "bf16"  # the key bf16's pointer names
    fp16_enabled: bool | None = False  # as pydantic's lax bool reads it; None: "auto" (an integration decides)
    bf16_enabled: bool | None = False
    optimizer: Mapping[str, Any] | None = None  # the optimizer section; None when absent or not an object
    optimizer_type: str | None = None  # effective.optimizer_type
    grad_accum_dtype: Any = None  # data_types.grad_accum_dtype (DeepSpeed's default when absent)
    communication_data_type: Any = None
    gradient_clipping: Any = None  # as written (None when absent)
    gather_16bit_weights_on_model_save: bool = False
    batch: BatchCounts = field(default_factory=BatchCounts)
    layout: Layout = field(default_factory=Layout)

    @property
    def precision(self) -> str | None:
        """The model dtype DeepSpeed trains in ("fp16", "bf16", "fp32"); None while "auto" leaves it open.
        DeepSpeed asserts against both enabled; the engine checks fp16 first."""
        if self.fp16_enabled is True:
            return "fp16"
        if self.bf16_enabled is True:
            return "bf16"
        return None if self.open_precisions else "fp32"

    @property
    def open_precisions(self) -> tuple[str, ...]:
        """The 16-bit formats left "auto" for an integration to switch on."""
        return tuple(name for name, enabled in (("fp16", self.fp16_enabled), ("bf16", self.bf16_enabled))
                     if enabled is None)

    def offload(self, which: str) -> Offload:
        """``offload_optimizer`` or ``offload_param``."""
        return {"offload_optimizer": self.offload_optimizer, "offload_param": self.offload_param}[which]

    def batch_world(self, gpus: int) -> float:
        return self.layout.batch_world(gpus)


def _gather_16bit(zero: Mapping[str, Any]) -> bool:
    """stage3_gather_16bit_weights_on_model_save (or its fp16 alias); "auto" and null read as DeepSpeed's default."""
    key = "stage3_gather_16bit_weights_on_model_save"
    value = zero.get(key, zero.get("stage3_gather_fp16_weights_on_model_save", AUTO))
    if value == AUTO or value is None:
        value = schema.default("zero_optimization", key)
    return bool(value)


def _offload(zero: dict[str, Any], which: str) -> Offload:
    block = E.offload_block(zero, which)
    return Offload(_view(block), E.offload_device(block))


def read(data: Any) -> DeepSpeedSettings:
    """The effective settings of a parsed config (None: no config, DeepSpeed's defaults; not an object: read
    as an empty one). Use ``settings_of`` for a document: it reads once per document."""
    cfg = data if isinstance(data, dict) else {}
    zero = E.zero_section(cfg)
    tensor_parallel = E.section(cfg, "tensor_parallel")
    return DeepSpeedSettings(
        configured=data is not None,
        is_object=isinstance(data, dict),
        keys=frozenset(str(key) for key in cfg),
        stage=E.zero_stage(cfg),
        stage_written=zero.get("stage"),
        zero=_view(zero),
        offload_optimizer=_offload(zero, "offload_optimizer"),
        offload_param=_offload(zero, "offload_param"),
        fp16=_view(E.section(cfg, "fp16")),
        bf16=_view(E.bf16_block(cfg)),
        bf16_key="bfloat16" if "bf16" not in cfg and "bfloat16" in cfg else "bf16",
        fp16_enabled=E.is_enabled(E.section(cfg, "fp16")),
        bf16_enabled=E.is_enabled(E.bf16_block(cfg)),
        optimizer=_view(cfg["optimizer"]) if isinstance(cfg.get("optimizer"), dict) else None,
        optimizer_type=E.optimizer_type(cfg),
        grad_accum_dtype=E.section(cfg, "data_types").get("grad_accum_dtype",
                                                          schema.default("data_types", "grad_accum_dtype")),
        communication_data_type=cfg.get("communication_data_type", schema.default("communication_data_type")),
        gradient_clipping=cfg.get("gradient_clipping"),
        gather_16bit_weights_on_model_save=_gather_16bit(zero),
        batch=read_batch(cfg),
        layout=Layout(tensor_parallel.get("autotp_size"), cfg.get("sequence_parallel_size"),
                      cfg.get("data_parallel_size"), zero.get("zero_hpz_partition_size")),
    )


# A parsed config, or what DeepSpeed reads of one: the layers above take either, so that a caller holding the
# settings (a document's, settings_of) hands them on and the config is read once.
Config = dict[str, Any] | DeepSpeedSettings | None


def as_settings(config: Config) -> DeepSpeedSettings:
    """``config`` read (``read``), or the settings themselves when it was read already."""
    return config if isinstance(config, DeepSpeedSettings) else read(config)


def _read_document(document: Document) -> DeepSpeedSettings:
    return read(document.data)


def settings_of(document: Document) -> DeepSpeedSettings:
    """The effective settings of ``document``, read once per document."""
    return document.derived(_read_document)


__all__ = ["AUTO", "BATCH_KEYS", "GAS", "MBS", "TBS", "BatchCounts", "Config", "DeepSpeedSettings", "Layout",
           "Offload", "as_settings", "read", "read_batch", "settings_of"]
