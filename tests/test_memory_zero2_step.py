"""ZeRO-2's optimizer step (memory/step_temporaries.py sub_group_gradient, stage 2), against DeepSpeed 0.19.8's
stage_1_and_2.py and the CPU measurement in benchmarks/zero2_step.json (benchmarks/calibrate_zero2_step.py).

step() builds ``single_grad_partition = flatten(averaged_gradients).to(master dtype)`` after backward (a 16-bit cat
copy, then the fp32 copy where the dtypes differ), steps the optimizer and frees it. The estimate counted it as a
model state held beside the activations, and without the cat copy: 4 B/element where bf16 measures 6 before
the activations are subtracted, and the whole 4 B on top of them after.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from conftest import load_script
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.states import STEP1_FREED_KEY
from zeroadvisor.memory.step_temporaries import BOUNDARY_NORM_KEY, GRAD_KEY, KEY
from zeroadvisor.model.spec import Checkpointing, ModelSpec, TrainingShape

MEASURED = json.loads((Path(__file__).resolve().parents[1] / "benchmarks" / "zero2_step.json").read_text())
P, N = 7_000_000_000, 8
PART = P // N  # a multiple of 2·N: no alignment padding
LLAMA7B = ModelSpec(parameters=P, largest_layer_parameters=200_000_000, num_layers=32, hidden_size=4096,
                    vocab_size=32000, num_attention_heads=32, intermediate_size=11008)


def zero2(precision="bf16", stage=2):
    config = {"zero_optimization": {"stage": stage}}
    if precision != "fp32":
        config[precision] = {"enabled": True}
    return config


def configured(config, spec, shape, gpus):
    est = estimate(config, spec, shape, Cluster(gpus=gpus))
    return next(s for s in est.stages if s.configured)


def train_gpu(st, key):
    return sum(t.nbytes for t in st.terms if t.phase == "train" and t.device == "gpu" and t.key == key)


def measured_run(case):
    c, m = case["case"], case["measured"]
    assert m["grad_dtype"] == ("torch.bfloat16" if c["precision"] == "bf16" else "torch.float32")
    optim = "adamw_torch_fused" if c["optim"] == "fused" else "adamw_torch"
    spec = ModelSpec(parameters=m["partition"] * c["ranks"], largest_layer_parameters=m["largest_param"])
    return configured(zero2(c["precision"], c.get("stage", 2)), spec, TrainingShape(optim=optim), gpus=c["ranks"])


def case_id(c):
    return "z{stage}x{ranks}-{model}-{precision}-{optim}".format(**{"stage": 2, **c["case"]})


@pytest.mark.parametrize("case", MEASURED["cases"], ids=case_id)
def test_the_cpu_measurement(case):
    """The estimate's step terms for the measured run (no activations) against the step's peak beyond its start
    (the profiler counts a few dozen bytes of bookkeeping beside them). The one-large-parameter case is bound by
    the gradient norm's fp64 copy of that parameter (8 B × 8,388,608), above the flatten's 6 B × the partition.
    Stage 1 over 2 ranks: backward's gradients of the other rank's parameters are freed before step() begins, so
    the step's peak beyond its start is its terms plus those (STEP1_FREED_KEY), which the step reuses."""
    m = case["measured"]
    st = measured_run(case)
    counted = train_gpu(st, GRAD_KEY) + train_gpu(st, KEY) + train_gpu(st, STEP1_FREED_KEY)
    assert counted <= m["step_peak_extra"] <= counted + 1024
    assert train_gpu(st, "fp32_grads") == train_gpu(st, "step12_fp32_grads") == 0  # not a model state any more


@pytest.mark.parametrize("case", MEASURED["cases"], ids=case_id)
def test_the_gradients_peak_over_the_step(case):
    """The gradients' peak (what is held when step() begins + the step's peak beyond it) against all the estimate's
    gradient terms. Stage 1 used to keep the larger of the full-size gradients and the 16-bit + fp32 partitions as
    a model state and never counted the flatten's cat copy: bf16 at one rank 50,331,648 B where 67,108,873 are
    measured, over 2 ranks 25,165,824 where 33,554,440 are."""
    m = case["measured"]
    st = measured_run(case)
    counted = sum(train_gpu(st, key) for key in ("lp_grads", STEP1_FREED_KEY, GRAD_KEY, KEY))
    assert train_gpu(st, "lp_grads") == m["held_at_step"]  # what the step finds alive, exact
    assert counted <= m["held_at_step"] + m["step_peak_extra"] <= counted + 1024


