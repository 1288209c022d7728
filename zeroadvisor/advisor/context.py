"""What the advice rules (advisor/rules.py) see as ``ctx.advice``: the estimate, the budget, the search."""

from __future__ import annotations

from dataclasses import dataclass

from zeroadvisor.advisor.search import Searcher
from zeroadvisor.memory.estimate import Estimate, StageEstimate
from zeroadvisor.units import format_bytes


@dataclass(frozen=True, slots=True)
class Budget:
    """The memory a run may use: per GPU as the hardware has it, less the headroom; host RAM and NVMe per node."""

    gpu_memory: int
    usable: int
    headroom: float
    cpu_memory: int | None
    nvme: int | None
    unit: str = "GB"

    def fmt(self, nbytes: int) -> str:
        return format_bytes(nbytes, self.unit)


@dataclass(frozen=True, slots=True)
class AdviceContext:
    """The estimate of the config as written, the cluster budget, and the searcher that answers
    "what fits?" for the config as the fixes will write it."""

    estimate: Estimate
    budget: Budget
    search: Searcher

    @property
    def configured(self) -> StageEstimate | None:
        """The configured stage and offload as written (None when no config was given)."""
        return self.estimate.configured

    def fmt(self, nbytes: int) -> str:
        return self.budget.fmt(nbytes)
