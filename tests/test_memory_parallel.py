"""The parallel layout (memory/parallel.py): which group ZeRO partitions over, what each degree splits,
how activations divide. Every expected number is a hand calculation written out here."""

from __future__ import annotations

import json
import math
import re

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from conftest import corpus_manifest
from zeroadvisor.config.reader import read_document
from zeroadvisor.memory.errors import EstimateError
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.parallel import Parallel, local_parameters, parallel_activations, read_parallel
from zeroadvisor.memory.settings import given_conflicts
from zeroadvisor.model.spec import ModelSpec, TrainingShape

# Llama-2-7B (config.json: hidden 4096, 32 layers, 32 heads, MLP 11008 gated, vocab 32000, untied head)
L, H, A, F, V = 32, 4096, 32, 11008, 32000
P7 = 6_738_415_616
LLAMA = ModelSpec(parameters=P7, num_layers=L, hidden_size=H, num_attention_heads=A, num_key_value_heads=A,
                  intermediate_size=F, vocab_size=V, gated_mlp=True, embedding_parameters=V * H,
                  tied_embeddings=False)
ATTENTION = 4 * H * H  # q, k, v, o: 67,108,864
MLP = 3 * H * F  # gate, up, down: 135,266,304
REST = P7 - L * (ATTENTION + MLP)  # embedding + head + norms = 262,410,240


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def term(st, key, device="gpu"):
    return sum(t.nbytes for t in st.terms if t.key == key and t.device == device and t.phase == "train")


# ------------------------------------------------------------------ degrees and groups


def test_autotp_from_the_config_leaves_data_world_over_tp():
    layout = read_parallel({"tensor_parallel": {"autotp_size": 2}}, 16)
    assert layout == Parallel(data=8, tensor=2)
    assert layout.world == 16
    # autotp_size 0 (DeepSpeed's default) and 1 are off
    assert read_parallel({"tensor_parallel": {"autotp_size": 0}}, 16).tensor == 1


def test_ulysses_zero_group_holds_the_sequence_ranks_and_the_batch_divides_by_sp():
    # parallel_state_sp.initialize_sequence_parallel: sequence_data_parallel_size = sp x (world / sp) = world;
    # config.py: world_size = world / sequence_parallel_size for the batch arithmetic.
    layout = read_parallel({"sequence_parallel_size": 4}, 8)
    assert (layout.data, layout.sequence, layout.batch_world()) == (8, 4, 2)


def test_pipeline_from_the_flag_halves_data():
    layout = read_parallel(None, 8, TrainingShape(pipeline_parallel=2))
    assert (layout.data, layout.pipeline, layout.batch_world()) == (4, 2, 4)


@pytest.mark.parametrize("config,gpus,shape", [
    ({"tensor_parallel": {"autotp_size": 3}}, 8, TrainingShape()),
    (None, 8, TrainingShape(pipeline_parallel=2, sequence_parallel=3)),
    (None, 8, TrainingShape(expert_parallel=16)),
])
def test_degrees_that_do_not_divide_are_an_error(config, gpus, shape):
    with pytest.raises(EstimateError):
        read_parallel(config, gpus, shape)


def test_a_flag_that_contradicts_the_config_is_a_conflict():
    config = {"tensor_parallel": {"autotp_size": 2}, "train_micro_batch_size_per_gpu": 1}
    spec = ModelSpec(parameters=10**9)
    assert given_conflicts(config, spec, 8, TrainingShape(tensor_parallel=2)) == []
    [line] = given_conflicts(config, spec, 8, TrainingShape(tensor_parallel=4))
    assert "--tensor-parallel" in line and "autotp_size = 2" in line
    # only the config sets none of pipeline/expert: no conflict possible
    assert given_conflicts(config, spec, 8, TrainingShape(tensor_parallel=2, pipeline_parallel=2)) == []


def test_micro_batch_from_train_batch_uses_the_sequence_parallel_world():
    # 16 = micro x 1 x (8 / 4)  ->  micro 8 (config.py _configure_train_batch_size on world / sp)
    config = {"train_batch_size": 16, "gradient_accumulation_steps": 1, "sequence_parallel_size": 4}
    est = estimate(config, ModelSpec(parameters=10**9), cluster=Cluster(gpus=8))
    assert est.settings.micro_batch == 8


