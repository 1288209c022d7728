"""``zeroadvisor.preflight``: the check, run by the training script itself before it loads the model.

It fills what the job already knows and the caller did not give:

* world size: ``torch.distributed.get_world_size()`` when the process group is initialised, else the
  launcher's ``WORLD_SIZE`` (torchrun, the deepspeed launcher and accelerate all set it), else 1;
  GPUs per node from ``LOCAL_WORLD_SIZE`` (torchrun, deepspeed launcher);
* the GPU's total and free memory: ``torch.cuda.mem_get_info()`` of the current device, when torch
  imports and CUDA is available. The check uses the total (the memory model charges the CUDA
  context and allocator itself); the free memory says whether something else already holds it;
* the node's RAM: ``MemTotal`` and ``MemAvailable`` of ``/proc/meminfo``. The check uses MemTotal
  (as ``--cpu-memory``); MemAvailable below the host peak is a note.

torch is imported here only inside the reader (never by ``import zeroadvisor``), and only if the
script can import it. Every rank runs the same check and raises the same error.
"""

from __future__ import annotations

import os
import re
import sys as _sys
import types as _types
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from zeroadvisor.library import CheckReport

MEMINFO = "/proc/meminfo"
# /proc/meminfo values are in kibibytes (proc(5): "kB" there means 1024 bytes).
_MEMINFO_LINE = re.compile(r"^(MemTotal|MemAvailable):\s+([0-9]+)\s*kB\s*$", re.MULTILINE)


class PreflightError(RuntimeError):
    """The configured run does not fit; ``str()`` is the text report, ``result`` the PreflightResult."""

    def __init__(self, message: str, result: "PreflightResult"):
        super().__init__(message)
        self.result = result


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


@dataclass(frozen=True)
class PreflightResult:
    """The check (``report``), the readings it used, and notes about this node (one line each)."""

    report: CheckReport
    readings: Readings
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str | None:
        return self.report.verdict

    @property
    def fits(self) -> bool | None:
        return self.report.fits

    def text(self) -> str:
        """The text report and the notes: the PreflightError's message."""
        return self.report.report("text") + "".join(f"preflight: {note}\n" for note in self.notes)


# -- readers (each one small, so that tests replace it) ----------------------------------------

def _positive_int(text: str | None) -> int | None:
    if text is None or not text.strip().isdigit():
        return None
    value = int(text.strip())
    return value if value > 0 else None


def _torch() -> Any:
    """torch if this process can import it, else None."""
    try:
        import torch  # noqa: PLC0415 - only here: the core never imports torch
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
    return _positive_int(environ.get("LOCAL_WORLD_SIZE"))


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


def _loaded_modules() -> Mapping[str, Any]:
    return _sys.modules


def read_all(environ: Mapping[str, str] = os.environ) -> Readings:
    world, source = read_world_size(environ)
    gpu = read_gpu_memory()
    host = read_host_memory()
    return Readings(world_size=world, world_size_from=source, local_world_size=read_local_world_size(environ),
                    gpu_free=gpu[0] if gpu else None, gpu_total=gpu[1] if gpu else None,
                    host_total=host[0] if host else None, host_available=host[1] if host else None)


# -- the check ------------------------------------------------------------------------------------

def preflight(config: Any, model: Any = None, *, params: int | str | None = None, gpus: int | None = None,
              gpus_per_node: int | None = None, gpu: str | None = None, gpu_memory: int | str | None = None,
              cpu_memory: int | str | None = None, nvme: int | str | None = None, headroom: float | str = "10%",
              warn_only: bool = False, select: Sequence[str] | None = None, ignore: Sequence[str] | None = None,
              integration: str = "any", **training: Any) -> PreflightResult:
    """Check ``config`` (a path or a dict) for ``model`` on this job's hardware before loading the model.

    What is not given is read from the job (module docstring): world size, GPUs per node, GPU memory
    (torch.cuda), host RAM (/proc/meminfo). ``training``: the training-shape keywords (seq_len,
    micro_batch, precision, activation_checkpointing, ...) as for ``zeroadvisor.check``.

    Raises PreflightError (its message: the text report) when the configured stage and offload do not
    fit; with ``warn_only`` it warns (``warnings.warn``, RuntimeWarning) and returns instead. A
    missing GPU memory (no CUDA here and no ``gpu``/``gpu_memory``) is a UsageError.

    Example, in the training script::

        zeroadvisor.preflight("ds_config.json", "meta-llama/Llama-3.1-8B", seq_len=4096, micro_batch=4)
        model = AutoModelForCausalLM.from_pretrained(...)
    """
    from zeroadvisor import api

    readings = read_all()
    notes: list[str] = []
    if gpus is None:
        gpus = readings.world_size or 1
    if gpus_per_node is None:
        gpus_per_node = readings.local_world_size
    if gpu is None and gpu_memory is None:
        if readings.gpu_total is None:
            raise api.UsageError("preflight: no GPU memory to check against: CUDA is not available here; "
                                 "pass gpu='A100-SXM4-80GB' or gpu_memory='80GiB'")
        gpu_memory = readings.gpu_total
    if cpu_memory is None and readings.host_total is not None:
        cpu_memory = readings.host_total
    options = dict(model=model, params=params, gpus_per_node=gpus_per_node, gpu=gpu, gpu_memory=gpu_memory,
                   cpu_memory=cpu_memory, nvme=nvme, headroom=headroom, integration=integration, **training)
    from zeroadvisor.library import check

    report = check(config, gpus=gpus, select=select, ignore=ignore, **options)
    notes.extend(_node_notes(report, readings))
    result = PreflightResult(report, readings, notes)
    if report.verdict == "does-not-fit":
        if warn_only:
            warnings.warn(result.text(), RuntimeWarning, stacklevel=2)
        else:
            raise PreflightError(result.text(), result)
    return result


def _node_notes(report: CheckReport, readings: Readings) -> list[str]:
    """What this node's free memory says beside the verdict (which is on the totals)."""
    from zeroadvisor.units import format_bytes

    configured = report.estimate.configured if report.estimate is not None else None
    if configured is None:
        return []
    notes = []
    if readings.gpu_free is not None and configured.peak_gpu > readings.gpu_free:
        notes.append(f"this GPU has {format_bytes(readings.gpu_free)} free of {format_bytes(readings.gpu_total)} "
                     f"now and the run peaks at {format_bytes(configured.peak_gpu)}: another process holds GPU "
                     "memory")
    if readings.host_available is not None and configured.peak_host_per_node > readings.host_available:
        notes.append(f"this node has {format_bytes(readings.host_available)} of RAM available (MemAvailable) and "
                     f"the run peaks at {format_bytes(configured.peak_host_per_node)} per node")
    return notes


class _CallableModule(_types.ModuleType):
    """``zeroadvisor.preflight`` is this module once it is imported (the import binds the name), so the
    module calls ``preflight``: ``zeroadvisor.preflight(...)`` works either way."""

    def __call__(self, *args: Any, **kwargs: Any) -> PreflightResult:
        return preflight(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
