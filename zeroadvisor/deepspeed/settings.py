"""The effective DeepSpeed settings of one config, read once into one frozen object.

``read(data)`` reads a parsed ds_config the way DeepSpeed 0.19.8 does into a :class:`DeepSpeedSettings`: its
sections typed (deepspeed/config_model.py: ZeroConfig, the offload configs, fp16/bf16, the optimizer), the
top-level keys beside them (deepspeed/effective.py has the batch arithmetic);
``settings_of(document)`` does it once per document and release (config/source.py ``Document.derived``).
The lint rules read it through ``lint/context.Context``, the memory model builds its ``Settings`` from it
(memory/settings.py), and the step-time model and the advisor read the batch counts and the global batch from
there: each fact has one reading.

What DeepSpeed leaves to someone else is kept, not guessed: a key left "auto" for an integration (an ``Auto``),
a value DeepSpeed rejects (a ``Rejected``). The layers above decide what to make of it (the rules report it, the
memory model resolves it from a flag or records an assumption).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from zeroadvisor.config.source import Document
from zeroadvisor.deepspeed import effective as E
from zeroadvisor.deepspeed import schema
from zeroadvisor.deepspeed.config_model import (
    ActivationCheckpointingConfig,
    Auto,
    Bf16Config,
    CompileConfig,
    DataTypesConfig,
    ExpertParallelConfig,
    Fp16Config,
    OffloadConfig,
    OffloadOptimizerConfig,
    OffloadParamConfig,
    OptimizerConfig,
    Rejected,
    TorchAutocastConfig,
    ZenFlowConfig,
    ZeroConfig,
    parallel_degree,
    read_activation_checkpointing,
    read_bf16,
    read_compile,
    read_data_types,
    read_expert_parallel,
    read_fp16,
    read_gradient_clipping,
    read_optimizer,
    read_torch_autocast,
    read_zenflow,
    read_zero,
    section,
    zero_section,
)
from zeroadvisor.deepspeed.effective import AUTO, BATCH_KEYS, GAS, MBS, TBS
from zeroadvisor.vocab import Precision, Stage


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
    def set_degrees(self) -> dict[str, int | Auto[None] | Rejected | None]:
        """The tensor and sequence degrees as the estimate takes them (config_model.parallel_degree)."""
        return {"tensor": parallel_degree(self.autotp_size, "tensor_parallel.autotp_size"),
                "sequence": parallel_degree(self.sequence_parallel_size, "sequence_parallel_size")}

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
    """What DeepSpeed reads from one config: its typed sections (deepspeed/config_model.py) and the top-level
    keys. The legacy ``zero_optimization: true`` reads as an empty section with ``stage`` 1."""

    configured: bool = False  # a config was given (None: DeepSpeed's defaults)
    is_object: bool = False  # the config is a JSON object (anything else reads as an empty one)
    keys: frozenset[str] = frozenset()  # the top-level keys written
    zero_config: ZeroConfig = field(default_factory=ZeroConfig)
    fp16: Fp16Config = field(default_factory=Fp16Config)
    bf16: Bf16Config = field(default_factory=Bf16Config)  # ``bf16``, else the legacy ``bfloat16``
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    data_types: DataTypesConfig = field(default_factory=DataTypesConfig)  # and communication_data_type
    gradient_clipping: float | Auto[float] | Rejected | None = None  # None: not written
    batch: BatchCounts = field(default_factory=BatchCounts)
    layout: Layout = field(default_factory=Layout)
    torch_autocast: TorchAutocastConfig = field(default_factory=TorchAutocastConfig)
    expert_parallel: ExpertParallelConfig = field(default_factory=ExpertParallelConfig)  # AutoEP
    zenflow: ZenFlowConfig = field(default_factory=ZenFlowConfig)  # zero_optimization.zenflow
    compile: CompileConfig = field(default_factory=CompileConfig)  # DeepCompile
    activation_checkpointing: ActivationCheckpointingConfig = field(default_factory=ActivationCheckpointingConfig)

    @property
    def stage(self) -> int | None:
        """The ZeRO stage DeepSpeed runs (the legacy ``zero_optimization: true`` is 1, no section 0); None where it
        is "auto" (an integration fills it) or a value DeepSpeed refuses."""
        stage = self.zero_config.stage
        return int(stage) if isinstance(stage, Stage) else None

    @property
    def offload_optimizer(self) -> OffloadOptimizerConfig:
        return self.zero_config.offload_optimizer

    @property
    def offload_param(self) -> OffloadParamConfig:
        return self.zero_config.offload_param

    @property
    def gather_16bit_weights_on_model_save(self) -> bool:
        return self.zero_config.gather_16bit_weights_on_model_save

    @property
    def bf16_key(self) -> str:
        """The key bf16's pointer names (``bfloat16`` where only the legacy spelling is written)."""
        return self.bf16.key

    @property
    def fp16_enabled(self) -> bool | None:
        """fp16.enabled as pydantic's lax bool reads it; None: "auto" (an integration decides)."""
        return None if isinstance(self.fp16.enabled, Auto) else self.fp16.enabled

    @property
    def bf16_enabled(self) -> bool | None:
        return None if isinstance(self.bf16.enabled, Auto) else self.bf16.enabled

    @property
    def optimizer_type(self) -> str | None:
        """config_model.optimizer_type: DeepSpeed's own names lower-cased, else as written."""
        return self.optimizer.type

    @property
    def precision(self) -> Precision | None:
        """The model dtype DeepSpeed trains in; None while "auto" leaves it open.
        DeepSpeed asserts against both enabled; the engine checks fp16 first."""
        if self.fp16_enabled is True:
            return Precision.FP16
        if self.bf16_enabled is True:
            return Precision.BF16
        return None if self.open_precisions else Precision.FP32

    @property
    def open_precisions(self) -> tuple[Precision, ...]:
        """The 16-bit formats left "auto" for an integration to switch on."""
        return tuple(name for name, enabled in ((Precision.FP16, self.fp16_enabled),
                                                (Precision.BF16, self.bf16_enabled)) if enabled is None)

    def offload(self, which: str) -> OffloadConfig:
        """``offload_optimizer`` or ``offload_param``."""
        return {"offload_optimizer": self.offload_optimizer, "offload_param": self.offload_param}[which]

    def batch_world(self, gpus: int) -> float:
        return self.layout.batch_world(gpus)


