"""What the advice rules (advisor/rules.py) see as ``ctx.advice``: the estimate, the budget, the search."""

from __future__ import annotations

from dataclasses import dataclass

from zeroadvisor.advisor.search import Searcher
from zeroadvisor.memory.cluster import Cluster
from zeroadvisor.memory.estimate import Estimate, StageEstimate
from zeroadvisor.units import format_bytes


@dataclass(frozen=True, slots=True)
class Budget:
    """The memory a run may use, as the advice rules read it: the cluster's capacities (memory/cluster.py, the one
    type that holds them) and the unit the messages are written in."""

    cluster: Cluster
    unit: str = "GB"

    @property
    def gpu_memory(self) -> int:
        """Per GPU as the hardware has it."""
        return self.cluster.gpu_memory

    @property
    def usable(self) -> int:
        """Per GPU less the headroom: what a "fits" may use."""
        return self.cluster.usable_gpu_memory

    @property
    def headroom(self) -> float:
        return self.cluster.headroom

    @property
    def cpu_memory(self) -> int | None:
        return self.cluster.cpu_memory

    @property
    def nvme(self) -> int | None:
        return self.cluster.nvme

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
