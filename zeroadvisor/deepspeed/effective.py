"""The names and the arithmetic DeepSpeed 0.19 applies to the top-level keys of a config: the "auto" placeholder,
the batch triple and its derivation, the legacy offload booleans' names, a parallel degree.

The sections themselves (zero_optimization and its offloads, fp16/bf16, the optimizer) are read in one place,
deepspeed/config_model.py; deepspeed/settings.py puts the two together into the DeepSpeedSettings that the lint
rules, the memory model, the step-time model and the advisor share.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

# The placeholder the Hugging Face integrations replace; DeepSpeedConfigModel drops it (config_utils.py).
AUTO = "auto"

# The batch triple DeepSpeedConfig._configure_train_batch_size derives (runtime/constants.py names).
TBS, MBS, GAS = "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"
BATCH_KEYS = (TBS, MBS, GAS)


# The deprecated booleans DeepSpeed migrates to {device: cpu} (runtime/zero/config.py).
LEGACY_OFFLOAD = {"offload_optimizer": "cpu_offload", "offload_param": "cpu_offload_param"}


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

