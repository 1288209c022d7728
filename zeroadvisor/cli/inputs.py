"""Command-line inputs to library values, each error a one-line ``InputError`` (exit 2)."""

from __future__ import annotations

from fractions import Fraction

from zeroadvisor.model.spec import ModelSpec, TrainingShape


class InputError(ValueError):
    """A bad command-line value or unreadable model/config file: exit code 2."""


def model_and_shape(model: str | None, params: str | None, seq_len: int | None = None,
                    checkpointing: str | None = None, flash: bool | None = None) -> tuple[ModelSpec, TrainingShape]:
    """``--model PATH`` or ``--params N``, with the training-shape overrides applied."""
    from zeroadvisor.model.description import apply_overrides, load_description, spec_from_params
    from zeroadvisor.model.errors import ModelError

    if (model is None) == (params is None):
        raise InputError("give exactly one of --model PATH or --params N")
    try:
        if model is not None:
            spec, shape = load_description(model)
        else:
            spec, shape = spec_from_params(params), TrainingShape()
        return spec, apply_overrides(shape, seq_len, checkpointing, flash)
    except ModelError as err:
        raise InputError(str(err)) from None


def size(option: str, text: str | None) -> int | None:
    from zeroadvisor.units import parse_size

    if text is None:
        return None
    try:
        value = parse_size(text)
    except ValueError as err:
        raise InputError(f"{option}: {err}") from None
    if value <= 0:
        raise InputError(f"{option}: must be more than 0 bytes, got {text!r}")
    return value


def gpu_memory(gpu_memory_text: str | None, gpu: str | None, required: bool) -> int | None:
    """``--gpu-memory 80GiB`` or ``--gpu H100`` (one of them; both is a usage error)."""
    from zeroadvisor.memory.gpus import gpu_memory as by_name

    if gpu_memory_text is not None and gpu is not None:
        raise InputError("give --gpu-memory or --gpu, not both")
    if gpu is not None:
        try:
            return by_name(gpu)
        except ValueError as err:
            raise InputError(f"--gpu: {err}") from None
    if gpu_memory_text is None and required:
        raise InputError("give the memory per GPU: --gpu-memory 80GiB or --gpu A100-80GB")
    return size("--gpu-memory", gpu_memory_text)


def headroom(text: str) -> float:
    """``10%`` or ``0.1``: the share of GPU memory to keep free."""
    raw = text.strip()
    try:
        value = Fraction(raw[:-1]) / 100 if raw.endswith("%") else Fraction(raw)
    except (ValueError, ZeroDivisionError):
        raise InputError(f"--headroom: expected a share like 10% or 0.1, got {text!r}") from None
    if not 0 <= value < 1:
        raise InputError(f"--headroom: must be at least 0% and below 100%, got {text!r}")
    return float(value)
