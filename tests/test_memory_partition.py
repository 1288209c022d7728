"""Stage 1/2 parameter layout (zeroadvisor/memory/partition.py) against hand-worked DeepSpeed 0.19.8 partitions.

Rules (deepspeed/runtime/zero/stage_1_and_2.py): the trainable parameters are flattened in order and
padded to a multiple of 2·N (flatten_dense_tensors_aligned / align_dense_tensors); partition_size =
flat // N; a parameter is in rank r's partition if it starts in [r·part, (r+1)·part) or starts before
and runs into it (get_partition_info, first_offset). grads_in_partition holds the touching parameters
whole (copy_grads_in_partition); step() flattens the partition's pieces, a view when there is one piece
that fills the partition (get_flat_partition + flatten), and a rank with no parameter flattens one
zero buffer of the partition size.
"""

from __future__ import annotations

import pytest

from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.partition import layout_stage12, step_gradient_elements
from zeroadvisor.memory.states import LAYOUT_NOT_MODELLED
from zeroadvisor.model.spec import ModelSpec, TrainingShape

# Three parameters A=5, B=6, C=7 elements (18 in all): A = [0,5), B = [5,11), C = [11,18).
SIZES = (5, 6, 7)


def test_two_ranks_by_hand():
    # N=2: alignment 4 -> flat 20 (2 padding elements), partition 10.
    #   rank 0 = [0,10):  A starts at 0, B starts at 5          -> touched 5+6 = 11, 2 params, offset 0
    #   rank 1 = [10,20): B starts at 5 < 10 < 11 (offset 5), C starts at 11 -> touched 6+7 = 13
    #            pieces: B[5:6] (1) + C (7) = 8 < 10 -> zero pad appended: a copy
    L = layout_stage12(SIZES, 2, element_size=4)
    assert (L.flat, L.partition) == (20, 10)
    assert [(r.touched, r.params, r.first_offset, r.single_tensor) for r in L.ranks] == [
        (11, 2, 0, False), (13, 2, 5, False)]
    # fp32 (4 B grads, 4 B master): step holds grads_in_partition + a 10-element copy on both ranks
    assert [step_gradient_elements(r, 4, 4) for r in L.ranks] == [(11, 10), (13, 10)]


def test_four_ranks_by_hand():
    # N=4: alignment 8 -> flat 24 (6 padding elements), partition 6.
    #   rank 0 = [0,6):   A starts 0, B starts 5                      -> touched 11, 2 params
    #   rank 1 = [6,12):  B 5 < 6 < 11 (offset 1), C starts 11         -> touched 13, 2 params
    #   rank 2 = [12,18): C 11 < 12 < 18 (offset 1), 6 elements fill it -> touched 7, 1 param, one piece: view
    #   rank 3 = [18,24): padding only, no parameter                   -> zero buffer of 6 (view of it)
    L = layout_stage12(SIZES, 4, element_size=4)
    assert (L.flat, L.partition) == (24, 6)
    assert [(r.touched, r.params, r.first_offset, r.single_tensor) for r in L.ranks] == [
        (11, 2, 0, False), (13, 2, 1, False), (7, 1, 1, True), (0, 0, 0, True)]
    # fp32: (grads_in_partition elements, fp32 copy elements)
    assert [step_gradient_elements(r, 4, 4) for r in L.ranks] == [(11, 6), (13, 6), (7, 0), (6, 0)]
    # bf16 model, fp32 master: .to(fp32) always copies
    assert [step_gradient_elements(r, 2, 4) for r in L.ranks] == [(11, 6), (13, 6), (7, 6), (6, 6)]


def test_last_rank_single_parameter_with_padding_is_a_copy():
    # Sizes 4, 9 (13), N=2: alignment 4 -> flat 16, partition 8.
    #   rank 1 = [8,16): the 9-element parameter [4,13) runs in (offset 4) but gives only 5 elements;
    #   3 zeros are appended -> two pieces -> copy even in fp32 (and the padding is in no parameter).
    L = layout_stage12((4, 9), 2, element_size=4)
    assert L.partition == 8
    assert [(r.touched, r.single_tensor) for r in L.ranks] == [(13, False), (9, False)]
    assert [step_gradient_elements(r, 4, 4) for r in L.ranks] == [(13, 8), (9, 8)]


