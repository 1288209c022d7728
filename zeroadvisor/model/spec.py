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
class LayerFacts:
    """What transformers' modelling code of a family keeps for backward, beyond the shapes
    (memory/activations.py). Each value cites the transformers/torch code it follows where it is set
    (model/activation_facts.py); a ModelSpec without them is costed with Korthikanti et al.'s
    assumptions (LayerNorm, GeLU, dropout masks everywhere)."""

    norm: str = "layernorm"  # "layernorm" | "rmsnorm" (LlamaRMSNorm: fp32 upcast) | "t5" (T5LayerNorm)
    activation: str = "gelu"  # MLP activation; "relu" keeps its output (shared with the next linear)
    attention_dropout: float | None = None  # on the attention probabilities; None: unknown (a mask counted)
    hidden_dropout: float | None = None  # on the embeddings, the attention output and the MLP output
    mlp_dropout: float = 0.0  # between the activation and the down projection (T5DenseActDense)
    softmax_fp32: bool = False  # eager attention keeps its softmax output in fp32 (Llama-family eager)
    loss_in_fp32: bool = True  # the loss upcasts the logits (transformers loss_utils ForCausalLMLoss)
    norms_per_layer: int = 2  # decoder layers of an encoder-decoder add one for cross-attention
    final_dropout: bool = False  # a dropout after each stack's final norm (T5Stack)
    relative_position_buckets: bool = False  # int64 (s, s) bucket indices per stack (T5Attention.compute_bias)
    head_transform: bool = False  # dense + activation + LayerNorm before the LM decoder (BertLMPredictionHead)


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
    # Encoder-decoder models (T5, BART): the layers of each stack (num_layers is their sum). The encoder runs
    # over the source sequence, the decoder over the target with cross-attention to the source.
    encoder_layers: int | None = None
    decoder_layers: int | None = None
    # Whether the counted class computes vocabulary-wide logits (an LM head: *ForCausalLM, *ForMaskedLM,
    # *ForConditionalGeneration); False for classifiers and base models; None: unknown (an LM head assumed).
    lm_head: bool | None = None
    layer_facts: LayerFacts | None = None


@dataclass(frozen=True, slots=True)
class TrainingShape:
    """How the model is run: the inputs to the activation estimate."""

    sequence_length: int | None = None  # encoder-decoder: the source (encoder) length
    activation_checkpointing: Checkpointing = "none"
    flash_attention: bool = True
    target_length: int | None = None  # encoder-decoder: the target (decoder) length; None -> sequence_length
