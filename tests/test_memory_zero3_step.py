"""ZeRO-3's optimizer step (memory/step_temporaries.py sub_group_gradient), against DeepSpeed 0.19.8's stage3.py
and the CPU measurement in benchmarks/zero3_step.json (benchmarks/calibrate_zero3_step.py).

stage3.py step(): for each sub-group, _prepare_fp32_grad_for_sub_group builds
``flatten(averaged_gradients[i]).to(fp32)`` (a cat copy in the gradient dtype, then the fp32 copy where that dtype
is not fp32), the optimizer steps it and _release_sub_group frees it. All of it happens after backward has freed
the activations, so it is one step term, not a gradient held beside the activations.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.step_temporaries import GRAD_KEY, KEY
from zeroadvisor.model.spec import Checkpointing, ModelSpec, TrainingShape

P, N = 7_000_000_000, 8
PART = P // N  # 875,000,000 < sub_group_size 1e9: one sub-group
SPEC = ModelSpec(parameters=P, largest_layer_parameters=200_000_000)
FUSED = TrainingShape(optim="adamw_torch_fused")  # no optimizer temporaries: the gradient alone
MEASURED = json.loads((Path(__file__).resolve().parents[1] / "benchmarks" / "zero3_step.json").read_text())


def zero3(precision="bf16", **zero):
    config = {"zero_optimization": {"stage": 3, **zero}}
    if precision != "fp32":
        config[precision] = {"enabled": True}
    return config


def configured(config, spec=SPEC, shape=FUSED, gpus=N):
    est = estimate(config, spec, shape, Cluster(gpus=gpus))
    return next(s for s in est.stages if s.configured)


def train_gpu(st, key=None, row=None):
    return sum(t.nbytes for t in st.terms if t.device == "gpu" and t.phase == "train"
               and (key is None or t.key == key) and (row is None or t.row == row))


def test_bf16_builds_the_fp32_gradient_beside_its_bf16_cat_copy():
    # flatten(bf16 views) = 2 B × sub, then .to(fp32) = 4 B × sub while the cat copy is alive: 6 B × sub
    st = configured(zero3())
    assert train_gpu(st, GRAD_KEY) == 6 * PART
    # the gradients row: the bf16 flat partition buffer (2 B) and the step's gradient, nothing else
    assert train_gpu(st, row="gradients") == 2 * PART + 6 * PART


def test_fp32_gradients_make_one_copy():
    # fp32 grads: the cat copy is the fp32 gradient (.to(fp32) returns it): 4 B × sub
    st = configured(zero3("fp32"))
    assert train_gpu(st, GRAD_KEY) == 4 * PART
    # fp32 gradient accumulation under bf16: the same one copy
    st = configured({**zero3(), "data_types": {"grad_accum_dtype": "fp32"}})
    assert train_gpu(st, GRAD_KEY) == 4 * PART


def test_one_sub_group_at_a_time():
    st = configured(zero3(sub_group_size=100_000_000))
    assert train_gpu(st, GRAD_KEY) == 6 * 100_000_000


def test_the_foreach_temporary_coexists_with_the_gradient_not_its_cat_copy():
    # build: 2 + 4 B; step: 4 B gradient + 4 B foreach sqrt: max(6, 8) = 8 B × sub, 2 of them the temporary's
    st = configured(zero3(), shape=TrainingShape(optim="adamw_torch"))
    assert train_gpu(st, GRAD_KEY) == 6 * PART
    assert train_gpu(st, KEY) == 2 * PART


def test_the_activations_freed_before_the_step_absorb_the_gradient():
    model = ModelSpec(parameters=P, largest_layer_parameters=200_000_000, num_layers=32, hidden_size=4096,
                      vocab_size=32000, num_attention_heads=32, intermediate_size=11008)
    shape = TrainingShape(sequence_length=4096, micro_batch_size=8, activation_checkpointing=Checkpointing.NONE,
                          optim="adamw_torch_fused")
    st = configured(zero3(), spec=model, shape=shape)
    activations = st.per_gpu["activations"]
    assert activations > 6 * PART  # the step's gradient fits in what backward freed
    assert train_gpu(st, GRAD_KEY) == 0
    assert train_gpu(st, row="gradients") == 2 * PART  # only the bf16 partition buffer beside the activations
    # with fewer activations than the gradient, only the excess is counted
    small = TrainingShape(sequence_length=1024, micro_batch_size=1, activation_checkpointing=Checkpointing.FULL,
                          optim="adamw_torch_fused")
    st = configured(zero3(), spec=model, shape=small)
    assert 0 < st.per_gpu["activations"] < 6 * PART
    assert train_gpu(st, GRAD_KEY) == 6 * PART - st.per_gpu["activations"]


@pytest.mark.parametrize("offload", ["cpu", "nvme"])
def test_an_offloaded_optimizer_builds_no_gpu_gradient_in_the_step(offload):
    st = configured(zero3(offload_optimizer={"device": offload}))
    assert train_gpu(st, GRAD_KEY) == 0


def test_offloaded_parameters_still_step_on_the_gpu():
    st = configured(zero3(offload_param={"device": "cpu"}))
    assert train_gpu(st, GRAD_KEY) == 6 * PART


def test_stage2_builds_the_partitions_gradient_in_the_step_too():
    # stage_1_and_2.py step(): flatten(averaged_gradients) (a bf16 cat copy), .to(fp32), del the copy; freed after
    # the step: a step term (no activations here to free first), no longer a model state beside the activations
    st = configured({"bf16": {"enabled": True}, "zero_optimization": {"stage": 2}})
    assert train_gpu(st, GRAD_KEY) == (2 + 4) * PART
    assert not [t for t in st.terms if t.key == "step12_fp32_grads"]


@pytest.mark.parametrize("case", MEASURED["cases"], ids=lambda c: "{precision}-{optim}-{sub_group_size}".format(
    **c["case"]))
def test_the_cpu_measurement(case):
    """The estimate's step terms for the measured run (no activations) against the largest peak measured inside
    one sub-group's prepare..release (the profiler counts a few dozen bytes of bookkeeping beside them)."""
    c, m = case["case"], case["measured"]
    assert m["grad_dtype"] == ("torch.bfloat16" if c["precision"] == "bf16" else "torch.float32")
    config = zero3(c["precision"], sub_group_size=c["sub_group_size"], stage3_param_persistence_threshold=0)
    optim = "adamw_torch_fused" if c["optim"] == "fused" else "adamw_torch"
    spec = ModelSpec(parameters=sum(m["sub_groups"]), largest_layer_parameters=m["largest_param_partition"])
    st = configured(config, spec=spec, shape=TrainingShape(optim=optim), gpus=1)
    counted = train_gpu(st, GRAD_KEY) + train_gpu(st, KEY)
    measured = max(m["sub_group_peaks"])
    assert counted <= measured <= counted + 1024
    # before the loop: the norms' fp64 copy of one parameter's partition at a time (get_grad_norm_direct)
    assert 8 * m["largest_param_partition"] <= m["pre_loop_peak"] <= 8 * m["largest_param_partition"] + 1024


