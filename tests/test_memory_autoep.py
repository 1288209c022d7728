"""AutoEP (``expert_parallel.autoep_size``, DeepSpeed 0.19.2+) sets the expert-parallel degree from the config.

DeepSpeed 0.19.8: module_inject/auto_ep_config.py parse_autoep_config reads ``enabled`` (default False) and
``autoep_size`` (default 1); engine._configure_expert_parallel does nothing unless enabled. AutoEPMoELayer
(module_inject/auto_ep_layer.py) keeps num_experts // autoep_size experts per rank and tags their parameters
allreduce=False with the ep_size_<ep> group, so ZeRO partitions them over the expert-data-parallel group of
world / ep ranks (auto_ep_folding.py build_folding_spec: edp = stage / (ep x etp)). Every expected number is a
hand calculation from Qwen3-30B-A3B's config.json, written out here."""

from __future__ import annotations

import dataclasses

import pytest

from zeroadvisor.memory.errors import EstimateError
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.parallel import read_parallel
from zeroadvisor.memory.settings import given_conflicts
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.vocab import Verdict

# Qwen3-30B-A3B (config.json): hidden 2048, 48 layers, 32 heads of 128, 4 kv heads, 128 experts of width 768
# (gate/up/down), top-8, vocab 151936, untied head, q/k RMSNorms of 128
H, LAYERS, HEADS, KV, HD, E, W, V = 2048, 48, 32, 4, 128, 128, 768, 151936
ATTENTION = 2 * H * HEADS * HD + 2 * H * KV * HD  # q, o + k, v: 18,874,368
EXPERT = 3 * H * W  # 4,718,592
EXPERTS = LAYERS * E * EXPERT  # 28,991,029,248
REST = 2 * V * H + LAYERS * E * H + LAYERS * (2 * H + 2 * HD) + H  # embed + head, routers, norms
P = LAYERS * ATTENTION + EXPERTS + REST
QWEN3_MOE = ModelSpec(parameters=P, num_layers=LAYERS, hidden_size=H, num_attention_heads=HEADS,
                      num_key_value_heads=KV, head_dim=HD, intermediate_size=W, vocab_size=V, gated_mlp=True,
                      num_experts=E, experts_per_token=8, embedding_parameters=V * H, tied_embeddings=False)
AUTOEP4 = {"expert_parallel": {"enabled": True, "autoep_size": 4}}
BASE = {"bf16": {"enabled": True}, "train_micro_batch_size_per_gpu": 1}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def train_gpu(st, key: str) -> int:
    return sum(t.nbytes for t in st.terms if t.key == key and t.device == "gpu" and t.phase == "train")


def test_the_model_is_qwen3_30b_a3b():
    assert P == 30_532_122_624 and EXPERTS == 28_991_029_248


@pytest.mark.parametrize("section,ep", [
    ({"enabled": True, "autoep_size": 4}, 4),
    ({"enabled": True}, 1),  # parse_autoep_config: autoep_size defaults to 1
    ({"enabled": False, "autoep_size": 4}, 1),  # _configure_expert_parallel returns early: no AutoEP
    ({"autoep_size": 4}, 1),  # enabled defaults to False
    ({}, 1),  # null or {}: AutoEPConfig(), disabled
    (None, 1),
])
def test_the_expert_degree_is_autoep_size_when_enabled(section, ep):
    assert read_parallel({"expert_parallel": section}, 8).expert == ep


def test_an_autoep_size_that_does_not_divide_the_data_group_is_an_error():
    # auto_ep_folding.py build_folding_spec: ep x etp must divide the stage size
    with pytest.raises(EstimateError, match="expert-parallel degree 3"):
        read_parallel({"expert_parallel": {"enabled": True, "autoep_size": 3}}, 8)


def test_a_flag_that_contradicts_autoep_size_is_a_conflict():
    [line] = given_conflicts({**BASE, **AUTOEP4}, QWEN3_MOE, 8, TrainingShape(expert_parallel=2))
    assert "--expert-parallel" in line and "expert_parallel.autoep_size = 4" in line


