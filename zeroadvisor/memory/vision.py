"""A multimodal model's vision tower (Qwen2-VL, Qwen2.5-VL, Qwen3-VL: ``model.visual``): what its forward keeps for
backward.

The tower runs before the decoder, over every image patch of the micro batch at once (one packed sequence,
``cu_seqlens`` separating the images: qwen2_5_vl/modeling_qwen2_5_vl.py Qwen2_5_VisionTransformerPretrainedModel
.forward); its merger folds ``merge**2`` neighbouring patches into one image token, which
``Qwen2_5_VLModel.forward`` scatters into the decoder's input embeddings. So an image token of the decoder's
sequence is ``merge**2`` patches in the tower, and what the tower keeps for backward is alive through the whole
decoder forward and backward: the tower's backward runs last.

* A tower none of whose parameters trains (frozen by the trainer, ``frozen: [visual]``, or PEFT adapting none of
  its Linears) runs without a graph: its inputs need no gradient, so autograd saves nothing (exact); its forward's
  transients are freed before the decoder's forward starts.
* A tower that trains keeps, per block, what a transformer layer keeps (memory/activations.py block_bytes: the same
  terms, at the tower's width, heads and MLP, with its norm and activation; fused attention: SDPA/FlashAttention,
  whose per-image attention keeps no score matrix) plus what its rotary attention adds (ROTARY_FP32, the fused qkv
  output), the merger's ln_q and two Linears with their GELU, and the patch embedding's input (the pixel values, in
  the model dtype, which its Conv3d keeps for the weight's gradient); measured on CPU, block by block
  (benchmarks/calibrate_vision.py, benchmarks/vision.md). Under full recomputation transformers checkpoints the tower's
  blocks too (each is a GradientCheckpointingLayer): their inputs are kept, and a block's recompute comes after the
  decoder's backward has freed its tensors, so it is not counted at the peak (exact for torch's backward order).
  ms-swift checkpoints the tower on its own switch (``--vit_gradient_checkpointing``, default: gradient_checkpointing;
  swift/trainers/arguments.py, mixin.py dynamic_gradient_checkpointing): TrainingShape.vision_checkpointing.
  Not counted: Qwen2.5-VL's window reordering of the patches (``window_index``), the rotary tables built once before
  the blocks and Qwen3-VL's position-table interpolation: a few tensors per patch over the whole tower (the
  measured towers' "outside" beyond the pixel values, within the 3% of benchmarks/vision.md).

The image tokens per sample are an input (TrainingShape.image_tokens, ``--image-tokens``); where nobody gives it the
tower is costed with every token of the sequence an image token, the most the sequence can hold (memory/assumed.py
lists it).
"""

from __future__ import annotations

import dataclasses

from zeroadvisor.memory import bytes as B
from zeroadvisor.memory.activations import Activations, block_bytes, norm_bytes
from zeroadvisor.model.spec import Checkpointing, LayerFacts, ModelSpec, TrainingShape

# Per patch and block beyond a decoder layer's terms (memory/activations.py block_bytes), measured on CPU with
# saved_tensors_hooks (benchmarks/calibrate_vision.py): the attention's fused qkv output, which v (a view of it) keeps
# whole while the rotated q and k are new tensors (e bytes x 2 widths more than separate q/k/v projections), and the
# fp32 cos and sin apply_rotary_pos_emb_vision keeps per block (2 x 4 bytes x head width)
ROTARY_FP32 = 2 * 4
# The merger (Qwen2_5_VLPatchMerger / PatchMerger): ln_q's tensors, its output (the first Linear's input, viewed
# merge**2 patches wide), GELU's input and the second Linear's input: e bytes x the width each, per patch
MERGER_TENSORS = 3


@dataclasses.dataclass(frozen=True, slots=True)
class VisionActivations:
    nbytes: int  # what the tower keeps for backward through the decoder's forward and backward
    patches: int  # the patches of one micro batch the tower runs over
    note: str


