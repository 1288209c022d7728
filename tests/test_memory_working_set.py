"""ZeRO-3's gathered working set: the coordinator's replay (memory/working_set.py) and the bound the estimate
uses (memory/buffers.py gathered_terms)."""

from __future__ import annotations

from zeroadvisor.memory.working_set import Trace, layered_trace, peak, split_layers, stage3_peak

H, F, V, LAYERS = 64, 176, 1000, 6
LAYER = [H * H, H * H // 4, H * H // 4, H * H, H * F, H * F, F * H, H, H]  # q k v o gate up down ln ln
LLAMA = [V * H] + LAYER * LAYERS + [H, V * H]
BIG = 10**12


def test_layers_are_found_between_the_embedding_and_the_head():
    assert split_layers(LLAMA, LAYERS) == (1, len(LAYER), 2)
    assert split_layers([5, 1, 2, 3], 2) is None  # no two identical blocks


def test_without_prefetch_only_the_current_module_is_gathered():
    # bucket 0, no reuse window: each module's parameter is freed after use; the peak is the largest one
    got = stage3_peak(LLAMA, LAYERS, True, False, H, BIG, 0, BIG, 0)
    assert got is not None and got.elements == V * H


def test_prefetch_builds_up_to_max_live_plus_one_parameter():
    # a bucket smaller than any Linear still prefetches one parameter per module entered; the norms (persistent)
    # enter too without consuming, so the lead grows until max_live stops it: the peak overshoots max_live by
    # at most one parameter and is far above "largest + bucket"
    max_live = 3 * H * F
    got = stage3_peak(LLAMA, LAYERS, True, False, H, BIG, 1, max_live, 0)
    assert got is not None
    assert max_live < got.elements <= max_live + V * H
    assert got.elements > V * H + 1


def test_reuse_distance_keeps_a_recomputed_layer_gathered_through_its_backward():
    one_layer = sum(LAYER)
    n = [H] + LAYER * 2  # a persistent first parameter: the layers alone are gathered
    # no prefetch: with a window of two layers the recompute's parameters stay until their backward use
    kept = stage3_peak(n, 2, True, False, H, BIG, 0, BIG, 2 * one_layer)
    freed = stage3_peak(n, 2, True, False, H, BIG, 0, BIG, 0)
    assert kept is not None and freed is not None
    assert freed.elements == H * F  # one module at a time: the largest Linear
    assert kept.elements >= one_layer - 2 * H  # the whole layer but its (persistent) norms


def test_coalesced_prefetch_holds_the_flat_buffer_beside_the_copies():
    # two parameters prefetched in one call: all_gather_coalesced's flat buffer lives until both are used
    trace = Trace((10, 10, 10), ((0,), (1,), (2,)), frozenset())
    got = peak(trace, prefetch_bucket=20, max_live=100, max_reuse=0)
    assert got.transient == 20 and got.elements == 40  # 0, 1, 2 gathered + the flat buffer of 1 and 2


def test_tied_head_reuses_the_embedding_after_the_last_layer():
    trace = layered_trace([V * H] + LAYER * 2 + [H], 2, False, True, frozenset())
    assert trace is not None and trace.modules[1 + 2 * len(LAYER) + 1] == (0,)
