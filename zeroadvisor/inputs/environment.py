"""What ``zeroadvisor.preflight`` reads from the job it runs in, to fill what the caller did not give:

* world size: ``torch.distributed.get_world_size()`` when the process group is initialised, else the
  launcher's ``WORLD_SIZE`` (torchrun, the deepspeed launcher and accelerate all set it), else 1 (set to
  anything but a count of processes, it is a UsageError, never read as unset);
  GPUs per node from ``LOCAL_WORLD_SIZE`` (torchrun, deepspeed launcher);
* the GPU's total and free memory: ``torch.cuda.mem_get_info()`` of the current device, when torch
  imports and CUDA is available. The check uses the total (the memory model charges the CUDA
  context and allocator itself); the free memory says whether something else already holds it;
* the node's RAM: ``MemTotal`` and ``MemAvailable`` of ``/proc/meminfo``. The check uses MemTotal
  (as ``--cpu-memory``); MemAvailable below the host peak is a note;
* the installed transformers' release (its distribution metadata, never imported): the job's, which decides an
  MoE model's layout (model/transformers_release.py).

torch is imported here only inside the reader (never by ``import zeroadvisor``), and only if the
script can import it. inputs/run.py ``build`` fills the run's inputs from a :class:`Readings`.
"""

from __future__ import annotations

import os
import re
import sys as _sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zeroadvisor.config.limits import MAX_GPUS
from zeroadvisor.inputs.errors import UsageError

MEMINFO = "/proc/meminfo"
# /proc/meminfo values are in kibibytes (proc(5): "kB" there means 1024 bytes).
_MEMINFO_LINE = re.compile(r"^(MemTotal|MemAvailable):\s+([0-9]+)\s*kB\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Readings:
    """What preflight read from the job (None: not readable here); ``world_size_from`` names the source."""

    world_size: int | None = None
    world_size_from: str | None = None  # "torch.distributed", "WORLD_SIZE" or None
    local_world_size: int | None = None  # LOCAL_WORLD_SIZE
    gpu_free: int | None = None  # bytes, torch.cuda.mem_get_info()
    gpu_total: int | None = None
    host_total: int | None = None  # bytes, /proc/meminfo MemTotal
    host_available: int | None = None  # bytes, /proc/meminfo MemAvailable
    transformers_version: str | None = None  # the installed transformers' release ("4.57.1")


# -- readers (each one small, so that tests replace it) ----------------------------------------

# ASCII digits: str.isdigit() also takes "²", which int() refuses.
_DIGITS = re.compile(r"[0-9]+")


def _positive_int(text: str | None, name: str = "WORLD_SIZE") -> int | None:
    """A count the launcher sets in the environment variable ``name``; None where it is unset. Anything else that
    is not a whole number of ASCII digits from 1 to the cluster bound (config/limits.py MAX_GPUS), as
    config/launch.py reads a launch command's counts, is a UsageError naming the variable: "abc", "0", "" or "²"
    (which torch.distributed's int() would refuse or start no process with) would otherwise be read as unset, a
    1-GPU job, and the check would answer for another run."""
    if text is None:
        return None
    stripped = text.strip()
    if not _DIGITS.fullmatch(stripped):
        raise UsageError(f"preflight: {name}={_shown(text)} is not a whole number of processes (the launcher sets "
                         f"it to the job's count, 1 or more; unset it to check a 1-GPU run)")
    digits = stripped.lstrip("0")
    if not digits:
        raise UsageError(f"preflight: {name}={stripped} starts no process (the launcher sets it to 1 or more)")
    if len(digits) > len(str(MAX_GPUS)) or int(digits) > MAX_GPUS:
        shown = digits if len(digits) <= 20 else f"{digits[:20]}... ({len(digits):,} digits)"
        raise UsageError(f"preflight: {name}={shown} is more than any cluster has (at most {MAX_GPUS:,})")
    return int(digits)


def _shown(text: str) -> str:
    """The value as the message shows it: quoted with escapes (a control character stays on its line), cut."""
    return ascii(text if len(text) <= 40 else text[:40] + "...")


def _torch() -> Any:
    """torch if this process can import it, else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def read_world_size(environ: Mapping[str, str] = os.environ) -> tuple[int | None, str | None]:
    """(world size, its source): the initialised process group, else WORLD_SIZE, else (None, None)."""
    torch = _torch() if "torch" in _loaded_modules() else None  # never import torch just for this
    if torch is not None:
        try:
            dist = torch.distributed
            if dist.is_available() and dist.is_initialized():
                return int(dist.get_world_size()), "torch.distributed"
        except (AttributeError, RuntimeError, ValueError):
            pass
    size = _positive_int(environ.get("WORLD_SIZE"))
    return (size, "WORLD_SIZE") if size is not None else (None, None)


def read_local_world_size(environ: Mapping[str, str] = os.environ) -> int | None:
    return _positive_int(environ.get("LOCAL_WORLD_SIZE"), "LOCAL_WORLD_SIZE")


def read_gpu_memory() -> tuple[int, int] | None:
    """(free, total) bytes of the current CUDA device, or None without torch or CUDA."""
    torch = _torch()
    if torch is None:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        free, total = torch.cuda.mem_get_info(torch.cuda.current_device())
    except (AttributeError, RuntimeError, AssertionError):  # a CUDA build without a usable device
        return None
    return int(free), int(total)


def read_host_memory(path: str | None = None) -> tuple[int, int | None] | None:
    """(MemTotal, MemAvailable) bytes from /proc/meminfo, or None where it cannot be read (not Linux)."""
    try:
        with open(path or MEMINFO, encoding="ascii", errors="replace") as handle:
            text = handle.read(1 << 16)
    except OSError:
        return None
    found = {name: int(kib) * 1024 for name, kib in _MEMINFO_LINE.findall(text)}
    if "MemTotal" not in found:
        return None
    return found["MemTotal"], found.get("MemAvailable")


def read_transformers_version() -> str | None:
    """The installed transformers' release (its base version: "5.0.0" of "5.0.0.dev0"), None where not installed."""
    from importlib import metadata

    from packaging.version import InvalidVersion, Version

    try:
        return Version(metadata.version("transformers")).base_version
    except (metadata.PackageNotFoundError, InvalidVersion, ValueError):
        return None


def _loaded_modules() -> Mapping[str, Any]:
    return _sys.modules


def read_all(environ: Mapping[str, str] = os.environ) -> Readings:
    world, source = read_world_size(environ)
    gpu = read_gpu_memory()
    host = read_host_memory()
    return Readings(world_size=world, world_size_from=source, local_world_size=read_local_world_size(environ),
                    gpu_free=gpu[0] if gpu else None, gpu_total=gpu[1] if gpu else None,
                    host_total=host[0] if host else None, host_available=host[1] if host else None,
                    transformers_version=read_transformers_version())