def test_autoep_4_at_zero2_splits_the_experts_and_their_states_over_8_over_4_ranks():
    # ZeRO-2 on 8 GPUs: the bf16 parameters are whole on each rank, so the experts count 1/4 (32 of 128 per
    # layer); the fp32 master partitions the dense parameters over 8 ranks and the experts over 8 / 4 = 2.
    # Stage 1/2 pads each flat group to a multiple of 2N elements (as test_memory_parallel).
    config = {**BASE, "zero_optimization": {"stage": 2}, **AUTOEP4}
    est = estimate(config, QWEN3_MOE, TrainingShape(sequence_length=2048), Cluster(gpus=8))
    assert est.to_dict()["cluster"]["parallel"]["expert"] == 4
    dense, local_experts = P - EXPERTS, EXPERTS // 4
    assert train_gpu(est.configured, "lp_params") == 2 * (dense + local_experts) == 17_577_701_376
    master = 4 * cdiv(dense, 16) * 2 + 4 * cdiv(local_experts, 4) * 2
    # (experts / 4 over 8 / 4 ranks is experts / 8: the states per rank equal plain ZeRO's; the parameters do not)
    assert train_gpu(est.configured, "master") == master == 770_546_688 + 14_495_514_624
    # without AutoEP the same run holds every expert: 2 B x 30.5e9 of parameters
    plain = estimate({**BASE, "zero_optimization": {"stage": 2}}, QWEN3_MOE, TrainingShape(sequence_length=2048),
                     Cluster(gpus=8))
    assert train_gpu(plain.configured, "lp_params") == 2 * P
    assert est.configured.peak_gpu < plain.configured.peak_gpu


def test_autoep_on_a_model_whose_experts_are_unknown_is_unknown_not_a_dense_number():
    # the architecture without num_experts: which parameters AutoEP splits cannot be counted, so a run that
    # fits on what is counted is "unknown" and says why; a model known to have no experts (0) has nothing to split
    dense = ModelSpec(parameters=P, num_layers=LAYERS, hidden_size=H, num_attention_heads=HEADS,
                      num_key_value_heads=KV, head_dim=HD, intermediate_size=6144, vocab_size=V, gated_mlp=True)
    config = {**BASE, "zero_optimization": {"stage": 3}, **AUTOEP4}
    cluster = Cluster(gpus=8, gpu_memory=1024 * 2**30)
    est = estimate(config, dense, TrainingShape(sequence_length=2048), cluster)
    st = est.configured
    assert st.counted_verdict == Verdict.FITS and st.verdict == Verdict.UNKNOWN
    assert "experts" in st.uncounted and any("expert layout is unknown" in w for w in st.uncounted_words(False))
    known_dense = estimate(config, dataclasses.replace(dense, num_experts=0), TrainingShape(sequence_length=2048),
                           cluster)
    assert known_dense.configured.verdict == Verdict.FITS and not known_dense.configured.uncounted


def test_expert_tensor_parallel_is_not_costed_so_the_verdict_is_unknown():
    # auto_ep_folding.py build_folding_spec: expert width ep x etp, edp = stage / (ep x etp); not modelled
    config = {**BASE, "zero_optimization": {"stage": 3},
              "expert_parallel": {"enabled": True, "autoep_size": 2, "expert_tensor_parallel_size": 2}}
    st = estimate(config, QWEN3_MOE, TrainingShape(sequence_length=2048),
                  Cluster(gpus=8, gpu_memory=1024 * 2**30)).configured
    assert st.counted_verdict == Verdict.FITS and st.verdict == Verdict.UNKNOWN
    assert st.uncounted == ("expert_tensor_parallel",)
    plain = estimate({**config, "expert_parallel": {"enabled": True, "autoep_size": 2}}, QWEN3_MOE,
                     TrainingShape(sequence_length=2048), Cluster(gpus=8, gpu_memory=1024 * 2**30)).configured
    assert plain.verdict == Verdict.FITS and not plain.uncounted
