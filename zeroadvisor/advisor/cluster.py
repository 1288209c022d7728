"""When nothing fits: which resource binds (``shortfalls``) and the smallest cluster that fits
(``ClusterProposal``): more GPUs (ZeRO-3 partitions over them), more host RAM or more NVMe per node.

The best change on a proposed cluster is the search's (advisor/search.py), handed in as ``search_on``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from zeroadvisor.advisor.candidates import largest_true
from zeroadvisor.advisor.change import Change, ClusterChange
from zeroadvisor.advisor.patch import Outcome, written_buckets, written_patch
from zeroadvisor.advisor.written import Written
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.deepspeed.effective import AUTO, GAS, MBS, TBS
from zeroadvisor.memory.errors import EstimateError
from zeroadvisor.memory.estimate import MAX_GPUS, MAX_MEMORY_BYTES, Cluster, StageEstimate, estimate
from zeroadvisor.memory.verdict import RESOURCES  # the three a phase's peak is judged on
from zeroadvisor.model.spec import Checkpointing
from zeroadvisor.vocab import Capacity, Phase

# The most GPUs the cluster search proposes (a few hundred nodes); beyond it "add GPUs" is no answer.
CLUSTER_SEARCH_LIMIT = 4096
# GPUs per node when the cluster did not say (Cluster's default: min(gpus, 8)).
DEFAULT_GPUS_PER_NODE = 8



class Search(Protocol):
    """The search on another cluster (advisor/search.py Searcher): what the proposal reads of it."""

    @property
    def base(self) -> dict[str, Any]: ...  # the config there with its fixes

    def best(self) -> Outcome | None: ...


# (config, cluster) -> the search there; EstimateError where the memory model cannot use the config on it
SearchOn = Callable[[dict[str, Any], Cluster], Search]


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A resource that binds for the candidate closest to fitting on it: what it needs, and in which phase."""

    resource: Capacity
    phase: Phase
    need: int
    usable: int  # the capacity less the headroom
    change: Change

    @property
    def missing(self) -> int:
        return self.need - self.usable


def peak(stage: StageEstimate, resource: Capacity) -> int:
    """What ``stage`` needs of ``resource`` to fit with the headroom left free: on the GPU the expected peak's bound
    (memory/verdict.py: "fits" is the bound under the usable memory)."""
    return {Capacity.GPU: stage.peak_gpu_bound, Capacity.HOST: stage.peak_host_per_node,
            Capacity.NVME: stage.peak_nvme_per_node}[resource]


def usable(cluster: Cluster) -> dict[Capacity, int | None]:
    """What each resource offers less the headroom (None: not given)."""
    keep = 1 - cluster.headroom
    return {Capacity.GPU: cluster.usable_gpu_memory,
            Capacity.HOST: None if cluster.cpu_memory is None else int(cluster.cpu_memory * keep),
            Capacity.NVME: None if cluster.nvme is None else int(cluster.nvme * keep)}


def shortfalls(pool: list[tuple[Change, StageEstimate]], cluster: Cluster) -> list[Shortfall]:
    """What binds on ``cluster``, resource by resource, for the candidates of ``pool`` (each at the least memory
    the run allows): the GPU for the candidate with the smallest GPU peak; host RAM for the one with the
    smallest host peak among those the GPU holds; NVMe likewise among those GPU and host hold."""
    capacities = usable(cluster)
    out: list[Shortfall] = []
    for resource in RESOURCES:
        capacity = capacities[resource]
        if capacity is None or not pool:
            continue
        change, stage = min(pool, key=lambda pair: peak(pair[1], resource))
        need = peak(stage, resource)
        if need > capacity:
            phase = max(stage.phases.values(), key=lambda p: p.of(resource)).phase if stage.phases else Phase.TRAIN
            out.append(Shortfall(resource, phase, need, capacity, change))
        pool = [pair for pair in pool if peak(pair[1], resource) <= capacity]
    return out


def round_up_gb(nbytes: float) -> int:
    """Up to whole decimal GB: what a person provisions."""
    return math.ceil(nbytes / 10**9) * 10**9


