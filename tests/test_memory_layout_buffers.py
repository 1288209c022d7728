"""ZeRO++ buffers, Ulysses all-to-all and pipeline p2p buffers, and the load/save phases split by the
parallel layout. Every expected number is a hand calculation from DeepSpeed 0.19.8's code, written out."""

from __future__ import annotations

from zeroadvisor.memory.estimate import Cluster, estimate, phase_split
from zeroadvisor.memory.parallel import Parallel, local_parameters
from zeroadvisor.memory.phases import SaveInputs, load_moments, save_moments
from zeroadvisor.model.spec import LoadInputs, ModelSpec, TrainingShape

# Llama-2-7B (config.json: hidden 4096, 32 layers, 32 heads, MLP 11008 gated, vocab 32000, untied head)
L, H, A, F, V = 32, 4096, 32, 11008, 32000
P7 = 6_738_415_616
LLAMA = ModelSpec(parameters=P7, num_layers=L, hidden_size=H, num_attention_heads=A, num_key_value_heads=A,
                  intermediate_size=F, vocab_size=V, gated_mlp=True, embedding_parameters=V * H,
                  tied_embeddings=False, largest_layer_parameters=V * H)
BF16 = {"bf16": {"enabled": True}, "optimizer": {"type": "AdamW"}, "train_micro_batch_size_per_gpu": 1}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def terms(st, key, phase="train", device="gpu"):
    return sum(t.nbytes for t in st.terms if t.key == key and t.device == device and t.phase == phase)


def stage3(zero=None, spec=LLAMA, gpus=16, shape=None, **extra):
    # no prefetch and no reuse window: ZeRO-3 keeps only the module it computes gathered (the largest: L_p)
    config = {**BF16, **extra, "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 0,
                                                     "stage3_max_reuse_distance": 0, **(zero or {})}}
    return estimate(config, spec, shape or TrainingShape(), Cluster(gpus=gpus)).configured


# ------------------------------------------------------------------ ZeRO++


def test_qwz_adds_an_int8_buffer_of_the_gathered_elements_and_its_scales():
    # prefetch 0: the gathered elements are the largest layer, V x H = 131,072,000 (buffers.py gathered_terms)
    # int8 flat buffer: 1 B each; scales: ceil(131,072,000 / 8,000) = 16,384 fp32 = 65,536 B
    plain, quantized = stage3(), stage3({"zero_quantized_weights": True})
    assert terms(plain, "qwz_allgather") == 0
    assert terms(quantized, "qwz_allgather") == 1 * V * H
    assert terms(quantized, "qwz_scales") == 4 * cdiv(V * H, 8000)
    assert quantized.per_gpu["buffers"] - plain.per_gpu["buffers"] == V * H + 4 * cdiv(V * H, 8000)


def test_qgz_adds_the_two_level_int4_all_to_all_buffers_of_the_largest_gradient():
    # n = 131,072,000, 8 GPUs per node: n/2 + n/2 (intra-node int4 pair) + n/16 + n/16 (inter-node int4 pair)
    # + 2n/8 (fp16 dequantized) = 131,072,000 + 16,384,000 + 32,768,000 = 180,224,000
    quantized = stage3({"zero_quantized_gradients": True})
    n = V * H
    assert terms(quantized, "qgz_all_to_all") == n // 2 + n // 2 + n // 16 + n // 16 + 2 * n // 8 == 180_224_000
    assert terms(stage3(), "qgz_all_to_all") == 0


def test_frozen_base_stored_int8_with_quantized_nontrainable_weights():
    # LoRA r=16 on q_proj/v_proj: T = 8,388,608; the frozen base partition at stage 3 over 4 GPUs:
    # ceil(6,738,415,616 / 4) = 1,684,603,904 elements, 1 B each instead of 2, + 4 B per 8,000 elements
    lora = ModelSpec(parameters=P7, trainable_parameters=8_388_608, peft="LoRA r=16", largest_layer_parameters=V * H)
    plain = stage3(spec=lora, gpus=4)
    int8 = stage3({"zero_quantized_nontrainable_weights": True}, spec=lora, gpus=4)
    partition = cdiv(P7, 4)  # 1,684,603,904
    assert terms(plain, "frozen_params") == 2 * partition
    assert terms(int8, "frozen_params") == partition
    assert terms(int8, "frozen_scales") == 4 * cdiv(partition, 8000) == 842_304
    # frozen weights are gathered quantized too (partition_parameters.py: quantize when not requires_grad)
    assert terms(int8, "qwz_allgather") == V * H


# ------------------------------------------------------------------ Ulysses and pipeline buffers


