"""GPU names to cards: ``--gpu H100-SXM5-80GB`` instead of ``--gpu-memory 79.6GiB``.

The facts live in hardware/table.py (one row per card, with its source); this module turns what a
user types into one row. Names are compared without case, spaces, hyphens, underscores or dots,
without the vendor and brand words in front (``PREFIXES``: NVIDIA, Tesla, GeForce, AMD, Instinct,
Intel, Habana ...) and with "GB" and "G" alike, so ``RTX4090``, ``rtx-4090``, ``NVIDIA GeForce RTX 4090``
and ``4090`` are one card, and the name ``nvidia-smi --query-gpu=name`` (or rocm-smi, hl-smi) prints
resolves where the table lists it. A cloud provider's name for a card (``nvidia-tesla-a100``: Google
Cloud's A100 40 GB) is matched exactly first (table.py CLOUD_NAMES).

A name that fits several cards resolves only when they all have the same memory (``A100-80GB``: the
SXM4 and the PCIe card, both 81920 MiB), so that the memory verdict does not depend on which one is
meant; the step time (TFLOPS, links) then assumes one of them by one rule, ``_assumed`` below, and the
card carries that assumption as ``GpuSpec.assumed_variant``. Where the memory differs (``A100``: 40 or
80 GB) the name is an error listing the cards: picking one silently is how "A100" came to mean 40 GB.

Cards a project declares (inputs/project.py builds them from the project configuration) are given as
``extra`` and resolve by their own names, which may not be names of the table's cards.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import replace
from functools import cache

from zeroadvisor.hardware.table import CLOUD_NAMES, GPUS, MIB, ROWS, GpuSpec

__all__ = ["GPUS", "MIB", "PREFIXES", "AmbiguousGpu", "GpuSpec", "UnknownGpu", "gpu_memory", "normalise",
           "resolve_gpu", "table_cards"]

# Words nvidia-smi / rocm-smi / hl-smi, clouds and shops put in front of a card's name that do not tell
# cards apart, stripped in any order and number. Not "Quadro": "Quadro RTX 6000" is not the RTX 6000 Ada.
PREFIXES = ("NVIDIA", "TESLA", "GEFORCE", "AMD", "INSTINCT", "RADEON", "INTEL", "HABANA")


class UnknownGpu(ValueError):
    """No card in the table has this name."""


class AmbiguousGpu(ValueError):
    """Several cards have this name; ``variants`` are their canonical names."""

    def __init__(self, message: str, variants: tuple[str, ...]) -> None:
        super().__init__(message)
        self.variants = variants


def normalise(name: str) -> str:
    """The comparison key of a GPU name: upper case, letters and digits only, no leading PREFIXES words,
    "80GB" as "80G"."""
    key = re.sub(r"[^0-9A-Z]", "", name.upper())
    stripped = True
    while stripped:
        stripped = False
        for word in PREFIXES:
            if key.startswith(word) and len(key) > len(word):
                key, stripped = key[len(word):], True
    return re.sub(r"(\d)GB", r"\1G", key)


@cache
def _lookup() -> dict[str, tuple[str, ...]]:
    """Normalised name -> the canonical names of every card it names, in table order."""
    table: dict[str, list[str]] = {}
    for spec, names in ROWS:
        for name in (spec.name, *names):
            cards = table.setdefault(normalise(name), [])
            if spec.name not in cards:
                cards.append(spec.name)
    return {key: tuple(cards) for key, cards in table.items()}


def table_cards(name: str) -> tuple[str, ...]:
    """The canonical names of the table's cards ``name`` may mean (empty: none), without resolving it."""
    cloud = CLOUD_NAMES.get(name.strip().lower())
    return (cloud,) if cloud is not None else _lookup().get(normalise(name), ())


def _assumed(name: str, cards: tuple[str, ...]) -> GpuSpec:
    """The card a name meaning several cards of one memory resolves to, with the assumption stated.

    The rule: the first of them in the table, which lists each family's SXM / NVLink-switched form before
    its PCIe and NVL forms -- the 8-GPU HGX/DGX node most published training runs use. Memory is the
    same whichever is meant; only the step time's TFLOPS and links depend on the choice."""
    chosen = GPUS[cards[0]]
    listed = ", ".join(cards[:-1]) + f" and {cards[-1]}"
    why = (f"{name!r} names {listed} (the same {chosen.memory_mib} MiB); the step time assumes {chosen.name}, "
           "the SXM form, listed first")
    return replace(chosen, assumed_variant=why)


def resolve_gpu(name: str, extra: Sequence[GpuSpec] = ()) -> GpuSpec:
    """The card named ``name``: one of ``extra`` (a project's own cards) or of the table; UnknownGpu or
    AmbiguousGpu (both ValueError, one line) otherwise."""
    key = normalise(name)
    for card in extra:
        if normalise(card.name) == key:
            return card
    cards = table_cards(name)
    if len(cards) == 1:
        return GPUS[cards[0]]
    if cards and len({GPUS[card].memory_mib for card in cards}) == 1:
        return _assumed(name, cards)
    if cards:
        raise AmbiguousGpu(f"{name!r} names {len(cards)} cards, give one: {', '.join(cards)}", cards)
    names = [*GPUS, *(card.name for card in extra)]
    by_key = {normalise(n): n for n in names}
    close = difflib.get_close_matches(key, list(by_key), n=4, cutoff=0.6)
    hint = f"did you mean {', '.join(by_key[k] for k in close)}?" if close else f"known: {', '.join(names)}"
    raise UnknownGpu(f"unknown GPU {name!r} ({hint}); or give the memory per GPU with --gpu-memory SIZE")


def gpu_memory(name: str) -> int:
    """Bytes of memory on the named GPU, as the driver reports it; ValueError as ``resolve_gpu``."""
    return resolve_gpu(name).memory_bytes
