"""Parameters frozen without PEFT: ``requires_grad_(False)`` on named modules (a frozen input embedding, a
vision tower, the first layers), the rest trained in full.

DeepSpeed builds gradients, master weights and optimizer states from the parameters that require grad only
(stage_1_and_2.py ``is_optimized_parameter``; stage3.py ``_create_fp16_sub_groups`` over the optimizer's
groups), so a frozen module costs only its weights (memory/states.py frozen terms). This module counts exactly
which parameters that leaves trainable, from the model's layout, as PEFT's counts are (model/peft.py).

A module is frozen when an entry equals the last segments of its dotted name or of a parent's (``embed_tokens``
matches ``model.embed_tokens``; ``vision_tower`` every module under it; ``layers.0`` the first decoder layer, an
index of a stack of repeated layers): the names a ``named_parameters()`` loop that freezes by name tests. A tied
output head shares the input embedding's tensor (transformers ``tie_weights``), so freezing either freezes that one
tensor.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from zeroadvisor.model.errors import ModelError
from zeroadvisor.model.layout import Module
from zeroadvisor.model.peft import real_name
from zeroadvisor.model.spec import ModelSpec


def _segments_match(name: list[str], entry: list[str]) -> tuple[bool, str | None]:
    """(matches, pinned index): ``entry`` equals ``name``'s last segments, a layout's ``*`` (a stack of repeated
    layers) matching any index; the index the entry names at the ``*``, if it names one."""
    pinned = None
    for have, want in zip(name, entry, strict=True):
        if have == "*" and want.isdigit():
            pinned = want
        elif have != want:
            return False, None
    return True, pinned


def _frozen_repeats(name: str, module: Module, entries: Sequence[str]) -> int:
    """How many of ``module``'s ``count`` repeats (named ``name``, as transformers names it) the entries freeze:
    all, or the stack indices they name."""
    parts = name.split(".")
    indices: set[int] = set()
    for entry in entries:
        want = entry.split(".")
        for end in range(len(want), len(parts) + 1):  # the entry against each prefix's last segments
            matched, pinned = _segments_match(parts[end - len(want):end], want)
            if not matched:
                continue
            if pinned is None:
                return module.count
            if parts.count("*") > 1:  # nested stacks (experts in layers): which repeats an index means is unknown
                raise ModelError(f"frozen: {entry!r} names one index of a nested stack ({module.name}); name the "
                                 "whole module or the outer layer", key="frozen")
            indices.add(int(pinned))
    return len({i for i in indices if i < module.count})


def apply(spec: ModelSpec, modules: Sequence[Module], entries: Sequence[str]) -> ModelSpec:
    """``spec`` with the modules ``entries`` name frozen: trainable_parameters and the largest trainable tensor
    counted exactly from ``modules`` (the layout of the model's Hugging Face config)."""
    if not entries:
        raise ModelError("frozen must name at least one module", key="frozen")
    named = [(real_name(spec.model_type, m.name), m) for m in modules]  # the layout's norm0 is input_layernorm
    repeats = [_frozen_repeats(name, m, entries) for name, m in named]
    unmatched = [e for e in entries if not any(_frozen_repeats(name, m, (e,)) for name, m in named)]
    if unmatched:
        names = sorted({name.split(".")[-1] for name, _ in named})
        raise ModelError(f"frozen: {unmatched[0]!r} names no module of this {spec.model_type or 'model'} "
                         f"(module names end in: {', '.join(names[:12])}{', ...' if len(names) > 12 else ''})",
                         key="frozen")
    frozen = sum(r * m.unique for m, r in zip(modules, repeats, strict=True))
    # A tied head's tensor is listed (shared) under the head and counted under the input embedding: freezing the
    # head freezes the embedding's tensor, and the embedding frozen freezes the head's.
    head_frozen = any(p.shared for m, r in zip(modules, repeats, strict=True) if r for p in m.params)
    embedding_frozen = any(r for m, r in zip(modules, repeats, strict=True) if m.embedding)
    if head_frozen and not embedding_frozen:
        frozen += sum(m.count * m.unique for m in modules if m.embedding)
    embedding_frozen = embedding_frozen or head_frozen
    trained = [p.numel for m, r in zip(modules, repeats, strict=True) if r < m.count
               and not (m.embedding and embedding_frozen) for p in m.params if not p.shared]
    trainable = spec.parameters - frozen
    if trainable <= 0 or not trained:
        raise ModelError("frozen leaves no parameter to train", key="frozen")
    listed = ", ".join(entries)
    note = (f"frozen {listed}: {frozen:,} of {spec.parameters:,} parameters require no gradient, "
            f"{trainable:,} train")
    tower = spec.vision
    # the tower keeps its activations while a parameter in its patch embedding or blocks still trains
    vision_trains = tower is not None and any(tower.trains_through(m.name) and r < m.count
                                              for m, r in zip(modules, repeats, strict=True))
    return dataclasses.replace(
        spec,
        vision_trains=vision_trains,
        trainable_parameters=trainable,
        largest_trainable_parameter=max(trained),
        frozen=listed,
        notes=(*spec.notes, note),
    )