def test_ulysses_all_to_all_send_copy_and_receive_buffer_of_the_query():
    # sp 4 on 8 GPUs, 32,768 tokens, b 1, bf16: the query is 32 heads x 128 = 4,096 wide on 8,192 local tokens;
    # send copy + receive buffer = 2 x 2 B x 1 x 8,192 x 4,096 = 134,217,728 B
    config = {**BF16, "sequence_parallel_size": 4, "zero_optimization": {"stage": 3}}
    shape = TrainingShape(sequence_length=32_768, flash_attention=True, activation_checkpointing="full")
    est = estimate(config, LLAMA, shape, Cluster(gpus=8))
    assert terms(est.configured, "ulysses_all_to_all") == 2 * 2 * 1 * (32_768 // 4) * (A * 128)
    plain = estimate({**BF16, "zero_optimization": {"stage": 3}}, LLAMA, shape, Cluster(gpus=8))
    assert terms(plain.configured, "ulysses_all_to_all") == 0


def test_pipeline_receive_buffers_hold_one_micro_batch_of_activations_and_its_gradient():
    # pipe_recv_buf + grad_layer: 2 x 2 B x b 2 x 4,096 tokens x 4,096 hidden = 134,217,728 B
    config = {**BF16, "train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1}}
    shape = TrainingShape(sequence_length=4096, pipeline_parallel=2)
    est = estimate(config, LLAMA, shape, Cluster(gpus=8))
    assert terms(est.configured, "pipeline_p2p") == 2 * 2 * 2 * 4096 * H


# ------------------------------------------------------------------ load and save by layout


BF16_LOAD = LoadInputs(load_dtype="bf16", zero_init=False)


def _load_save(config, shape, gpus=8, load=BF16_LOAD):
    from dataclasses import replace
    est = estimate(config, LLAMA, replace(shape, load=load), Cluster(gpus=gpus))
    return est.configured, est


def model_states_copy(config, shape, gpus=8):
    """Host bytes of the save phase's model-state copy on rank 0's node (whichever moment binds the phase)."""
    est = estimate(config, LLAMA, shape, Cluster(gpus=gpus))
    split = phase_split(LLAMA, est.parallel, local_parameters(LLAMA, est.parallel), est.cluster)
    moments = save_moments(LLAMA, est.settings, est.configured.option, est.cluster, SaveInputs(), split=split)
    moment = next(m for m in moments if m.name == "model_states")
    return moment.node_bytes("cpu", est.cluster.gpus_on_a_node)


def test_pipeline_builds_only_its_stage_and_saves_its_layers():
    # the most loaded stage: 16 blocks + V x H (test_memory_parallel: 3,369,074,688 parameters)
    stage_params = local_parameters(LLAMA, Parallel(data=4, pipeline=2)).total
    assert stage_params == 16 * (4 * H * H + 3 * H * F) + V * H
    st, _ = _load_save({**BF16, "zero_optimization": {"stage": 1}}, TrainingShape(pipeline_parallel=2))
    assert terms(st, "loaded_model", "load", "cpu") == 8 * 2 * stage_params  # 8 local ranks, bf16
    assert terms(st, "module_on_device", "load") == 2 * stage_params
    # data-parallel rank 0 of the first stage writes its layers: 2 B x stage parameters on that node
    assert model_states_copy({**BF16, "zero_optimization": {"stage": 1}}, TrainingShape(pipeline_parallel=2)) \
        == 2 * stage_params


def test_autotp_loads_the_model_whole_then_holds_its_shard():
    # AutoTP 2 on 8 GPUs: blocks split by 2, embedding + head + norms whole
    shard = local_parameters(LLAMA, Parallel(data=4, tensor=2)).total
    assert shard == 32 * (4 * H * H + 3 * H * F) // 2 + (P7 - 32 * (4 * H * H + 3 * H * F))
    st, _ = _load_save({**BF16, "tensor_parallel": {"autotp_size": 2}, "zero_optimization": {"stage": 1}},
                       TrainingShape())
    assert terms(st, "loaded_model", "load", "cpu") == 8 * 2 * P7  # from_pretrained loads it whole on each rank
    assert terms(st, "module_on_device", "load") == 2 * shard
    # both tensor ranks of data-parallel rank 0 (ranks 0 and 1, one node) write their shard
    assert model_states_copy({**BF16, "tensor_parallel": {"autotp_size": 2}, "zero_optimization": {"stage": 1}},
                             TrainingShape()) == 2 * 2 * shard


def test_qlora_loads_quantized_onto_the_gpu():
    # bitsandbytes: from_pretrained with no device_map loads onto the current GPU, Linear weights packed
    q = ModelSpec(parameters=P7, trainable_parameters=8_388_608, peft="QLoRA r=16",
                  quantized_parameters=6_476_005_376, quantized_bytes=3_642_767_360,
                  largest_quantized_parameters=H * F)
    est = estimate({**BF16, "zero_optimization": {"stage": 2}}, q, TrainingShape(), Cluster(gpus=1))
    moments = load_moments(q, est.settings, est.configured.option, est.cluster,
                           LoadInputs(load_dtype="bf16", zero_init=False))
    built = next(m for m in moments if m.name == "built")
    # 262,410,240 unquantized parameters (embeddings, norms, head) in bf16 + the packed 4-bit weights
    assert built.rank_bytes(devices=("gpu",)) == 2 * (P7 - 6_476_005_376) + 3_642_767_360
    assert built.rank_bytes(devices=("cpu",)) == 0
