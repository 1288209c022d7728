"""Which fitting change is best: the one ranking key every piece of advice is chosen by.

``cost_key`` orders changes by expected throughput cost, smaller first; ties go to fewer changes. Until a
step-time model is available it is a fixed order of what each part costs (ZeRO paper §7; field reports
DS#1635, DS#6834): no offload before any offload (optimizer to CPU, then parameters to CPU, then NVMe), no
parallel layout change before Ulysses before AutoTP (smallest degree first), weaker checkpointing before
stronger, a larger micro batch before a smaller one, ZeRO-0/1/2 (the same volume, 2Ψ per step) before
ZeRO-3 (1.5x).
"""

from __future__ import annotations

from zeroadvisor.advisor.change import CHECKPOINTING_LEVELS, Change
from zeroadvisor.memory.estimate import StageEstimate

# Offload weight per device (optimizer, parameters): parameters cross PCIe in forward and backward, the
# optimizer state once per step; NVMe is slower than host RAM.
OFFLOAD_WEIGHT = {
    "offload_optimizer": {"none": 0.0, "cpu": 1.0, "nvme": 3.0},
    "offload_param": {"none": 0.0, "cpu": 1.5, "nvme": 3.5},
}


def cost_key(change: Change, stage: StageEstimate) -> tuple:
    """Smaller is better: the order in which fitting changes are recommended."""
    option = change.option
    offload = OFFLOAD_WEIGHT["offload_optimizer"][option.offload_optimizer] \
        + OFFLOAD_WEIGHT["offload_param"][option.offload_param]
    layout = (2, change.tensor_parallel) if change.tensor_parallel else \
        (1, change.sequence_parallel) if change.sequence_parallel else (0, 0)
    checkpointing = CHECKPOINTING_LEVELS.index(change.shape.activation_checkpointing)
    return (offload, layout, checkpointing, -change.micro_batch, option.stage == 3, change.changes, option.stage)