def test_one_rank_is_the_whole_group():
    L = layout_stage12(SIZES, 1, element_size=4)
    assert (L.flat, L.partition) == (18, 18)
    assert step_gradient_elements(L.ranks[0], 4, 4) == (18, 18)


def test_parameter_alignment_and_round_robin():
    # parameter_alignment (fp32: 16 // gcd(16, 4) = 4): pad A to 8 and B to 12 -> A [0,5), B [8,14),
    # C [16,23); total 23 -> flat 24 with N=2, partition 12.
    #   rank 0 = [0,12): A, B (starts 8) -> 11;  rank 1 = [12,24): B 8<12<14 (offset 4), C -> 13
    L = layout_stage12(SIZES, 2, element_size=4, parameter_alignment=True)
    assert (L.flat, L.partition) == (24, 12)
    assert [(r.touched, r.first_offset) for r in L.ranks] == [(11, 0), (13, 4)]
    # round_robin_gradients, N=2: order A, C, B (indices 0, 2 | 1) -> A [0,5), C [5,12), B [12,18);
    # flat 20, partition 10: rank 0 A, C -> 12; rank 1 C (offset 5), B -> 13
    L = layout_stage12(SIZES, 2, element_size=4, round_robin_gradients=True)
    assert [(r.touched, r.first_offset) for r in L.ranks] == [(12, 0), (13, 5)]


FP32_Z2 = {"optimizer": {"type": "AdamW"}, "zero_optimization": {"stage": 2}}


def _grads(numels, gpus, config=FP32_Z2, parameters=18):
    spec = ModelSpec(parameters=parameters, parameter_numels=numels)
    st = estimate(config, spec, TrainingShape(), Cluster(gpus=gpus)).stage(2)
    return st, sum(t.nbytes for t in st.terms if t.row == "gradients")


def test_estimate_takes_the_worst_rank():
    # N=4 fp32 above: ranks hold 4·(11+6)=68, 4·(13+6)=76, 4·7=28, 4·6=24 B -> worst rank 1: 4·13 touched + the
    # step's 4·6; the step's share is now the larger of that fp32 gradient and the gradient norm's fp64 copy of the
    # largest parameter's piece (get_grad_norm_direct: 8 B × min(7, 6) = 48 > 24), with no activations to reuse
    st, grads = _grads(SIZES, 4)
    assert grads == 4 * 13 + 8 * 6
    assert LAYOUT_NOT_MODELLED not in st.notes
    # N=2: 4·(11+10)=84, 4·(13+10)=92 -> 4·13 + max(4·10, 8·min(7, 10)) = 108 B
    assert _grads(SIZES, 2)[1] == 4 * 13 + 8 * 7


def test_without_numels_unchanged():
    # P/N as before: part = ceil(18 / 8)·2 = 6 at N=4 -> 4·6 + 4·6 = 48 B, and the assumption is stated
    st, grads = _grads(None, 4)
    assert grads == 48
    assert LAYOUT_NOT_MODELLED in st.notes
    # one rank: nothing to say
    assert LAYOUT_NOT_MODELLED not in _grads(None, 1)[0].notes


@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_no_numels_is_today_p_over_n(gpus):
    # today's stage-2 bf16 step gradients: 2 B grads_in_partition + 4 B fp32 copy on part = ceil(P / 2N)·2, and the
    # 2 B cat copy the fp32 one is cast from (no activations to reuse: memory/step_temporaries.py)
    P = 7_000_001
    part = -(-P // (2 * gpus)) * 2
    config = {"bf16": {"enabled": True}, "optimizer": {"type": "AdamW"}, "zero_optimization": {"stage": 2}}
    for spec in (ModelSpec(parameters=P), ModelSpec(parameters=P, parameter_numels=None)):
        st = estimate(config, spec, TrainingShape(), Cluster(gpus=gpus)).stage(2)
        assert sum(t.nbytes for t in st.terms if t.row == "gradients") == (2 + 4 + 2) * part


def test_numels_not_matching_the_count_fall_back():
    st, grads = _grads((5, 6), 4)  # 11 != 18
    # P/N: 4·6 grads_in_partition, then the step's larger of its fp32 gradient (4·6) and the norm's fp64 copy of the
    # largest parameter's piece (8·min(6, 6))
    assert grads == 4 * 6 + 8 * 6
    assert any("parameter_numels sum to 11" in n for n in st.notes)
