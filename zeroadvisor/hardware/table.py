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
- ``memory_gb_s``: the GPU memory's (HBM/GDDR) bandwidth, GB/s, as the row's source datasheet prints
  it next to the TFLOPS (TB/s x 1000). It bounds the memory-bound optimizer step on the GPU
  (throughput/gpu_step.py). Optional in the type so that a card described by hand may omit it; every
  row of this table has it (tests/test_memory_gpus.py).
- ``names``: what a user may type, besides the canonical name. A name listed on several rows names all of
  them: it resolves when they have the same memory (the step time then assumes the first, hardware/gpus.py)
  and is refused otherwise (``A100``: 40 or 80 GB).
- ``assumed_variant``: never set in this table; set on the card hardware/gpus.py resolves a name to when the
  name meant several cards of the same memory: the one line saying which one the step time assumes.

Rows cover the cards DeepSpeed runs on (CUDA, ROCm and Intel Gaudi's HPU). Where a datasheet gives no
figure the row derives it from one that does and says how; a figure that cannot be sourced or derived is
left out where the type allows (``memory_gb_s``), and the card is left out where it does not.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroadvisor.jsontypes import JSONObject

MIB = 1 << 20

# PCIe x16 per direction, GB/s (PCI-SIG: 8, 16, 32 GT/s per lane x 16 lanes, 128b/130b, rounded; Gen6:
# 64 GT/s, PAM4 with FLIT encoding, 128 GB/s per direction as PCI-SIG states it).
PCIE3, PCIE4, PCIE5, PCIE6 = 16.0, 32.0, 64.0, 128.0


@dataclass(frozen=True)
class GpuSpec:
    name: str  # canonical, e.g. "A100-SXM4-80GB"
    memory_mib: int  # what nvidia-smi / rocm-smi reports as total
    dense_tflops: float  # dense (no sparsity) bf16/fp16 tensor-core peak, TFLOPS
    intra_node_gb_s: float  # per-GPU unidirectional bandwidth to the other GPUs of its node (NVLink/IF, or PCIe)
    host_link_gb_s: float  # per-GPU unidirectional host link (PCIe gen x16), GB/s
    source: str  # URL(s) of the datasheet(s)
    memory_gb_s: float | None = None  # GPU memory bandwidth, GB/s (datasheet); None: not known
    # The one-line assumption when the name given meant several cards of this memory (hardware/gpus.py):
    # "'A100-80GB' names A100-SXM4-80GB and A100-PCIE-80GB (...); the step time assumes A100-SXM4-80GB".
    assumed_variant: str | None = None

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB

    def to_dict(self) -> JSONObject:
        return {"name": self.name, "memory_mib": self.memory_mib, "memory_bytes": self.memory_bytes,
                "dense_tflops": self.dense_tflops, "intra_node_gb_s": self.intra_node_gb_s,
                "host_link_gb_s": self.host_link_gb_s, "memory_gb_s": self.memory_gb_s, "source": self.source,
                "assumed_variant": self.assumed_variant}


def _gb(gigabytes: float) -> int:
    """A datasheet's GB (10^9 bytes) in MiB, rounded down: for cards without a published driver figure
    (less than the driver reports: an "80 GB" H100 reports 85.5 GB, so these rows err towards not fitting)."""
    return int(gigabytes * 10**9 // MIB)


def _sparse(tflops: float) -> float:
    """The dense rate from a datasheet's "with sparsity" figure (2:4 sparsity doubles the headline)."""
    return tflops / 2


# Where the driver's memory figures were read (nvidia-smi output in public threads):
_SMI_MODAL = "https://github.com/modal-labs/modal-client/pull/2797"  # H100, A100 80/40, A10, L40S, L4, T4
_SMI_LAMBDA = "https://github.com/lambdal/lambda-tensorflow-benchmark/pull/11"  # TITAN RTX, Quadro RTX 8000

_A100 = ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
         "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
_A800 = "https://www.nvidia.cn/data-center/a800/"
_H100 = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
_H800 = "https://www.nvidia.cn/data-center/h800/"
_H200 = "https://www.nvidia.com/en-us/data-center/h200/"
_GH200 = "https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/"
_HGX = "https://www.nvidia.com/en-us/data-center/hgx/"
_V100 = "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"
_AMPERE_GA102 = "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf"
_ADA = "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
_BLACKWELL_RTX = ("https://images.nvidia.com/aem-dam/Solutions/geforce/blackwell/"
                  "nvidia-rtx-blackwell-gpu-architecture.pdf")
_TURING = ("https://images.nvidia.com/aem-dam/en-zz/Solutions/design-visualization/technologies/"
           "turing-architecture/NVIDIA-Turing-Architecture-Whitepaper.pdf")
_RTX_3080 = "https://www.nvidia.com/en-us/geforce/graphics-cards/30-series/rtx-3080-3080ti/"
_RTX_4080 = "https://www.nvidia.com/en-us/geforce/graphics-cards/40-series/rtx-4080-family/"
_RTX_A = "https://www.nvidia.com/en-us/design-visualization/"  # + rtx-a4000/ etc.: each card's datasheet page
_GAUDI_NET = "https://docs.habana.ai/en/latest/Management_and_Monitoring/Network_Configuration/index.html"

# (spec, names a user may type). Grouped by family; the order is the order of --help and of errors.
ROWS: tuple[tuple[GpuSpec, tuple[str, ...]], ...] = (
    # --- NVIDIA Hopper. NVLink 4: 900 GB/s bidirectional per GPU (H800, H20 as noted) ---
    (GpuSpec("H100-SXM5-80GB", 81559, _sparse(1979), 450.0, PCIE5, f"{_H100} {_SMI_MODAL}", memory_gb_s=3350.0),
     ("H100", "H100-SXM", "H100-SXM5", "H100-80GB", "H100-SXM-80GB", "H100 80GB HBM3")),
    # memory: datasheet 80 GB (no published nvidia-smi figure found); NVLink bridge joins pairs only
    (GpuSpec("H100-PCIE-80GB", _gb(80), _sparse(1513), PCIE5, PCIE5, _H100, memory_gb_s=2000.0),
     ("H100", "H100-PCIE", "H100-80GB", "H100 PCIe")),
    # memory: nvidia-smi 95830 MiB, https://github.com/NVIDIA/gpu-admin-tools/issues/4; bridge pairs only
    (GpuSpec("H100-NVL-94GB", 95830, _sparse(1671), PCIE5, PCIE5, _H100, memory_gb_s=3900.0),
     ("H100", "H100-NVL", "H100-94GB", "H100 NVL")),
    # memory: nvidia-smi 143771 MiB, https://thundergolfer.com/blog/nvidia-gpu-memory-capacity (Modal's table)
    (GpuSpec("H200-SXM-141GB", 143771, _sparse(1979), 450.0, PCIE5,
             f"{_H200} https://thundergolfer.com/blog/nvidia-gpu-memory-capacity", memory_gb_s=4800.0),
     ("H200", "H200-SXM", "H200-SXM5", "H200-141GB")),
    # memory: as the SXM card (same 141 GB HBM3e); NVLink bridge joins 2 or 4 cards only
    (GpuSpec("H200-NVL-141GB", 143771, _sparse(1671), PCIE5, PCIE5, _H200, memory_gb_s=4800.0),
     ("H200", "H200-NVL", "H200-141GB", "H200 NVL")),
    # H800: the H100 SXM5 with NVLink cut to 400 GB/s bidirectional; memory: datasheet 80 GB
    (GpuSpec("H800-SXM5-80GB", _gb(80), _sparse(1979), 200.0, PCIE5, _H800, memory_gb_s=3350.0),
     ("H800", "H800-SXM", "H800-SXM5", "H800-80GB")),
    (GpuSpec("H800-PCIE-80GB", _gb(80), _sparse(1513), PCIE5, PCIE5, _H800, memory_gb_s=2000.0),
     ("H800", "H800-PCIE", "H800-80GB", "H800 PCIe")),
    # H20: 148 TFLOPS dense bf16, 96 GB HBM3, NVLink 900 GB/s; memory: datasheet 96 GB
    (GpuSpec("H20-96GB", _gb(96), 148.0, 450.0, PCIE5, "https://www.nvidia.cn/data-center/h20/", memory_gb_s=4000.0),
     ("H20",)),
    # GH200: an H100-class GPU with NVLink-C2C (900 GB/s bidirectional) to its Grace CPU as host link
    (GpuSpec("GH200-96GB", _gb(96), _sparse(1979), 450.0, 450.0, _GH200, memory_gb_s=4000.0),
     ("GH200", "GH200 480GB", "GH200-HBM3")),
    (GpuSpec("GH200-144GB", _gb(144), _sparse(1979), 450.0, 450.0, _GH200, memory_gb_s=4900.0),
     ("GH200", "GH200 624GB", "GH200-HBM3E")),
    # --- NVIDIA Blackwell. NVLink 5: 1.8 TB/s bidirectional per GPU ---
    # memory: nvidia-smi 183359 MiB, https://github.com/NVIDIA/TensorRT-LLM/issues/10278
    (GpuSpec("B200-180GB", 183359, _sparse(4500), 900.0, PCIE5, _HGX, memory_gb_s=8000.0),
     ("B200", "B200-SXM", "B200-SXM6")),
    # B100: 700 W B200 (HGX B100: 3.5 PF sparse bf16 per GPU); memory: datasheet 192 GB
    (GpuSpec("B100-192GB", _gb(192), _sparse(3500), 900.0, PCIE5, _HGX, memory_gb_s=8000.0), ("B100", "B100-SXM")),
    # B300 (Blackwell Ultra): HGX B300 36 PF sparse fp16/bf16 and 2.3 TB HBM3e over 8 GPUs (4.5 PF sparse,
    # 288 GB each), 8 TB/s, NVLink 5; host link PCIe Gen6; memory: datasheet 288 GB
    (GpuSpec("B300-288GB", _gb(288), _sparse(4500), 900.0, PCIE6,
             f"{_HGX} https://glennklockwood.com/garden/processors/B300", memory_gb_s=8000.0),
     ("B300", "B300-SXM", "B300-SXM6", "B300 SXM6 AC", "Blackwell Ultra")),
    # GB200 NVL72: 360 PF sparse bf16 and 13.4 TB HBM3e over 72 GPUs; NVLink-C2C to Grace as host link
    (GpuSpec("GB200-186GB", _gb(186), _sparse(5000), 900.0, 450.0,
             "https://www.nvidia.com/en-us/data-center/gb200-nvl72/", memory_gb_s=8000.0), ("GB200",)),
    # --- NVIDIA Ampere. NVLink 3: 600 GB/s bidirectional per SXM4 GPU (A800: 400) ---
    (GpuSpec("A100-SXM4-80GB", 81920, _sparse(624), 300.0, PCIE4, f"{_A100} {_SMI_MODAL}", memory_gb_s=2039.0),
     ("A100", "A100-SXM4", "A100-SXM", "A100-80GB", "A100-SXM-80GB")),
    (GpuSpec("A100-PCIE-80GB", 81920, _sparse(624), PCIE4, PCIE4, f"{_A100} {_SMI_MODAL}", memory_gb_s=1935.0),
     ("A100", "A100-PCIE", "A100-80GB", "A100 80GB PCIe")),
    # memory: 40960 MiB on current drivers (older ones showed 40536), modal PR above
    (GpuSpec("A100-SXM4-40GB", 40960, _sparse(624), 300.0, PCIE4, f"{_A100} {_SMI_MODAL}", memory_gb_s=1555.0),
     ("A100", "A100-SXM4", "A100-SXM", "A100-40GB", "A100-SXM-40GB")),
    (GpuSpec("A100-PCIE-40GB", 40960, _sparse(624), PCIE4, PCIE4, f"{_A100} {_SMI_MODAL}", memory_gb_s=1555.0),
     ("A100", "A100-PCIE", "A100-40GB")),
    # memory: nvidia-smi 81920 MiB, https://github.com/dexmal/dexbotic/issues/41 (SXM4),
    # https://github.com/vllm-project/vllm/issues/41519 (PCIe)
    (GpuSpec("A800-SXM4-80GB", 81920, _sparse(624), 200.0, PCIE4, _A800, memory_gb_s=2039.0),
     ("A800", "A800-SXM4", "A800-SXM", "A800-80GB")),
    (GpuSpec("A800-PCIE-80GB", 81920, _sparse(624), PCIE4, PCIE4, _A800, memory_gb_s=1935.0),
     ("A800", "A800-PCIE", "A800-80GB", "A800 80GB PCIe")),
    # A40: NVLink bridge joins pairs only; memory: datasheet 48 GB
    (GpuSpec("A40", _gb(48), _sparse(299.4), PCIE4, PCIE4, "https://www.nvidia.com/en-us/data-center/a40/",
             memory_gb_s=696.0),
     ("A40-48GB",)),
    # A30: 24 GB HBM2, NVLink bridge pairs only; memory: datasheet 24 GB
    (GpuSpec("A30", _gb(24), _sparse(330), PCIE4, PCIE4,
             "https://www.nvidia.com/en-us/data-center/products/a30-gpu/", memory_gb_s=933.0), ("A30-24GB",)),
    (GpuSpec("A10", 23028, _sparse(250), PCIE4, PCIE4,
             f"https://www.nvidia.com/en-us/data-center/products/a10-gpu/ {_SMI_MODAL}", memory_gb_s=600.0),
     ("A10-24GB",)),
    # A10G (AWS G5): NVIDIA publishes no datasheet; tensor rate as measured/compared by Baseten;
    # memory: nvidia-smi 23028 MiB, https://github.com/NVIDIA/DCGM/issues/232
    (GpuSpec("A10G", 23028, 70.0, PCIE4, PCIE4,
             "https://aws.amazon.com/ec2/instance-types/g5/ "
             "https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/", memory_gb_s=600.0),
     ("A10G-24GB",)),
    # memory: nvidia-smi 49140 MiB as the previous table had it (not re-found in a public output)
    (GpuSpec("RTX-A6000", 49140, _sparse(309.7), PCIE4, PCIE4,
             "https://www.nvidia.com/en-us/design-visualization/rtx-a6000/", memory_gb_s=768.0),
     ("A6000", "RTX A6000")),
    # RTX A4000-A5500 (datasheet "Tensor performance" is the sparse fp16 rate, as the A6000's); NVLink bridges
    # (A4500 and up) join pairs only; memory: datasheet GB
    (GpuSpec("RTX-A5500", _gb(24), _sparse(272.8), PCIE4, PCIE4, f"{_RTX_A}rtx-a5500/", memory_gb_s=768.0),
     ("A5500", "RTX A5500")),
    (GpuSpec("RTX-A5000", _gb(24), _sparse(222.2), PCIE4, PCIE4, f"{_RTX_A}rtx-a5000/", memory_gb_s=768.0),
     ("A5000", "RTX A5000")),
    (GpuSpec("RTX-A4500", _gb(20), _sparse(189.2), PCIE4, PCIE4, f"{_RTX_A}rtx-a4500/", memory_gb_s=640.0),
     ("A4500", "RTX A4500")),
    (GpuSpec("RTX-A4000", _gb(16), _sparse(153.4), PCIE4, PCIE4, f"{_RTX_A}rtx-a4000/", memory_gb_s=448.0),
     ("A4000", "RTX A4000")),
    # GeForce: fp16/bf16 with fp32 accumulate (GA102 whitepaper, 71 dense); memory: nvidia-smi 24576 MiB,
    # https://github.com/noonghunna/club-3090/issues/1128
    (GpuSpec("RTX-3090", 24576, 71.0, PCIE4, PCIE4, _AMPERE_GA102, memory_gb_s=936.0), ("3090", "GeForce RTX 3090")),
    # RTX 3080 10 GB: GA102 whitepaper (59.5 dense, fp32 accumulate; 760 GB/s). The 12 GB card and the 3080 Ti
    # came later: the same per-core rate scaled by CUDA cores x boost clock from NVIDIA's specs page (12 GB:
    # 8960 at 1.71 GHz, 912 GB/s; Ti: 10240 at 1.665 GHz, 912 GB/s; 10 GB: 8704 at 1.71 GHz). nvidia-smi prints
    # "NVIDIA GeForce RTX 3080" for both 3080s, so that name is refused. Memory: datasheet GB
    (GpuSpec("RTX-3080-10GB", _gb(10), 59.5, PCIE4, PCIE4, f"{_AMPERE_GA102} {_RTX_3080}", memory_gb_s=760.0),
     ("3080", "RTX 3080", "GeForce RTX 3080", "3080 10GB")),
    (GpuSpec("RTX-3080-12GB", _gb(12), round(59.5 * 8960 / 8704, 2), PCIE4, PCIE4, f"{_AMPERE_GA102} {_RTX_3080}",
             memory_gb_s=912.0),
     ("3080", "RTX 3080", "GeForce RTX 3080", "3080 12GB")),
    (GpuSpec("RTX-3080-TI", _gb(12), round(59.5 * 10240 * 1.665 / (8704 * 1.71), 2), PCIE4, PCIE4,
             f"{_AMPERE_GA102} {_RTX_3080}", memory_gb_s=912.0),
     ("3080 Ti", "GeForce RTX 3080 Ti", "RTX 3080 Ti 12GB")),
    # --- NVIDIA Ada ---
    (GpuSpec("L40S", 46068, 362.05, PCIE4, PCIE4,
             f"https://www.nvidia.com/en-us/data-center/l40s/ {_SMI_MODAL}", memory_gb_s=864.0), ("L40S-48GB",)),
    # memory: as the L40S (same 48 GB GDDR6 board), the previous table's figure
    (GpuSpec("L40", 46068, _sparse(362.1), PCIE4, PCIE4, "https://www.nvidia.com/en-us/data-center/l40/",
             memory_gb_s=864.0),
     ("L40-48GB",)),
    # L20: memory: datasheet 48 GB
    (GpuSpec("L20", _gb(48), _sparse(239), PCIE4, PCIE4, "https://www.nvidia.cn/data-center/products/l20/",
             memory_gb_s=864.0),
     ("L20-48GB",)),
    (GpuSpec("L4", 23034, _sparse(242), PCIE4, PCIE4, f"https://www.nvidia.com/en-us/data-center/l4/ {_SMI_MODAL}",
             memory_gb_s=300.0),
     ("L4-24GB",)),
    # RTX 6000 Ada: 1457 TFLOPS is fp8 sparse; fp16/bf16 (fp32 accumulate) dense is a quarter of it;
    # memory: datasheet 48 GB
    (GpuSpec("RTX-6000-ADA", _gb(48), 1457.0 / 4, PCIE4, PCIE4,
             "https://www.nvidia.com/en-us/design-visualization/rtx-6000/", memory_gb_s=960.0),
     ("RTX 6000 Ada", "RTX 6000 Ada Generation", "6000 Ada", "RTX 6000")),
    # GeForce: fp32 accumulate rate (Ada whitepaper: 165.2 dense, 330.3 with fp16 accumulate);
    # memory: nvidia-smi 24564 MiB, https://github.com/RLinf/RLinf/issues/255
    (GpuSpec("RTX-4090", 24564, 165.2, PCIE4, PCIE4, _ADA, memory_gb_s=1008.0), ("4090", "GeForce RTX 4090")),
    # RTX 4080: Ada whitepaper 97.5 dense (fp32 accumulate), 716.8 GB/s. 4080 SUPER: the same per-core rate
    # scaled by CUDA cores x boost clock (10240 at 2.55 GHz against 9728 at 2.505), 736 GB/s (23 Gbps x 256 bit),
    # NVIDIA's specs page. Memory: datasheet 16 GB
    (GpuSpec("RTX-4080", _gb(16), 97.5, PCIE4, PCIE4, f"{_ADA} {_RTX_4080}", memory_gb_s=716.8),
     ("4080", "GeForce RTX 4080")),
    (GpuSpec("RTX-4080-SUPER", _gb(16), round(97.5 * 10240 * 2.55 / (9728 * 2.505), 2), PCIE4, PCIE4, _RTX_4080,
             memory_gb_s=736.0),
     ("4080 SUPER", "GeForce RTX 4080 SUPER")),
    # --- NVIDIA Blackwell GeForce: fp32 accumulate rate; memory: nvidia-smi 32607 MiB,
    # https://github.com/noonghunna/club-3090/issues/617
    (GpuSpec("RTX-5090", 32607, 209.5, PCIE5, PCIE5, _BLACKWELL_RTX, memory_gb_s=1792.0), ("5090", "GeForce RTX 5090")),
    # RTX PRO 6000 Blackwell (Workstation Edition): 4000 AI TOPS is fp4 with sparsity; fp16/bf16 (fp32
    # accumulate, full rate on the professional cards) dense is an eighth of it, as the RTX 6000 Ada row
    # derives its rate (the RTX 5090's 3352 over 16 gives its 209.5 at half rate); 96 GB GDDR7 at 1792 GB/s,
    # PCIe Gen5, no NVLink; memory: datasheet 96 GB
    (GpuSpec("RTX-PRO-6000-BLACKWELL", _gb(96), 4000 / 8, PCIE5, PCIE5,
             "https://www.nvidia.com/en-us/products/workstations/professional-desktop-gpus/rtx-pro-6000/",
             memory_gb_s=1792.0),
     ("RTX PRO 6000", "RTX PRO 6000 Blackwell", "RTX PRO 6000 Blackwell Workstation Edition")),
    # --- NVIDIA Volta (fp16 only, no sparsity), Turing. NVLink 2: 300 GB/s bidirectional per SXM2 GPU ---
    # memory: current drivers report the full HBM2 (V100-SXM2-16GB: 16384 MiB on driver 570,
    # https://github.com/1CatAI/1Cat-vLLM/issues/85; driver 440 showed 16160), so the 32 GB card's 32768
    # MiB (driver 418 showed 32480, https://github.com/godweiyang/GrabGPU/issues/5)
    (GpuSpec("V100-SXM2-32GB", 32768, 125.0, 150.0, PCIE3, _V100, memory_gb_s=900.0),
     ("V100", "V100-32GB", "V100-SXM2", "V100-SXM")),
    (GpuSpec("V100-SXM2-16GB", 16384, 125.0, 150.0, PCIE3, _V100, memory_gb_s=900.0),
     ("V100", "V100-16GB", "V100-SXM2", "V100-SXM")),
    # V100-SXM3 (DGX-2: 16 GPUs on NVSwitch, 2 PFLOPS tensor = 125 each); memory as the SXM2 32 GB card;
    # memory bandwidth: the DGX-2 datasheet prints none, so the V100 datasheet's 900 GB/s (same HBM2 stacks)
    (GpuSpec("V100-SXM3-32GB", 32768, 125.0, 150.0, PCIE3,
             "https://www.nvidia.com/content/dam/en-zz/es_em/Solutions/Data-Center/dgx-2/"
             "dgx-2h-datasheet-us-nvidia-841283-r6-web.pdf "
             + _V100, memory_gb_s=900.0),
     ("V100", "V100-32GB", "V100-SXM3")),
    # memory: nvidia-smi 32768 MiB on a PCIe V100 32 GB board (GV100GL),
    # https://github.com/akash-network/provider-configs/pull/90; the 16 GB card: datasheet 16 GB
    (GpuSpec("V100-PCIE-32GB", 32768, 112.0, PCIE3, PCIE3,
             f"{_V100} https://github.com/akash-network/provider-configs/pull/90", memory_gb_s=900.0),
     ("V100", "V100-32GB", "V100-PCIE")),
    (GpuSpec("V100-PCIE-16GB", _gb(16), 112.0, PCIE3, PCIE3, _V100, memory_gb_s=900.0),
     ("V100", "V100-16GB", "V100-PCIE")),
    (GpuSpec("T4", 15360, 65.0, PCIE3, PCIE3,
             "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/"
             f"t4-tensor-core-datasheet-951643.pdf {_SMI_MODAL}", memory_gb_s=320.0), ("T4-16GB",)),
    # TU102 cards: fp16 tensor rate with fp32 accumulate (no bf16), 672 GB/s GDDR6; NVLink bridges join pairs
    # only. Quadro RTX 6000/8000: Turing whitepaper 130.5 TFLOPS; TITAN RTX: 130 TFLOPS (its product page).
    # "RTX 6000" alone is refused: also the RTX 6000 Ada. Memory: nvidia-smi 24219 MiB (TITAN RTX) and
    # 48601 MiB (Quadro RTX 8000), https://github.com/lambdal/lambda-tensorflow-benchmark/pull/11; the
    # Quadro RTX 6000: datasheet 24 GB
    (GpuSpec("TITAN-RTX", 24219, 130.0, PCIE3, PCIE3,
             f"https://www.nvidia.com/en-us/deep-learning-ai/products/titan-rtx/ {_TURING} {_SMI_LAMBDA}",
             memory_gb_s=672.0),
     ("Titan RTX", "TITAN RTX 24GB")),
    (GpuSpec("QUADRO-RTX-8000", 48601, 130.5, PCIE3, PCIE3,
             f"https://www.nvidia.com/en-us/design-visualization/quadro/rtx-8000/ {_TURING} {_SMI_LAMBDA}",
             memory_gb_s=672.0),
     ("Quadro RTX 8000", "RTX 8000")),
    (GpuSpec("QUADRO-RTX-6000", _gb(24), 130.5, PCIE3, PCIE3,
             f"https://www.nvidia.com/en-us/design-visualization/quadro/rtx-6000/ {_TURING}", memory_gb_s=672.0),
     ("Quadro RTX 6000", "RTX 6000")),
    # --- AMD Instinct (rocm-smi). Infinity Fabric links: 128 GB/s bidirectional each, 7 per MI300-class GPU ---
    # MI355X (CDNA 4): 256 CUs x 2.4 GHz x 4096 fp16/bf16 FLOPs per clock = 2516.6 dense ("2.5 PF"), 288 GB
    # HBM3E at 8 TB/s, 7 Infinity Fabric links of 153.6 GB/s bidirectional; memory: datasheet 288 GB
    (GpuSpec("MI355X", _gb(288), 2516.6, 7 * 153.6 / 2, PCIE5,
             "https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html", memory_gb_s=8000.0),
     ("MI355X-288GB",)),
    # memory: rocm-smi 196288 MiB as the previous table had it (not re-found in a public output)
    (GpuSpec("MI300X", 196288, 1307.4, 448.0, PCIE5,
             "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html", memory_gb_s=5300.0),
     ("MI300X-192GB",)),
    # memory: datasheet 256 GB
    (GpuSpec("MI325X", _gb(256), 1307.4, 448.0, PCIE5,
             "https://www.amd.com/en/products/accelerators/instinct/mi300/mi325x.html", memory_gb_s=6000.0),
     ("MI325X-256GB",)),
    # MI250X: two GCDs per package, each its own device (one rank): per GCD half the package's 383 TFLOPS
    # bf16 and 128 GB; 4 Infinity Fabric links (50 GB/s per direction) per GCD; memory: datasheet 64 GB
    (GpuSpec("MI250X-GCD-64GB", _gb(64), 383.0 / 2, 200.0 / 2, PCIE4,
             "https://www.amd.com/en/products/accelerators/instinct/mi200/mi250x.html", memory_gb_s=1600.0),
     ("MI250X", "MI250X-GCD")),
    # MI210: the PCIe MI200 (one GCD): 181 TFLOPS bf16, 64 GB HBM2e at 1.6 TB/s; its Infinity Fabric bridge
    # joins 2 or 4 cards only; memory: datasheet 64 GB
    (GpuSpec("MI210", _gb(64), 181.0, PCIE4, PCIE4,
             "https://www.amd.com/en/products/accelerators/instinct/mi200/mi210.html", memory_gb_s=1600.0),
     ("MI210-64GB",)),
    # --- Intel Gaudi (DeepSpeed's HPU accelerator; hl-smi names HL-225 / HL-325L). No sparsity: the matrix
    # engines' bf16 rate is dense. Scale-up: 21 of the 24 on-chip RoCE ports join the 8 cards of a node all
    # to all (3 to each peer), so per direction 21 x 100 Gb/s (Gaudi 2) or 21 x 200 Gb/s = 525 GB/s (Gaudi 3,
    # Intel's network configuration page). Gaudi 2: 432 TFLOPS bf16, 96 GB HBM2e at 2.46 TB/s, PCIe Gen4 x16;
    # Gaudi 3: 1835 TFLOPS, 128 GB at 3.67 TB/s, PCIe Gen5 x16 (Intel's Gaudi 3 white paper, which tabulates
    # both). Memory: datasheet GB
    (GpuSpec("GAUDI2-96GB", _gb(96), 432.0, 21 * 100 / 8, PCIE4,
             "https://www.intel.com/content/www/us/en/products/details/processors/ai-accelerators/gaudi2.html "
             + _GAUDI_NET, memory_gb_s=2460.0),
     ("Gaudi2", "Gaudi 2", "HL-225", "HL-225H")),
    (GpuSpec("GAUDI3-128GB", _gb(128), 1835.0, 21 * 200 / 8, PCIE5,
             "https://www.intel.com/content/www/us/en/content-details/817486/"
             "intel-gaudi-3-ai-accelerator-white-paper.html " + _GAUDI_NET, memory_gb_s=3670.0),
     ("Gaudi3", "Gaudi 3", "HL-325L")),
)

# The names cloud providers give cards, matched exactly (case aside), not normalised: "nvidia-tesla-a100"
# is Google Cloud's A100 40 GB, while "Tesla A100" typed by hand names every A100. Google Cloud accelerator
# types (https://cloud.google.com/compute/docs/gpus); AWS and Azure name the card itself (A10G, L4, H100 ...),
# which the table's names already resolve.
CLOUD_NAMES: dict[str, str] = {
    "nvidia-tesla-t4": "T4",
    "nvidia-tesla-v100": "V100-SXM2-16GB",
    "nvidia-tesla-a100": "A100-SXM4-40GB",
    "nvidia-a100-80gb": "A100-SXM4-80GB",
    "nvidia-l4": "L4",
    "nvidia-h100-80gb": "H100-SXM5-80GB",
    "nvidia-h100-mega-80gb": "H100-SXM5-80GB",
    "nvidia-h200-141gb": "H200-SXM-141GB",
    "nvidia-b200": "B200-180GB",
    "nvidia-gb200": "GB200-186GB",
}

GPUS: dict[str, GpuSpec] = {spec.name: spec for spec, _ in ROWS}
