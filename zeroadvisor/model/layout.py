"""Exact parameter accounting for a network described as a list of modules, without torch.

A family builder (families.py) lists every ``nn.Module`` that owns parameters directly,
with the number of elements of each parameter and how many identical copies of the module
exist (e.g. one per decoder layer). From that list:

* ``total``   = what ``sum(p.numel() for p in model.parameters())`` returns: a tied
  parameter (the same tensor reachable from two modules, e.g. ``lm_head.weight`` tied to
  ``embed_tokens.weight``) is listed in both modules but counted once, so the copy in the
  second module is marked ``shared``;
* ``largest`` = ``max(sum(p.numel() for p in m.parameters(recurse=False)) for m in
  model.modules())``: what ZeRO-3 gathers at once for one module (DeepSpeed's
  ``estimate_zero3_model_states_mem_needs_all_live`` uses this very expression). A tied
  tensor counts in every module that owns it, exactly as ``parameters(recurse=False)`` does;
* ``embedding`` = the input embedding tables (token, learned absolute position, token
  type), each tensor once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum


class TorchClass(Enum):
    """The torch/transformers class of a module where something reads it by class (ms-swift's modules_to_save
    words all-embedding and all-norm, model/peft.py); None for the rest."""

    EMBEDDING = "nn.Embedding"
    LAYER_NORM = "nn.LayerNorm"
    RMS_NORM = "an RMSNorm class (LlamaRMSNorm, Qwen2RMSNorm, ...)"
    OTHER_NORM = "a norm class of its own (T5LayerNorm)"


@dataclass(frozen=True, slots=True)
class Param:
    numel: int
    shared: bool = False  # the same tensor as a parameter listed (and counted) elsewhere


@dataclass(frozen=True, slots=True)
class Module:
    name: str
    params: tuple[Param, ...]
    count: int = 1
    embedding: bool = False  # an input embedding table
    # (fan_in, fan_out) when the module is an ``nn.Linear`` (or transformers' ``Conv1D``): what a
    # LoRA adapter wraps (model/peft.py); None for every other module.
    linear: tuple[int, int] | None = None
    torch_class: TorchClass | None = None
    # (num_embeddings, embedding_dim) of an ``nn.Embedding``: what a LoRA adapter on it holds (model/peft.py)
    embedding_shape: tuple[int, int] | None = None

    @property
    def own(self) -> int:
        """What ``m.parameters(recurse=False)`` holds, tied tensors included."""
        return sum(p.numel for p in self.params)

    @property
    def unique(self) -> int:
        """The part of ``own`` that no other module already counts."""
        return sum(p.numel for p in self.params if not p.shared)


@dataclass(slots=True)
class Layout:
    """Modules under a name prefix, each repeated ``mult`` times (a stack of layers).

    ``sub`` returns a view that shares the module list, so a layer builder can be written
    once and called with ``L.sub("model.layers", n)``.
    """

    modules: list[Module] = field(default_factory=list)
    prefix: str = ""
    mult: int = 1

    def sub(self, name: str, count: int = 1) -> Layout:
        return Layout(self.modules, self._name(name), self.mult * count)

    def _name(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix and name else (self.prefix or name)

    def add(
        self,
        name: str,
        *params: Param | int,
        embedding: bool = False,
        linear: tuple[int, int] | None = None,
        torch_class: TorchClass | None = None,
        embedding_shape: tuple[int, int] | None = None,
    ) -> None:
        """A module owning ``params`` directly (ints are plain, unshared parameters)."""
        if self.mult <= 0:
            return  # e.g. no dense layers in an all-MoE model: nothing to add
        ps = tuple(p if isinstance(p, Param) else Param(p) for p in params)
        if any(p.numel < 0 for p in ps):  # a builder bug, never a user error
            raise AssertionError(f"negative parameter size in {self._name(name)}")
        self.modules.append(Module(self._name(name), ps, self.mult, embedding, linear, torch_class,
                                   embedding_shape))

    # The torch.nn building blocks, with the parameters torch gives them.
    def linear(
        self,
        name: str,
        fan_in: int,
        fan_out: int,
        bias: bool,
        *,
        tied_weight: bool = False,
        tied_bias: bool = False,
    ) -> None:
        """``nn.Linear(fan_in, fan_out, bias)`` (also transformers' ``Conv1D(nf, nx)``:
        weight (nx, nf) plus bias (nf), the same numbers)."""
        params = [Param(fan_in * fan_out, tied_weight)]
        if bias:
            params.append(Param(fan_out, tied_bias))
        self.add(name, *params, linear=(fan_in, fan_out))

    def embedding(self, name: str, num: int, dim: int, *, shared: bool = False) -> None:
        """``nn.Embedding(num, dim)``: one ``num x dim`` weight."""
        self.add(name, Param(num * dim, shared), embedding=True, torch_class=TorchClass.EMBEDDING,
                 embedding_shape=(num, dim))

    def layer_norm(self, name: str, dim: int, *, bias: bool = True, affine: bool = True) -> None:
        """``nn.LayerNorm(dim)``: weight and bias unless ``elementwise_affine=False``
        (OPT) or the bias is dropped (``bias=False``, or MPT setting ``.bias = None``)."""
        if not affine:
            self.add(name, torch_class=TorchClass.LAYER_NORM)  # no parameters: kept for the module census
            return
        self.add(name, dim, *([dim] if bias else []), torch_class=TorchClass.LAYER_NORM)

    def rms_norm(self, name: str, dim: int, *, cls: TorchClass = TorchClass.RMS_NORM) -> None:
        """Llama-style ``RMSNorm(dim)`` (and T5LayerNorm, Gemma's zero-centred one): one weight."""
        self.add(name, dim, torch_class=cls)


@dataclass(frozen=True, slots=True)
class Totals:
    total: int
    largest: int
    largest_name: str
    embedding: int


def totals(modules: list[Module]) -> Totals:
    total = sum(m.unique * m.count for m in modules)
    embedding = sum(m.unique * m.count for m in modules if m.embedding)
    largest_module = max((m for m in modules if m.count > 0), key=lambda m: m.own, default=None)
    return Totals(
        total=total,
        largest=largest_module.own if largest_module else 0,
        largest_name=largest_module.name if largest_module else "",
        embedding=embedding,
    )


def parameter_sizes(modules: list[Module]) -> tuple[tuple[int, int], ...]:
    """(numel, count) of every parameter tensor once (a tied copy is the tensor listed elsewhere),
    smallest first: the multiset of ``p.numel() for p in model.parameters()``."""
    counts: Counter[int] = Counter()
    for m in modules:
        for p in m.params:
            if not p.shared:
                counts[p.numel] += m.count
    return tuple(sorted(counts.items()))


def census(modules: list[Module]) -> Counter[int]:
    """How many modules own how many parameters directly (modules owning none left out):
    the oracle test compares this with the real model, module by module."""
    counts: Counter[int] = Counter()
    for m in modules:
        if m.own:
            counts[m.own] += m.count
    return counts
