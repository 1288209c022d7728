"""The GPU table: one row per card, the facts the memory and step-time models use, each with its source.

Columns (``GpuSpec``):
- ``memory_mib``: total memory as the driver reports it (``nvidia-smi --query-gpu=memory.total``,
  ``rocm-smi --showmeminfo vram``), in MiB. It is less than the marketing figure (an "80 GB" H100
  reports 81559 MiB) because the driver keeps part of the memory. Where no driver figure is
  published, the datasheet's GB (10^9 bytes) converted to MiB, rounded down, and the row says so.
- ``dense_tflops``: dense (no 2:4 sparsity) bf16 tensor-core peak, fp16 where the card has no bf16
  (V100, T4). Datasheets print the sparse figure with an asterisk; the dense one is half of it.
  GeForce cards: the rate with fp32 accumulation (what mixed-precision training uses), which is half
  the fp16-accumulate rate those datasheets headline.
- ``intra_node_gb_s``: per-GPU unidirectional bandwidth to the other GPUs of its node: half the
  NVLink/Infinity Fabric total a datasheet gives as bidirectional. A card whose NVLink is a bridge
  joining only two (or four) cards talks to the rest of an 8-GPU node over PCIe, so its figure is
  the PCIe one.
- ``host_link_gb_s``: per-GPU unidirectional host link: PCIe x16 (Gen3 16, Gen4 32, Gen5 64 GB/s) or
  NVLink-C2C for Grace superchips.
- ``names``: what a user may type, besides the canonical name. A name listed on several rows (``A100``)
  is ambiguous by construction and resolves to none of them (memory/gpus.py).
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20

# PCIe x16 per direction, GB/s (PCI-SIG: 8, 16, 32 GT/s per lane x 16 lanes, 128b/130b, rounded).
PCIE3, PCIE4, PCIE5 = 16.0, 32.0, 64.0


@dataclass(frozen=True)
class GpuSpec:
    name: str  # canonical, e.g. "A100-SXM4-80GB"
    memory_mib: int  # what nvidia-smi / rocm-smi reports as total
    dense_tflops: float  # dense (no sparsity) bf16/fp16 tensor-core peak, TFLOPS
    intra_node_gb_s: float  # per-GPU unidirectional bandwidth to the other GPUs of its node (NVLink/IF, or PCIe)
    host_link_gb_s: float  # per-GPU unidirectional host link (PCIe gen x16), GB/s
    source: str  # URL(s) of the datasheet(s)

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB

    def to_dict(self) -> dict:
        return {"name": self.name, "memory_mib": self.memory_mib, "memory_bytes": self.memory_bytes,
                "dense_tflops": self.dense_tflops, "intra_node_gb_s": self.intra_node_gb_s,
                "host_link_gb_s": self.host_link_gb_s, "source": self.source}


def _gb(gigabytes: float) -> int:
    """A datasheet's GB (10^9 bytes) in MiB, for cards without a published driver figure."""
    return int(gigabytes * 10**9 // MIB)


_A100 = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
_V100 = "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"
_H100 = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
_H200 = "https://www.nvidia.com/en-us/data-center/h200/"
_MI300 = "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html"

# (spec, names a user may type). Keep rows grouped by family; the order is the order of --help.
ROWS: tuple[tuple[GpuSpec, tuple[str, ...]], ...] = (
    # --- NVIDIA Hopper ---
    (GpuSpec("H100-SXM5-80GB", 81559, 989.4, 450.0, PCIE5, _H100),
     ("H100", "H100-SXM", "H100-SXM5", "H100-80GB", "H100-SXM-80GB", "H100 80GB HBM3")),
    (GpuSpec("H100-PCIE-80GB", 81559, 756.0, PCIE5, PCIE5, _H100),
     ("H100", "H100-PCIE", "H100-80GB", "H100 PCIe")),
    (GpuSpec("H100-NVL-94GB", 95830, 835.5, PCIE5, PCIE5, _H100),
     ("H100", "H100-NVL", "H100-94GB", "H100 NVL")),
    (GpuSpec("H200-SXM-141GB", 143771, 989.4, 450.0, PCIE5, _H200),
     ("H200", "H200-SXM", "H200-141GB", "H200-SXM5")),
    (GpuSpec("H200-NVL-141GB", 143771, 835.5, PCIE5, PCIE5, _H200),
     ("H200", "H200-NVL", "H200-141GB", "H200 NVL")),
    # --- NVIDIA Blackwell ---
    (GpuSpec("B200-180GB", 183359, 2250.0, 900.0, PCIE5, "https://www.nvidia.com/en-us/data-center/hgx/"),
     ("B200", "B200-SXM")),
    # --- NVIDIA Ampere ---
    (GpuSpec("A100-SXM4-80GB", 81920, 312.0, 300.0, PCIE4, _A100),
     ("A100", "A100-SXM4", "A100-SXM", "A100-80GB", "A100-SXM-80GB")),
    (GpuSpec("A100-PCIE-80GB", 81920, 312.0, PCIE4, PCIE4, _A100),
     ("A100", "A100-PCIE", "A100-80GB", "A100 80GB PCIe")),
    (GpuSpec("A100-SXM4-40GB", 40960, 312.0, 300.0, PCIE4, _A100),
     ("A100", "A100-SXM4", "A100-SXM", "A100-40GB", "A100-SXM-40GB")),
    (GpuSpec("A100-PCIE-40GB", 40960, 312.0, PCIE4, PCIE4, _A100),
     ("A100", "A100-PCIE", "A100-40GB")),
    (GpuSpec("A10", 23028, 125.0, PCIE4, PCIE4, "https://www.nvidia.com/en-us/data-center/products/a10-gpu/"),
     ("A10-24GB",)),
    (GpuSpec("A10G", 23028, 70.0, PCIE4, PCIE4, "https://aws.amazon.com/ec2/instance-types/g5/"),
     ("A10G-24GB",)),
    (GpuSpec("RTX-A6000", 49140, 154.8, PCIE4, PCIE4,
             "https://www.nvidia.com/en-us/design-visualization/rtx-a6000/"),
     ("A6000", "RTX A6000")),
    (GpuSpec("RTX-3090", 24576, 71.0, PCIE4, PCIE4,
             "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf"),
     ("3090", "GeForce RTX 3090")),
    # --- NVIDIA Ada ---
    (GpuSpec("L40S", 46068, 362.1, PCIE4, PCIE4, "https://www.nvidia.com/en-us/data-center/l40s/"),
     ("L40S-48GB",)),
    (GpuSpec("L40", 46068, 181.0, PCIE4, PCIE4, "https://www.nvidia.com/en-us/data-center/l40/"),
     ("L40-48GB",)),
    (GpuSpec("L4", 23034, 121.0, PCIE4, PCIE4, "https://www.nvidia.com/en-us/data-center/l4/"),
     ("L4-24GB",)),
    (GpuSpec("RTX-4090", 24564, 165.2, PCIE4, PCIE4,
             "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"),
     ("4090", "GeForce RTX 4090")),
    # --- NVIDIA Volta, Turing ---
    (GpuSpec("V100-SXM2-32GB", 32768, 125.0, 150.0, PCIE3, _V100),
     ("V100", "V100-32GB", "V100-SXM2", "V100-SXM")),
    (GpuSpec("V100-SXM2-16GB", 16384, 125.0, 150.0, PCIE3, _V100),
     ("V100", "V100-16GB", "V100-SXM2", "V100-SXM")),
    (GpuSpec("T4", 15360, 65.0, PCIE3, PCIE3,
             "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf"),
     ("T4-16GB",)),
    # --- AMD Instinct ---
    (GpuSpec("MI300X", 196288, 1307.4, 448.0, PCIE5, _MI300), ("MI300X-192GB",)),
)

GPUS: dict[str, GpuSpec] = {spec.name: spec for spec, _ in ROWS}
