"""Frozen parameters (LoRA) get no gradient buffers: numbers derived from DeepSpeed 0.19.8's code.

DeepSpeed builds every gradient structure from the optimizer's groups, which keep only the parameters that
require grad (runtime/utils.py is_optimized_parameter; stage_1_and_2.py __init__ bit16_groups; stage3.py
_get_trainable_parameter_groups), and registers the gradient hook that feeds the reduce bucket only
``if param.requires_grad`` (stage3.py create_reduce_and_remove_grad_hooks). The frozen base still costs its
16-bit partitions and gathers (tests/test_memory_peft.py).

The model: Llama-2-7B (embedding 32000 x 4096 the largest layer) with LoRA r=16 on q_proj and v_proj: every
adapter tensor is 16 x 4096 = 65,536 elements (lora_A r x in, lora_B out x r), 32 layers x 2 modules x 2
tensors = 8,388,608 trainable elements.
"""

from __future__ import annotations

import dataclasses

from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.options import configured_option
from zeroadvisor.memory.phases import LoadInputs, load_phase
from zeroadvisor.memory.settings import read_settings
from zeroadvisor.model.hf import layout_from_hf_config, spec_from_hf_config
from zeroadvisor.model.peft import PeftSettings, apply
from zeroadvisor.model.spec import ModelSpec, TrainingShape

BASE = 6_738_415_616
H, F, V, LAYERS = 4096, 11008, 32000, 32
EMBEDDING = V * H  # 131,072,000: the largest layer, frozen under LoRA
ADAPTER = 16 * H  # 65,536: the largest trainable tensor
T = LAYERS * 2 * 2 * ADAPTER  # 8,388,608
# the base's parameter sizes (model.parameters() multiset): q/k/v/o, gate/up/down, embedding + untied head, norms
SIZES = ((H * H, 4 * LAYERS), (H * F, 3 * LAYERS), (EMBEDDING, 2), (H, 2 * LAYERS + 1))
RBS = 500_000_000  # reduce_bucket_size default (runtime/zero/config.py)


def lora(**extra) -> ModelSpec:
    return ModelSpec(parameters=BASE, hidden_size=H, intermediate_size=F, vocab_size=V, num_layers=LAYERS,
                     num_attention_heads=32, largest_layer_parameters=EMBEDDING, parameter_sizes=SIZES,
                     trainable_parameters=T, largest_trainable_parameter=ADAPTER, peft="LoRA r=16", **extra)


def terms(spec: ModelSpec, gpus: int, zero: dict, device: str = "gpu", **config) -> dict[str, int]:
    """The configured option's train-phase terms on ``device`` (bf16, AdamW), summed by key."""
    ds = {"bf16": {"enabled": True}, "optimizer": {"type": "AdamW"}, "zero_optimization": zero, **config}
    est = estimate(ds, spec, TrainingShape(), Cluster(gpus=gpus))
    st = next(s for s in est.stages if s.configured)
    out: dict[str, int] = {}
    for t in st.terms:
        if t.phase == "train" and t.device == device:
            out[t.key] = out.get(t.key, 0) + t.nbytes
    return out


def p2(n: int) -> int:
    """torch's CachingHostAllocator block for a pinned request of n bytes (c10::llvm::PowerOf2Ceil)."""
    return 1 << (n - 1).bit_length()


def test_stage3_full_gradient_is_the_largest_trainable_parameter():
    # param.grad exists only for requires_grad parameters: a LoRA run's largest is one adapter tensor (bf16),
    # not the frozen embedding the model's largest layer is
    got = terms(lora(), 4, {"stage": 3})
    assert got["gathered_grad"] == 2 * ADAPTER
    # the adapters' sizes unknown: no more than all trainable elements
    got = terms(dataclasses.replace(lora(), largest_trainable_parameter=None), 4, {"stage": 3})
    assert got["gathered_grad"] == 2 * T
    # full training keeps the largest layer
    full = dataclasses.replace(lora(), trainable_parameters=None, largest_trainable_parameter=None, peft=None)
    assert terms(full, 4, {"stage": 3})["gathered_grad"] == 2 * EMBEDDING


def test_stage3_reduce_scatter_copy_holds_at_most_the_trainable_gradients():
    # reduce_scatter_coalesced copies one IPG bucket; only trainable gradients enter it (bf16 communication)
    got = terms(lora(), 4, {"stage": 3})
    assert got["reduce_scatter_copy"] == 2 * T
    # the IPG buffer itself is torch.empty(reduce_bucket_size) at init whatever trains (_setup_for_real_optimizer)
    assert got["ipg_bucket"] == 2 * RBS
    # a full model larger than the bucket: one full bucket; smaller: the whole model's gradients
    full = dataclasses.replace(lora(), trainable_parameters=None, largest_trainable_parameter=None, peft=None)
    assert terms(full, 4, {"stage": 3})["reduce_scatter_copy"] == 2 * RBS
    small = ModelSpec(parameters=335_000_000, hidden_size=1024, vocab_size=30522, num_layers=24,
                      num_attention_heads=16)
    assert terms(small, 4, {"stage": 3})["reduce_scatter_copy"] == 2 * 335_000_000


