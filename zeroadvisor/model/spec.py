"""What the memory model needs to know about a network and how it is trained."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Checkpointing = Literal["none", "selective", "full"]

# The largest size the memory model multiplies (a model dimension, a sequence length, a micro
# batch). Real values stay far below it (hidden sizes of ~30k, 256k vocabularies, 10M-token
# contexts), and with every factor bounded the byte counts stay far inside the float range the
# reports format them in (a product of five such factors is 2**150, floats reach 2**1024).
MAX_DIMENSION = 2**30


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Architecture facts; counts are exact when derived from a Hugging Face config.

    Fields other than ``parameters`` are None when the description does not say
    (e.g. ``parameters: 7.5B`` alone); the memory model then states what it assumed.
    """

    parameters: int
    model_type: str | None = None
    num_layers: int | None = None
    hidden_size: int | None = None
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    intermediate_size: int | None = None  # dense MLP width (per expert for MoE)
    vocab_size: int | None = None
    gated_mlp: bool | None = None  # SwiGLU/GeGLU: three projections instead of two
    num_experts: int | None = None  # routed experts per MoE layer
    experts_per_token: int | None = None  # top-k
    # Largest number of parameters owned directly by one module (not its children):
    # ZeRO-3 gathers a module's own parameters at once (DS estimator's largest_layer_params).
    largest_layer_parameters: int | None = None
    embedding_parameters: int | None = None  # input embedding(s) V*h (+ positions)
    tied_embeddings: bool | None = None
    source: str = ""  # where the description came from, for the report
    notes: tuple[str, ...] = field(default_factory=tuple)
    # Element counts of the trainable parameters in model.parameters() order (what DeepSpeed flattens
    # into its stage-1/2 bit16 group; one param group assumed). None: layout unknown, partitions costed as P/N.
    parameter_numels: tuple[int, ...] | None = None
    # Every parameter's element count once (tied tensors once), as (numel, how many parameters of that size),
    # order unknown: the multiset of model.parameters() sizes, exact from a Hugging Face config. What the
    # stage-3 persistence threshold selects from (zero/parameter_offload.py mark_persistent_parameters).
    parameter_sizes: tuple[tuple[int, int], ...] | None = None


@dataclass(frozen=True, slots=True)
class TrainingShape:
    """How the model is run: the inputs to the activation estimate."""

    sequence_length: int | None = None
    activation_checkpointing: Checkpointing = "none"
    flash_attention: bool = True
