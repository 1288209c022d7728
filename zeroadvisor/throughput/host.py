"""DeepSpeed's host-side work per ZeRO-3 module fetch: the hooks that gather and release each module.

ZeRO-3 registers pre/post forward and backward hooks on every module (runtime/zero/parameter_offload.py
setup_zero_stage3_hooks); each fetch runs partitioned_param_coordinator.py fetch_sub_module (trace
bookkeeping, the all-gather launch of the module and the prefetches, the wait) and release_sub_module,
and backward adds the per-parameter gradient hooks (stage3.py reduce_partition_and_remove_grads). That
is Python on the thread that also launches the GPU kernels.

- Cost per fetch: measured by benchmarks/zero3_fetch_overhead.py with real DeepSpeed 0.19.8 on one CPU
  rank (no collective: what the hooks themselves cost), as the slope of ZeRO-3 minus ZeRO-2 step time
  over the module count (benchmarks/zero3_fetch_overhead.json records the machine). A faster host CPU
  takes less, so this is the development machine's figure, not a bound.
- Fetches per micro step: every module with parameters once in the forward pass and once in the
  backward pass, and once more in the recomputed forward under full activation checkpointing
  (the hooks fire on every forward call).
- Overlap: the GPU runs the kernels already queued while the host runs hooks; nothing in the fetch path
  waits for the compute stream (the waits are on the all-gather stream: fetch_sub_module's
  __ongoing_fetch_events), so a pass takes the longer of its compute and its host work: a lower bound,
  since the host also launches the model's own kernels (not counted).
- The wait per fetch (with more than one data-parallel rank): fetch_sub_module launches one
  all_gather_coalesced per module (or prefetch group) on the all-gather stream (__all_gather_params_), then
  makes the compute stream wait for that stream (``current_stream().wait_stream(self.__allgather_stream)``)
  and synchronizes on the oldest fetch event past ``__max_ongoing_fetch_events``. So each module's kernels
  queue behind a collective launch and its completion: a fixed latency per fetch on the compute stream's
  critical path, whatever the bandwidth (NCCL's small-message latency, the event waits). Neither the code nor
  a datasheet gives its size: ZERO3_FETCH_WAIT_S is an allowance, the one parameter fitted on public pairs
  (benchmarks/throughput/fit.py, fit.md: least squares in log ratio over the training half of the source
  groups, checked by leave-one-source-out). On one rank DeepSpeed gathers nothing
  (partition_parameters.py _no_gather_coalesced), so there is no wait.
"""

from __future__ import annotations

from zeroadvisor.model.spec import Checkpointing, ModelSpec

# benchmarks/zero3_fetch_overhead.json "by_ranks" "1" "per_module_fetch_s" (tests check they agree).
ZERO3_FETCH_HOST_S = 321e-6  # 1 rank, slope over 16-256 modules; 2 ranks with gloo: 1264e-6
# benchmarks/throughput/fit.md (fit.py computes it; tests/test_throughput_fit.py checks they agree).
ZERO3_FETCH_WAIT_S = 209e-6  # fit.md: the training half's fit; leave-one-source-out 76-219 us


def modules_with_parameters(model: ModelSpec) -> tuple[int | None, str]:
    """(modules that own parameters, how they were counted); None when the layer count is unknown.

    From the layout when the model was counted from its config (model/hf.py); otherwise a Llama-style
    decoder layer: 4 attention projections, 3 gated (or 2) MLP projections, 2 norms (layer_facts), plus
    the embedding, the final norm and the LM head; an encoder-decoder's decoder layers add cross-attention
    (4 projections and a norm); a mixture of experts counts the router and the active experts' projections."""
    if model.modules_with_parameters:
        return model.modules_with_parameters, "counted from the model layout"
    if not model.num_layers:
        return None, "the layer count is unknown"
    mlp = 3 if model.gated_mlp else 2
    if model.num_experts and model.num_experts > 1 and model.experts_per_token:
        mlp = 1 + mlp * min(model.experts_per_token, model.num_experts)  # router + active experts
    norms = model.layer_facts.norms_per_layer if model.layer_facts else 2
    per_layer = 4 + mlp + norms
    total = model.num_layers * per_layer + 3
    if model.decoder_layers:
        total += model.decoder_layers * 5
    return total, f"estimated: {per_layer} per layer x {model.num_layers} layers + embedding, final norm, head"


def fetches_per_micro_step(checkpointing: Checkpointing) -> int:
    """Forward and backward, and the recomputed forward under full checkpointing (module docstring)."""
    return 3 if checkpointing == Checkpointing.FULL else 2
