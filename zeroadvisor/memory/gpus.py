"""GPU names to usable memory: ``--gpu H100`` instead of ``--gpu-memory 79.6GiB``.

Capacities are the total device memory the driver reports (``nvidia-smi
--query-gpu=memory.total``, in MiB; ``rocm-smi`` for AMD), which is less than the
marketing figure: an "80 GB" H100 reports 81559 MiB = 79.6 GiB, a "141 GB" H200
143771 MiB = 140.4 GiB. The CUDA context and the allocator's fragmentation come on top and
are accounted for by the estimate's overhead row, not here.
"""

from __future__ import annotations

import re

MIB = 1 << 20

# name -> (MiB reported by the driver, aliases)
GPUS: dict[str, tuple[int, tuple[str, ...]]] = {
    "H200": (143771, ("H200-141GB", "H200-SXM")),
    "H100": (81559, ("H100-80GB", "H100-SXM", "H100-PCIE")),
    "H100-NVL": (95830, ("H100-94GB",)),
    "B200": (183359, ("B200-180GB",)),
    "A100-80GB": (81920, ("A100-80G", "A100-SXM4-80GB", "A100-PCIE-80GB")),
    "A100-40GB": (40960, ("A100", "A100-40G", "A100-SXM4-40GB", "A100-PCIE-40GB")),
    "L40S": (46068, ("L40S-48GB",)),
    "L40": (46068, ("L40-48GB",)),
    "L4": (23034, ("L4-24GB",)),
    "A10G": (23028, ("A10G-24GB",)),
    "A10": (23028, ("A10-24GB",)),
    "A6000": (49140, ("RTX-A6000",)),
    "V100-32GB": (32768, ("V100-32G", "V100-SXM2-32GB")),
    "V100-16GB": (16384, ("V100", "V100-16G", "V100-SXM2-16GB")),
    "T4": (15360, ("T4-16GB",)),
    "RTX-4090": (24564, ("4090",)),
    "RTX-3090": (24576, ("3090",)),
    "MI300X": (196288, ("MI300X-192GB",)),
}


def _normalise(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip().upper())


_LOOKUP = {_normalise(alias): name for name, (_, aliases) in GPUS.items() for alias in (name, *aliases)}


def gpu_memory(name: str) -> int:
    """Bytes of memory on the named GPU; ValueError with the known names otherwise."""
    canonical = _LOOKUP.get(_normalise(name))
    if canonical is None:
        known = ", ".join(GPUS)
        raise ValueError(f"unknown GPU {name!r}: use --gpu-memory SIZE, or one of {known}")
    return GPUS[canonical][0] * MIB
