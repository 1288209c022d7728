"""Load/save phases and host-RAM mechanisms, against hand calculations from the DeepSpeed/transformers/torch code.

Llama-2-7B: 6,738,415,616 parameters (HF config: 32 layers, h 4096, ffn 11008, vocab 32000, untied),
so its bf16 weights are 13,476,831,232 B ("13.48 GB"); the largest module is an embedding or the LM
head, 32000 × 4096 = 131,072,000 parameters.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from zeroadvisor.memory.estimate import Cluster
from zeroadvisor.memory.host import (
    CUDA_HOST_BYTES,
    PinnedBuffer,
    deepspeed_pinned_buffers,
    pinned_block_bytes,
    pinned_bytes,
    pinned_param_partitions,
    pinned_rounding_terms,
    power_of_two_ceil,
    runtime_baseline_terms,
)
from zeroadvisor.memory.options import configured_option
from zeroadvisor.memory.phases import LoadInputs, SaveInputs, load_phase, save_phase
from zeroadvisor.memory.settings import read_settings
from zeroadvisor.memory.terms import Term
from zeroadvisor.model.spec import ModelSpec

P7B = 6_738_415_616
EMB = 32_000 * 4_096
LLAMA7B = ModelSpec(parameters=P7B, largest_layer_parameters=EMB)
BF16_7B = 13_476_831_232  # 2 B × P


def setup(stage, gpus=8, extra=None, **cluster):
    config = {"bf16": {"enabled": True}, "zero_optimization": {"stage": stage, **(extra or {})}}
    s = read_settings(config, LLAMA7B, gpus)
    option, _ = configured_option(s)
    return s, option, Cluster(gpus=gpus, **cluster)


# ------------------------------------------------------------------------------------------------ load


def test_stage2_every_rank_loads_the_whole_model_on_the_host_and_the_gpu():
    s, option, cluster = setup(2)
    phase = load_phase(LLAMA7B, s, option, cluster, LoadInputs(load_dtype="bf16"))
    # host: 8 local ranks × the bf16 model (transformers materialises it on every rank)
    assert phase.peak_host_per_node == 8 * 2 * P7B == 8 * BF16_7B
    # GPU: the bf16 model moved by the engine, plus the flat bit16 copy DeepSpeedZeroOptimizer.__init__ makes
    # next to it; P is a multiple of 2·N = 16, so the flat buffer has no padding
    assert P7B % 16 == 0
    moved = next(m for m in phase.moments if m.name == "moved")
    assert moved.rank_bytes() == BF16_7B
    assert phase.peak_gpu == 2 * BF16_7B
    assert phase.binding_moment("gpu").name == "flatten"
    assert {t.kind for t in phase.terms()} <= {"exact", "bound", "allowance"}
    assert all(t.phase == "load" for t in phase.terms())


def test_stage3_without_zero_init_holds_the_whole_model_on_every_gpu():
    s, option, cluster = setup(3)
    phase = load_phase(LLAMA7B, s, option, cluster, LoadInputs(load_dtype="bf16", zero_init=False))
    assert phase.peak_gpu == BF16_7B  # the whole module moved to the device before stage 3 partitions it
    assert phase.peak_host_per_node == 8 * BF16_7B
    # after initialize: bf16 partition 2·P/8 + fp32 master 4·P/8 + bf16 gradient buffer 2·P/8 + the IPG
    # bucket reduce_bucket_size (DeepSpeed default 5e8) × 2 B; Adam's moments come at the first step
    part = P7B // 8
    initialized = next(m for m in phase.moments if m.name == "initialized")
    assert initialized.rank_bytes() == 2 * part + 4 * part + 2 * part + 2 * 500_000_000


def test_stage3_zero_init_is_the_hf_default_and_reads_the_checkpoint_on_rank0_only():
    s, option, cluster = setup(3)
    phase = load_phase(replace(LLAMA7B, checkpoint_dtype="bf16"), s, option, cluster, LoadInputs())
    assert any("Hugging Face Trainer" in n for n in phase.notes)
    assert any("checkpoint's bf16" in n for n in phase.notes)
    # host: rank 0's state dict only (transformers 5 loads the other ranks' to meta)
    assert phase.peak_host_per_node == BF16_7B
    part = P7B // 8
    # GPU: never the whole model; the largest moment is _create_fp32_partitions: the bf16 partition, its fp32
    # conversion (one sub-group: sub_group_size 1e9 > P/8) and the fp32 clone = 2 + 4 + 4 B per partition element,
    # above what initialize leaves (8 B per element + the 1e9-byte bucket)
    assert phase.peak_gpu == (2 + 4 + 4) * part > 8 * part + 2 * 500_000_000
    assert phase.binding_moment("gpu").name == "fp32_partitions"
    loading = next(m for m in phase.moments if m.name == "loading")
    assert loading.rank_bytes() == 2 * part + 2 * EMB + 0  # rank 0's checkpoint is host memory


@pytest.mark.parametrize("zero_init", [None, True])
def test_a_quantized_model_is_never_built_under_zero_init(zero_init):
    # QLoRA: transformers skips zero.Init when is_quantized (modeling_utils.py get_init_context), so the packed
    # 4-bit weights are loaded whole onto every GPU by bitsandbytes, whatever zero3_init_flag / --zero-init say.
    # 6.5e9 weights quantized to 4 bit (0.5 B each) plus 0.24e9 bf16 parameters left unquantized
    q = 6_476_271_616
    spec = replace(LLAMA7B, quantized_parameters=q, quantized_bytes=q // 2, trainable_parameters=20_000_000,
                   largest_quantized_parameters=45_088_768)
    s, option, cluster = setup(3)
    phase = load_phase(spec, s, option, cluster, LoadInputs(load_dtype="bf16", zero_init=zero_init))
    built = next(m for m in phase.moments if m.name == "built")
    assert built.rank_bytes() == 2 * (P7B - q) + q // 2  # on the GPU, whole, no partition
    # host: no checkpoint on rank 0 (the zero.Init path); only stage 3's defragment staging of the trainable
    # (adapter) partitions, 2 B × 20e6 / 8 on each of the 8 local ranks
    assert phase.peak_host_per_node == 8 * 2 * 20_000_000 // 8
    assert not any(m.name == "loading" for m in phase.moments)  # the zero.Init moment
    assert any("bitsandbytes-quantized" in n for n in phase.notes)
    assert any("ignored" in n for n in phase.notes) == bool(zero_init)


def test_fp32_load_with_bf16_training_casts_on_the_host():
    s, option, cluster = setup(2)
    phase = load_phase(LLAMA7B, s, option, cluster, LoadInputs(load_dtype="fp32"))
    cast = next(m for m in phase.moments if m.name == "cast")
    # engine._cast_module_mixed_precision: one parameter at a time, so fp32 model + one bf16 copy
    assert cast.rank_bytes(devices=("cpu",)) == 4 * P7B + 2 * EMB
    assert phase.peak_host_per_node == 8 * (4 * P7B + 2 * EMB)
    assert phase.peak_gpu == 2 * BF16_7B  # still cast to bf16 before the move


def test_unknown_load_dtype_is_fp32_and_said():
    s, option, cluster = setup(2)
    phase = load_phase(LLAMA7B, s, option, cluster)
    assert any("assumed fp32" in n for n in phase.notes)
    assert phase.peak_host_per_node == 8 * (4 * P7B + 2 * EMB)


def test_meta_device_loading_has_no_host_copy():
    s, option, cluster = setup(2)
    phase = load_phase(LLAMA7B, s, option, cluster, LoadInputs(load_dtype="bf16", meta_device=True))
    assert phase.peak_host_per_node == 0
    assert phase.peak_gpu == 2 * BF16_7B


def test_script_moving_an_fp32_model_casts_it_on_the_gpu():
    s, option, cluster = setup(2)
    phase = load_phase(LLAMA7B, s, option, cluster, LoadInputs(load_dtype="fp32", script_moves_to_gpu=True))
    assert phase.peak_gpu == 4 * P7B + 2 * EMB  # fp32 model on the GPU + the parameter being cast
    assert phase.peak_host_per_node == 0


def test_stage2_without_room_for_the_flat_copy_flattens_on_the_host():
    s, option, cluster = setup(2, gpu_memory=20 * 10**9)  # < 2 × 13.48 GB
    phase = load_phase(LLAMA7B, s, option, cluster, LoadInputs(load_dtype="bf16"))
    # params moved to the host (cpu_data) + the flat copy built there, on every rank
    assert phase.peak_host_per_node == 8 * 2 * BF16_7B
    # GPU: never two copies; the largest is what initialize leaves, the flat bf16 model + the fp32 master partition
    assert phase.peak_gpu == BF16_7B + 4 * (P7B // 8)
    assert phase.binding_moment("gpu").name == "initialized"
    assert any("flattens the parameters on the host" in n for n in phase.notes)


def test_zero_init_requested_below_stage3_is_ignored_and_said():
    s, option, cluster = setup(2)
    phase = load_phase(LLAMA7B, s, option, cluster, LoadInputs(load_dtype="bf16", zero_init=True))
    assert phase.peak_host_per_node == 8 * BF16_7B
    assert any("zero.Init ignored at stage 2" in n for n in phase.notes)


def test_phase_terms_scale_every_rank_host_terms_to_the_node():
    s, option, cluster = setup(2)
    phase = load_phase(LLAMA7B, s, option, cluster, LoadInputs(load_dtype="bf16"))
    host = [t for t in phase.terms() if t.device == "cpu"]
    assert sum(t.nbytes for t in host) == phase.peak_host_per_node
    assert all("8 local ranks" in t.what for t in host)


# ------------------------------------------------------------------------------------------------ save


def test_save_config_flag_defaults_to_deepspeeds_false():
    assert SaveInputs.from_config({"zero_optimization": {"stage": 3}}).gather_16bit_weights is False
    assert SaveInputs.from_config({"zero_optimization": {
        "stage": 3, "stage3_gather_16bit_weights_on_model_save": True}}).gather_16bit_weights is True
    assert SaveInputs.from_config({"zero_optimization": {
        "stage": 3, "stage3_gather_fp16_weights_on_model_save": True}}).gather_16bit_weights is True


def test_stage3_save_consolidates_the_16bit_model_on_rank0():
    s, option, cluster = setup(3)
    phase = save_phase(LLAMA7B, s, option, cluster, SaveInputs(gather_16bit_weights=True, checkpoint=False))
    assert phase.peak_host_per_node == BF16_7B  # param.detach().cpu() on rank 0, module by module
    assert phase.peak_gpu == 2 * EMB  # one module gathered at a time
    assert all(t.phase == "save" for t in phase.terms())


def test_checkpoint_save_copies_each_ranks_largest_state_storage_to_the_host():
    s, option, cluster = setup(3)
    phase = save_phase(LLAMA7B, s, option, cluster, SaveInputs(gather_16bit_weights=False, checkpoint=True))
    # torch.save copies every non-CPU storage to the host one at a time; the largest is one fp32 sub-group
    # (sub_group_size default 1e9 > P/8, so the whole 842,301,952-element partition): 8 ranks at once
    assert phase.peak_host_per_node == 8 * 4 * (P7B // 8)
    s2, option2, cluster2 = setup(2)
    phase2 = save_phase(LLAMA7B, s2, option2, cluster2, SaveInputs(checkpoint=True))
    # stage 2 also writes the module state dict from data-parallel rank 0, cloned to the host first
    moments = {m.name: m.node_bytes("cpu", 8) for m in phase2.moments}
    assert moments["model_states"] == BF16_7B
    assert moments["optimizer_partition"] == 8 * 4 * (P7B // 8)


def test_offloaded_optimizer_states_need_no_save_staging():
    s, option, cluster = setup(3, extra={"offload_optimizer": {"device": "cpu"}})
    phase = save_phase(LLAMA7B, s, option, cluster, SaveInputs(checkpoint=True))
    assert phase.peak_host_per_node == 0


# ------------------------------------------------------------------------------------------------ host RAM


def test_power_of_two_rounding():
    assert [power_of_two_ceil(n) for n in (0, 1, 2, 3, 4096, 4097)] == [0, 1, 2, 4, 4096, 8192]
    assert pinned_block_bytes(int(1.1 * 2**30)) == 2**31
    assert pinned_block_bytes(int(1.1 * 2**30), round_threshold=2**30) == int(1.1 * 2**30)
    assert pinned_bytes([3, 5, 0, 1024]) == 4 + 8 + 1024


def test_stage2_cpu_offload_pinned_buffers_7b_on_8_gpus():
    s, option, _ = setup(2, extra={"offload_optimizer": {"device": "cpu", "pin_memory": True}})
    part = P7B // 8  # 842,301,952 (already a multiple of 2)
    buffers = deepspeed_pinned_buffers(s, option, P7B, 8, largest_param=EMB)
    requested = {b.key: b.nbytes for b in buffers}
    assert requested == {"master": 4 * part, "lp_param_staging": 2 * part, "fp32_grads": 4 * part,
                         "grad_staging": 2 * EMB}
    # 3,369,207,808 -> 4 GiB; 1,684,603,904 -> 2 GiB; 3,369,207,808 -> 4 GiB; 262,144,000 -> 256 MiB
    assert sum(b.held for b in buffers) == 4 * 2**30 + 2 * 2**30 + 4 * 2**30 + 2**28
    extra = sum(t.nbytes for t in pinned_rounding_terms(buffers))
    assert extra == (10 * 2**30 + 2**28) - (10 * part + 2 * EMB)


def test_pin_memory_defaults_to_true_in_deepspeed_0_19_8():
    # runtime/zero/offload_config.py DeepSpeedZeroOffloadOptimizerConfig: pin_memory: bool = True
    s, option, _ = setup(2, extra={"offload_optimizer": {"device": "cpu"}})
    assert len(deepspeed_pinned_buffers(s, option, P7B, 8, EMB)) == 4
    s, option, _ = setup(2, extra={"offload_optimizer": {"device": "cpu", "pin_memory": False}})
    assert deepspeed_pinned_buffers(s, option, P7B, 8, EMB) == []


def test_stage3_offload_pins_gradient_buffers_not_master_weights():
    s, option, _ = setup(3, extra={"offload_optimizer": {"device": "cpu", "pin_memory": True},
                                   "sub_group_size": 100_000_000})
    part = P7B // 8
    buffers = deepspeed_pinned_buffers(s, option, P7B, 8, EMB)
    keys = {(b.key, b.nbytes, b.count) for b in buffers}
    nsub = -(-part // 100_000_000)  # 9 sub-groups, the last 42,301,952 elements
    assert keys == {("lp_grads", 2 * part, 1), ("master_grads", 4 * 100_000_000, nsub - 1),
                    ("master_grads", 4 * (part - (nsub - 1) * 100_000_000), 1)}


def test_zero_init_pinned_param_partitions_are_rounded_one_by_one():
    assert pinned_param_partitions([10, 3], N=2, element_size=2) == 16 + 4  # ceil(10/2)·2=10 -> 16; 4 -> 4


def test_runtime_baseline_is_an_allowance_with_the_cuda_part_optional():
    with_cuda = runtime_baseline_terms("train")
    without = runtime_baseline_terms("train", cuda=False)
    assert {t.kind for t in with_cuda} == {"allowance"}
    assert sum(t.nbytes for t in with_cuda) - sum(t.nbytes for t in without) == CUDA_HOST_BYTES
    assert CUDA_HOST_BYTES == (2_056_600 - 322_040) * 1024  # pytorch/pytorch#113326's RSS before/after


def test_term_defaults_keep_old_terms_valid():
    t = Term("parameters", "gpu", 1, "k", "w", "f", "s")
    assert (t.phase, t.kind) == ("train", "exact")


def test_pinned_buffer_count():
    assert PinnedBuffer("x", 3, 5, "src").held == 20


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_every_stage_has_a_load_phase(stage):
    s, option, cluster = setup(stage)
    phase = load_phase(LLAMA7B, s, option, cluster, LoadInputs(load_dtype="bf16", zero_init=False))
    assert phase.peak_gpu >= BF16_7B  # without zero.Init every GPU receives the whole model