def test_stage3_offload_pins_trainable_buffers_and_frozen_partitions_one_by_one():
    zero = {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True},
            "offload_param": {"device": "cpu", "pin_memory": True}}
    host = terms(lora(), 2, zero, device="cpu")
    # _create_param_groups_fp16_flat_cpu_memory (trainable_param_groups) and grad_partitions_flat_buffer
    # (fp16_groups): T/2 elements each, 2^22 -> 2^23 B (bf16) and 2^24 B (fp32 accumulation): powers of two,
    # nothing rounded (today: the whole base, 6.7 GB per buffer rounded up to 8 GiB)
    assert "pinned_rounding:lp_params" not in host
    assert "pinned_rounding:lp_grads" not in host
    # the frozen base stays in zero.Init's per-parameter pinned partitions (partition_parameters.py
    # _partition_param), each its own power-of-two block
    frozen = sum(count * (p2(2 * -(-n // 2)) - 2 * -(-n // 2)) for n, count in SIZES)
    assert frozen == 96 * (2**26 - 2 * H * F // 2) + 2 * (2**27 - EMBEDDING)
    assert host["pinned_rounding:frozen_params"] == frozen


def test_stage2_offload_staging_buffers_hold_the_largest_trainable_parameter():
    # stage_1_and_2.py __init__: largest_param_numel over bit16_groups (the trainable parameters)
    zero = {"stage": 2, "offload_optimizer": {"device": "cpu"}}
    assert terms(lora(), 2, zero)["offload_gpu_staging"] == 2 * ADAPTER
    assert terms(lora(), 2, zero, device="cpu")["offload_cpu_staging"] == 2 * ADAPTER


def test_stage0_allreduce_bucket_holds_the_trainable_gradients():
    # engine.py buffered_allreduce_fallback flattens the gradients that exist: min(T, MEMORY_OPT_ALLREDUCE_SIZE)
    assert terms(lora(), 2, {"stage": 0})["allreduce_bucket"] == 2 * T


def test_nvme_optimizer_swap_buffers_sized_by_the_trainable_partition():
    # OptimizerSwapper buffers: buffer_count (4) x the largest sub-group of the trainable partition T/2, fp32
    zero = {"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"}}
    assert terms(lora(), 2, zero, device="cpu")["optimizer_swap_buffers"] == 4 * 4 * (T // 2)



def test_peft_records_the_largest_adapter_tensor():
    # peft's LoRA Linear: lora_A (r x in_features) and lora_B (out_features x r); modules_to_save copies whole
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": V, "hidden_size": H,
              "intermediate_size": F, "num_hidden_layers": LAYERS, "num_attention_heads": 32,
              "num_key_value_heads": 32}
    spec = spec_from_hf_config(config)
    modules = layout_from_hf_config(config)[2]
    adapters = apply(spec, modules, PeftSettings(method="lora", r=16, target_modules=("q_proj", "v_proj")))
    assert adapters.trainable_parameters == T
    assert adapters.largest_trainable_parameter == ADAPTER
    saved = apply(spec, modules, PeftSettings(method="lora", r=16, target_modules=("q_proj",),
                                              modules_to_save=("lm_head",)))
    assert saved.largest_trainable_parameter == EMBEDDING  # the trainable copy of the 32000 x 4096 head



def test_load_phase_staging_buffers_hold_the_largest_trainable_parameter():
    # the same temp_grad_buffer_for_{cpu,gpu}_offload, where deepspeed.initialize returns (memory/phases.py)
    ds = {"bf16": {"enabled": True}, "optimizer": {"type": "AdamW"},
          "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    s = read_settings(ds, lora(), 2)
    option, _ = configured_option(s)
    phase = load_phase(lora(), s, option, Cluster(gpus=2), LoadInputs(load_dtype="bf16"))
    initialized = next(m for m in phase.moments if m.name == "initialized")
    staging = [t.nbytes for t in initialized.every_rank + initialized.rank0 if t.key == "grad_staging"]
    assert staging == [2 * ADAPTER, 2 * ADAPTER]  # host and GPU, bf16


def test_qgz_buffers_sized_by_the_largest_trainable_gradient():
    # stage3.py __avg_scatter_grads -> all_to_all_quant_reduce over the bucket's gradients (trainable only): int4
    # copy + receive n/2 + n/2 B, then n/(2g) + n/(2g) + 2n/g B for g GPUs on the node, n one adapter tensor
    got = terms(lora(), 4, {"stage": 3, "zero_quantized_gradients": True})
    g = 4  # Cluster(gpus=4): one node of 4
    assert got["qgz_all_to_all"] == ADAPTER + ADAPTER // g + 2 * ADAPTER // g
