"""Activation offloading: the checkpointed layer inputs held in host memory instead of on the GPU.

Under full recomputation every layer keeps its input (e·s·b·h bytes) until its backward: at long sequences the
largest activation term (memory/activations.py). An offloader moves those inputs to pinned host memory in the
forward and brings each back when its layer is recomputed, so the GPU keeps only the inputs in flight. One row per
offloader, read from its code:

* ``save_on_cpu``: torch/autograd/graph.py ``save_on_cpu(pin_memory=True)`` (pack_to_cpu: ``torch.empty(...,
  pin_memory=True)`` then a blocking ``copy_``) around each checkpoint call: transformers 5.17+
  modeling_utils.py ``_activation_checkpointing_enable(offload=True)`` (``gradient_checkpointing_kwargs:
  {offload: true}``); unsloth's offloaded checkpoint (LLaMA-Factory ``use_unsloth_gc``, axolotl
  ``gradient_checkpointing: offload`` before 0.18) moves the same tensor the same way. Nothing stays in flight:
  the copy ends before the next layer runs, and in backward the input comes back as its layer recomputes (it is
  that layer's own input, counted in its recompute).
* ``trl``: trl/models/activation_offloading.py ``OffloadActivations`` (@ v1.9.0, default ``use_streams=True``,
  ``min_offload_size=1024``, ``max_fwd_stash_size=5``), which TRL's trainers enter around ``training_step`` where
  ``activation_offloading`` is true (SFT 0.18+, reward 0.24+, DPO 0.29+, KTO 1.8+). It offloads every saved tensor
  of 1 KiB or more that is not a parameter; under checkpointing that is each layer's checkpointed input (the
  recompute's own tensors are saved under the checkpoint's inner hooks). The forward stash keeps the last five
  tensors packed, which at the end of the forward are the loss's own (counted in the loss peak); in backward
  ``unpack_tensor_with_streams`` frees a node's tensors only once the next node has unpacked its own: one layer
  input more than the one recomputed. Without checkpointing it offloads every activation and keeps a backlog the
  transfer stream has not drained: what that leaves on the GPU is not counted (axolotl #3776 measured it above
  checkpointing alone), so the run is costed without the offload, a bound.
* ``hidden_states``: axolotl's ``CheckpointHiddenStatesOffload`` (monkeypatch/checkpoint_activation_offload.py @
  v0.18.0, ``max_fwd_stash_size=2``): only the marked checkpoint inputs, on a transfer stream. Its forward stash
  keeps the last two layer inputs alive into the loss's backward; in backward one input is prefetched.

The host holds every offloaded input per rank: one pinned block each, which torch's CachingHostAllocator rounds up
to a power of two (memory/host.py offloaded_input_terms).
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroadvisor.vocab import ActivationOffload, Checkpointing


@dataclass(frozen=True, slots=True)
class Offloader:
    """What one offloader leaves on the GPU of the layer inputs it moves, and where that is read."""

    at_recompute: int  # layer inputs on the GPU beside the one whose layer is recomputed
    at_loss: int  # layer inputs still on the GPU at the loss's peak (the end of the forward)
    offloads_everything: bool  # without checkpointing it moves every saved tensor (its GPU residue not counted)
    source: str


OFFLOADERS: dict[ActivationOffload, Offloader] = {
    ActivationOffload.SAVE_ON_CPU: Offloader(0, 0, False, "torch autograd/graph.py save_on_cpu (pack_to_cpu); "
                                             "transformers 5.17 modeling_utils.py _activation_checkpointing_enable"),
    ActivationOffload.TRL: Offloader(1, 0, True, "trl/models/activation_offloading.py OffloadActivations "
                                     "(max_fwd_stash_size=5; unpack_tensor_with_streams) @ v1.9.0"),
    ActivationOffload.HIDDEN_STATES: Offloader(1, 2, False, "axolotl monkeypatch/checkpoint_activation_offload.py "
                                               "CheckpointHiddenStatesOffload (max_fwd_stash_size=2) @ v0.18.0"),
}


def offloader(mode: ActivationOffload, checkpointing: Checkpointing) -> Offloader | None:
    """The offloader that moves the layer inputs under ``checkpointing`` (None: none does; every offloader here
    moves them only under full recomputation, the only checkpointing transformers' models run)."""
    if mode == ActivationOffload.NONE or checkpointing != Checkpointing.FULL:
        return None
    return OFFLOADERS[mode]


def offloads_uncounted(mode: ActivationOffload, checkpointing: Checkpointing) -> bool:
    """Whether the offloader moves activations this estimate does not follow (TRL's without checkpointing): the
    run is costed as if they stayed on the GPU, so a "does not fit" is unknown."""
    return mode != ActivationOffload.NONE and checkpointing == Checkpointing.NONE \
        and OFFLOADERS[mode].offloads_everything


__all__ = ["OFFLOADERS", "Offloader", "offloader", "offloads_uncounted"]
