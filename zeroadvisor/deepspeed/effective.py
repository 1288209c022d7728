"""How DeepSpeed 0.19 reads each setting of a parsed config: one function per key or section.

deepspeed/settings.py reads a config once with these into the DeepSpeedSettings that the lint rules,
the memory model, the step-time model and the advisor share, so that "which ZeRO stage is this?" has
one answer. Values that DeepSpeed would reject are returned as None; the rules report them.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from zeroadvisor.deepspeed import coerce, schema

# The placeholder the Hugging Face integrations replace; DeepSpeedConfigModel drops it (config_utils.py).
AUTO = "auto"

# The batch triple DeepSpeedConfig._configure_train_batch_size derives (runtime/constants.py names).
TBS, MBS, GAS = "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"
BATCH_KEYS = (TBS, MBS, GAS)


def section(data: Any, key: str) -> dict[str, Any]:
    """A top-level section as a dict ({} when absent or not an object)."""
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, dict) else {}


def zero_section(data: Any) -> dict[str, Any]:
    return section(data, "zero_optimization")


def zero_stage(data: Any) -> int | None:
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
        default = schema.default("zero_optimization", "stage")
        return default if isinstance(default, int) else None  # the schema's is an int
    return stage_value(zero["stage"])


def stage_value(value: Any) -> int | None:
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


def is_enabled(block: Any) -> bool | None:
    """``{"enabled": ...}`` of a pydantic section (fp16, bf16): True/False as pydantic's lax bool reads
    it, or None when it is "auto" (an integration decides)."""
    if not isinstance(block, dict):
        return False
    value = block.get("enabled", False)
    if value == AUTO:
        return None
    return coerce.lax_bool(value) is True


def bf16_block(data: Any) -> dict[str, Any]:
    """``bf16``, or the legacy ``bfloat16`` that DeepSpeed reads only when bf16 is absent."""
    if isinstance(data, dict):
        block = data.get("bf16")
        if isinstance(block, dict):
            return block
    return section(data, "bfloat16")


# The deprecated booleans DeepSpeed migrates to {device: cpu} (runtime/zero/config.py).
LEGACY_OFFLOAD = {"offload_optimizer": "cpu_offload", "offload_param": "cpu_offload_param"}


def offload_block(zero: dict[str, Any], which: str) -> dict[str, Any]:
    """``offload_optimizer``/``offload_param`` of the ``zero_optimization`` section as DeepSpeed reads it, the
    legacy booleans included."""
    block = zero.get(which)
    if isinstance(block, dict):
        return block
    return {"device": "cpu"} if zero.get(LEGACY_OFFLOAD[which]) is True else {}


def offload_device(block: dict[str, Any]) -> str:
    """Device of an offload block: "none", "cpu", "nvme" (or "auto", or a value DeepSpeed rejects)."""
    device = block.get("device", "none")
    return device if isinstance(device, str) else "none"


def optimizer_type(data: Any) -> str | None:
    """``optimizer.type`` as DeepSpeed resolves it: its own names lower-cased, else as written."""
    opt = section(data, "optimizer")
    name = opt.get("type")
    if not isinstance(name, str):
        return None
    return name.lower() if name.lower() in schema.names("x-deepspeed-optimizers") else name



def derive_batch(tbs: int | None, mbs: int | None, gas: int | None,
                 world: float) -> tuple[float, float, float] | None:
    """DeepSpeedConfig._configure_train_batch_size, step for step (runtime/config.py).

    Any two of the three give the third, with floor division; one alone fills the rest.
    Returns the (tbs, mbs, gas) DeepSpeed ends with, or None if it asserts for lack of both
    train_batch_size and train_micro_batch_size_per_gpu. ``world`` is a float as in DeepSpeed
    (``dist.get_world_size() / sequence_parallel_size``), so the counts it derives may be too.
    """
    try:
        return _derive(tbs, mbs, gas, world)
    except OverflowError:
        # a count past the float range (a 400-digit train_batch_size): DeepSpeed's int-by-float arithmetic raises
        # here; exact arithmetic gives what it would mean, and the value rules report the count
        return _derive(tbs, mbs, gas, Fraction(world))


def _derive(tbs: int | None, mbs: int | None, gas: int | None,
            world: float | Fraction) -> tuple[float, float, float] | None:
    if tbs is not None:
        return _from_train_batch(tbs, mbs, gas, world)
    if mbs is None:
        return None
    gas = 1 if gas is None else gas  # the micro-batch alone: one step per batch
    return mbs * gas * world, mbs, gas  # a Fraction compares as a float does


def _from_train_batch(tbs: int, mbs: int | None, gas: int | None,
                      world: float | Fraction) -> tuple[float, float, float]:
    """derive_batch when train_batch_size is given."""
    if mbs is not None and gas is not None:
        return tbs, mbs, gas
    if mbs is not None:
        return tbs, mbs, tbs // mbs // world if mbs else 0
    if gas is not None:
        return tbs, (tbs // world) // gas if gas else 0, gas
    return tbs, tbs // world, 1


def positive_int(value: Any) -> int | None:
    """An integer setting as DeepSpeed's int fields take it (2 or 2.0); None for anything else or < 1."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None

