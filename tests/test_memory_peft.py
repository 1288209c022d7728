"""The memory model with LoRA/QLoRA, against hand calculations from DeepSpeed 0.19.8's code.

A LoRA model hands only its adapters to the optimizer: gradients, fp32 master weights and Adam
states exist for the trainable parameters T alone (stage_1_and_2.py: is_optimized_parameter), while
the frozen base B stays in the training dtype (engine.py _cast_module_mixed_precision), whole on every
GPU at stages 0-2 and partitioned by zero.Init at stage 3.
"""

from __future__ import annotations

import dataclasses

from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.model.spec import ModelSpec, TrainingShape

BASE = 6_738_415_616  # Llama-2-7B
T = 8_388_608  # LoRA r=16 on q_proj, v_proj
BF16_ADAM = {"bf16": {"enabled": True}, "optimizer": {"type": "AdamW"}}


def lora(**extra):
    return ModelSpec(parameters=BASE, trainable_parameters=T, peft="LoRA r=16", **extra)


def row(spec, stage, gpus, name, **zero):
    config = {**BF16_ADAM, "zero_optimization": {"stage": stage, **zero}}
    est = estimate(config, spec, TrainingShape(), Cluster(gpus=gpus))
    st = next(s for s in est.stages if s.option.stage == stage and s.option.offload_optimizer == "none"
              and s.option.offload_param == "none")
    return {t.key: t.nbytes for t in st.terms if t.phase == "train" and t.row == name and t.device == "gpu"}, est


def test_stage2_adapters_partitioned_frozen_base_whole():
    params, _ = row(lora(), 2, 4, "parameters")
    # frozen base in bf16 on every GPU; the trainable bf16 flat group T (4 | 2·4: no padding)
    assert params["frozen_params"] == 2 * BASE
    assert params["lp_params"] == 2 * T
    states, _ = row(lora(), 2, 4, "optimizer_states")
    # fp32 master + 2 Adam states on the partition T / 4
    assert states["master"] == 4 * T // 4
    assert states["optimizer_state"] == 2 * 4 * T // 4


def test_stage3_partitions_the_frozen_base_too():
    params, _ = row(lora(), 3, 4, "parameters")
    assert params["frozen_params"] == 2 * BASE // 4  # zero.Init partitions frozen parameters as well
    assert params["lp_params"] == 2 * T // 4


def test_qlora_base_bytes_replace_the_quantized_weights():
    q = lora(quantized_parameters=6_476_005_376, quantized_bytes=3_642_767_360,
             largest_quantized_parameters=4096 * 11008)
    params, est = row(q, 2, 1, "parameters")
    # embeddings, norms and lm_head stay bf16: 6,738,415,616 - 6,476,005,376 = 262,410,240 parameters
    assert params["frozen_params"] == 2 * (BASE - 6_476_005_376)
    assert params["quantized_params"] == 3_642_767_360
    buffers, _ = row(q, 2, 1, "buffers")
    assert buffers["dequantized_weight"] == 2 * 4096 * 11008  # one weight dequantized to bf16 per matmul
    assert est.to_dict()["model"]["trainable_parameters"] == T


def test_gradients_follow_the_trainable_parameters():
    full = dataclasses.replace(lora(), trainable_parameters=None, peft=None)
    g_lora, _ = row(lora(), 2, 2, "gradients")
    g_full, _ = row(full, 2, 2, "gradients")
    assert sum(g_lora.values()) * (BASE // T) < sum(g_full.values()) * 2  # scales with T, not BASE
    # the fp32 gradient partition of the adapters, built in the step beside its bf16 cat copy (no activations here to
    # free first): (4 + 2) B × T / 2 (stage_1_and_2.py step; memory/step_temporaries.py)
    assert g_lora["step_fp32_grad"] == (4 + 2) * T // 2


def test_load_phase_flattens_only_the_adapters():
    # stage 2 without zero.Init: the engine moves base + adapters in bf16 to the GPU ("moved"), then
    # DeepSpeed flattens the trainable group only; the full-model fp32 master never exists.
    _, est = row(lora(), 2, 4, "parameters")
    st = next(s for s in est.stages if s.option.stage == 2 and s.option.offload_optimizer == "none")
    load = {t.key: t.nbytes for t in st.terms if t.phase == "load" and t.device == "gpu"}
    assert load["module_on_device"] == 2 * (BASE + T)
    assert all(n < 2 * (BASE + T) for k, n in load.items() if k not in {"module_on_device", "frozen_params"})


def test_stage3_offload_param_moves_the_frozen_partition():
    config = {**BF16_ADAM, "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}
    est = estimate(config, lora(), TrainingShape(), Cluster(gpus=4))
    st = next(s for s in est.stages if s.option.stage == 3 and s.option.offload_param == "cpu"
              and s.option.offload_optimizer == "none")
    frozen = [t for t in st.terms if t.phase == "train" and t.key == "frozen_params"]
    assert [(t.device, t.nbytes) for t in frozen] == [("cpu", 2 * BASE // 4)]
