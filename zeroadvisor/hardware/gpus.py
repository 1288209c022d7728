"""GPU names to cards: ``--gpu H100-SXM5-80GB`` instead of ``--gpu-memory 79.6GiB``.

The facts live in hardware/table.py (one row per card, with its source); this module turns what a
user types into one row. Names are compared without case, spaces, hyphens, underscores or dots,
without a vendor word (NVIDIA, Tesla, GeForce, AMD, Instinct...) and with "GB" and "G" alike, so
``RTX4090``, ``rtx-4090``, ``NVIDIA GeForce RTX 4090`` and ``4090`` are one card, and the name
``nvidia-smi --query-gpu=name`` prints resolves where the table lists it.

A name that fits several cards (``A100``: 40 or 80 GB, SXM4 or PCIe) is an error listing them: the
cards differ in memory or in speed, and picking one silently is how "A100" came to mean 40 GB.
"""

from __future__ import annotations

import difflib
import re
from functools import cache

from zeroadvisor.hardware.table import GPUS, MIB, ROWS, GpuSpec

__all__ = ["GPUS", "MIB", "AmbiguousGpu", "GpuSpec", "UnknownGpu", "gpu_memory", "normalise", "resolve_gpu"]

# Words nvidia-smi / rocm-smi and shops put around a card's name that do not tell cards apart.
_VENDOR_WORDS = ("NVIDIA", "TESLA", "GEFORCE", "QUADRO", "AMD", "INSTINCT", "RADEON")


class UnknownGpu(ValueError):
    """No card in the table has this name."""


class AmbiguousGpu(ValueError):
    """Several cards have this name; ``variants`` are their canonical names."""

    def __init__(self, message: str, variants: tuple[str, ...]) -> None:
        super().__init__(message)
        self.variants = variants


def normalise(name: str) -> str:
    """The comparison key of a GPU name: upper case, letters and digits only, no vendor words,
    "80GB" as "80G"."""
    key = re.sub(r"[^0-9A-Z]", "", name.upper())
    stripped = True
    while stripped:
        stripped = False
        for word in _VENDOR_WORDS:
            if key.startswith(word) and len(key) > len(word):
                key, stripped = key[len(word):], True
    return re.sub(r"(\d)GB", r"\1G", key)


@cache
def _lookup() -> dict[str, tuple[str, ...]]:
    """Normalised name -> the canonical names of every card it names (one: resolved; more: ambiguous)."""
    table: dict[str, list[str]] = {}
    for spec, names in ROWS:
        for name in (spec.name, *names):
            cards = table.setdefault(normalise(name), [])
            if spec.name not in cards:
                cards.append(spec.name)
    return {key: tuple(cards) for key, cards in table.items()}


def resolve_gpu(name: str) -> GpuSpec:
    """The card named ``name``; UnknownGpu or AmbiguousGpu (both ValueError, one line) otherwise."""
    key = normalise(name)
    cards = _lookup().get(key, ())
    if len(cards) == 1:
        return GPUS[cards[0]]
    if cards:
        raise AmbiguousGpu(f"{name!r} names {len(cards)} cards, give one: {', '.join(cards)}", cards)
    close = difflib.get_close_matches(key, [normalise(n) for n in GPUS], n=4, cutoff=0.6)
    by_key = {normalise(n): n for n in GPUS}
    hint = f"did you mean {', '.join(by_key[k] for k in close)}?" if close else f"known: {', '.join(GPUS)}"
    raise UnknownGpu(f"unknown GPU {name!r} ({hint}); or give the memory per GPU with --gpu-memory SIZE")


def gpu_memory(name: str) -> int:
    """Bytes of memory on the named GPU, as the driver reports it; ValueError as ``resolve_gpu``."""
    return resolve_gpu(name).memory_bytes