def test_the_norms_fp64_copy_bounds_the_step_of_a_partition_inside_a_large_parameter():
    # 64 GPUs: a rank's partition (7e9 / 64 = 109,375,000) lies inside a 500M-element embedding; get_grad_norm_direct's
    # fp64 copy of that piece (8 B × the partition) exceeds the flatten's bf16 copy + fp32 gradient (6 B)
    spec = ModelSpec(parameters=P, largest_layer_parameters=500_000_000)
    st = configured(zero2(), spec, TrainingShape(optim="adamw_torch_fused"), 64)
    assert train_gpu(st, GRAD_KEY) == 8 * (P // 64)
    # 8 GPUs: the embedding's piece (500M) is under the partition (875M): 8 × 500M < 6 × 875M, the flatten decides
    assert train_gpu(configured(zero2(), spec, TrainingShape(optim="adamw_torch_fused"), N), GRAD_KEY) == 6 * PART


def test_the_step_gradient_reuses_the_activations_freed_before_it():
    shape = TrainingShape(sequence_length=4096, micro_batch_size=2, activation_checkpointing=Checkpointing.NONE,
                          optim="adamw_torch_fused")
    st = configured(zero2(), LLAMA7B, shape, N)
    activations = st.per_gpu["activations"]
    assert activations > 6 * PART  # the step's working set fits in what backward freed
    assert train_gpu(st, GRAD_KEY) == 0
    # with fewer activations than the step builds, only the excess is counted
    short = configured(zero2(), LLAMA7B, TrainingShape(sequence_length=256, micro_batch_size=1,
                                                       activation_checkpointing=Checkpointing.FULL,
                                                       optim="adamw_torch_fused"), N)
    assert 0 < short.per_gpu["activations"] < 6 * PART
    assert train_gpu(short, GRAD_KEY) == 6 * PART - short.per_gpu["activations"]


def test_stage1_steps_beyond_the_activations_and_the_gradients_freed_before_it():
    shape = TrainingShape(optim="adamw_torch_fused")  # no sequence length: no activations
    st = configured(zero2(stage=1), LLAMA7B, shape, N)
    # after backward: every parameter's bf16 gradient (2 B × P), the partition's kept to the step
    assert train_gpu(st, "lp_grads") + train_gpu(st, STEP1_FREED_KEY) == 2 * P
    assert train_gpu(st, "lp_grads") == 2 * PART
    # 8 GPUs: the 2 B × 7/8 P freed before the step hold its bf16 cat copy + fp32 partition (6 B × P/8)
    assert train_gpu(st, GRAD_KEY) == 0
    # 2 GPUs: 6 B × P/2 built where 2 B × P/2 were freed: 4 B × P/2 beyond them
    two = configured(zero2(stage=1), LLAMA7B, shape, 2)
    assert train_gpu(two, GRAD_KEY) == 4 * (P // 2)
    assert train_gpu(two, "fp32_grads") == train_gpu(two, "step12_fp32_grads") == 0


# -- the accumulation boundary's norm with the optimizer offloaded ------------------------------------------------

def _offloaded(precision="fp16"):
    config = zero2(precision)
    config["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}
    return config


def _boundary(st):
    return train_gpu(st, BOUNDARY_NORM_KEY)


@pytest.mark.parametrize("tied", [False, True])
def test_offload_boundary_norm_copy(tied):
    """stage_1_and_2.py copy_grads_in_partition (offload, at the boundary): set_norm_for_param_grad_in_gpu reads each
    gradient piece of the rank's partition as fp64 (get_norm_dtype) beside the parameter's 16-bit gradient, in
    backward. An untied LM head is reduced first, with every layer's kept tensors live; a tied embedding last."""
    h, V, L, s = 4096, 128256, 32, 2001
    spec = ModelSpec(parameters=8_030_261_248, largest_layer_parameters=V * h, num_layers=L, hidden_size=h,
                     vocab_size=V, num_attention_heads=32, num_key_value_heads=8, intermediate_size=14336,
                     tied_embeddings=tied, lm_head=True, parameter_numels=(V * h,) * (1 if tied else 2))
    shape = TrainingShape(sequence_length=s, activation_checkpointing=Checkpointing.FULL, flash_attention=True)
    st = configured(_offloaded(), spec, shape, gpus=8)
    act = train_gpu(st, "activations") + train_gpu(st, "allreduce_bucket")  # both freed before the norms run
    # the LM head/embedding is larger than the bucket but inside one rank's partition: a straddling bucket is the
    # copy; the loss's tensors are freed before it, so it is expected beyond the activations' peak only by what
    # exceeds them, and bounded by itself
    (copy,) = [t for t in st.terms if t.key == "allreduce_bucket"]
    assert copy.upper == 2 * 500_000_000 and copy.nbytes < copy.upper
    kept = 0 if tied else L * s * h * 2  # the layer inputs under full recomputation (and small bits outside them)
    norm, grad = 8 * V * h, 2 * V * h  # the largest parameter lies inside one rank's 1B-element partition
    assert _boundary(st) >= max(0, norm + grad + kept - act)
    assert _boundary(st) <= max(0, norm + grad + kept - act) + L * s * h  # outside the layers: ids, the final norm
    if tied:
        assert _boundary(st) == norm + grad - act
    # without the offload the step's own norm copy is counted (step_terms); nothing in backward
    assert _boundary(configured(zero2("fp16"), spec, shape, gpus=8)) == 0
    # a LoRA run's largest gradient is an adapter's: the copy is small, and nothing is counted beyond activations
    assert _boundary(configured(_offloaded(), dataclasses.replace(spec, trainable_parameters=20_000_000,
                                                                  largest_trainable_parameter=4096 * 16),
                                shape, gpus=8)) == 0


def test_older_releases_test_the_whole_gradient_for_overflow_and_move_the_fp32_partition_to_the_gpu():
    """DeepSpeed 0.13.3-0.19.5 run _has_inf_or_nan elementwise on each partition parameter's whole 16-bit gradient
    at the boundary (fp32 copy, three bool masks, an fp32 copy of the last: 11 B/element), after the fp64 norm of its
    piece: the larger of the two is live (measured on CPU with 0.16.9: benchmarks/zero2_reduce.md). 0.14.1-0.16.9's
    step moves the stepped fp32 partition to the GPU before the 16-bit copy (memory/ds_changes.py)."""
    from zeroadvisor.deepspeed.schema import reading_as
    from zeroadvisor.memory.step_temporaries import OFFLOAD_STEP_COPY_KEY

    h, V, L, s = 4096, 128256, 32, 1001
    spec = ModelSpec(parameters=8_030_261_248, largest_layer_parameters=V * h, num_layers=L, hidden_size=h,
                     vocab_size=V, num_attention_heads=32, num_key_value_heads=8, intermediate_size=14336,
                     tied_embeddings=True, lm_head=True, parameter_numels=(V * h,))
    shape = TrainingShape(sequence_length=s, activation_checkpointing=Checkpointing.FULL, flash_attention=True)
    latest = configured(_offloaded(), spec, shape, gpus=8)
    with reading_as("0.16.9"):
        old = configured(_offloaded(), spec, shape, gpus=8)
    with reading_as("0.17.0"):
        newer = configured(_offloaded(), spec, shape, gpus=8)
    act = train_gpu(latest, "activations") + train_gpu(latest, "allreduce_bucket")
    # a tied embedding is reduced last, with nothing of the layers live: the whole 525M gradient is the check's
    assert _boundary(latest) == 8 * V * h + 2 * V * h - act
    assert _boundary(newer) == 11 * V * h + 2 * V * h - act
    (check,) = [t for t in newer.terms if t.key == BOUNDARY_NORM_KEY and t.phase == "train"]
    assert "overflow check" in check.what and "0.13.3 to 0.19.5" in check.what
    # the step's fp32 partition on the GPU: 4 B/param / N beyond the activations, in 0.14.1-0.16.9 only
    part = -(-8_030_261_248 // (2 * 8)) * 2  # partition_stage12: aligned to 2 elements per rank
    assert train_gpu(old, OFFLOAD_STEP_COPY_KEY) == 4 * part - train_gpu(old, "activations")
    assert train_gpu(newer, OFFLOAD_STEP_COPY_KEY) == 0 == train_gpu(latest, OFFLOAD_STEP_COPY_KEY)
    # the step and backward's boundary are moments apart: the train peak is the larger (here the boundary's)
    assert act + train_gpu(old, OFFLOAD_STEP_COPY_KEY) + _boundary(old) == max(13 * V * h, 4 * part)
    # without the offload neither (the step's own norm and gradient are step_terms')
    with reading_as("0.16.9"):
        plain = configured(zero2("fp16"), spec, shape, gpus=8)
    assert _boundary(plain) == 0 == train_gpu(plain, OFFLOAD_STEP_COPY_KEY)


def test_reduction_flat_copy():
    """average_tensor -> allreduce_and_scatter -> allreduce_bucket joins a bucket's slices for several ranks into a
    new tensor (stage_1_and_2.py 0.14-0.19.8; measured in benchmarks/zero2_reduce.md): a full bucket wherever one
    spans two partitions (every run on more than one rank), none on one rank (a single slice is a view), none
    without use_multi_rank_bucket_allreduce (each rank's one range reduced alone) or without reduce_scatter."""
    def copy(**zero):  # the copy in full (its bound): the step's excess, a moment after it, absorbs the expected
        config = zero2("bf16")
        config["zero_optimization"].update(zero)
        return copy_of(configured(config, LLAMA7B, TrainingShape(), gpus=N))

    def copy_of(st):
        return sum(t.upper for t in st.terms if t.key == "allreduce_bucket")

    assert copy() == 2 * 500_000_000  # reduce_bucket_size's default
    assert copy(reduce_bucket_size=2_000_000_000) == 2 * 2_000_000_000
    assert copy(reduce_bucket_size=2_000_000_000, use_multi_rank_bucket_allreduce=False) == 0
    assert copy(reduce_scatter=False) == 0
    assert copy_of(configured(zero2("bf16"), LLAMA7B, TrainingShape(), gpus=1)) == 0
    # a parameter larger than the bucket is reduced alone: copied at its size where it spans two partitions (larger
    # than one), a view of its one slice inside one partition (then a straddling bucket is the copy)
    big = dataclasses.replace(LLAMA7B, largest_layer_parameters=1_000_000_000)
    assert copy_of(configured(zero2("bf16"), big, TrainingShape(), gpus=N)) == 2 * 1_000_000_000
    inside = dataclasses.replace(LLAMA7B, largest_layer_parameters=600_000_000)
    assert copy_of(configured(zero2("bf16"), inside, TrainingShape(), gpus=N)) == 2 * 500_000_000
    # LoRA: only the adapters' gradients are reduced
    lora = dataclasses.replace(LLAMA7B, trainable_parameters=20_000_000, largest_trainable_parameter=4096 * 16)
    assert copy_of(configured(zero2("bf16"), lora, TrainingShape(), gpus=N)) == 2 * 20_000_000
    # expected: a moment apart from the step, it counts only by what it exceeds the step's own excess (here the
    # step's fp32 partition, 6 B/param / N, is larger: nothing beyond it), so the peak is the larger moment
    st = configured(zero2("bf16"), LLAMA7B, TrainingShape(), gpus=N)
    step = train_gpu(st, GRAD_KEY) + train_gpu(st, KEY)
    assert train_gpu(st, "allreduce_bucket") == max(0, 2 * 500_000_000 - step) == 0


REDUCE = json.loads((Path(__file__).resolve().parents[1] / "benchmarks" / "zero2_reduce.json").read_text())
reduce_calibration = load_script("benchmarks/calibrate_zero2_reduce.py", "calibrate_zero2_reduce")


@pytest.mark.parametrize("case", REDUCE["cases"], ids=lambda r: "x{ranks}-{precision}-{off}-rs{rs}".format(
    off="off" if r["case"]["offload"] else "gpu", rs=int(r["case"].get("reduce_scatter", True)), **r["case"]))
def test_the_reduction_measured_on_cpu(case):
    """benchmarks/zero2_reduce.md: the allocations of backward's reduction in DeepSpeed 0.19.8 on CPU, against the
    estimate's two terms (live, not the report's stored column)."""
    c, m = case["case"], case["measured"]
    terms = reduce_calibration.estimate_terms(c)
    w = reduce_calibration.BYTES[c["precision"]]
    large, ranks = reduce_calibration.LARGE, c["ranks"]
    piece = min(large, -(-(large + reduce_calibration.WIDE * 8) // (2 * ranks)) * 2)  # the rank's part of it
    if c["offload"]:  # the fp64 copy of the rank's piece is backward's largest allocation
        assert max(m["largest_allocations"]) == 8 * piece
        if c.get("release"):  # 0.13.3-0.19.5: the overflow check's fp32 copy and bool masks of the whole gradient
            assert {4 * large, large} <= set(m["largest_allocations"])
        # the norm term holds it (with the weight's 16-bit gradient beside it, less the flat copy freed before it)
        assert terms["boundary_norm_copy"] + terms["allreduce_bucket"] + terms["offload_step_fp32_copy"] >= 8 * piece
        # and the whole backward beyond its start is within 5% of the terms (0.14.1-0.16.9's step copy a moment the
        # boundary is counted beyond: the two together are backward's)
        counted = terms["boundary_norm_copy"] + terms["allreduce_bucket"] + terms["offload_step_fp32_copy"]
        assert counted <= m["backward_peak_extra"] <= 1.05 * counted
    else:  # without the offload no fp64 copy: the step's own norm comes later (step_terms)
        assert m["fp64_piece_allocations"] == 0 and terms["boundary_norm_copy"] == 0
        if c.get("reduce_scatter", True):
            # autograd's gradient of the weight, and over 2 ranks the flat copy of its two slices: on one rank the
            # single slice is a view (flatten_dense_tensors), which the estimate does not count either
            assert m["flat_copy_allocations"] == ranks
            assert terms["allreduce_bucket"] == (w * large if ranks > 1 else 0)


def test_an_fp16_step_tests_the_largest_gradient_piece_for_overflow_in_older_releases():
    """Stage 1/2 in fp16 without offload: step() runs check_overflow first (has_overflow_partitioned_grads_serial:
    _has_inf_or_nan on each averaged gradient piece), before the fp64 norm and the flatten; 0.13.3-0.19.5 hold 11 B
    per element of the largest piece there (memory/ds_changes.py OVERFLOW_CHECK), 0.19.6 on nothing. bf16 skips it."""
    from zeroadvisor.deepspeed.schema import reading_as

    h, V = 4096, 128256
    spec = ModelSpec(parameters=8_030_261_248, largest_layer_parameters=V * h, num_layers=32, hidden_size=h,
                     vocab_size=V, num_attention_heads=32, num_key_value_heads=8, intermediate_size=14336,
                     lm_head=True, parameter_numels=(V * h, V * h))
    shape = TrainingShape(sequence_length=1001, activation_checkpointing=Checkpointing.FULL, flash_attention=True)
    piece = -(-8_030_261_248 // (2 * 16)) * 2  # 16 ranks: the partition is smaller than the 525M LM head
    for precision, older in (("fp16", 11 * piece), ("bf16", None)):
        with reading_as("0.16.9"):
            old = configured(zero2(precision), spec, shape, gpus=16)
        new = configured(zero2(precision), spec, shape, gpus=16)
        act = train_gpu(new, "activations")
        if older is None:  # no overflow check outside fp16: the releases agree
            assert train_gpu(old, GRAD_KEY) == train_gpu(new, GRAD_KEY)
            continue
        assert train_gpu(old, GRAD_KEY) == older - act > train_gpu(new, GRAD_KEY) == 8 * piece - act