def test_the_norms_fp64_copy_bounds_the_step_of_small_sub_groups():
    # sub-groups of 1e7 elements under a 5e8-element embedding on 8 GPUs: the fp64 copy of the embedding's
    # partition (8 B × 6.25e7) exceeds building a sub-group's gradient (6 B × 1e7)
    spec = ModelSpec(parameters=P, largest_layer_parameters=500_000_000, parameter_numels=(500_000_000,) * 14)
    st = configured(zero3(sub_group_size=10_000_000), spec=spec)
    assert train_gpu(st, GRAD_KEY) == 8 * 500_000_000 // N


def test_a_sub_group_can_pass_sub_group_size_by_a_parameter():
    # _create_fp16_sub_groups closes a sub-group at the first parameter that reaches sub_group_size: expected
    # 1e8 elements, at most 1e8 - 1 + the largest parameter's partition (5e8 / 8)
    spec = ModelSpec(parameters=P, largest_layer_parameters=500_000_000, parameter_numels=(500_000_000,) * 14)
    st = configured(zero3(sub_group_size=100_000_000), spec=spec)
    (term,) = [t for t in st.terms if t.key == GRAD_KEY and t.phase == "train"]
    assert term.nbytes == 6 * 100_000_000
    assert term.upper == 6 * (100_000_000 - 1 + 500_000_000 // N)
    # one sub-group (sub_group_size above the partition): nothing to pass
    (term,) = [t for t in configured(zero3(), spec=spec).terms if t.key == GRAD_KEY and t.phase == "train"]
    assert term.upper == term.nbytes == 6 * PART
