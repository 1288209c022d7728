"""Which fitting change is best: the one ranking every piece of advice is chosen by.

``rank`` orders fitting changes by their estimated step time (zeroadvisor/throughput), shortest first; step
times within TIE of each other are a tie, which goes to fewer changes, then to ``cost_key``. Without a step
time (no GPU named, no sequence length) ``cost_key`` alone ranks: a fixed order of what each part costs
(ZeRO paper §7; field reports
DS#1635, DS#6834): no offload before any offload (optimizer to CPU, then parameters to CPU, then NVMe), no
parallel layout change before Ulysses before AutoTP (smallest degree first), weaker checkpointing before
stronger, a larger micro batch before a smaller one, ZeRO-0/1/2 (the same volume, 2Ψ per step) before
ZeRO-3 (1.5x).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from zeroadvisor.advisor.change import CHECKPOINTING_LEVELS, Change
from zeroadvisor.memory.estimate import StageEstimate
from zeroadvisor.vocab import Device

# Step times within 2% of each other are a tie: well inside the model's own error (benchmarks/throughput/).
TIE = 0.02

# Offload weight per device (optimizer, parameters): parameters cross PCIe in forward and backward, the
# optimizer state once per step; NVMe is slower than host RAM.
OFFLOAD_WEIGHT = {
    "offload_optimizer": {Device.NONE: 0.0, Device.CPU: 1.0, Device.NVME: 3.0},
    "offload_param": {Device.NONE: 0.0, Device.CPU: 1.5, Device.NVME: 3.5},
}


# (offload weight, (layout kind, degree), checkpointing level, -micro batch, is ZeRO-3, changes, stage)
CostKey = tuple[float, tuple[int, int], int, int, bool, int, int]


def cost_key(change: Change, stage: StageEstimate) -> CostKey:
    """Smaller is better: the order in which fitting changes are recommended."""
    option = change.option
    offload = OFFLOAD_WEIGHT["offload_optimizer"][option.offload_optimizer] \
        + OFFLOAD_WEIGHT["offload_param"][option.offload_param]
    layout = (2, change.tensor_parallel) if change.tensor_parallel else \
        (1, change.sequence_parallel) if change.sequence_parallel else (0, 0)
    checkpointing = CHECKPOINTING_LEVELS.index(change.shape.activation_checkpointing)
    return (offload, layout, checkpointing, -change.micro_batch, option.stage == 3, change.changes, option.stage)


def rank(candidates: Sequence[tuple[Change, StageEstimate, float | None]]) -> list[tuple[Change, StageEstimate]]:
    """(change, estimate, step time in s or None) best first: by step time when every candidate has one."""
    timed = all(seconds is not None and seconds > 0 for _, _, seconds in candidates)

    def key(item: tuple[Change, StageEstimate, float | None]) -> tuple[CostKey] | tuple[int, int, CostKey]:
        change, stage, seconds = item
        fixed = cost_key(change, stage)
        if not timed:
            return (fixed,)
        assert seconds is not None  # timed: every candidate has a step time
        return (math.floor(math.log(seconds) / math.log1p(TIE)), change.changes, fixed)

    return [(change, stage) for change, stage, _ in sorted(candidates, key=key)]