def image_tokens(spec: ModelSpec, shape: TrainingShape) -> int:
    """The image tokens per sample costed: the given count, else the whole sequence (a bound)."""
    s = shape.sequence_length or 0
    return min(shape.image_tokens, s) if shape.image_tokens is not None else s


def vision_checkpointed(shape: TrainingShape) -> bool:
    """Whether the tower's blocks are checkpointed: as said (ms-swift's --vit_gradient_checkpointing), else as the
    decoder's layers are (full recomputation checkpoints every GradientCheckpointingLayer of the model)."""
    if shape.vision_checkpointing is not None:
        return shape.vision_checkpointing
    return shape.activation_checkpointing == Checkpointing.FULL


def vision_activations(spec: ModelSpec, shape: TrainingShape, micro_batch: int, precision: str) -> VisionActivations:
    """What the vision tower of ``spec`` keeps for backward at this shape (0 without a tower or where none of its
    parameters trains)."""
    tower = spec.vision
    if tower is None:
        return VisionActivations(0, 0, "")
    if not spec.vision_trains:
        return VisionActivations(0, 0, "activations: the vision tower trains no parameter: it runs without a graph "
                                       "and keeps nothing for backward")
    e = B.nbytes(precision)
    tokens = image_tokens(spec, shape)
    patches = tokens * tower.patches_per_token * micro_batch
    if not patches:
        return VisionActivations(0, 0, "activations: no image tokens: the vision tower does not run")
    # the tower's blocks: no dropout anywhere (Qwen2VisionBlock / Qwen2_5_VLVisionBlock), attention through the
    # model's implementation (fused: SDPA or FlashAttention, per image by cu_seqlens)
    facts = LayerFacts(norm=tower.norm, activation=tower.activation, attention_dropout=0.0, hidden_dropout=0.0)
    linear = block_bytes(e, tower.width, tower.heads, tower.intermediate, tower.gated, facts, patches)
    linear += patches * (2 * e * tower.width + ROTARY_FP32 * (tower.width // tower.heads))
    # each merger over every patch: the main one, and Qwen3-VL's deepstack mergers over the blocks it taps
    merger = tower.mergers * patches * (norm_bytes(tower.norm, e, tower.width) + MERGER_TENSORS * e * tower.width)
    merger += patches * e * tower.patch_elements  # the pixel values, which the Conv3d keeps for its weight's gradient
    if vision_checkpointed(shape):
        kept = tower.depth * e * tower.width * patches + merger  # each block's input
        how = "full recomputation: each block's input"
    else:
        kept = tower.depth * linear + merger
        how = "what each block keeps without recomputation"
    given = "given" if shape.image_tokens is not None else "assumed: every token of the sequence"
    note = (f"activations: the vision tower trains: {tower.depth} blocks over {patches:,} patches per micro batch "
            f"({tokens:,} image tokens per sample, {given}; {tower.patches_per_token} patches each), {how}, and "
            f"the merger: {kept / 2**30:.2f} GiB kept through the decoder's forward and backward")
    return VisionActivations(kept, patches, note)


def with_vision(whole: Activations, spec: ModelSpec, shape: TrainingShape, micro_batch: int,
                precision: str) -> Activations:
    """``whole`` (the decoder's activations) with the vision tower's kept tensors added: held beside every moment
    the decoder's activations count, and still live when the LM head's backward has run."""
    vision = vision_activations(spec, shape, micro_batch, precision)
    if not vision.note:
        return whole
    notes = (*whole.notes, vision.note)
    if not vision.nbytes:
        return dataclasses.replace(whole, notes=notes)
    return dataclasses.replace(whole, nbytes=whole.nbytes + vision.nbytes, notes=notes,
                               parts=(*whole.parts, ("vision tower", vision.nbytes)),
                               backward_kept=whole.backward_kept + vision.nbytes)
