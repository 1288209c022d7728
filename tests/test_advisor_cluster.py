"""advisor/cluster.py alone: what binds when nothing fits, and the smallest cluster change under which the best
change fits (checked by estimating its patch on that cluster)."""

from __future__ import annotations

import dataclasses

from zeroadvisor.advisor.candidates import Candidates
from zeroadvisor.advisor.change import ClusterChange
from zeroadvisor.advisor.cluster import ClusterProposal, peak, round_up_gb, shortfalls, usable
from zeroadvisor.advisor.estimates import Estimates
from zeroadvisor.advisor.search import Searcher
from zeroadvisor.advisor.written import Written, stage_of
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape

LLAMA2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000}
GB = 10**9
CONFIG = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8, "bf16": {"enabled": True},
          "zero_optimization": {"stage": 3}}
SHAPE = TrainingShape(2048, "none")
SPEC = spec_from_hf_config(LLAMA2_7B)


def _written(cluster: Cluster) -> Written:
    return Written(CONFIG, SPEC, SHAPE, cluster, Estimates(SPEC, cluster, "deepspeed"), lambda data, gpus: {})


def _search_on(config: dict, cluster: Cluster) -> Searcher:
    return Searcher(config, SPEC, SHAPE, cluster, "deepspeed", estimate(config, SPEC, SHAPE, cluster),
                    provision=True)


def test_usable_is_the_capacity_less_the_headroom():
    cluster = Cluster(gpus=8, gpu_memory=16 * GB, cpu_memory=64 * GB)
    assert usable(cluster) == {"gpu": cluster.usable_gpu_memory, "host": int(64 * GB * (1 - cluster.headroom)),
                               "nvme": None}
    assert round_up_gb(57.1 * GB) == 58 * GB and round_up_gb(58 * GB) == 58 * GB


def test_host_ram_binds_for_the_candidate_the_gpus_hold():
    """16 GB cards hold ZeRO-3 only with the optimizer offloaded, whose host RAM 64 GB per node does not hold."""
    cluster = Cluster(gpus=8, gpu_memory=16 * GB, cpu_memory=64 * GB)
    pool = Candidates(_written(cluster)).extremes()
    [host] = shortfalls(pool, cluster)
    assert host.resource == "host" and host.usable == usable(cluster)["host"] and host.missing > 0
    holding = [stage for _, stage in pool if stage.peak_gpu <= usable(cluster)["gpu"]]
    assert host.need == min(peak(stage, "host") for stage in holding)
    assert host.phase in ("load", "train", "save")
    roomy = Cluster(gpus=8, gpu_memory=80 * GB, cpu_memory=1000 * GB)
    assert shortfalls(Candidates(_written(roomy)).extremes(), roomy) == []


def test_more_host_ram_makes_the_best_change_fit():
    cluster = Cluster(gpus=8, gpu_memory=16 * GB, cpu_memory=64 * GB)
    written = _written(cluster)
    proposal = ClusterProposal(written, "deepspeed", _search_on)
    binding = shortfalls(Candidates(written).extremes(), cluster)
    [found] = proposal.changes(binding)
    grown = round_up_gb(binding[0].need / (1 - cluster.headroom))
    assert found.change.cluster == ClusterChange(cpu_memory=grown)
    larger = dataclasses.replace(cluster, cpu_memory=grown)
    final = mp.apply(written.base, found.patch or {})
    stage = stage_of(estimate(final, SPEC, found.change.shape, larger), found.change.option)
    assert stage is not None and stage.comfortable
    before = stage_of(estimate(final, SPEC, found.change.shape, cluster), found.change.option)
    assert before is not None and not before.comfortable  # the host RAM is what it needed


def test_more_gpus_where_the_gpus_bind():
    cluster = Cluster(gpus=2, gpu_memory=8 * GB, cpu_memory=1000 * GB)
    proposal = ClusterProposal(_written(cluster), "deepspeed", _search_on)
    assert proposal.per_node(2) == 2 and proposal.per_node(16) == 8  # Cluster's default: min(gpus, 8)
    assert proposal.gpu_counts()[:7] == [3, 4, 5, 6, 7, 8, 16]
    gpus = proposal.gpus_that_fit()
    assert gpus is not None and gpus > 2 and proposal.probe(gpus)
    [found] = proposal.changes([])
    assert found.change.cluster == ClusterChange(gpus=gpus, gpus_per_node=gpus)
    # the global batch is kept on the new world: micro x accumulation x GPUs
    patch = found.patch or {}
    assert patch["train_micro_batch_size_per_gpu"] * patch["gradient_accumulation_steps"] * gpus == 64