class ClusterProposal:
    """The smallest cluster changes under which some change of ``written``'s config fits, each with the best
    change there (``search_on``), its patch against the config ``written`` was given."""

    def __init__(self, written: Written, accounting: str, search_on: SearchOn) -> None:
        self.written = written
        self.cluster = written.cluster
        self.accounting = accounting
        self.search_on = search_on

    def changes(self, binding: list[Shortfall]) -> list[Outcome]:
        """More host RAM or NVMe per node (where the GPUs already hold a candidate: ``binding`` names no GPU), or
        more GPUs (ZeRO-3 partitions over them)."""
        out: list[Outcome] = []
        keep = 1 - self.cluster.headroom
        by_resource = {s.resource: s for s in binding}
        if Capacity.GPU not in by_resource:
            grown: dict[str, int] = {}
            for resource, key in ((Capacity.HOST, "cpu_memory"), (Capacity.NVME, "nvme")):
                if resource in by_resource:
                    grown[key] = round_up_gb(by_resource[resource].need / keep)
            # more than any machine has (memory/cluster.py's bound) is no change to recommend
            if grown and max(grown.values()) <= MAX_MEMORY_BYTES:
                larger = replace(self.cluster, cpu_memory=grown.get("cpu_memory", self.cluster.cpu_memory),
                                 nvme=grown.get("nvme", self.cluster.nvme))
                found = self.on_cluster(larger, ClusterChange(**grown))
                if found is not None:
                    out.append(found)
        gpus = self.gpus_that_fit()
        if gpus is not None:
            per_node = self.per_node(gpus)
            found = self.on_cluster(replace(self.cluster, gpus=gpus, gpus_per_node=per_node),
                                    ClusterChange(gpus=gpus, gpus_per_node=per_node))
            if found is not None:
                out.append(found)
        return out

    def per_node(self, gpus: int) -> int:
        """GPUs per node on ``gpus`` GPUs: the given count, or Cluster's default where the cluster did not say."""
        given = self.cluster.gpus_per_node
        assert given is not None  # Cluster.__post_init__ sets it
        return min(gpus, DEFAULT_GPUS_PER_NODE) if given == min(self.cluster.gpus, DEFAULT_GPUS_PER_NODE) else given

    def gpu_counts(self) -> list[int]:
        """More GPUs: filling the node, then whole nodes, up to CLUSTER_SEARCH_LIMIT."""
        gpus, node = self.cluster.gpus, max(self.per_node(self.cluster.gpus), DEFAULT_GPUS_PER_NODE)
        counts = list(range(gpus + 1, min(node, CLUSTER_SEARCH_LIMIT) + 1))
        start = max(gpus, node) // node + 1
        counts += [n * node for n in range(start, min(CLUSTER_SEARCH_LIMIT, MAX_GPUS) // node + 1)]
        return counts

    def probe(self, gpus: int) -> bool:
        """Whether some ZeRO-3 option fits on ``gpus`` GPUs at the least memory the run allows (full
        checkpointing, micro batch 1 where the keys allow it); the batch keys that only set the global batch are
        left out (memory does not depend on them)."""
        w = self.written
        cluster = replace(self.cluster, gpus=gpus, gpus_per_node=self.per_node(gpus))
        batch = w.deepspeed.batch
        micro = 1 if batch.micro_batch is not None or TBS in batch.present else w.micro_batch
        config = {k: v for k, v in w.base.items() if k not in (TBS, GAS)}
        if MBS in config and config[MBS] != AUTO:
            config[MBS] = micro
        full = replace(w.shape, activation_checkpointing=Checkpointing.FULL)
        try:
            result = estimate(config, w.model, full, cluster, self.accounting)
        except EstimateError:
            return False
        return any(s.option.stage == 3 and s.comfortable and s.trainer_refusal is None for s in result.stages)

    def gpus_that_fit(self) -> int | None:
        counts = self.gpu_counts()
        found = largest_true(counts[::-1], lambda n: not self.probe(n))  # the largest count that does not fit
        index = 0 if found is None else counts.index(found) + 1
        for gpus in counts[index:index + 8]:  # the batch keys may rule out a count: the next ones
            if self.on_cluster(replace(self.cluster, gpus=gpus, gpus_per_node=self.per_node(gpus)), None):
                return gpus
        return None

    def on_cluster(self, cluster: Cluster, grown: ClusterChange | None) -> Outcome | None:
        """The best change on ``cluster``, with the batch keys kept at the global batch (None: nothing fits, or
        the global batch cannot be kept there). Its patch is against the config ``written`` was given."""
        w = self.written
        config = w.base
        tbs, mbs = w.deepspeed.batch.train_batch_size, w.micro_batch
        if tbs is not None and cluster.gpus != self.cluster.gpus:
            world = w.deepspeed.batch_world(cluster.gpus)
            if not float(world).is_integer() or tbs % (mbs * int(world)):
                return None
            config = mp.apply(w.base, {MBS: mbs, GAS: tbs // (mbs * int(world))})
        try:
            other = self.search_on(config, cluster)
        except EstimateError:
            return None
        found = other.best()
        if found is None or grown is None:
            return found
        # the run priced there is ``found.patch`` written on ``config``, what that search was given; the fix writes
        # that run
        # on the config as given here
        final = mp.apply(config, found.patch) if found.patch else config
        patch = written_patch(w.original, w.base, final)
        return Outcome(replace(found.change, cluster=grown, lint_keys=w.lint_keys(patch),
                               written_option=w.given_option, buckets=written_buckets(patch)),
                       found.stage, patch or None)
