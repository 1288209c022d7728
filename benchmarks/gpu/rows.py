"""Live tensor bytes of a DeepSpeed engine by the estimate's rows, per device type (cuda, cpu).

The same classification as benchmarks/calibrate.py (classify/snapshot), which counts CPU tensors only: here
each storage is counted on its own device, so a GPU run gives the GPU rows and, with offload, the host rows
apart. Tensors are found with gc and by walking the engine's and optimizer's attributes (a gradient autograd
made in C++ has no Python object until ``param.grad`` is read); a storage claimed by two rows goes to the first
of PRIORITY (param.grad is a view into the reduce bucket while it fills: the bucket counts as buffers).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from typing import Any

ROWS = ("parameters", "gradients", "optimizer_states", "gathered_parameters", "buffers")
PRIORITY = ("parameters", "optimizer_states", "buffers", "gathered_parameters", "gradients")
# DeepSpeed 0.19.8 attributes holding each row (runtime/zero/stage_1_and_2.py, stage3.py, bf16_optimizer.py)
PARAMETER_ATTRS = ("bit16_groups_flat", "fp16_groups_flat", "bf16_groups_flat", "lp_param_buffer",
                   "fp16_partitioned_groups_flat", "param_groups_fp16_flat_cpu_memory",
                   "param_buffer_of_bit16_for_cpu_offload_groups")
MASTER_ATTRS = ("single_partition_of_fp32_groups", "fp32_partitioned_groups_flat", "fp32_groups_flat",
                "fp32_groups_flat_partition")
GRADIENT_ATTRS = ("grads_in_partition", "grad_partitions_flat_buffer", "fp32_groups_gradients_flat",
                  "averaged_gradients", "fp32_groups_gradients")
BUFFER_ATTRS = ("ipg_buckets", "temp_grad_buffer_for_cpu_offload", "temp_grad_buffer_for_gpu_offload")

Key = tuple[str, int]  # (device type, storage pointer)


def _key(t: Any) -> tuple[Key, int] | None:
    try:
        st = t.untyped_storage()
        ptr, n = st.data_ptr(), st.nbytes()
    except Exception:  # noqa: BLE001 - meta, sparse and other tensors without a plain storage
        return None
    return ((t.device.type, ptr), n) if ptr and n else None


def _walk(obj: Any, tensor: type, depth: int = 0) -> Iterator[Any]:
    """The tensors in ``obj``: itself, or inside dicts, sequences, IPG buckets and gradient partition groups."""
    if obj is None or depth > 4:
        return
    if isinstance(obj, tensor):
        yield obj
        return
    if isinstance(obj, dict):
        children: Iterable[Any] = obj.values()
    elif isinstance(obj, (list, tuple, set)):
        children = obj
    elif hasattr(obj, "buffer"):  # IPG bucket objects
        children = (obj.buffer,)
    elif hasattr(obj, "flat_partition"):  # compact gradient partition groups
        children = (obj.flat_partition, getattr(obj, "grad_buffers", None))
    else:
        return
    for child in children:
        yield from _walk(child, tensor, depth + 1)


def _parameter_claims(engine: Any, params: list[Any]) -> Iterator[tuple[str, Any]]:
    for p in params:
        if hasattr(p, "ds_tensor"):  # stage 3: the partition; a full copy is gathered (or persistent)
            yield "parameters", p.ds_tensor
            if p.data.numel() > 0 and _key(p.data) != _key(p.ds_tensor):
                yield ("parameters" if getattr(p, "ds_persist", False) else "gathered_parameters"), p.data
        else:
            yield "parameters", p.data
    for name in PARAMETER_ATTRS:
        yield "parameters", getattr(engine.optimizer, name, None)


def _state_claims(engine: Any, params: list[Any], tensor: type) -> Iterator[tuple[str, Any]]:
    opt = engine.optimizer
    masters = [getattr(opt, name, None) for name in MASTER_ATTRS]
    yield from (("optimizer_states", m) for m in masters)
    base = engine.basic_optimizer if engine.basic_optimizer is not None else opt
    for candidate in (base, getattr(opt, "optimizer", None)):
        if candidate is not None and hasattr(candidate, "state"):
            yield "optimizer_states", dict(candidate.state)
    for p in params:
        if hasattr(p, "ds_tensor"):
            yield "gathered_parameters", p.grad  # stage 3: a full gradient before it is reduced
        yield "gradients", p.grad
        yield "gradients", getattr(p, "grad_accum", None)
    yield from (("gradients", m.grad) for m in _walk(masters, tensor))
    yield from (("gradients", getattr(opt, name, None)) for name in GRADIENT_ATTRS)
    yield from (("buffers", getattr(opt, name, None)) for name in BUFFER_ATTRS)


def snapshot(engine: Any) -> dict[str, dict[str, int]]:
    """``{device type: {row: bytes, ..., "unclassified": bytes}}`` of every live tensor storage now."""
    import torch

    gc.collect()
    sizes: dict[Key, int] = {}

    def note(t: Any) -> Key | None:
        found = _key(t)
        if found is None:
            return None
        key, n = found
        sizes[key] = max(sizes.get(key, 0), n)
        return key

    for obj in gc.get_objects():
        if isinstance(obj, torch.Tensor):
            note(obj)
    cats: dict[str, set[Key]] = {row: set() for row in ROWS}
    params = list(engine.module.parameters())
    for row, obj in (*_parameter_claims(engine, params), *_state_claims(engine, params, torch.Tensor)):
        cats[row].update(key for key in map(note, _walk(obj, torch.Tensor)) if key is not None)
    out: dict[str, dict[str, int]] = {}
    for (device, ptr), n in sizes.items():
        rows = out.setdefault(device, dict.fromkeys((*ROWS, "unclassified"), 0))
        row = next((r for r in PRIORITY if (device, ptr) in cats[r]), "unclassified")
        rows[row] += n
    return out


def row_max(points: list[dict[str, dict[str, int]]]) -> dict[str, dict[str, int]]:
    """Row by row, the largest value over the moments (the estimate's rows are peaks of each kind)."""
    out: dict[str, dict[str, int]] = {}
    for point in points:
        for device, rows in point.items():
            mine = out.setdefault(device, {})
            for row, n in rows.items():
                mine[row] = max(mine.get(row, 0), n)
    return out