# ------------------------------------------------------------------ parameters per GPU


def test_autotp_2_on_16_gpus_stage3_bf16_parameter_count_only():
    # 7B, no architecture: all of it costed as split by 2 (a stated lower bound), ZeRO over 8:
    # 16-bit partition = 2 B x ceil(7e9 / 2 / 8) = 875,000,000 B
    config = {"bf16": {"enabled": True}, "zero_optimization": {"stage": 3},
              "tensor_parallel": {"autotp_size": 2}, "train_micro_batch_size_per_gpu": 1}
    est = estimate(config, ModelSpec(parameters=7 * 10**9), cluster=Cluster(gpus=16))
    assert est.to_dict()["cluster"]["parallel"] == {"data": 8, "tensor": 2, "pipeline": 1, "sequence": 1,
                                                    "expert": 1}
    assert term(est.configured, "lp_params") == 2 * cdiv(7 * 10**9 // 2, 8) == 875_000_000
    assert any("lower bound" in note for note in est.assumptions)


def test_autotp_2_on_16_gpus_llama_blocks_split_embeddings_whole():
    # blocks 32 x (67,108,864 + 135,266,304) split by 2 = 3,238,002,688; embedding, head and norms whole
    # (262,410,240): 3,500,412,928 parameters per TP rank; ZeRO-3 over 8: ceil(/8) = 437,551,616 -> x 2 B
    local = local_parameters(LLAMA, Parallel(data=8, tensor=2))
    assert local.dense == L * (ATTENTION + MLP) // 2 + REST == 3_500_412_928
    config = {"bf16": {"enabled": True}, "zero_optimization": {"stage": 3},
              "tensor_parallel": {"autotp_size": 2}, "train_micro_batch_size_per_gpu": 1}
    est = estimate(config, LLAMA, cluster=Cluster(gpus=16))
    assert term(est.configured, "lp_params") == 2 * cdiv(L * (ATTENTION + MLP) // 2 + REST, 8) == 2 * 437_551_616


def test_ulysses_sp4_on_8_gpus_partitions_over_all_8():
    # ZeRO-3 over the sequence-data-parallel group of 8: 2 B x ceil(6,738,415,616 / 8) = 2 x 842,301,952
    config = {"fp16": {"enabled": True}, "zero_optimization": {"stage": 3}, "sequence_parallel_size": 4,
              "train_micro_batch_size_per_gpu": 1}
    est = estimate(config, LLAMA, cluster=Cluster(gpus=8))
    assert term(est.configured, "lp_params") == 2 * cdiv(P7, 8) == 2 * 842_301_952


def test_pipeline_2_on_8_gpus_halves_the_layers_data_4():
    # most loaded stage: 16 blocks + the larger of embedding and head (V x H = 131,072,000 each)
    stage_params = 16 * (ATTENTION + MLP) + V * H
    assert stage_params == 3_369_074_688
    local = local_parameters(LLAMA, Parallel(data=4, pipeline=2))
    assert local.dense == stage_params
    # ZeRO-1 (a pipeline runs stage 0/1) over 4: fp32 master = 4 B x ceil(P / (2 x 4)) x 2
    config = {"fp16": {"enabled": True}, "zero_optimization": {"stage": 1}, "train_micro_batch_size_per_gpu": 1}
    est = estimate(config, LLAMA, TrainingShape(pipeline_parallel=2), Cluster(gpus=8))
    assert est.parallel.data == 4
    assert term(est.configured, "master") == 4 * cdiv(stage_params, 8) * 2 == 3_369_074_688


def test_expert_parallel_splits_experts_and_partitions_their_states_over_data_over_ep():
    # 2 MoE layers, 8 experts of gate/up/down 3 x 64 x 128 = 24,576 each; ep 4 on 8 GPUs
    spec = ModelSpec(parameters=2 * (4 * 64 * 64 + 8 * 3 * 64 * 128) + 1000 * 64, num_layers=2, hidden_size=64,
                     num_attention_heads=4, intermediate_size=128, vocab_size=1000, gated_mlp=True,
                     num_experts=8, experts_per_token=2, embedding_parameters=1000 * 64)
    local = local_parameters(spec, Parallel(data=8, expert=4))
    assert local.experts == 2 * 8 * 24_576 // 4 == 98_304
    assert local.dense == 2 * 4 * 64 * 64 + 1000 * 64
    config = {"fp16": {"enabled": True}, "zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": 1}
    est = estimate(config, spec, TrainingShape(expert_parallel=4), Cluster(gpus=8))
    # masters: dense over 8 ranks + experts over 8 / 4 = 2 ranks, each 4 B x ceil(n / 2N) x 2
    dense_master = 4 * cdiv(local.dense, 16) * 2
    expert_master = 4 * cdiv(98_304, 4) * 2
    assert term(est.configured, "master") == dense_master + expert_master


def test_hpz_secondary_partition_stage3():
    # partition_parameters.py _partition_param_sec: aligned numel / hpz in 16 bits:
    # 7e9 on 16 GPUs, hpz 8: ceil(7e9 / 16) x 16 / 8 = 875,000,000 elements x 2 B
    config = {"fp16": {"enabled": True}, "zero_optimization": {"stage": 3, "zero_hpz_partition_size": 8},
              "train_micro_batch_size_per_gpu": 1}
    est = estimate(config, ModelSpec(parameters=7 * 10**9), cluster=Cluster(gpus=16))
    assert term(est.configured, "hpz_secondary") == 2 * (cdiv(7 * 10**9, 16) * 16 // 8) == 1_750_000_000
    assert term(est.stage(2), "hpz_secondary") == 0  # hpZ is a stage-3 feature


# ------------------------------------------------------------------ activations


def test_tensor_parallel_activations_follow_korthikanti_eq2():
    # q = kv = h, f = 4h, GeLU MLP, 2-byte activations, explicit scores: per layer
    # sbh (10 + 24 / t) + 5 a s^2 b / t. h 1024, a 16, s 512, b 1, t 2:
    # 512 x 1024 x 22 + 5 x 16 x 512^2 / 2 = 11,534,336 + 10,485,760, plus the fp32 mean and rstd of the
    # two LayerNorms per token (torch native_layer_norm, 8 B; not split by t): 2 x 8 x 512
    spec = ModelSpec(parameters=10**8, num_layers=1, hidden_size=1024, num_attention_heads=16,
                     intermediate_size=4096, gated_mlp=False)
    shape = TrainingShape(sequence_length=512, flash_attention=False)
    act = parallel_activations(spec, shape, 1, "fp16", Parallel(data=1, tensor=2))
    assert act.per_layer == 512 * 1024 * 22 + 5 * 16 * 512**2 // 2 + 2 * 8 * 512 == 22_028_288


def llama_layer(s: int, b: int, heads: int, scores_heads: int | None = None, seq_for_scores: int = 0) -> int:
    """Korthikanti per layer generalised (memory/activations.py), bf16: s b [2 (4h + 2q + 2kv + 4f) + 2h],
    plus the fp32 mean and rstd of the layer's two LayerNorms, 8 B per token each (native_layer_norm)."""
    linear = s * b * (2 * (4 * H + 2 * H + 2 * H + 4 * F) + 2 * H + 2 * 8)
    if scores_heads is None:
        return linear + 4 * heads * s * b  # FlashAttention log-sum-exp
    return linear + scores_heads * seq_for_scores**2 * b * (2 * 2 + 1)


def outside(s: int) -> int:
    """Outside the layers, per token: int64 token ids (8), the embedding dropout mask (h), the final LayerNorm
    (input 2h + stats 8) and the LM-head input (2h)."""
    return s * (8 + H + 2 * H + 8) + 2 * s * H


def loss(s: int) -> int:
    """The loss peak (ForCausalLMLoss upcasts): fp32 log-probs, their gradient, the logits' gradient, 12 s V,
    plus the int64 labels."""
    return 12 * s * V + 8 * s


def test_ulysses_sp4_divides_activations_by_4_with_flash():
    s = 4096
    shard = s // 4
    expected = L * llama_layer(shard, 1, A) + outside(shard) + loss(shard)
    assert expected == 5_720_530_944
    act = parallel_activations(LLAMA, TrainingShape(sequence_length=s), 1, "bf16", Parallel(data=8, sequence=4))
    assert act.nbytes == expected


def test_ulysses_scores_hold_heads_over_sp_on_the_whole_sequence():
    # explicit attention: each rank computes a/sp = 8 heads over all 4096 tokens: 8 x 4096^2 x 5 B per layer
    s = 4096
    shard = s // 4
    per_layer = llama_layer(shard, 1, A, scores_heads=A // 4, seq_for_scores=s)
    expected = L * per_layer + outside(shard) + loss(shard)
    act = parallel_activations(LLAMA, TrainingShape(sequence_length=s, flash_attention=False), 1, "bf16",
                               Parallel(data=8, sequence=4))
    assert act.nbytes == expected == 27_191_173_120


def test_pipeline_first_stage_keeps_all_layers_worth_in_flight():
    # 1F1B: first stage p micro batches x L/p layers = L layers (+ the final norm/head input, a bound);
    # last stage: L/p layers of one micro batch + the fp32 logits and loss. The larger is costed.
    s = 4096
    first = L * llama_layer(s, 1, A) + outside(s)
    last = (L // 2) * llama_layer(s, 1, A) + outside(s) + loss(s)
    assert first > last
    act = parallel_activations(LLAMA, TrainingShape(sequence_length=s), 1, "bf16", Parallel(data=4, pipeline=2))
    assert act.nbytes == first == 21_309_227_008


# ------------------------------------------------------------------ inputs: flags, description, JSON


def test_the_flags_reach_the_estimate_and_the_json(cli, tmp_path):
    model = tmp_path / "m.yaml"
    model.write_text("parameters: 7B\nsequence_parallel: 2\n")
    out = cli("estimate", "--model", str(model), "--gpus", "16", "--tensor-parallel", "2", "--format", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["cluster"]["parallel"] == {"data": 8, "tensor": 2, "pipeline": 1,
                                                             "sequence": 2, "expert": 1}


def test_flag_against_config_and_bad_layout_are_usage_errors(cli, tmp_path):
    config = tmp_path / "ds.json"
    config.write_text('{"tensor_parallel": {"autotp_size": 2}, "train_micro_batch_size_per_gpu": 1}')
    conflict = cli("estimate", str(config), "--params", "7B", "--gpus", "8", "--tensor-parallel", "4")
    assert conflict.returncode == 2 and "autotp_size = 2" in conflict.stderr
    bad = cli("estimate", "--params", "7B", "--gpus", "8", "--pipeline-parallel", "3")
    assert bad.returncode == 2 and "do not split" in bad.stderr and "Traceback" not in bad.stderr


# ------------------------------------------------------------------ the corpus


PARALLEL_KEY = re.compile(r"^\s*[\"']?(autotp_size|sequence_parallel_size|zero_hpz_partition_size)[\"']?\s*:",
                          re.M)


def _value(data, *path):
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def test_every_corpus_config_with_a_parallel_setting_is_costed_with_its_data_degree(corpus):
    found = 0
    for row in corpus_manifest(corpus):
        path = corpus / row["file"]
        if not path.is_file() or not PARALLEL_KEY.search(path.read_text("utf-8", errors="replace")):
            continue
        data = read_document(str(path)).data
        if not isinstance(data, dict):
            continue
        found += 1
        gpus = 16
        tp = _value(data, "tensor_parallel", "autotp_size")
        sp = data.get("sequence_parallel_size")
        hpz = _value(data, "zero_optimization", "zero_hpz_partition_size")
        tp = tp if isinstance(tp, int) and tp > 1 else 1
        est = estimate(data, LLAMA, TrainingShape(micro_batch_size=1, precision="bf16", zero_stage=3),
                       Cluster(gpus=gpus))
        layout = est.to_dict()["cluster"]["parallel"]
        assert layout["data"] == gpus // tp, path.name
        assert layout["tensor"] == tp and layout["sequence"] == (sp if isinstance(sp, int) and sp > 1 else 1)
        if isinstance(hpz, int) and hpz > 1 and est.configured.option.stage == 3:
            local = local_parameters(LLAMA, est.parallel).total
            assert term(est.configured, "hpz_secondary") == 2 * math.ceil(cdiv(local, gpus // tp) * (gpus // tp)
                                                                              / hpz), path.name
    assert found >= 2  # two in the corpus today: LLaMA-Factory's AutoTP example and an hpZ config
