"""Training FLOPs per token: what one token costs in forward, backward and recomputation.

Per token, a transformer's matrix multiplications cost 2 FLOPs per weight in the forward pass
and 4 in the backward pass (gradients of the inputs and of the weights): 6·N (Kaplan et al. 2020
§2.1; PaLM, Chowdhery et al. 2022, appendix B). Attention's score and value products add
2·2·s·q per layer in the forward pass (q = heads x head_dim), 12·L·q·s forward+backward (PaLM
appendix B: 6N + 12·L·H·Q·T; Narayanan et al. 2021 eq. 3 counts the same products). Full
activation checkpointing runs every layer's forward again in the backward pass: 8 instead of 6
per weight (Narayanan et al. 2021 §5.1: "4 passes" instead of 3). Selective recomputation
(Korthikanti et al. 2022 §5) recomputes only the attention core: + 4·L·q·s.

N counts the weights that are multiplied: the input embedding is a lookup (no FLOPs) unless it is
tied to the LM head, which is a matmul (Narayanan et al. 2021 eq. 3: the V/(16·l·h) term). A
mixture of experts multiplies only the routed experts' weights: the active parameters (top-k of
the experts; Fedus et al. 2022 §2; DeepSpeed-MoE, Rajbhandari et al. 2022 §3).
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroadvisor.model.spec import Checkpointing, ModelSpec

# FLOPs per multiplied weight per token (Kaplan et al. 2020 §2.1): forward 2, backward 4.
FORWARD_PER_WEIGHT = 2
BACKWARD_PER_WEIGHT = 4
# Attention score (Q·K^T) and value (P·V) products: 2 FLOPs per multiply-add, 2 products, per layer,
# per token, per key position, per attention width (PaLM appendix B).
ATTENTION_FORWARD_PER_LAYER = 4


@dataclass(frozen=True, slots=True)
class TokenFlops:
    """FLOPs of one token, split by pass; ``recompute`` is the extra forward under checkpointing."""

    forward: float
    backward: float
    recompute: float
    matmul_weights: int  # N of 6N
    notes: tuple[str, ...] = ()

    @property
    def model(self) -> float:
        """Model FLOPs (no recomputation): what MFU is reported against (PaLM appendix B)."""
        return self.forward + self.backward

    @property
    def executed(self) -> float:
        """What the GPU runs: model FLOPs plus recomputation (hardware FLOPs)."""
        return self.forward + self.backward + self.recompute


def expert_weights(model: ModelSpec) -> tuple[int, int] | None:
    """(all routed-expert MLP weights, the active ones per token) of a mixture of experts; None if dense or unknown."""
    E, k = model.num_experts, model.experts_per_token
    L, h, f = model.num_layers, model.hidden_size, model.intermediate_size
    if not (E and k and L and h and f) or E <= 1:
        return None
    per_expert = (3 if model.gated_mlp else 2) * h * f
    return L * E * per_expert, L * min(k, E) * per_expert


def matmul_weights(model: ModelSpec) -> tuple[int, list[str]]:
    """N of 6N: the weights a token is multiplied by (see the module docstring)."""
    notes: list[str] = []
    n = model.parameters
    if model.embedding_parameters and not model.tied_embeddings:
        n -= model.embedding_parameters  # the input embedding is a lookup
    experts = expert_weights(model)
    if experts is not None:
        n -= experts[0] - experts[1]
        notes.append(f"mixture of experts: {model.experts_per_token} of {model.num_experts} experts active per token")
    elif model.num_experts and model.num_experts > 1:
        notes.append("mixture of experts without layer sizes: every parameter counted as active (an upper bound)")
    return max(n, 1), notes


def attention_width(model: ModelSpec) -> int | None:
    """q = heads x head_dim, the width of the score and value products (hidden size when not given)."""
    if model.num_attention_heads and model.head_dim:
        return model.num_attention_heads * model.head_dim
    return model.hidden_size


def token_flops(model: ModelSpec, sequence_length: int,
                checkpointing: Checkpointing = Checkpointing.NONE) -> TokenFlops:
    """Training FLOPs of one token at ``sequence_length`` (module docstring for the formula)."""
    n, notes = matmul_weights(model)
    q = attention_width(model)
    layers = model.num_layers
    if layers and q:
        attention_forward = ATTENTION_FORWARD_PER_LAYER * layers * q * sequence_length
    else:
        attention_forward = 0
        notes.append("attention products not counted: the layer count and width are unknown (6N only)")
    forward = FORWARD_PER_WEIGHT * n + attention_forward
    backward = 2 * forward  # BACKWARD_PER_WEIGHT / FORWARD_PER_WEIGHT: input and weight gradients
    if checkpointing == Checkpointing.FULL:
        recompute = forward  # Narayanan et al. 2021 §5.1: the forward runs again in backward
    elif checkpointing == Checkpointing.SELECTIVE:
        recompute = attention_forward  # Korthikanti et al. 2022 §5: only the attention core
    else:
        recompute = 0
    return TokenFlops(forward, backward, recompute, n, tuple(notes))