def read(data: Any) -> DeepSpeedSettings:
    """The effective settings of a parsed config (None: no config, DeepSpeed's defaults; not an object: read
    as an empty one), with DeepSpeed's defaults of the active release (``schema.reading_as``). Use
    ``settings_of`` for a document: it reads once per document and release."""
    cfg = data if isinstance(data, dict) else {}
    zero = zero_section(cfg)
    tensor_parallel = section(cfg, "tensor_parallel")
    return DeepSpeedSettings(
        configured=data is not None,
        is_object=isinstance(data, dict),
        keys=frozenset(str(key) for key in cfg),
        zero_config=read_zero(cfg),
        fp16=read_fp16(cfg),
        bf16=read_bf16(cfg),
        optimizer=read_optimizer(cfg),
        data_types=read_data_types(cfg),
        gradient_clipping=read_gradient_clipping(cfg),
        batch=read_batch(cfg),
        layout=Layout(tensor_parallel.get("autotp_size"), cfg.get("sequence_parallel_size"),
                      cfg.get("data_parallel_size"), zero.get("zero_hpz_partition_size")),
        torch_autocast=read_torch_autocast(cfg),
        expert_parallel=read_expert_parallel(cfg),
        zenflow=read_zenflow(cfg),
        compile=read_compile(cfg),
        activation_checkpointing=read_activation_checkpointing(cfg),
    )


# A parsed config, or what DeepSpeed reads of one: the layers above take either, so that a caller holding the
# settings (a document's, settings_of) hands them on and the config is read once.
Config = dict[str, Any] | DeepSpeedSettings | None


def as_settings(config: Config) -> DeepSpeedSettings:
    """``config`` read (``read``), or the settings themselves when it was read already."""
    return config if isinstance(config, DeepSpeedSettings) else read(config)


@cache
def _reader(release: str) -> Callable[[Document], DeepSpeedSettings]:
    """The reading of a document as ``release`` (its defaults): one function per release, so that
    ``Document.derived`` keeps one reading per document and release."""
    def read_document(document: Document) -> DeepSpeedSettings:
        with schema.reading_as(release):
            return read(document.data)
    return read_document


def settings_of(document: Document) -> DeepSpeedSettings:
    """The effective settings of ``document`` as the active release reads it, read once per document and release
    (a lint over several releases reads each release's defaults)."""
    return document.derived(_reader(schema.active_release()))


__all__ = ["AUTO", "BATCH_KEYS", "GAS", "MBS", "TBS", "BatchCounts", "Config", "DeepSpeedSettings", "Layout",
           "OffloadConfig", "as_settings", "read", "read_batch", "settings_of"]
